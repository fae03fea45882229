"""Token-Guard's scorer against a NumPy loop transcription of the reference
(rhq945/Token-Guard guard/token_guard_plugin.py: `verify_candidates`,
`compute_chain_global_score`, `adjust_thresholds`, `check_refinement`),
the AUROC against scikit-learn, and the search's bookkeeping on a tiny LM."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import metrics

from iclrjax.lm import model as lm_model
from iclrjax.lm import token_guard as tg

CFG = tg.TokenGuardConfig()


# -- the reference, line by line in NumPy (float64) -------------------------

def _cos(a, b, eps=1e-8):
  return float(a @ b / (max(np.linalg.norm(a), eps) *
                        max(np.linalg.norm(b), eps)))


def ref_verify(h, e, p, h_x, c=CFG):
  """verify_candidates' loop for one candidate: (f_seg, token_scores, H_k,
  e_tilde_k, f_norm)."""
  token_scores, running, t_offset = [], h_x.copy(), 1
  for i in range(len(h)):
    sim = _cos(h[i], running)
    f = c.lambda_val * sim + (1 - c.lambda_val) * p[i]
    token_scores.append(f)
    if f >= c.tau_token:
      running = (running * t_offset + h[i]) / (t_offset + 1)
      t_offset += 1
  f = np.asarray(token_scores)
  w = np.exp(f - f.max())
  w /= w.sum()
  H = (w[:, None] * h).sum(0)
  score_token = float((w * f).sum())
  if len(h) > 1:
    hn = h / np.maximum(np.linalg.norm(h, axis=-1, keepdims=True), 1e-12)
    const = max(0.0, float((hn[:-1] * hn[1:]).sum(-1).mean()))
  else:
    const = 1.0
  align = _cos(H, h_x)
  f_seg = c.alpha * score_token + c.beta * const + c.gamma * align
  return f_seg, f, H, e.mean(0), float(np.linalg.norm(f))


def ref_chain(chain, c=CFG):
  """compute_chain_global_score over a list of ref_verify outputs."""
  if not chain:
    return 0.0, 0.0, 0.0
  num = [seg[4] * 1.0 for seg in chain]
  den = sum(num) + 1e-8
  f_fact = sum(num[k] / den * chain[k][0] for k in range(len(chain)))
  K = len(chain)
  if K < 2:
    f_logic = 1.0
  else:
    s = [(1 + _cos(chain[k][3], chain[k + 1][3])) / 2
         * _cos(chain[k][2], chain[k + 1][2]) for k in range(K - 1)]
    f_logic = sum(s) / (K - 1)
  a, b = max(f_fact, 1e-8), max(f_logic, 1e-8)
  g = -0.1 * math.log(math.exp(-a / 0.1) + math.exp(-b / 0.1))
  return max(0.0, min(1.0, g)), f_fact, f_logic


def _inputs(seed, n, d=16, shift=0.0):
  r = np.random.default_rng(seed)
  h_x = r.normal(size=d)
  h = h_x * shift + r.normal(size=(n, d))
  return h, r.normal(size=(n, d)), r.uniform(size=n), h_x


def _jax_seg(h, e, p, h_x, c=CFG, valid=None):
  valid = np.ones(len(h), bool) if valid is None else valid
  return jax.jit(tg.segment_score, static_argnames='cfg')(
      jnp.asarray(h, jnp.float32), jnp.asarray(e, jnp.float32),
      jnp.asarray(p, jnp.float32), jnp.asarray(valid), jnp.asarray(
          h_x, jnp.float32), cfg=c)


@pytest.mark.parametrize('seed,n,shift', [(0, 5, 0.0), (1, 7, 1.0),
                                          (2, 1, 0.5), (3, 6, 3.0)])
def test_segment_matches_reference(seed, n, shift):
  h, e, p, h_x = _inputs(seed, n, shift=shift)
  want = ref_verify(h, e, p, h_x)
  got = _jax_seg(h, e, p, h_x)
  np.testing.assert_allclose(got.f_seg, want[0], atol=1e-5)
  np.testing.assert_allclose(got.f_tok_N, want[1], atol=1e-5)
  np.testing.assert_allclose(got.H_D, want[2], atol=1e-5)
  np.testing.assert_allclose(got.e_D, want[3], atol=1e-5)
  np.testing.assert_allclose(got.f_norm, want[4], atol=1e-5)


def test_gate_is_exercised_both_ways():
  """The inputs above cross tau_token both ways: with the gate, and with
  tau_token > 1 the running mean stays at h_x (every sim against h_x)."""
  h, e, p, h_x = _inputs(1, 7, shift=1.0)
  f = ref_verify(h, e, p, h_x)[1]
  assert (f >= CFG.tau_token).any() and (f < CFG.tau_token).any()
  closed = tg.TokenGuardConfig(tau_token=1.5)
  got = _jax_seg(h, e, p, h_x, closed).f_tok_N
  sims = np.asarray([_cos(x, h_x) for x in h])
  np.testing.assert_allclose(got, 0.6 * sims + 0.4 * p, atol=1e-5)
  assert np.abs(got - f).max() > 1e-3     # the gate changed the scores


def test_without_hidden_is_softmax_mean_of_probabilities():
  h, e, p, h_x = _inputs(4, 6)
  got = _jax_seg(h, e, p, h_x, CFG.without_hidden())
  w = np.exp(p) / np.exp(p).sum()
  np.testing.assert_allclose(got.f_seg, 0.5 * (w * p).sum(), atol=1e-6)


def test_padded_segment_equals_unpadded():
  h, e, p, h_x = _inputs(5, 4, shift=1.0)
  pad = lambda x: np.concatenate([x, np.ones_like(x[:2]) * 7.0])
  got = _jax_seg(pad(h), pad(e), pad(p), h_x,
                 valid=np.arange(6) < 4)
  want = ref_verify(h, e, p, h_x)
  np.testing.assert_allclose(got.f_seg, want[0], atol=1e-5)
  np.testing.assert_allclose(got.f_norm, want[4], atol=1e-5)


@pytest.mark.parametrize('seed,K,nk', [(0, 3, 3), (1, 4, 2), (2, 3, 1),
                                       (3, 2, 0), (4, 5, 5)])
def test_chain_matches_reference(seed, K, nk):
  """F_fact, F_logic, the soft-min and the clip on random segments (the
  valid prefix nk of K; nk = 0 is the empty chain, nk = 1 F_logic = 1)."""
  segs = [ref_verify(*_inputs(100 * seed + k, 3 + k, shift=0.7 * k))
          for k in range(K)]
  jsegs = [_jax_seg(*_inputs(100 * seed + k, 3 + k, shift=0.7 * k))
           for k in range(K)]
  S = max(len(s.f_tok_N) for s in jsegs)
  stack = tg.Segment(
      jnp.stack([s.f_seg for s in jsegs]),
      jnp.stack([jnp.pad(s.f_tok_N, (0, S - len(s.f_tok_N)))
                 for s in jsegs]),
      jnp.stack([s.H_D for s in jsegs]), jnp.stack([s.e_D for s in jsegs]),
      jnp.stack([s.f_norm for s in jsegs]))
  got = tg.chain_score(stack, jnp.arange(K) < nk, CFG)
  want = ref_chain(segs[:nk])
  np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_softmin_clip_both_ends():
  """F_global = clip(softmin(F_fact, F_logic), 0, 1): negative scores clip
  to 0; high ones give the soft-min (below the min by <= 0.1 log 2)."""
  def chain(f_seg, H):
    K = len(f_seg)
    return tg.Segment(jnp.asarray(f_seg), jnp.zeros((K, 2)),
                      jnp.asarray(H, jnp.float32), jnp.ones((K, 3)),
                      jnp.ones((K,)))
  low = tg.chain_score(chain([-0.4, -0.2], [[1, 0], [-1, 0]]),
                       jnp.ones(2, bool), CFG)
  assert float(low.f_global) == 0.0
  assert ref_chain([(-0.4, None, np.array([1., 0]), np.ones(3), 1.0),
                    (-0.2, None, np.array([-1., 0]), np.ones(3), 1.0)]
                   )[0] == 0.0
  hi = tg.chain_score(chain([1.3, 1.3], [[1, 0], [1, 0]]),
                      jnp.ones(2, bool), CFG)
  want = -0.1 * math.log(math.exp(-13) + math.exp(-10))
  np.testing.assert_allclose(float(hi.f_global), min(want, 1.0), atol=1e-6)


@pytest.mark.parametrize('fact,logic,adj', [(0.4, 0.7, 0.1), (0.7, 0.4, -0.1),
                                            (0.55, 0.55, 0.0)])
def test_threshold_adjustment_and_window(fact, logic, adj):
  ch = tg.Chain(jnp.zeros(()), jnp.asarray(fact), jnp.asarray(logic))
  a = float(tg.threshold_adjustment(ch, CFG))
  assert a == pytest.approx(adj)
  for f_seg in (0.5, 0.55 - a - 1e-4, 0.55 - a + 1e-4, 0.6, 0.75 + a - 1e-4,
                0.75 + a + 1e-4, 0.9):
    want = (0.55 - a) <= f_seg < (0.75 + a)
    assert bool(tg.needs_refinement(f_seg, jnp.asarray(a), CFG)) == want


def test_auroc_matches_sklearn_with_ties():
  r = np.random.default_rng(0)
  for _ in range(5):
    s = np.round(r.normal(size=300), 1)           # many ties
    y = r.uniform(size=300) < 1 / (1 + np.exp(-s))
    assert tg.auroc(s, y) == pytest.approx(metrics.roc_auc_score(y, s),
                                           abs=1e-12)
  assert tg.auroc(np.ones(10), np.arange(10) < 5) == 0.5
  assert math.isnan(tg.auroc(np.arange(4.), np.ones(4)))


def test_step_value_sum_default_and_mean_option():
  """`step_value` sums segments k.. (the search's value before the option
  existed, bit for bit); `mean=True` divides by their token count, the
  release's per-token mean (guard/generation_utils.py:111-118)."""
  logp = -jax.random.uniform(jax.random.PRNGKey(0), (5, 4), maxval=6.0)
  for k in range(4):
    old = (logp * (jnp.arange(4) >= k)).sum(-1)
    np.testing.assert_array_equal(tg.step_value(logp, k, 3), old)
    np.testing.assert_allclose(tg.step_value(logp, k, 3, mean=True),
                               old / (3 * (4 - k)), rtol=1e-6)
  traced = jax.jit(tg.step_value, static_argnums=(2, 3))(logp, 2, 3, True)
  np.testing.assert_allclose(traced, logp[:, 2:].sum(-1) / 6, rtol=1e-6)
  assert not tg.TokenGuardConfig().value_mean        # recorded runs sum


# -- the search on a tiny random LM -----------------------------------------

@pytest.fixture(scope='module')
def tiny():
  m = lm_model.Model(lm_model.Config(vocab_size=12, d_model=16, num_heads=2,
                                     num_layers=2, d_ff=32, max_len=16))
  return m, m.init(jax.random.PRNGKey(0))


def test_search_passes_and_determinism(tiny):
  m, params = tiny
  layout = tg.Layout(prompt_len=4, seg_len=2, num_segments=3)
  prompt = jnp.asarray([1, 5, 6, 7], jnp.int32)
  cv = jnp.ones(4, bool)
  key = jax.random.PRNGKey(3)
  c = tg.TokenGuardConfig(step_beams=2, num_rollout=2, sigma_rate=10.0)
  run = jax.jit(tg.foresight_search, static_argnums=(0, 5))
  phi = run(m, params, prompt, cv, key, layout, c.phi_decoding())
  # phi-decoding, nothing pruned: 4 rollouts x (2 step + foresight) tokens.
  assert float(phi.passes) == 4 * (6 + 4 + 2)
  assert float(phi.refined) == 0.0 and float(phi.f_global) == 0.0
  out = run(m, params, prompt, cv, key, layout, c)
  again = run(m, params, prompt, cv, key, layout, c)
  np.testing.assert_array_equal(out.tokens_L, again.tokens_L)
  np.testing.assert_array_equal(out.tokens_L[:4], prompt)
  assert float(out.passes) >= float(phi.passes) + 3 * 4
  # Each refinement call adds <= max_retries x (seg_len + 1) passes.
  extra = float(out.passes) - float(phi.passes) - 3 * 4
  assert extra <= float(out.refined) * c.max_retries * 3
  assert 0.0 <= float(out.f_global) <= 1.0
  capped = run(m, params, prompt, cv, key, layout, c.replace(max_passes=60.))
  assert float(phi.passes) + 12 <= float(capped.passes) <= 60.0


def test_refine_keeps_only_improvements(tiny):
  m, params = tiny
  layout = tg.Layout(prompt_len=4, seg_len=3, num_segments=2)
  toks = jax.random.randint(jax.random.PRNGKey(1), (6, 10), 3, 12)
  cv = jnp.ones((6, 4), bool)
  c = tg.TokenGuardConfig(tau_seg_low=-10.0, tau_seg_high=10.0)  # always on
  sc = tg.score_rows(m, params, toks, layout, cv, c)
  new, seg, passes = jax.jit(tg.refine, static_argnums=(0, 7, 10))(
      m, params, toks, sc.seg, 1, jnp.zeros(6), jax.random.PRNGKey(2),
      layout, cv, c, 3)
  assert (np.asarray(seg.f_seg[:, 1]) >= np.asarray(sc.seg.f_seg[:, 1])).all()
  np.testing.assert_array_equal(new[:, :7], toks[:, :7])
  rescored = tg.score_rows(m, params, new, layout, cv, c)
  np.testing.assert_allclose(rescored.seg.f_seg[:, 1], seg.f_seg[:, 1],
                             atol=1e-6)
  np.testing.assert_allclose(rescored.seg.f_seg[:, 0], sc.seg.f_seg[:, 0],
                             atol=1e-6)
  assert (np.asarray(new[:, 7:]) != np.asarray(toks[:, 7:])).any()
  assert (np.asarray(passes) > 0).all()
