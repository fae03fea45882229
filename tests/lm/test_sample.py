"""lm/sample.py: cached and recomputed sampling agree; filters; stop tokens."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.lm import model as lm_model
from iclrjax.lm import sample as lm_sample

V = 11


@pytest.fixture(scope='module')
def setup():
  cfg = lm_model.Config(vocab_size=V, d_model=32, num_heads=4, num_layers=2,
                        d_ff=64, max_len=32)
  m = lm_model.Model(cfg)
  params = m.init(jax.random.key(0))
  prompts = jax.random.randint(jax.random.key(1), (2, 5), 1, V)
  return m, params, prompts


# One set of static sampling arguments for the tests below (each distinct
# set compiles `sample` once).
KW = dict(max_new_tokens=8, num_samples=3, temperature=0.8, top_k=6)


@pytest.mark.parametrize('greedy', [True, False], ids=['greedy', 'sampled'])
def test_cached_sampling_equals_full_recompute(setup, greedy):
  m, params, prompts = setup
  kw = dict(KW, greedy=greedy)
  a = lm_sample.sample(m, params, prompts, jax.random.key(2), **kw)
  b = lm_sample.sample(m, params, prompts, jax.random.key(2), use_cache=False,
                       **kw)
  np.testing.assert_array_equal(a.tokens_NxT, b.tokens_NxT)
  np.testing.assert_allclose(a.logprobs_NxT, b.logprobs_NxT, atol=1e-5)
  assert a.tokens_NxT.shape == (6, 8)
  if greedy:   # the three samples of a prompt coincide; logprobs = scoring
    np.testing.assert_array_equal(a.tokens_NxT[0], a.tokens_NxT[2])
    seq = jnp.concatenate([jnp.repeat(prompts, 3, 0), a.tokens_NxT], 1)
    lp = lm_sample.sequence_logprobs(m, params, seq)[:, 4:]
    np.testing.assert_allclose(a.logprobs_NxT, lp, atol=1e-5)
  else:        # with a key per step the samples of a prompt differ
    assert not np.array_equal(a.tokens_NxT[0], a.tokens_NxT[1])


def test_same_key_same_samples_other_key_other_samples(setup):
  m, params, prompts = setup
  run = lambda k: lm_sample.sample(m, params, prompts, jax.random.key(k),
                                   greedy=False, **KW)
  np.testing.assert_array_equal(run(3).tokens_NxT, run(3).tokens_NxT)
  assert not np.array_equal(run(3).tokens_NxT, run(4).tokens_NxT)


def test_filter_logits_matches_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(4, V)).astype(np.float32)
  got = np.asarray(lm_sample.filter_logits(logits, 0.7, top_k=5, top_p=0.6))
  for row, g in zip(logits, got):
    x = row / 0.7
    x = np.where(x < np.sort(x)[-5], -np.inf, x)
    order = np.argsort(-x)
    p = np.exp(x[order] - x[order].max())
    p /= p.sum()
    keep = order[(np.cumsum(p) - p) < 0.6]
    want = np.full(V, -np.inf, np.float32)
    want[keep] = x[keep]
    np.testing.assert_allclose(g, want, rtol=1e-6)


def test_sampling_frequencies_match_the_filtered_softmax():
  logits = jnp.asarray([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
  keys = jax.random.split(jax.random.key(0), 20000)
  draw = jax.vmap(lambda k: lm_sample._pick(k, logits, False, 0.5, 4, None))
  toks, logp = draw(keys)
  freq = np.bincount(np.asarray(toks[:, 0]), minlength=6) / len(keys)
  p = np.asarray(jax.nn.softmax(lm_sample.filter_logits(logits, 0.5, 4))[0])
  np.testing.assert_allclose(freq, p, atol=0.012)
  assert freq[4] == freq[5] == 0.0
  np.testing.assert_allclose(np.exp(logp[:, 0]), p[np.asarray(toks[:, 0])],
                             rtol=1e-5)


def test_stop_tokens_pad_and_mask_what_follows(setup):
  m, params, prompts = setup
  free = lm_sample.sample(m, params, prompts, jax.random.key(5),
                          greedy=False, **KW)
  stop = int(free.tokens_NxT[0, 3])                 # appears in row 0
  s = lm_sample.sample(m, params, prompts, jax.random.key(5), greedy=False,
                       stop_tokens=(stop,), pad_token=0, **KW)
  toks, mask = np.asarray(s.tokens_NxT), np.asarray(s.mask_NxT)
  for row, mrow, frow in zip(toks, mask, np.asarray(free.tokens_NxT)):
    hits = np.flatnonzero(frow == stop)
    end = hits[0] + 1 if len(hits) else len(row)
    np.testing.assert_array_equal(row[:end], frow[:end])  # same until stop
    assert mrow[:end].all() and not mrow[end:].any()
    assert (row[end:] == 0).all()
  assert (np.asarray(s.logprobs_NxT)[~mask] == 0).all()


def test_left_padded_prompt_samples_as_the_unpadded_one(setup):
  m, params, prompts = setup
  pad = 3
  padded = jnp.pad(prompts, ((0, 0), (pad, 0)))
  P = padded.shape[1]
  keep = jnp.arange(P) >= pad
  pm = lm_model.causal_mask(P)[None] & keep[None, None, :]
  pm = pm | jnp.eye(P, dtype=bool)[None]   # pad rows see themselves only
  kw = dict(max_new_tokens=6, greedy=True)
  a = lm_sample.sample(m, params, prompts, jax.random.key(0), **kw)
  b = lm_sample.sample(m, params, padded, jax.random.key(0),
                       prompt_mask_BxPxP=pm, **kw)
  np.testing.assert_array_equal(a.tokens_NxT, b.tokens_NxT)   # rope: relative


def test_prompt_embeddings_sample_as_the_embedded_tokens(setup):
  m, params, prompts = setup
  emb = params['embed']['embedding'][prompts]
  kw = dict(KW, greedy=False)
  a = lm_sample.sample(m, params, prompts, jax.random.key(3), **kw)
  b = lm_sample.sample(m, params, None, jax.random.key(3),
                       prompt_embeds_BxPxD=emb, **kw)
  np.testing.assert_array_equal(a.tokens_NxT, b.tokens_NxT)
  np.testing.assert_allclose(a.logprobs_NxT, b.logprobs_NxT, atol=1e-6)
