"""AdaLN-zero DiT: pieces compose to __call__, zero output at init, layout."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.diffusion import dit
from iclrjax.diffusion import nets
from tests.diffusion.conftest import random_params

MODEL = dit.DiT(patch=2, width=32, depth=2, heads=4)
# `TimestepEmbedder`'s arguments of `nets.timestep_embedding`.
DIT_EMBEDDING = dict(scale=1.0, freq_shift=0, flip_sin_to_cos=True)


def _random_params(model, x, t, scale=0.1, seed=0):
  """N(0, scale^2) numpy params (every adaLN-zero layer active)."""
  return random_params(model.init, x, t, scale=scale, seed=seed)


def _composed(model, params, x, t):
  """embed -> block 0..depth-1 -> final, each a separate `apply`."""
  h, cond = model.apply(params, x, t, method=dit.DiT.embed)
  hs = [h]
  for i in range(model.depth):
    h = model.apply(params, h, cond, i, method=dit.DiT.block)
    hs.append(h)
  out = model.apply(params, h, cond, x.shape[-3:], method=dit.DiT.final)
  return out, hs, cond


def test_zero_output_and_identity_blocks_at_init():
  x = jax.random.normal(jax.random.key(0), (5, 8, 8, 1))
  t = jax.random.uniform(jax.random.key(1), (5,))

  @jax.jit
  def f(key):
    params = MODEL.init(key, x, t)
    return params, MODEL.apply(params, x, t), _composed(MODEL, params, x, t)

  params, full, (out, hs, _) = f(jax.random.key(2))
  assert full.shape == x.shape
  assert np.all(np.asarray(full) == 0.0)  # adaLN-zero: exactly zero
  assert np.all(np.asarray(out) == 0.0)
  for h in hs[1:]:  # zero gates: every block is the identity
    np.testing.assert_array_equal(h, hs[0])
  p = params['params']
  for name in ('blocks_0', 'blocks_1', 'final_layer'):
    assert not np.any(p[name]['adaLN_modulation']['kernel'])
  assert not np.any(p['final_layer']['linear']['kernel'])
  assert np.any(p['blocks_0']['attn']['qkv']['kernel'])  # the rest is random


def test_pieces_compose_to_call_batched_and_single():
  x = jax.random.normal(jax.random.key(0), (5, 8, 8, 1))
  t = jax.random.uniform(jax.random.key(1), (5,))
  params = _random_params(MODEL, x, t)

  @jax.jit
  def f(params):
    embed, block, final = dit.pieces(MODEL, params)
    h, cond = embed(x, t)
    for i in range(MODEL.depth):
      h = block(h, cond, i)
    return dict(
        full=MODEL.apply(params, x, t),
        composed=_composed(MODEL, params, x, t),
        closures=final(h, cond, x.shape[-3:]),
        full1=MODEL.apply(params, x[2], t[2]),
        composed1=_composed(MODEL, params, x[2], t[2]),
        vmapped=jax.vmap(MODEL.apply, in_axes=(None, 0, 0))(params, x, t),
        t_scalar=MODEL.apply(params, x, 0.3),
        t_vector=MODEL.apply(params, x, jnp.full((5,), 0.3)),
        t_other=MODEL.apply(params, x, 0.7))

  r = f(params)
  full = r['full']
  out, hs, cond = r['composed']
  assert hs[0].shape == (5, 16, 32) and cond.shape == (5, 32)
  np.testing.assert_allclose(out, full, atol=1e-6, rtol=1e-6)
  np.testing.assert_allclose(r['closures'], full, atol=1e-6, rtol=1e-6)
  assert np.abs(np.asarray(full)).max() > 1e-2
  # One example [H, W, C] with a scalar t.
  out1, hs1, cond1 = r['composed1']
  assert hs1[0].shape == (16, 32) and cond1.shape == (32,)
  np.testing.assert_allclose(out1, r['full1'], atol=1e-6, rtol=1e-6)
  np.testing.assert_allclose(r['full1'], full[2], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(r['vmapped'], full, atol=1e-5, rtol=1e-5)
  # A scalar t is broadcast over the batch; the output depends on t.
  np.testing.assert_allclose(r['t_scalar'], r['t_vector'], atol=1e-6)
  assert np.abs(np.asarray(r['t_scalar'] - r['t_other'])).max() > 1e-2


def test_out_channels_shapes():
  model = dit.DiT(patch=2, width=16, depth=1, heads=2, out_channels=3)
  x = jnp.ones((2, 4, 6, 1))
  params = jax.eval_shape(model.init, jax.random.key(0), x, 0.5)
  assert jax.eval_shape(model.apply, params, x, 0.5).shape == (2, 4, 6, 3)
  assert params['params']['final_layer']['linear']['kernel'].shape == (16, 12)
  assert params['params']['x_embed']['kernel'].shape == (4, 16)


def test_patchify_layout_and_roundtrip():
  x = np.arange(2 * 8 * 6 * 3, dtype=np.float32).reshape(2, 8, 6, 3)
  tok = np.asarray(jax.jit(functools.partial(dit.patchify, p=2))(x))
  assert tok.shape == (2, 12, 12)
  # Token (r, c) in row-major order (3 per row) is the patch at (2r, 2c).
  np.testing.assert_array_equal(tok[1, 0], x[1, :2, :2].reshape(-1))
  np.testing.assert_array_equal(tok[1, 4], x[1, 2:4, 2:4].reshape(-1))
  np.testing.assert_array_equal(
      jax.jit(lambda z: dit.unpatchify(z, 2, 8, 6))(tok), x)


def test_embeddings():
  pos = dit.sincos_2d_pos_embed(16, 2, 2)
  assert pos.shape == (4, 16)
  assert len({tuple(np.round(r, 6)) for r in pos}) == 4  # distinct tokens
  # Token (0, 0): sin(0) = 0 and cos(0) = 1 in both the row and column halves.
  np.testing.assert_allclose(pos[0], np.r_[np.zeros(4), np.ones(4),
                                           np.zeros(4), np.ones(4)])
  # The time features of `TimestepEmbedder`: DiT/ADM's [cos(t w), sin(t w)],
  # w_k = max_period^(-k / half).
  e = nets.timestep_embedding(np.array([0.0, 2.0]), 6, max_period=100.0,
                              **DIT_EMBEDDING)
  w = 100.0 ** (-np.arange(3) / 3)
  np.testing.assert_allclose(e[1], np.r_[np.cos(2 * w), np.sin(2 * w)],
                             rtol=1e-6)
  np.testing.assert_allclose(e[0], np.r_[np.ones(3), np.zeros(3)])


def _dit_sinusoidal_embedding(t, dim, max_period=10000.0):
  """The embedding `dit` had before it used `nets.timestep_embedding`."""
  half = dim // 2
  freqs = jnp.exp(-np.log(max_period) *
                  jnp.arange(half, dtype=jnp.float32) / half)
  args = jnp.asarray(t, jnp.float32)[..., None] * freqs
  emb = jnp.concatenate([jnp.cos(args), jnp.sin(args)], -1)
  if dim % 2:
    emb = jnp.concatenate([emb, jnp.zeros_like(emb[..., :1])], -1)
  return emb


@pytest.mark.parametrize('dim', [256, 7])
def test_time_embedding_is_the_former_dit_embedding(dim):
  t = jnp.array([0.0, 1e-3, 0.25, 0.5, 0.999, 1.0])
  embedder = dit.TimestepEmbedder(width=8, freq_dim=dim)
  params = embedder.init(jax.random.key(0), t)['params']

  def former(t):
    e = _dit_sinusoidal_embedding(embedder.emb_scale * t, dim)
    e = nn.Dense(8).apply({'params': params['fc1']}, e)
    return nn.Dense(8).apply({'params': params['fc2']}, nn.silu(e))

  # The same up to XLA's fusion of the two programs (1e-6 relative) ...
  np.testing.assert_allclose(
      jax.jit(embedder.apply)({'params': params}, t), jax.jit(former)(t),
      rtol=1e-5, atol=1e-9)
  # ... and the embedding itself bit for bit.
  np.testing.assert_array_equal(
      jax.jit(lambda t: nets.timestep_embedding(t, dim, **DIT_EMBEDDING))(
          1000.0 * t),
      jax.jit(lambda t: _dit_sinusoidal_embedding(t, dim))(1000.0 * t))


def test_class_conditioning_and_null_label():
  model = dit.DiT(patch=2, width=32, depth=1, heads=4, num_classes=3)
  x = jax.random.normal(jax.random.key(0), (4, 8, 8, 1))
  t = jnp.full((4,), 0.3)
  y = jnp.array([0, 1, 2, 3])  # 3 = the null label
  params = random_params(model.init, x, t, y, seed=3)
  assert params['params']['y_embed']['embedding'].shape == (4, 32)
  out = model.apply(params, x, t, y)
  # None is the null label; labels change the output; a scalar broadcasts.
  np.testing.assert_allclose(model.apply(params, x, t, None),
                             model.apply(params, x, t, jnp.full(4, 3)),
                             atol=1e-6)
  assert float(jnp.abs(out - model.apply(params, x, t, None)).max()) > 1e-3
  np.testing.assert_allclose(model.apply(params, x, t, 1)[1], out[1],
                             atol=1e-6)
  # cond = t_embed(t) + y_embed(y).
  _, cond = model.apply(params, x, t, y, method=dit.DiT.embed)
  _, cond_null = model.apply(params, x, t, None, method=dit.DiT.embed)
  emb = params['params']['y_embed']['embedding']
  np.testing.assert_allclose(cond - cond_null, emb[y] - emb[3], atol=1e-6)
  # An unconditional DiT refuses labels.
  with pytest.raises(ValueError, match='unconditional'):
    MODEL.apply(_random_params(MODEL, x, t), x, t, y)
