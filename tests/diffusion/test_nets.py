"""Diffusion denoiser networks: embeddings, ResMLP, UNet, parameter EMA.

Kept fast on a shared 2-core CPU, where XLA compile time dominates: tiny
models, one jitted init per model config (module-scoped fixtures), and every
check reuses a few jitted apply functions at fixed shapes. Runs under
`jax.numpy_rank_promotion('raise')`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclrjax.diffusion import nets

D = 8
B = 4
MLP_KW = dict(width=32, blocks=2, emb_dim=16, fourier=(0, 2))
UNET_KW = dict(channels=8, channel_mults=(1, 2), num_res_blocks=1, emb_dim=16,
               attention_levels=(1,), fourier=(2, 4))


@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  with jax.numpy_rank_promotion('raise'):
    yield


def _batch(shape, seed=0):
  kx, kc = jax.random.split(jax.random.key(seed))
  return (jax.random.normal(kx, (B, *shape)),
          jax.random.uniform(kc, (B,)))


# ----------------------------------------------------------------- features


def test_timestep_embedding_matches_formula_and_shapes():
  c = np.array([0.0, 0.25, 0.7], np.float32)
  dim, half = 10, 5
  freqs = np.exp(-np.log(10_000.0) * np.arange(half) / (half - 1))
  args = (c * 1000.0)[:, None] * freqs
  ref = np.concatenate([np.sin(args), np.cos(args)], -1)
  np.testing.assert_allclose(nets.timestep_embedding(c, dim), ref,
                             rtol=1e-5, atol=1e-4)
  assert nets.timestep_embedding(jnp.float32(0.3), 16).shape == (16,)
  assert nets.timestep_embedding(jnp.zeros((2, 3)), 16).shape == (2, 3, 16)
  odd = nets.timestep_embedding(c, 11)
  assert odd.shape == (3, 11)
  np.testing.assert_array_equal(odd[:, -1], 0.0)
  assert nets.timestep_embedding(jnp.arange(3), 8).dtype == jnp.float32
  assert nets.timestep_embedding(jnp.bfloat16(0.5), 8).dtype == jnp.float32
  with pytest.raises(ValueError):
    nets.timestep_embedding(c, 1)


@pytest.mark.parametrize('lo,hi,scale', [(0.0, 1.0, 1000.0),
                                         (-15.0, 15.0, 1000.0),
                                         (-15.0, 15.0, 1000.0 / 30)])
def test_timestep_embedding_distinct(lo, hi, scale):
  c = jnp.linspace(lo, hi, 64)
  e = np.asarray(nets.timestep_embedding(c, 32, scale=scale), np.float64)
  dist = np.linalg.norm(e[:, None] - e[None], axis=-1)
  np.fill_diagonal(dist, np.inf)
  assert dist.min() > 1e-2


def test_fourier_features_matches_numpy_vdm_layout():
  x = np.asarray(jax.random.uniform(jax.random.key(0), (2, 3, 5),
                                    minval=-1, maxval=1), np.float64)
  start, stop = -1, 3
  ks = range(start, stop)
  # Direct formula: sin/cos(2^k * 2 pi * x_d), input dim major, freq minor.
  ang = np.stack([x[..., d] * 2.0**k * 2 * np.pi for d in range(5)
                  for k in ks], -1)  # [2, 3, D * F]
  ref = np.concatenate([np.sin(ang), np.cos(ang)], -1)
  # VDM's Base2FourierFeatures, transcribed to NumPy.
  w = np.tile((2.0 ** np.arange(start, stop) * 2 * np.pi)[None], (1, 5))
  h = np.repeat(x, len(ks), axis=-1) * w
  vdm = np.concatenate([np.sin(h), np.cos(h)], -1)
  out = nets.fourier_features(jnp.asarray(x, jnp.float32), start, stop)
  assert out.shape == (2, 3, 5 * 2 * (stop - start))
  np.testing.assert_allclose(ref, vdm, atol=1e-12)
  np.testing.assert_allclose(out, ref, atol=2e-5)
  with pytest.raises(ValueError):
    nets.fourier_features(jnp.asarray(x), 3, 3)


# ------------------------------------------------------------------- ResMLP
#
# XLA's CPU compile time dominates these tests (initialisers especially), so
# each model config is initialised by one jitted program and every check
# reuses the same few jitted apply functions. `zero_init_out` only changes
# the output layer's initialiser, so one apply function serves both variants.


@pytest.fixture(scope='module')
def mlp():
  x, c = _batch((D,))
  zero = nets.ResMLP(D, **MLP_KW)
  rand = nets.ResMLP(D, zero_init_out=False, **MLP_KW)
  # rbg keys throughout: the initialisers compile several times faster on
  # CPU than with threefry keys; the init code path is the same.
  p_zero, p_rand = jax.jit(lambda k: (zero.init(k, x, c), rand.init(k, x, c))
                           )(jax.random.key(1, impl='rbg'))
  return rand, p_zero, p_rand, x, c, jax.jit(rand.apply)


def test_resmlp_zero_init_output_is_zero(mlp):
  _, p_zero, p_rand, x, c, apply = mlp
  np.testing.assert_array_equal(apply(p_zero, x, c), 0.0)
  assert np.abs(apply(p_rand, x, c)).max() > 1e-3


def test_resmlp_shapes_jit_vmap(mlp):
  model, _, params, x, c, apply = mlp
  batched = apply(params, x, c)
  assert batched.shape == (B, D)
  one = jax.jit(model.apply)(params, x[1], c[1])
  assert one.shape == (D,)
  np.testing.assert_allclose(one, batched[1], atol=1e-5)
  mapped = jax.jit(jax.vmap(model.apply, (None, 0, 0)))(params, x, c)
  np.testing.assert_allclose(mapped, batched, atol=1e-5)
  # Extra leading dims, and a scalar c broadcast over the batch.
  shape = jax.eval_shape(model.apply, params, jnp.zeros((2, 3, D)),
                         jnp.zeros((2, 3)))
  assert shape.shape == (2, 3, D)
  shape = jax.eval_shape(model.apply, params, x, jnp.float32(0.5))
  assert shape.shape == (B, D)


def test_resmlp_depends_on_c_and_x(mlp):
  _, _, params, x, c, apply = mlp
  y = apply(params, x, c)
  assert np.all(np.isfinite(y))
  assert np.abs(apply(params, x, c + 0.1) - y).max() > 1e-3
  assert np.abs(apply(params, x + 0.1, c) - y).max() > 1e-3
  # Per example: changing c of example 0 only changes output 0.
  y2 = apply(params, x, c.at[0].add(0.3))
  assert np.abs(y2[0] - y[0]).max() > 1e-3
  np.testing.assert_allclose(y2[1:], y[1:], atol=1e-6)


def test_resmlp_gradients_finite(mlp):
  model, _, params, x, c, _ = mlp
  grads = jax.jit(jax.grad(
      lambda p: jnp.sum(model.apply(p, x, c) ** 2)))(params)
  leaves = jax.tree.leaves(grads)
  assert all(np.all(np.isfinite(g)) for g in leaves)
  assert sum(float(jnp.abs(g).sum()) for g in leaves) > 0


def test_resmlp_fits_conditional_regression(mlp):
  """Learns x -> x * (1 + c) from the zero-init net; needs the c input.

  The best c-blind predictor, E[x (1 + c) | x] = 1.5 x, has loss
  E[x^2] Var(c) ~ 1/12; the trained net must beat it by 10x, and reduce the
  initial loss (output 0: E[x^2 (1 + c)^2] ~ 7/3) by 100x.
  """
  model, params, _, _, _, _ = mlp
  kx, kc = jax.random.split(jax.random.key(3))
  x = jax.random.normal(kx, (256, D))
  c = jax.random.uniform(kc, (256,))
  y = x * (1 + c[:, None])
  opt = optax.adam(3e-3)

  def loss(p):
    return jnp.mean((model.apply(p, x, c) - y) ** 2)

  @jax.jit
  def train(p):
    def step(carry, _):
      p, s = carry
      val, g = jax.value_and_grad(loss)(p)
      u, s = opt.update(g, s, p)
      return (optax.apply_updates(p, u), s), val
    (p, _), losses = jax.lax.scan(step, (p, opt.init(p)), None, length=300)
    return losses[0], loss(p)

  l0, l1 = map(float, train(params))
  blind = float(jnp.mean(x ** 2) * jnp.var(c))
  assert l1 < l0 / 100, (l0, l1)
  assert l1 < blind / 10, (blind, l1)


# --------------------------------------------------------------------- UNet
#
# Initialising the full test U-Net (~140 parameter leaves) costs 15-40 s of
# XLA compile on a loaded 2-core CPU, so its checks run on parameters of the
# exact `init` shapes (from `jax.eval_shape`) filled with fan-in-scaled
# Gaussian kernels, unit norm scales and zero biases, as `zero_init_out=
# False` would give. The real initialisers are exercised on a one-level
# U-Net (with an rbg key, as for the ResMLP).


def _fill_params(model, *args):
  shapes = jax.eval_shape(model.init, jax.random.key(0), *args)
  rng = np.random.default_rng(0)

  def fill(path, s):
    name = path[-1].key
    if name == 'kernel':
      fan_in = math.prod(s.shape[:-1])
      return jnp.asarray(rng.normal(size=s.shape) / math.sqrt(fan_in),
                         s.dtype)
    return (jnp.ones if name == 'scale' else jnp.zeros)(s.shape, s.dtype)

  return jax.tree_util.tree_map_with_path(fill, shapes)


@pytest.fixture(scope='module')
def unet():
  x, c = _batch((8, 8, 1))
  model = nets.UNet(1, zero_init_out=False, **UNET_KW)
  return model, _fill_params(model, x, c), x, c, jax.jit(model.apply)


def test_unet_real_init_zero_out_and_conditioning():
  x, c = _batch((8, 8, 1))
  model = nets.UNet(1, channels=4, channel_mults=(1,), num_res_blocks=1,
                    emb_dim=8)
  params = jax.jit(model.init)(jax.random.key(0, impl='rbg'), x, c)
  apply = jax.jit(model.apply)
  xx, cc = jnp.concatenate([x, x]), jnp.concatenate([c, c + 0.1])
  np.testing.assert_array_equal(apply(params, xx, cc), 0.0)
  # zero_init_out=False differs only in this kernel's initialiser.
  kernel = params['params']['conv_out']['kernel']
  params['params']['conv_out']['kernel'] = jnp.asarray(
      np.random.default_rng(1).normal(0.0, 0.3, kernel.shape), kernel.dtype)
  y = apply(params, xx, cc)
  assert y.shape == (2 * B, 8, 8, 1) and np.all(np.isfinite(y))
  assert np.abs(y[:B] - y[B:]).max() > 1e-4


def test_unet_shapes_jit_vmap(unet):
  model, params, x, c, apply = unet
  batched = apply(params, x, c)
  assert batched.shape == (B, 8, 8, 1)
  assert np.all(np.isfinite(batched))
  # vmap runs the unbatched [H, W, C] code path on each example.
  mapped = jax.jit(jax.vmap(model.apply, (None, 0, 0)))(params, x, c)
  np.testing.assert_allclose(mapped, batched, atol=1e-5)
  one = jax.eval_shape(model.apply, params, x[2], c[2])
  assert one.shape == (8, 8, 1)
  many = jax.eval_shape(model.apply, params, jnp.zeros((2, 3, 8, 8, 1)),
                        jnp.float32(0.5))
  assert many.shape == (2, 3, 8, 8, 1)


def test_unet_depends_on_c_and_x(unet):
  _, params, x, c, apply = unet
  y = apply(params, x, c)
  assert np.abs(apply(params, x, c + 0.1) - y).max() > 1e-3
  assert np.abs(apply(params, x + 0.1, c) - y).max() > 1e-3
  y2 = apply(params, x, c.at[0].add(0.3))
  assert np.abs(y2[0] - y[0]).max() > 1e-3
  np.testing.assert_allclose(y2[1:], y[1:], atol=1e-6)


def test_unet_cifar_shape_and_dropout():
  model = nets.UNet(3, zero_init_out=False, dropout=0.1, **UNET_KW)
  x = jax.random.normal(jax.random.key(0), (2, 32, 32, 3))
  c = jnp.array([0.2, 0.9])
  params = _fill_params(model, x, c)
  run = jax.jit(lambda key: model.apply(params, x, c, deterministic=False,
                                        rngs={'dropout': key}))
  # rbg keys: dropout masks from threefry add seconds of CPU compile.
  y = run(jax.random.key(2, impl='rbg'))
  assert y.shape == (2, 32, 32, 3) and np.all(np.isfinite(y))
  y_other = run(jax.random.key(3, impl='rbg'))
  assert np.abs(y_other - y).max() > 0  # dropout is active


def test_unet_rejects_indivisible_size():
  model = nets.UNet(1, channel_mults=(1, 2, 2), channels=4)
  with pytest.raises(ValueError):
    jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((6, 6, 1)), 0.5)


# ---------------------------------------------------------------------- EMA


def test_ema_update_formula():
  ema = {'a': jnp.array([1.0, 2.0]), 'b': {'c': jnp.array(3.0)}}
  params = {'a': jnp.array([3.0, 0.0]), 'b': {'c': jnp.array(-1.0)}}
  out = nets.ema_update(ema, params, 0.75)
  np.testing.assert_allclose(out['a'], [1.5, 1.5])
  np.testing.assert_allclose(out['b']['c'], 2.0)
  out = nets.ema_update(ema, params, jnp.float32(0.0))
  np.testing.assert_allclose(out['a'], params['a'])
  half = {'x': jnp.ones(3, jnp.bfloat16)}
  assert nets.ema_update(half, half, jnp.float32(0.9))['x'].dtype == (
      jnp.bfloat16)


@pytest.mark.parametrize('decay', [0.5, 0.99, 0.999])
def test_ema_decay_debiased_is_optax_debiased_ema(decay):
  # Independent reference: optax.ema(decay, debias=True) on the same stream
  # of iterates; the recursion with d_k must give its debiased output.
  rng = np.random.default_rng(0)
  ps = rng.normal(size=(300, 4)).astype(np.float32)
  tx = optax.ema(decay, debias=True)
  opt = tx.init(jnp.zeros(4))
  ema = jnp.asarray(rng.normal(size=4), jnp.float32)   # init gets weight 0
  for k in range(len(ps)):
    ref, opt = tx.update(jnp.asarray(ps[k]), opt)
    ema = nets.ema_update(ema, jnp.asarray(ps[k]),
                          nets.ema_decay_debiased(k, decay))
    if k in (0, 1, 5, 50, 299):
      np.testing.assert_allclose(ema, ref, rtol=2e-4, atol=2e-5)
  # Closed form: weights d^(k-i) (1-d) / (1-d^(k+1)).
  k = len(ps) - 1
  w = decay ** (k - np.arange(k + 1)) * (1 - decay) / (1 - decay ** (k + 1))
  np.testing.assert_allclose(ema, w @ ps.astype(np.float64), rtol=2e-4,
                             atol=2e-5)


def test_ema_decay_debiased_formula():
  assert float(nets.ema_decay_debiased(0, 0.999)) == 0.0
  np.testing.assert_allclose(nets.ema_decay_debiased(1, 0.999),
                             0.999 * (1 - 0.999) / (1 - 0.999 ** 2),
                             rtol=1e-5)
  # Tends to the configured decay (not held below it by a warm-up).
  np.testing.assert_allclose(nets.ema_decay_debiased(10 ** 5, 0.999), 0.999,
                             rtol=1e-7)
  np.testing.assert_allclose(nets.ema_decay_debiased(3000, 0.999),
                             0.999 * (1 - 0.999 ** 3000)
                             / (1 - 0.999 ** 3001), rtol=1e-6)
  # Works under jit with a traced step.
  assert jax.jit(nets.ema_decay_debiased)(jnp.int32(5), 0.99).shape == ()


def test_in_chunks_equals_one_call():
  """A per-example fn over chunks of the batch: the same pytree of results
  (a lax.map step per chunk); None, 0 or a chunk >= the batch: one call."""
  x = jnp.arange(24.0).reshape(6, 4)
  y = jnp.arange(6.0)
  fn = lambda a, b: {'s': jnp.sin(a) @ jnp.ones(4) * b, 'a': 2.0 * a}
  want = fn(x, y)
  for chunk in (None, 0, 2, 3, 6, 8):
    got = nets.in_chunks(fn, chunk)(x, y)
    np.testing.assert_allclose(got['s'], want['s'], rtol=1e-6)
    np.testing.assert_array_equal(got['a'], want['a'])
  with pytest.raises(ValueError, match='does not divide'):
    nets.in_chunks(fn, 4)(x, y)
