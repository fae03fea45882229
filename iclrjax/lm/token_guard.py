"""Token-Guard: token-level hallucination scoring fused into a foresight
beam search ("TOKEN-GUARD: Towards Token-Level Hallucination Control via
Self-Checking Decoding", Zhu, Rong, Luo, arXiv 2601.21969, ICLR 2026).

Training-free: every score is a fixed function of a frozen LM's
second-to-last-layer hidden states, its input embeddings and its token
probabilities, transcribed from the reference code (github rhq945/Token-Guard,
guard/token_guard_plugin.py; equation numbers as cited in its comments):

  anchor      h_x = mean of the second-to-last layer over the context (Eq. 1)
  token       f_t = lam cos(h_t, m) + (1 - lam) p_t (Eq. 3); the running
              semantic mean m starts at h_x and absorbs h_t only when
              f_t >= tau_token (Eq. 4): m <- (m n + h_t) / (n + 1), n from 1
  segment     w = softmax(f), H_k = sum_i w_i h_i, score_tok = sum_i w_i f_i,
              score_const = max(0, mean_i cos(h_i, h_{i+1})) (1 for one
              token), score_align = cos(H_k, h_x);
              F_seg = alpha score_tok + beta score_const + gamma score_align
              (Eq. 9)
  chain       F_fact = sum_k (|f^(k)| ev_k / (sum_j |f^(j)| ev_j + 1e-8))
              F_seg_k (evidence ev_k = 1 as in the reference);
              F_logic = mean_k lam_k cos(H_k, H_{k+1}), lam_k = (1 + cos(e_k,
              e_{k+1})) / 2 over mean input embeddings (1 for one segment);
              F_global = clip(softmin_0.1(max(F_fact, 1e-8), max(F_logic,
              1e-8)), 0, 1) (Eq. 11-14)
  thresholds  adj = +delta if F_fact < 0.5 and F_logic > 0.6, -delta if
              F_logic < 0.5 and F_fact > 0.6, else 0 (Eq. 15); a segment is
              refined when tau_low - adj <= F_seg < tau_high + adj (Eq. 10)

The search (`foresight_search`) is the reference's phi-decoding-style loop
(guard/beam_search.py::process_step, guard/decoder.py::process_example) on a
fixed segment layout: per reasoning step every beam samples `num_rollout`
step candidates, low-sigma width pruning keeps those with log-prob > mean -
sigma std (at least `step_beams`), the kept ones are completed to the end
(foresight), advantage = the value log p(step + foresight) (`step_value`)
- the parent's value, each step segment is scored and refined, and the
fused advantage adv + lambda_TG F_global (F_global of the parent chain plus
the new segment) picks the next beams by softmax(./0.3) sampling without
replacement. After the last step up to `m_max` global rounds refine the
worst segment of the best chain while F_global < tau_global.

Where this departs from the reference (toy LM, no text):
  * refinement truncates 2 tokens before the argmin-score token and resamples
    the rest of the segment (T 0.7, top-p 0.9), keeping it if F_seg improves,
    at most `max_retries` times; the reference also appends a
    self-correction trigger phrase ("Wait, let me double check"), which a toy
    LM has never seen;
  * the scored artifact of a candidate is its step segment; the reference
    scores the step text together with its foresight completion as one
    segment. The foresight enters through the advantage;
  * no TF-IDF + k-means clustering and no keyword / length bonuses (text
    heuristics of the reference): selection is by the fused advantage
    alone, and the answer is the final beam with the highest value +
    lambda_TG F_global (the reference generates a final response by another
    round of rollouts).

The step value departs from the release's on purpose (rhq945/Token-Guard
at 534e753, asserted in tests/parity/test_token_guard.py):
  * by default it is the SUM of the token log-probs of step k and its
    foresight; the release ranks by the per-token MEAN
    (guard/generation_utils.py:111-118). `TokenGuardConfig.value_mean`
    selects the mean (default False: the recorded runs sum);
  * it spans step + foresight; the release's completed value spans the
    foresight completion only (guard/beam_search.py:342-351, the step's
    tokens were in the prompt of that call), which the fixed layout leaves
    empty at the last step;
  * it is the model's own log p (T 1, no truncation); the release averages
    HF `compute_transition_scores` of `output_scores`, the log p under the
    warped sampler (T 0.7, top-k 50, top-p 0.95;
    guard/generation_utils.py:59-72, 92-95);
  * width pruning ranks by the step's own log p; the release by its
    first-stage rollout's mean, which runs past the step (the stop strings
    only trim the text, guard/generation_utils.py:103-107), and when fewer
    than `step_beams` pass the low-sigma cut it samples the rest by
    softmax(logp / 0.3) (guard/beam_search.py:285-302) where ours keeps the
    top `step_beams`; the release's early stopping (beam_search.py:558-609)
    is not done.

Forward passes are counted as token positions the model evaluates beyond
the shared prompt prefill (a KV-cached implementation's cost): one per
sampled token, plus one per scored segment (the last token's hidden state;
the others come with sampling). With `max_passes` > 0 the search keeps to
that budget: a refinement retry runs only if it leaves room for the
remaining steps' sampling and scoring (the arms are compared at a matched
budget).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from iclrjax.lm import model as lm_model
from iclrjax.lm import sample as lm_sample


@struct.dataclass
class TokenGuardConfig:
  """The reference's `TokenGuardConfig` (defaults as there) and the search's
  knobs (`BeamSearchEngine.tg_lambda`, phi-decoding's sampling). A pytree:
  the numbers are traced (Token-Guard and its ablations share one compiled
  search), the loop sizes are static."""
  lambda_val: float = 0.6       # Eq. 3
  tau_token: float = 0.4        # Eq. 4
  alpha: float = 0.5            # Eq. 9
  beta: float = 0.3
  gamma: float = 0.2
  tau_seg_low: float = 0.55     # Eq. 10
  tau_seg_high: float = 0.75
  tau_global: float = 0.7       # Eq. 13
  delta_tau: float = 0.1        # Eq. 15
  softmin_tau: float = 0.1      # F_global's soft-min temperature
  tg_lambda: float = 2.0        # fused advantage adv + tg_lambda F_global
  refine_temperature: float = 0.7
  refine_top_p: float = 0.9
  rollout_temperature: float = 0.7  # generation_utils: T 0.7, top-p 0.95
  rollout_top_p: float = 0.95
  sigma_rate: float = 0.8       # low-sigma width pruning (run_guard.py)
  select_temperature: float = 0.3   # generation_utils.TEMPERATURE
  max_passes: float = 0.0       # a search's forward-pass budget (0: none)
  use_scorer: bool = True       # False: phi-decoding (no scores, no refining)
  # The step value per token (the release, generation_utils.py:111-118)
  # instead of summed (ours; see `step_value`).
  value_mean: bool = struct.field(pytree_node=False, default=False)
  m_max: int = struct.field(pytree_node=False, default=2)   # global rounds
  max_retries: int = struct.field(pytree_node=False, default=3)
  cutoff_back: int = struct.field(pytree_node=False, default=2)
  step_beams: int = struct.field(pytree_node=False, default=2)
  num_rollout: int = struct.field(pytree_node=False, default=2)

  def without_hidden(self) -> 'TokenGuardConfig':
    """The likelihood-only ablation: lam = 0 in Eq. 3, beta = gamma = 0."""
    return self.replace(lambda_val=0.0, beta=0.0, gamma=0.0)

  def phi_decoding(self) -> 'TokenGuardConfig':
    """The search without Token-Guard (lambda_TG = 0, no refinement)."""
    return self.replace(use_scorer=False)


class Segment(NamedTuple):
  """`CandidateSegment` as arrays: F_seg, the token scores f_N, H_k (D),
  the mean input embedding e~_k (D) and |f|."""
  f_seg: jax.Array
  f_tok_N: jax.Array
  H_D: jax.Array
  e_D: jax.Array
  f_norm: jax.Array


class Chain(NamedTuple):
  f_global: jax.Array
  f_fact: jax.Array
  f_logic: jax.Array


def _norm(x, eps):
  return jnp.maximum(jnp.linalg.norm(x, axis=-1), eps)


def cosine(a, b, eps: float = 1e-8):
  """torch.nn.functional.cosine_similarity along the last axis."""
  return (a * b).sum(-1) / (_norm(a, eps) * _norm(b, eps))


def anchor(hidden_LxD: jax.Array, valid_L: jax.Array) -> jax.Array:
  """h_x: mean second-to-last-layer state over the context (Eq. 1)."""
  w = valid_L.astype(hidden_LxD.dtype)
  return (w[:, None] * hidden_LxD).sum(0) / jnp.maximum(w.sum(), 1.0)


def token_scores(h_NxD: jax.Array, p_N: jax.Array, valid_N: jax.Array,
                 h_x: jax.Array, cfg: TokenGuardConfig) -> jax.Array:
  """f_t (Eq. 3) with the tau_token-gated running mean (Eq. 4): [N]."""

  def step(carry, xs):
    m, n = carry
    h, p, ok = xs
    f = cfg.lambda_val * cosine(h, m) + (1 - cfg.lambda_val) * p
    upd = ok & (f >= cfg.tau_token)
    m = jnp.where(upd, (m * n + h) / (n + 1), m)
    return (m, n + upd), f

  _, f = jax.lax.scan(step, (h_x, jnp.ones((), h_NxD.dtype)),
                      (h_NxD, p_N, valid_N))
  return jnp.where(valid_N, f, 0.0)


def segment_score(h_NxD: jax.Array, e_NxD: jax.Array, p_N: jax.Array,
                  valid_N: jax.Array, h_x: jax.Array,
                  cfg: TokenGuardConfig) -> Segment:
  """`verify_candidates` for one candidate (Eq. 2-9); `valid_N` masks a
  padded segment (at least one token valid)."""
  f = token_scores(h_NxD, p_N, valid_N, h_x, cfg)
  w = jax.nn.softmax(jnp.where(valid_N, f, -jnp.inf))
  H = (w[:, None] * h_NxD).sum(0)
  score_tok = (w * f).sum()
  vf = valid_N.astype(h_NxD.dtype)
  e = (vf[:, None] * e_NxD).sum(0) / jnp.maximum(vf.sum(), 1.0)
  f_norm = jnp.sqrt((f ** 2).sum())
  hn = h_NxD / _norm(h_NxD, 1e-12)[:, None]
  pair = valid_N[:-1] & valid_N[1:]
  cs = ((hn[:-1] * hn[1:]).sum(-1) * pair).sum() / jnp.maximum(pair.sum(), 1)
  const = jnp.where(vf.sum() > 1, jnp.maximum(cs, 0.0), 1.0)
  align = cosine(H, h_x)
  f_seg = cfg.alpha * score_tok + cfg.beta * const + cfg.gamma * align
  return Segment(f_seg, f, H, e, f_norm)


def chain_score(seg: Segment, valid_K: jax.Array, cfg: TokenGuardConfig,
                evidence_K: jax.Array | None = None) -> Chain:
  """`compute_chain_global_score` over the valid (a prefix) of K segments:
  F_fact, F_logic and their clipped soft-min F_global (Eq. 11-14)."""
  vk = valid_K.astype(seg.f_seg.dtype)
  ev = jnp.ones_like(vk) if evidence_K is None else evidence_K
  num = seg.f_norm * ev * vk
  f_fact = (num / (num.sum() + 1e-8) * seg.f_seg).sum()
  pair = valid_K[:-1] & valid_K[1:]
  lam = (1 + cosine(seg.e_D[:-1], seg.e_D[1:])) / 2
  logic = (lam * cosine(seg.H_D[:-1], seg.H_D[1:]) * pair).sum()
  f_logic = jnp.where(vk.sum() < 2, 1.0, logic / jnp.maximum(pair.sum(), 1))
  a = jnp.maximum(f_fact, 1e-8)
  b = jnp.maximum(f_logic, 1e-8)
  t = cfg.softmin_tau
  g = jnp.clip(-t * jnp.logaddexp(-a / t, -b / t), 0.0, 1.0)
  empty = vk.sum() == 0
  zero = jnp.zeros_like(g)
  return Chain(jnp.where(empty, zero, g), jnp.where(empty, zero, f_fact),
               jnp.where(empty, zero, f_logic))


def threshold_adjustment(chain: Chain, cfg: TokenGuardConfig) -> jax.Array:
  """`adjust_thresholds` (Eq. 15): +delta (tighten) on low factuality,
  -delta (relax) on low logic, else 0."""
  tighten = (chain.f_fact < 0.5) & (chain.f_logic > 0.6)
  relax = (chain.f_logic < 0.5) & (chain.f_fact > 0.6)
  return jnp.where(tighten, cfg.delta_tau,
                   jnp.where(relax, -cfg.delta_tau, 0.0))


def needs_refinement(f_seg: jax.Array, adj: jax.Array,
                     cfg: TokenGuardConfig) -> jax.Array:
  """`check_refinement`: tau_low - adj <= F_seg < tau_high + adj."""
  return (f_seg >= cfg.tau_seg_low - adj) & (f_seg < cfg.tau_seg_high + adj)


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
  """Area under the ROC curve of `scores` for the positive `labels` by the
  rank-sum (Mann-Whitney) formula, ties at their average rank; nan when a
  class is empty."""
  s = np.asarray(scores, np.float64).ravel()
  y = np.asarray(labels).astype(bool).ravel()
  n1, n0 = int(y.sum()), int((~y).sum())
  if n1 == 0 or n0 == 0:
    return float('nan')
  order = np.argsort(s, kind='mergesort')
  ranks = np.empty(len(s))
  sorted_s = s[order]
  _, start, counts = np.unique(sorted_s, return_index=True, return_counts=True)
  avg = start + (counts + 1) / 2.0               # 1-based average ranks
  ranks[order] = np.repeat(avg, counts)
  return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


# ---------------------------------------------------------------------------
# The LM side: fixed layout [prompt P | segment 0 | ... | segment K-1], each
# segment `seg_len` tokens.


class Layout(NamedTuple):
  prompt_len: int
  seg_len: int
  num_segments: int

  @property
  def length(self) -> int:
    return self.prompt_len + self.seg_len * self.num_segments

  def start(self, k):
    return self.prompt_len + k * self.seg_len


class Scored(NamedTuple):
  """Per row: the K segments' scores (`Segment` with a leading K axis) and
  each segment's log-probability under the model [K]."""
  seg: Segment
  logp_K: jax.Array


def token_logp(logits_NxLxV: jax.Array, tokens_NxL: jax.Array) -> jax.Array:
  """Per-token log p(x_i | x_<i) [N, L] from teacher-forced logits (0 at
  i = 0)."""
  logp = jax.nn.log_softmax(logits_NxLxV[:, :-1].astype(jnp.float32), -1)
  tok = jnp.take_along_axis(logp, tokens_NxL[:, 1:, None], -1)[..., 0]
  return jnp.pad(tok, ((0, 0), (1, 0)))


def forward(model: lm_model.Model, params, tokens_NxL: jax.Array):
  """One teacher-forced pass: per-token log p(x_i | x_<i) [N, L] (0 at i=0),
  the second-to-last layer [N, L, D] and the input embeddings [N, L, D]."""
  logits, hidden = model.apply(params, tokens_NxL, return_hidden=True)
  return (token_logp(logits, tokens_NxL), hidden[-2].astype(jnp.float32),
          hidden[0].astype(jnp.float32))


def step_value(logp_NxK: jax.Array, k, seg_len: int,
               mean: bool = False) -> jax.Array:
  """phi-decoding's value of the candidates at step k (maybe traced) [N]:
  the log-probability of step k and its foresight (segments k .. K-1 of
  `seg_len` tokens; `logp_NxK` holds each segment's summed token
  log-probs), summed (default), or with `mean` per token as the release
  ranks candidates (guard/generation_utils.py:111-118, which divides by
  n + 1e-8). The advantage is this minus the parent's value."""
  on = jnp.arange(logp_NxK.shape[-1]) >= k
  v = jnp.where(on, logp_NxK, 0.0).sum(-1)
  return v / (on.sum() * seg_len) if mean else v


def score_rows(model, params, tokens_NxL, layout: Layout,
               context_valid_NxP: jax.Array, cfg: TokenGuardConfig) -> Scored:
  """Every segment of every row scored against its prompt's anchor."""
  logp, h, e = forward(model, params, tokens_NxL)
  P, S, K = layout
  h_x = jax.vmap(anchor)(h[:, :P], context_valid_NxP)
  seg = lambda x: x[:, P:P + S * K].reshape(x.shape[0], K, S, *x.shape[2:])
  one = functools.partial(segment_score, valid_N=jnp.ones((S,), bool),
                          cfg=cfg)
  segs = jax.vmap(lambda hh, ee, pp, hx: jax.vmap(
      lambda a, b, c: one(a, b, c, h_x=hx))(hh, ee, pp))(
          seg(h), seg(e), jnp.exp(seg(logp)), h_x)
  return Scored(segs, seg(logp).sum(-1))


def fill(model, params, tokens_NxL, write_NxL, key, lo, count: int, *,
         temperature=1.0, top_p=None) -> jax.Array:
  """Samples positions lo .. lo + count - 1 (lo may be traced; positions
  past the end are skipped) left to right by full recompute, writing only
  where `write_NxL`; other tokens stay."""

  def step(toks, xs):
    k, j = xs
    logits = jax.lax.dynamic_index_in_dim(model.apply(params, toks), j - 1,
                                          1, keepdims=False)
    x = lm_sample.filter_logits(logits, temperature, None, top_p)
    new = jax.random.categorical(k, x, -1).astype(toks.dtype)
    col = jax.lax.dynamic_index_in_dim(toks, j, 1, keepdims=False)
    w = jax.lax.dynamic_index_in_dim(write_NxL, j, 1, keepdims=False)
    w = w & (j < toks.shape[1])           # positions past the end: no-ops
    return jax.lax.dynamic_update_index_in_dim(
        toks, jnp.where(w, new, col), j, 1), None

  keys = jax.random.split(key, count)
  toks, _ = jax.lax.scan(step, tokens_NxL, (keys, lo + jnp.arange(count)))
  return toks


def _where(c_N, a, b):
  """Row-wise select of two pytrees with a leading N axis."""
  return jax.tree.map(
      lambda x, y: jnp.where(c_N.reshape(c_N.shape + (1,) * (x.ndim - 1)),
                             x, y), a, b)


def _take(tree, i):
  return jax.tree.map(lambda x: x[i], tree)


def _col(tree, k):
  """Segment k (maybe traced) of every row: [N, K, ...] -> [N, ...]."""
  return jax.tree.map(
      lambda a: jax.lax.dynamic_index_in_dim(a, k, 1, keepdims=False), tree)


def _set_col(tree, k, new):
  return jax.tree.map(
      lambda a, b: jax.lax.dynamic_update_index_in_dim(a, b, k, 1), tree, new)


def refine(model, params, tokens_NxL, seg_NxK: Segment, k, adj_N, key,
           layout: Layout, context_valid_NxP, cfg: TokenGuardConfig,
           max_retries: int, active_N=None, budget=jnp.inf):
  """`refine_segment` on segment k (maybe traced) of every row (Eq. 10):
  while F_seg is in the refinement window, cut `cutoff_back` tokens before
  the argmin token, resample the rest of the segment (T, top-p), keep it if
  F_seg rises; stop once F_seg >= tau_high + adj. `active_N` masks rows
  (default all); a retry whose passes (summed over rows) would take the
  total past `budget` is not run. Returns (tokens, segments, passes_N):
  passes count the resampled tokens plus one scoring pass per retry."""
  S = layout.seg_len
  lo = layout.prompt_len + k * S
  N = tokens_NxL.shape[0]
  active = needs_refinement(_col(seg_NxK, k).f_seg, adj_N, cfg)
  if active_N is not None:
    active = active & active_N
  pos = jnp.arange(tokens_NxL.shape[1])

  def retry(carry, r):
    toks, seg, active, passes = carry
    cur = _col(seg, k)
    cut = jnp.maximum(jnp.argmin(cur.f_tok_N, -1) - cfg.cutoff_back, 0)
    active = active & (passes.sum() + (active * (S - cut + 1)).sum()
                       <= budget)
    write = (pos[None] >= lo + cut[:, None]) & (pos[None] < lo + S)
    new = fill(model, params, toks, write, jax.random.fold_in(key, r), lo, S,
               temperature=cfg.refine_temperature, top_p=cfg.refine_top_p)
    cand = _col(score_rows(model, params, new, layout, context_valid_NxP,
                           cfg).seg, k)
    better = active & (cand.f_seg > cur.f_seg)
    passes = passes + active * (S - cut + 1)
    toks = jnp.where(better[:, None], new, toks)
    seg = _set_col(seg, k, _where(better, cand, cur))
    active = active & (_col(seg, k).f_seg < cfg.tau_seg_high + adj_N)
    return (toks, seg, active, passes), None

  (tokens_NxL, seg_NxK, _, passes), _ = jax.lax.scan(
      retry, (tokens_NxL, seg_NxK, active, jnp.zeros((N,), jnp.float32)),
      jnp.arange(max_retries))
  return tokens_NxL, seg_NxK, passes


def _gumbel_top(key, logits_N, valid_N, n):
  """n indices sampled without replacement with probabilities softmax(
  logits) among the valid (Gumbel top-k)."""
  g = jax.random.gumbel(key, logits_N.shape)
  return jax.lax.top_k(jnp.where(valid_N, logits_N + g, -jnp.inf), n)[1]


class SearchOut(NamedTuple):
  tokens_L: jax.Array     # the answer row (prompt and segments)
  passes: jax.Array       # forward-pass count (see the module doc)
  f_global: jax.Array     # F_global of the returned chain (0 for phi)
  refined: jax.Array      # refinement calls that resampled something


def foresight_search(model: lm_model.Model, params, prompt_P: jax.Array,
                     context_valid_P: jax.Array, key: jax.Array,
                     layout: Layout, cfg: TokenGuardConfig) -> SearchOut:
  """Token-Guard decoding of one prompt (see the module doc). With
  `cfg.use_scorer` False it is phi-decoding (lambda_TG = 0: no scoring, no
  refinement; a traced flag, so both share one compiled program);
  `cfg.max_retries = 0` and `cfg.m_max = 0` turn refinement off."""
  P, S, K = layout
  Bm, R = cfg.step_beams, cfg.num_rollout
  N = Bm * R
  L = layout.length
  pos = jnp.arange(L)
  cv = jnp.broadcast_to(context_valid_P, (N, P))
  beams = jnp.zeros((Bm, L), jnp.int32).at[:, :P].set(prompt_P)
  values = jnp.zeros((Bm,))
  arts = Segment(jnp.zeros((Bm, K)), jnp.zeros((Bm, K, S)),
                 jnp.zeros((Bm, K, model.cfg.d_model)),
                 jnp.zeros((Bm, K, model.cfg.d_model)), jnp.zeros((Bm, K)))
  parent = jnp.repeat(jnp.arange(Bm), R)
  ones = jnp.ones((N, L), bool)
  # The most passes steps j >= k0 can take before refinement (all kept).
  later = lambda k0: (((jnp.arange(K) >= k0) * (
      N * S + N * (L - P - (jnp.arange(K) + 1) * S) + N)).sum())
  budget = lambda spent, k0: jnp.where(
      cfg.max_passes > 0, cfg.max_passes - spent - later(k0), jnp.inf)

  def step(carry, k):
    beams, values, arts, adj, passes, n_ref = carry
    k_roll, k_fore, k_ref, k_sel = jax.random.split(
        jax.random.fold_in(key, k), 4)
    lo = P + k * S
    hi = lo + S
    rows = fill(model, params, beams[parent], ones, k_roll, lo, S,
                temperature=cfg.rollout_temperature, top_p=cfg.rollout_top_p)
    passes += N * S
    logp_tok = forward(model, params, rows)[0]
    in_step = (pos >= lo) & (pos < hi)
    step_logp = (logp_tok * in_step).sum(-1)
    keep = step_logp > step_logp.mean() - cfg.sigma_rate * step_logp.std()
    keep = keep.at[jax.lax.top_k(step_logp, Bm)[1]].set(True)
    rows = fill(model, params, rows, ones, k_fore, hi, L - P - S,
                temperature=cfg.rollout_temperature,
                top_p=cfg.rollout_top_p)                     # foresight
    passes += keep.sum() * (L - hi)
    sc = score_rows(model, params, rows, layout, cv, cfg)
    value = step_value(sc.logp_K, k, S, cfg.value_mean)
    adv = value - values[parent]
    seg = _where_k(jnp.arange(K) < k, _take(arts, parent), sc.seg)
    use = cfg.use_scorer
    passes += keep.sum() * use
    rows, seg, p = refine(model, params, rows, seg, k, jnp.full((N,), adj),
                          k_ref, layout, cv, cfg, cfg.max_retries, keep & use,
                          budget(passes, k + 1))
    passes += p.sum()
    n_ref += (p > 0).sum()
    chain = jax.vmap(lambda s: chain_score(s, jnp.arange(K) <= k, cfg))(seg)
    fused = adv + use * cfg.tg_lambda * chain.f_global
    sel = _gumbel_top(k_sel, fused / cfg.select_temperature, keep, Bm)
    adj = jnp.where(use, threshold_adjustment(_take(chain, sel[0]), cfg), 0.)
    beams = jnp.where(pos[None] < hi, rows[sel], 0)
    return (beams, value[sel], _take(seg, sel), adj, passes, n_ref), None

  zero = jnp.zeros(())
  (beams, values, arts, adj, passes, n_ref), _ = jax.lax.scan(
      step, (beams, values, arts, zero, zero, zero), jnp.arange(K))
  use = cfg.use_scorer
  every = jnp.ones((K,), bool)
  chains = jax.vmap(lambda s: chain_score(s, every, cfg))(arts)
  best = jnp.argmax(values + use * cfg.tg_lambda * chains.f_global)

  def round_(carry, m):                           # global rounds
    row, art, adj, passes, n_ref = carry
    g = chain_score(_take(art, 0), every, cfg)
    go = (g.f_global < cfg.tau_global) & use
    adj = jnp.where(go, threshold_adjustment(g, cfg), adj)
    row, art, p = refine(model, params, row, art, jnp.argmin(art.f_seg[0]),
                         adj[None], jax.random.fold_in(key, 1000 + m),
                         layout, cv[:1], cfg, 1, go[None],
                         budget(passes, K))
    return (row, art, adj, passes + p[0], n_ref + (p[0] > 0)), None

  (row, art, _, passes, n_ref), _ = jax.lax.scan(
      round_, (beams[best][None], _take(arts, best[None]), adj, passes,
               n_ref), jnp.arange(cfg.m_max))
  g = chain_score(_take(art, 0), every, cfg).f_global
  return SearchOut(row[0], passes, jnp.where(use, g, 0.0), n_ref)


def _where_k(c_K, a, b):
  """Per segment select of two [N, K, ...] pytrees."""
  return jax.tree.map(
      lambda x, y: jnp.where(c_K.reshape((1, -1) + (1,) * (x.ndim - 2)), x, y),
      a, b)
