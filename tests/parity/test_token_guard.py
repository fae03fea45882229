"""Token-Guard vs the released code (rhq945/Token-Guard, guard/
token_guard_plugin.py and guard/generation_utils.py), on the hidden states,
logits and token ids of a tiny random GPT-2 (tests/parity/generate/
token_guard.py).

Compared: h_x, the token scores, F_seg, H_k, e~_k and |f| of six
candidates of 1-6 tokens (padded on our side), F_global / F_fact / F_logic
of 15 chains (prefixes, reversed, and a constructed segment pushing both
below 0), the threshold shift (Eq. 15) on 64 (F_fact, F_logic) pairs, the
refinement flag (Eq. 10) under each shift, and phi-decoding's step value
(our `step_value` with `value_mean=True`).

Deliberate differences (iclrjax/lm/token_guard.py module docstring): the
default step value sums the log-probs where the release averages them per
token; it spans step + foresight where the release's completed value spans
the foresight only; it is the model's own log p where the release averages
HF's warped `output_scores` (so the step-value checks feed ours the logits
warped by our own sampler filter at the release's T 0.7 / top-p 0.95;
top-k 50 is a no-op at V = 12).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.lm import sample as lm_sample
from iclrjax.lm import token_guard as tg
from tests.parity import common

PAPER = ('TOKEN-GUARD: Towards Token-Level Hallucination Control via '
         'Self-Checking Decoding (arXiv 2601.21969)')
FIXTURE = 'token_guard'
CFG = tg.TokenGuardConfig()


def _tol(theirs, rel=1e-5):
  """float32 rounding relative to the quantity's scale (at least 1)."""
  return rel * max(1.0, float(np.max(np.abs(theirs))))


def _scorer(a):
  """Ours on the fixture's model outputs: anchor, segments, chains."""
  h_x = tg.anchor(a['ctx_hidden'], jnp.ones(a['ctx_hidden'].shape[0], bool))
  n_max = a['token_scores'].shape[1]
  P = a['ctx_hidden'].shape[0]
  p = jnp.exp(tg.token_logp(a['logits'], a['rows']))
  seg = lambda x: x[:, P:P + n_max]
  valid = jnp.arange(n_max)[None] < a['lengths'][:, None]
  segs = jax.vmap(lambda h, e, pp, v: tg.segment_score(h, e, pp, v, h_x, CFG))(
      seg(a['hidden']), seg(a['embed']), seg(p), valid)
  # The constructed segment (index 6): candidate 2 with H_k negated, F_seg -0.3.
  flip = tg.Segment(jnp.float32(-0.3), segs.f_tok_N[2], -segs.H_D[2],
                    segs.e_D[2], segs.f_norm[2])
  pool = jax.tree.map(lambda s, f: jnp.concatenate([s, f[None]]), segs, flip)
  idx = a['chain_idx']
  chains = jax.vmap(lambda i: tg.chain_score(
      jax.tree.map(lambda x: x[jnp.maximum(i, 0)], pool), i >= 0, CFG))(idx)
  adj = jax.vmap(lambda f: tg.threshold_adjustment(
      tg.Chain(jnp.float32(0.0), f[0], f[1]), CFG))(a['adj_inputs'])
  flags = jax.vmap(lambda s: tg.needs_refinement(a['refine_f_seg'], s, CFG))(
      a['refine_shift'])
  return h_x, segs, chains, adj, flags


def _steps(a):
  """phi-decoding's step value of the fixture's rows at step k: token
  log-probs from step k on (the tokens the release sampled), under the
  model (raw) and under the rollout sampler's warped distribution (T 0.7,
  top-p 0.95) as HF's scores are."""
  P, S, K, k = (int(x) for x in a['layout'])
  logits, rows = a['step_logits'], a['step_rows']
  N, L, V = logits.shape
  warped = lm_sample.filter_logits(
      logits.reshape(-1, V), CFG.rollout_temperature, None,
      CFG.rollout_top_p).reshape(N, L, V)
  to_k = lambda lg: jnp.where(jnp.arange(L) >= P + S * k,
                              tg.token_logp(lg, rows), 0.0)[:, P:].reshape(
                                  N, K, S).sum(-1)
  raw_K, warped_K = to_k(logits), to_k(warped)
  n = N // 2                       # first-stage rows, then completed rows
  first, comp = slice(0, n), slice(n, N)
  sv = tg.step_value
  return dict(
      first_mean=sv(warped_K[first], k, S, mean=True),
      first_sum=sv(warped_K[first], k, S),
      first_raw_mean=sv(raw_K[first], k, S, mean=True),
      comp_k_mean=sv(warped_K[comp], k, S, mean=True),
      comp_foresight_mean=sv(warped_K[comp], k + 1, S, mean=True),
      n_tokens=S * (K - k))


@functools.lru_cache(maxsize=None)
def _ours():
  a, _ = common.load(FIXTURE)
  f32 = {k: (jnp.asarray(v, jnp.float32) if v.dtype.kind == 'f'
             else jnp.asarray(v)) for k, v in a.items() if k != 'layout'}
  run = jax.jit(lambda x: (_scorer(x), _steps(dict(x, layout=a['layout']))))
  out, steps = jax.device_get(run(f32))
  return a, out, steps


def checks() -> list[common.Check]:
  a, (h_x, segs, chains, adj, flags), st = _ours()
  g = a['chain_global']
  c = common.check
  return [
      c('h_x: mean second-to-last state of the context (initialize_anchor)',
        h_x, a['h_x'], _tol(a['h_x'])),
      c('token scores f_t (Eq. 3-4, gated running mean; verify_candidates)',
        segs.f_tok_N, a['token_scores'], _tol(a['token_scores'])),
      c('F_seg (Eq. 9; verify_candidates)', segs.f_seg, a['f_seg'],
        _tol(a['f_seg'])),
      c('H_k: softmax(f)-weighted hidden states', segs.H_D, a['H_k'],
        _tol(a['H_k'])),
      c('e~_k: mean input embedding', segs.e_D, a['e_tilde'],
        _tol(a['e_tilde'])),
      c('|f|: token-score norm', segs.f_norm, a['f_norm'], _tol(a['f_norm'])),
      c('F_global (Eq. 13-14; compute_chain_global_score)', chains.f_global,
        g[:, 0], _tol(g[:, 0])),
      c('F_fact (Eq. 11)', chains.f_fact, g[:, 1], _tol(g[:, 1])),
      c('F_logic (Eq. 12)', chains.f_logic, g[:, 2], _tol(g[:, 2])),
      c('threshold shift (Eq. 15; adjust_thresholds)', adj, a['adj'], 1e-6),
      c('refinement flag, mismatches (Eq. 10; check_refinement)',
        flags.astype(int), a['refine_flags'].astype(int), 0.0),
      c('step value, value_mean=True, on logits warped as HF output_scores '
        '(generation_utils.generate)', st['first_mean'],
        a['step_value_first'], _tol(a['step_value_first'])),
      c('deliberate: default step value sums log p (= n_tokens x the '
        "release's per-token mean)", st['first_sum'],
        st['n_tokens'] * a['step_value_first'],
        _tol(st['n_tokens'] * a['step_value_first'])),
      c("deliberate: the release's completed value spans the foresight "
        'only (beam_search.py:340-351) = ours from segment k+1',
        st['comp_foresight_mean'], a['step_value_completed'],
        _tol(a['step_value_completed'])),
  ]


def test_matches_reference():
  common.assert_checks(checks())


def test_fixture_exercises_the_branches():
  a, (_, segs, chains, adj, flags), _ = _ours()
  n_max = a['token_scores'].shape[1]
  f = np.asarray(segs.f_tok_N)[np.arange(n_max) < a['lengths'][:, None]]
  assert (f < CFG.tau_token).any() and (f >= CFG.tau_token).any()  # Eq. 4
  assert set(np.round(a['adj'], 6)) == {-0.1, 0.0, 0.1}
  assert (a['chain_global'][:, 0] == 0).any()                       # clip
  assert a['refine_flags'].any() and not a['refine_flags'].all()
  assert (a['lengths'] == 1).any()                      # score_const = 1


def test_deliberate_sum_not_mean():
  """Default `step_value` sums; the release ranks by the per-token mean
  (generation_utils.py:111-118). Sum = n x mean, so they differ."""
  a, _, st = _ours()
  assert st['n_tokens'] > 1
  assert np.min(np.abs(st['first_sum'] - a['step_value_first'])) > 0.5
  np.testing.assert_allclose(st['first_sum'] / st['n_tokens'],
                             st['first_mean'], rtol=1e-6)


def test_deliberate_span_and_model_logp():
  """Ours spans step k + foresight (the release's completed value the
  foresight only); ours is the model's log p (the release's the warped
  sampler's)."""
  a, _, st = _ours()
  assert np.min(np.abs(st['comp_k_mean'] - a['step_value_completed'])) > 1e-2
  assert np.max(np.abs(st['first_raw_mean'] - a['step_value_first'])) > 1e-2
