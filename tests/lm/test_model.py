"""lm/model.py: KV-cached decoding equals the full forward pass; masks obeyed."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.lm import model as lm_model

V, B, L = 17, 3, 12


@pytest.fixture(scope='module', params=[('rope', 'swiglu'),
                                        ('learned', 'gelu')],
                ids=['rope-swiglu', 'learned-gelu'])
def setup(request):
  positions, mlp = request.param
  cfg = lm_model.Config(vocab_size=V, d_model=32, num_heads=4, num_layers=2,
                        d_ff=64, max_len=16, positions=positions, mlp=mlp)
  m = lm_model.Model(cfg)
  params = m.init(jax.random.key(0))
  tokens = jax.random.randint(jax.random.key(1), (B, L), 0, V)
  return m, params, tokens


def _cached_logits(m, params, tokens, p, prefill, step):
  """Logits at positions p-1 .. L-1: prefill p tokens, decode the rest."""
  cache = prefill(params, tokens[:, :p])
  out = [cache.logits_BxV]
  for i in range(p, tokens.shape[1]):
    logits, cache = step(params, cache, tokens[:, i])
    out.append(logits)
  return jnp.stack(out, 1), cache


@pytest.mark.parametrize('use_jit', [False, True], ids=['eager', 'jit'])
def test_kv_cache_matches_full_forward_at_every_position(setup, use_jit):
  m, params, tokens = setup
  if not use_jit and m.cfg.positions != 'rope':
    pytest.skip('eager: the RoPE + SwiGLU model (op by op compiles are slow)')
  apply, prefill, step = m.apply, m.prefill, m.decode_step
  if use_jit:
    apply, prefill, step = jax.jit(apply), jax.jit(prefill), jax.jit(step)
  full = apply(params, tokens)
  chex.assert_shape(full, (B, L, V))
  for p in ((1, 5) if use_jit else (L - 2,)):   # eager: slow per step
    got, cache = _cached_logits(m, params, tokens, p, prefill, step)
    np.testing.assert_allclose(got, full[:, p - 1:], atol=1e-5, rtol=1e-5)
    assert int(cache.index) == L
    np.testing.assert_array_equal(cache.valid_BxC[:, :L], True)
    np.testing.assert_array_equal(cache.valid_BxC[:, L:], False)


def test_repeat_cache_shares_one_prefill(setup):
  m, params, tokens = setup
  n = 4
  cache = lm_model.repeat_cache(jax.jit(m.prefill)(params, tokens[:, :5]), n)
  chex.assert_shape(cache.k, (2, B * n, 16, 4, 8))
  nxt = jnp.repeat(tokens[:, 5], n)
  logits, _ = jax.jit(m.decode_step)(params, cache, nxt)
  full = jax.jit(m.apply)(params, tokens[:, :6])[:, -1]
  np.testing.assert_allclose(logits, jnp.repeat(full, n, 0), atol=1e-5)


def test_hidden_states_per_layer(setup):
  m, params, tokens = setup
  apply = jax.jit(m.apply, static_argnames='return_hidden')
  logits, hidden = apply(params, tokens, return_hidden=True)
  chex.assert_shape(hidden, (3, B, L, 32))
  embeds = params['embed']['embedding'][tokens]
  if m.cfg.positions == 'rope':
    np.testing.assert_allclose(hidden[0], embeds, atol=1e-6)
  # Decoding returns the same residual streams at the new position.
  cache = jax.jit(m.prefill)(params, tokens[:, :L - 1])
  _, _, h = jax.jit(m.decode_step, static_argnames='return_hidden')(
      params, cache, tokens[:, -1], return_hidden=True)
  np.testing.assert_allclose(h, hidden[:, :, -1], atol=1e-5)
  # Embeddings in place of tokens give the same logits.
  np.testing.assert_allclose(
      jax.jit(lambda p, e: m.apply(p, None, embeds_BxLxD=e))(params, embeds),
      logits, atol=1e-6)


def test_attend_matches_a_numpy_transcription():
  rng = np.random.default_rng(0)
  q, k, v = (rng.normal(size=(2, n, 3, 4)).astype(np.float32)
             for n in (5, 7, 7))
  mask = rng.random((2, 5, 7)) < 0.6
  mask[0, 2] = False                               # an all-masked row
  got = lm_model.attend(q, k, v, mask)
  want = np.zeros((2, 5, 3, 4), np.float32)
  for b in range(2):
    for i in range(5):
      for h in range(3):
        js = np.flatnonzero(mask[b, i])
        if not len(js):
          continue
        s = k[b, js, h] @ q[b, i, h] / 2.0
        w = np.exp(s - s.max())
        want[b, i, h] = (w / w.sum()) @ v[b, js, h]
  np.testing.assert_allclose(got, want, atol=1e-6)


def test_gradient_probe_custom_mask_is_obeyed():
  """One layer: output i depends on input j != i only through attention to
  key j, so its gradient is zero exactly where the mask is False."""
  cfg = lm_model.Config(vocab_size=V, d_model=16, num_heads=2, num_layers=1,
                        d_ff=32, max_len=8)
  m = lm_model.Model(cfg)
  params = m.init(jax.random.key(2))
  n = 6
  rng = np.random.default_rng(3)
  mask = rng.random((n, n)) < 0.5
  np.fill_diagonal(mask, True)
  mask[0, 4] = True                                # a non-causal edge
  embeds = jax.random.normal(jax.random.key(4), (1, n, 16))
  probe = jax.random.normal(jax.random.key(5), (V,))

  def out_i(e, i):
    return m.apply(params, None, mask[None], embeds_BxLxD=e)[0, i] @ probe

  grad = jax.jit(jax.grad(out_i))   # i traced: one compile for every row
  for i in range(n):
    g = np.abs(np.asarray(grad(embeds, i))[0]).sum(-1)   # [n] per key j
    for j in range(n):
      if j == i:
        continue
      if mask[i, j]:
        assert g[j] > 1e-6, (i, j, g)
      else:
        assert g[j] == 0.0, (i, j, g)


def test_causal_by_default_future_tokens_do_not_change_the_past(setup):
  m, params, tokens = setup
  other = tokens.at[:, 7:].set((tokens[:, 7:] + 1) % V)
  np.testing.assert_allclose(m.apply(params, tokens)[:, :7],
                             m.apply(params, other)[:, :7], atol=1e-6)


def test_bad_configs_name_the_field():
  with pytest.raises(ValueError, match='positions'):
    lm_model.Config(vocab_size=5, positions='alibi')
  with pytest.raises(ValueError, match='mlp'):
    lm_model.Config(vocab_size=5, mlp='relu')
  with pytest.raises(ValueError, match='num_heads'):
    lm_model.Config(vocab_size=5, d_model=30, num_heads=4)


def test_set_model_extend_with_scratch_tokens_matches_full_forward():
  """readout='none', positions='none': a padded set prompt prefilled with
  its own valid keys, then [kept, scratch] pairs through `extend` with
  commit=1, equal one full masked forward pass; the scratch token is never
  a key for later rows."""
  cfg = lm_model.Config(vocab_size=1, d_model=32, num_heads=4, num_layers=2,
                        d_ff=64, max_len=32, positions='none', readout='none')
  m = lm_model.Model(cfg)
  params = m.init(jax.random.key(0))
  assert 'embed' not in params
  P, S = 5, 3                             # prompt (last row padding), steps
  x = jax.random.normal(jax.random.key(1), (B, P + 2 * S, 32))
  valid = jnp.arange(P) < P - 1            # the last prompt row is padding
  pm = jnp.broadcast_to(valid, (P, P))
  cache = jax.jit(m.prefill, static_argnums=3)(
      params, None, pm, 16, embeds_BxLxD=x[:, :P], valid_BxL=valid)
  ext = jax.jit(m.extend, static_argnames='commit')
  pair = jnp.array([[True, False], [True, False]])   # scratch sees kept
  outs = []
  for s in range(S):
    out, cache = ext(params, cache, None, pair,
                     embeds_BxLxD=x[:, P + 2 * s:P + 2 * s + 2], commit=1)
    outs.append(out)
  assert int(cache.index) == P + S
  # The same computation as one pass: keys = valid prompt + kept tokens so
  # far (and each row itself where it is kept).
  N = P + 2 * S
  q = jnp.arange(N)
  kept = (q >= P) & ((q - P) % 2 == 0)
  step = jnp.where(q >= P, (q - P) // 2, -1)
  mask = (((q[None] < P) & jnp.pad(valid, (0, 2 * S))[None])
          | (kept[None] & (step[None] < step[:, None]))
          | (kept[None] & (step[None] == step[:, None])))
  mask = mask | jnp.eye(N, dtype=bool) & (q[:, None] < P)
  full = m.apply(params, None, mask, embeds_BxLxD=x)
  got = jnp.concatenate(outs, 1)
  np.testing.assert_allclose(got, full[:, P:], atol=1e-5, rtol=1e-5)
  # Permuting the valid prompt rows leaves every later output unchanged.
  perm = jnp.array([2, 0, 3, 1, 4])
  c2 = m.prefill(params, None, pm[perm][:, perm], 16,
                 embeds_BxLxD=x[:, perm], valid_BxL=valid[perm])
  o2, _ = ext(params, c2, None, pair, embeds_BxLxD=x[:, P:P + 2], commit=1)
  np.testing.assert_allclose(o2, outs[0], atol=1e-5)
