"""Uni-CoT's two-level macro/micro chain of thought, on a grid-world task.

Uni-CoT (Qin et al., ICLR 2026, arXiv 2508.05606, "Our Solution") splits a
long multimodal chain of thought into a macro level (a planner emits
sub-goals z_1..z_M and a summariser aggregates their final outputs) and a
micro level (each sub-goal runs as an MDP: state s_t = the last step's
text and image, action a_t, next state s_{t+1}, reward r_t = a
self-evaluation). Both levels live in one decoder; what separates them is
the attention mask:

  * macro rows (the plan z_i) see the input, the plan and the sub-goals'
    final outputs, never their intermediate micro states;
  * micro rows of step t of sub-goal i see the input, z_i, step t - 1's
    output state (for t = 1 the previous sub-goal's final state) and their
    own prefix (the Markov mask: h_t sees only h_{t-1} and z_i);
  * summary rows see the input, the plan and the final outputs.

Each micro step then attends to a constant number of keys, so the allowed
(query, key) pairs grow linearly with the number of sub-goals instead of
quadratically (the paper's O(T^2) -> O(T) accounting,
`calculate_unicot_token_interaction.py`). The long-chain baseline is the
same token sequence under the causal mask.

The toy task ("grid walk"): an agent on a G x G grid starts in a cell (the
input's visual state) and executes M sub-goals "go <direction>"; each
sub-goal is T unit moves, each clipped at the border. A visual state is the
grid rasterised row by row: G tokens, each row either empty or "agent in
column c". A micro step is

    [STEP] [action: MOVE | BUMP] [next state: G row tokens] [eval: OK | FIX]
    [the next state again, re-encoded as context]

(the STEP token's row, inside the step, predicts the action; then text
action, image edit, self-evaluation: the released code's `<eval>`;
the re-encoded copy is how BAGEL feeds a generated image back as clean
tokens, and it is what keeps the Markov mask exact through every layer:
step t reads step t - 1's output, not the rows that generated it), and the
summary is the final state. Everything is checkable by simulation.
The self-check loop (`inference_mdp_self_reflection.py`: evaluate, revise,
repeat until "Everything is good") resamples a step while its eval token
says FIX, at most R rounds (`generate`).

Deviations from the released code (Fr0zenCrane/UniCoT at 56212e4), for
now: the release runs each micro step as a fresh context, the instruction,
plan and current image re-fed from rotary position 0
(inference_mdp_self_reflection.py:213-215), and BAGEL gives a whole image
one position (modeling/bagel/bagel.py:339-342); here the chain is one
sequence at positions 0..L-1, one per token, and the Markov structure comes
from the mask alone. A re-encoded state here is causal and reads only the
input, where BAGEL's conditioning image is bidirectional and reads every
earlier split (data/data_utils.py:72-98). The step rows' mask over their
context matches; tests/parity/test_unicot.py asserts both.

Sequence layout for M sub-goals (L = 2 (G + 2) + M (1 + T (2 G + 3))):

    BOS s_0 SEP | z_1 step_1 .. step_T | .. | z_M step .. | ANS s_final EOS

All functions are pure jnp with static shapes.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.lm import model as lm_model

# Vocabulary.
PAD, BOS, SEP, EOS, ANS, OK, FIX, MOVE, BUMP = range(9)
UP, DOWN, LEFT, RIGHT = range(9, 13)
STEP = 13                 # opens a micro step (its row predicts the action)
EMPTY_ROW = 14            # a row without the agent; 15 + c: agent in column c
DIRECTIONS = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]])   # U D L R

# Roles of a token (which mask rows and keys it belongs to).
R_PAD, R_INPUT, R_PLAN, R_STEP, R_STATE, R_SUMMARY = range(6)

# Sources of a token in `_values`: constants, then per-example values.
_CONSTANTS = (PAD, BOS, SEP, EOS, ANS, OK, STEP)


def vocab_size(grid: int) -> int:
  return EMPTY_ROW + 1 + grid


def seq_len(num_subgoals: int, steps: int, grid: int) -> int:
  """Tokens of a layout with M sub-goals of T steps on a G x G grid."""
  return 2 * (grid + 2) + num_subgoals * (1 + steps * (2 * grid + 3))


class Layout(NamedTuple):
  """Static per-token metadata of one layout, padded to a length L.

  role: R_* per token; segment: a unique id per segment (input, each z_i,
  each step's generation, each re-encoded state, summary); subgoal: i
  (1-based) for z_i and its steps, else 0; chain: the micro chain index
  ((i - 1) T + t, 1-based, of step t of sub-goal i and of its re-encoded
  state; 0 for the input, whose start state is state 0); final: a state
  that ends a sub-goal (its output); generated: the model writes this token
  at inference; copy_from: a re-encoded state token's generated original
  (-1 elsewhere); src: where `_value_table` holds the token.
  """
  role: np.ndarray
  segment: np.ndarray
  subgoal: np.ndarray
  chain: np.ndarray
  final: np.ndarray
  generated: np.ndarray
  copy_from: np.ndarray
  src: np.ndarray


def layout(num_subgoals: int, steps: int, grid: int,
           length: int | None = None) -> Layout:
  """The layout of M sub-goals of T steps on a G x G grid (NumPy, static),
  padded to `length`.

  A micro step is its generation segment [STEP, action, next state, eval] and
  then the next state re-encoded as context (role R_STATE), the way BAGEL
  feeds a generated image back as clean tokens: the next step and the
  macro rows read the re-encoded state, never the generation rows.
  """
  M, T, G = num_subgoals, steps, grid
  c = {v: i for i, v in enumerate(_CONSTANTS)}
  rows = []   # (role, segment, subgoal, chain, final, generated, copy, src)
  seg = 0
  add = lambda *r: rows.append(r)
  add(R_INPUT, seg, 0, 0, False, False, -1, ('c', c[BOS]))
  for r in range(G):
    add(R_INPUT, seg, 0, 0, False, False, -1, ('s0', r))
  add(R_INPUT, seg, 0, 0, False, False, -1, ('c', c[SEP]))
  for i in range(1, M + 1):
    seg += 1
    add(R_PLAN, seg, i, 0, False, False, -1, ('dir', i - 1))
    for t in range(1, T + 1):
      k, fin = (i - 1) * T + t, t == T
      seg += 1
      add(R_STEP, seg, i, k, False, False, -1, ('c', c[STEP]))
      add(R_STEP, seg, i, k, False, True, -1, ('act', k - 1))
      first = len(rows)
      for r in range(G):
        add(R_STEP, seg, i, k, False, True, -1, ('row', (k - 1) * G + r))
      add(R_STEP, seg, i, k, False, False, -1, ('c', c[OK]))
      seg += 1
      for r in range(G):
        add(R_STATE, seg, i, k, fin, False, first + r,
            ('row', (k - 1) * G + r))
  seg += 1
  add(R_SUMMARY, seg, 0, 0, False, False, -1, ('c', c[ANS]))
  for r in range(G):
    add(R_SUMMARY, seg, 0, 0, False, True, -1, ('ans', r))
  add(R_SUMMARY, seg, 0, 0, False, True, -1, ('c', c[EOS]))
  L = length or len(rows)
  if L < len(rows):
    raise ValueError(f'layout: {len(rows)} tokens do not fit length {L}')
  rows += [(R_PAD, -1, 0, -1, False, False, -1, ('c', c[PAD]))] * (
      L - len(rows))
  cols = list(zip(*rows))
  i32 = lambda x: np.asarray(x, np.int32)
  return Layout(i32(cols[0]), i32(cols[1]), i32(cols[2]), i32(cols[3]),
                np.asarray(cols[4], bool), np.asarray(cols[5], bool),
                i32(cols[6]), i32([_src_index(s) for s in cols[7]]))


# The value table holds at most MAX_SUBGOALS sub-goals of MAX_STEPS steps on
# a MAX_GRID grid; `_src_index` maps a (kind, i) source into it.
MAX_SUBGOALS, MAX_STEPS, MAX_GRID = 32, 8, 16

def _offsets(m_cap=MAX_SUBGOALS, t_cap=MAX_STEPS, g_cap=MAX_GRID):
  o, n = {}, len(_CONSTANTS)
  for kind, size in (('s0', g_cap), ('dir', m_cap), ('act', m_cap * t_cap),
                     ('row', m_cap * t_cap * g_cap), ('ans', g_cap)):
    o[kind] = n
    n += size
  return o, n


def _src_index(src):
  kind, i = src
  return i if kind == 'c' else _offsets()[0][kind] + i


def subgoal_mask(lay: Layout) -> jax.Array:
  """Uni-CoT's macro/micro attention mask [L, L] (True = may attend).

  Query row q may attend key k <= q (causal) when both are tokens and
    * k is input (every row sees the input), or k is in q's own segment
      (its prefix); and by q's role:
    * plan (macro) and summary rows: k is plan or a sub-goal's final state
      (its output);
    * step rows of sub-goal i, chain index c: k is z_i or the state of
      chain index c - 1 (step t - 1's output; for t = 1 the previous
      sub-goal's final state);
    * re-encoded state rows: nothing more (the state alone, like an image
      encoded on its own).
  So step t depends on the chain before it only through state t - 1: the
  gradient of a step-t row to anything of step t - 2 is exactly zero.
  `lay` may carry a leading batch axis (per-example layouts).
  """
  f = jnp.asarray
  role, seg, sub, chain, fin = (f(lay.role), f(lay.segment), f(lay.subgoal),
                                f(lay.chain), f(lay.final))
  q = lambda x: x[..., :, None]
  k = lambda x: x[..., None, :]
  is_ = lambda r: role == r
  valid = q(~is_(R_PAD)) & k(~is_(R_PAD))
  macro = q(is_(R_PLAN) | is_(R_SUMMARY)) & k(is_(R_PLAN) | (is_(R_STATE)
                                                             & fin))
  micro = q(is_(R_STEP)) & (
      (k(is_(R_PLAN)) & (q(sub) == k(sub)))
      | (k(is_(R_STATE)) & (k(chain) == q(chain) - 1)))
  allowed = k(is_(R_INPUT)) | (q(seg) == k(seg)) | macro | micro
  return lm_model.causal_mask(role.shape[-1]) & valid & allowed


def long_chain_mask(lay: Layout) -> jax.Array:
  """The long-chain baseline: causal over the tokens (pads see nothing)."""
  role = jnp.asarray(lay.role)
  valid = (role != R_PAD)[..., :, None] & (role != R_PAD)[..., None, :]
  return lm_model.causal_mask(role.shape[-1]) & valid


MASKS = {'unicot': subgoal_mask, 'long_chain': long_chain_mask}


def allowed_pairs(mask_LxL) -> int:
  """The number of (query, key) pairs a mask allows: attention's cost."""
  return int(np.asarray(mask_LxL).sum())


# ---------------------------------------------------------------------------
# The grid walk: simulation and batches.


def cell_rows(cell_B2: jax.Array, grid: int) -> jax.Array:
  """A cell (row, col) rasterised: [B, G] row tokens."""
  r = jnp.arange(grid)
  return jnp.where(r == cell_B2[..., :1], EMPTY_ROW + 1 + cell_B2[..., 1:],
                   EMPTY_ROW)


def walk(start_B2: jax.Array, dirs_BxM: jax.Array, steps: int, grid: int):
  """Simulates the walk: cells [B, M*T, 2] after each unit move (clipped at
  the border) and whether each move bumped [B, M*T]."""
  move = jnp.asarray(DIRECTIONS)[jnp.repeat(dirs_BxM, steps, axis=1)]

  def one(cell, d):
    new = jnp.clip(cell + d, 0, grid - 1)
    return new, (new, jnp.all(new == cell, -1))

  _, (cells, bumps) = jax.lax.scan(one, start_B2, jnp.swapaxes(move, 0, 1))
  return jnp.swapaxes(cells, 0, 1), jnp.swapaxes(bumps, 0, 1)


class Batch(NamedTuple):
  """Token sequences and what training and evaluation need of them.

  tokens_BxL: the sequences; weights_BxL: the training target weights;
  layout: the per-example `Layout` arrays [B, L]; answer_BxG: the final
  state (the exact answer); num_subgoals_B: M per example.
  """
  tokens_BxL: jax.Array
  weights_BxL: jax.Array
  layout: Layout
  answer_BxG: jax.Array
  num_subgoals_B: jax.Array


def _value_table(start_B2, dirs_BxM, cells, bumps, grid):
  off, n = _offsets()
  B, M = dirs_BxM.shape
  v = jnp.zeros((B, n), jnp.int32)
  v = v.at[:, :len(_CONSTANTS)].set(jnp.asarray(_CONSTANTS))
  v = v.at[:, off['s0']:off['s0'] + grid].set(cell_rows(start_B2, grid))
  v = v.at[:, off['dir']:off['dir'] + M].set(UP + dirs_BxM)
  K = cells.shape[1]
  v = v.at[:, off['act']:off['act'] + K].set(jnp.where(bumps, BUMP, MOVE))
  rows = cell_rows(cells, grid).reshape(B, K * grid)
  v = v.at[:, off['row']:off['row'] + K * grid].set(rows)
  return v


def stacked_layouts(min_subgoals: int, max_subgoals: int, steps: int,
                    grid: int) -> Layout:
  """Layouts of M = min .. max sub-goals, padded to max's length: [n, L]."""
  L = seq_len(max_subgoals, steps, grid)
  lays = [layout(m, steps, grid, L)
          for m in range(min_subgoals, max_subgoals + 1)]
  return Layout(*(np.stack(x) for x in zip(*lays)))


def sample_batch(key: jax.Array, batch: int, *, min_subgoals: int,
                 max_subgoals: int, steps: int, grid: int,
                 corrupt_fraction: float = 0.0,
                 corrupt_prob: float = 0.0) -> Batch:
  """A batch of grid walks with M uniform in [min, max] sub-goals.

  A `corrupt_fraction` of the examples is a self-check view: each step's
  state is replaced, with probability `corrupt_prob`, by a uniformly random
  other cell; its eval token becomes FIX when the shown state is not the
  move from the shown previous state (reward estimation). These examples
  train only the eval tokens; the others train every generated token and
  eval (= OK) token.
  """
  k_m, k_s, k_d, k_v, k_c, k_r = jax.random.split(key, 6)
  T, G = steps, grid
  lays = stacked_layouts(min_subgoals, max_subgoals, T, G)
  m_B = jax.random.randint(k_m, (batch,), min_subgoals, max_subgoals + 1)
  lay = Layout(*(jnp.asarray(x)[m_B - min_subgoals] for x in lays))
  start = jax.random.randint(k_s, (batch, 2), 0, G)
  dirs = jax.random.randint(k_d, (batch, max_subgoals), 0, 4)
  cells, bumps = walk(start, dirs, T, G)                    # [B, K, 2]
  # Self-check view: corrupt states; labels against the shown predecessor.
  view = jax.random.bernoulli(k_v, corrupt_fraction, (batch,))
  hit = view[:, None] & jax.random.bernoulli(k_c, corrupt_prob, bumps.shape)
  shift = jax.random.randint(k_r, cells.shape[:2] + (1,), 1, G * G)
  flat = (cells[..., 0] * G + cells[..., 1])[..., None]
  wrong = (flat + shift) % (G * G)
  wrong = jnp.concatenate([wrong // G, wrong % G], -1)
  shown = jnp.where(hit[..., None], wrong, cells)
  prev = jnp.concatenate([start[:, None], shown[:, :-1]], 1)
  d_step = jnp.asarray(DIRECTIONS)[jnp.repeat(dirs, T, axis=1)]
  expect = jnp.clip(prev + d_step, 0, G - 1)
  bad = jnp.any(expect != shown, -1)                         # [B, K]
  final = jnp.take_along_axis(
      cells, (m_B * T - 1)[:, None, None], axis=1)[:, 0]     # [B, 2]
  answer = cell_rows(final, G)
  v = _value_table(start, dirs, shown, bumps, G)
  off = _offsets()[0]
  v = v.at[:, off['ans']:off['ans'] + G].set(answer)
  tokens = jnp.take_along_axis(v, lay.src, axis=1)
  # Eval tokens: FIX where the shown state is not the move's result.
  is_eval = (lay.role == R_STEP) & (tokens == OK)
  k_of = jnp.clip(lay.chain - 1, 0, bad.shape[1] - 1)
  tokens = jnp.where(is_eval & jnp.take_along_axis(bad, k_of, axis=1), FIX,
                     tokens)
  clean_w = lay.generated | is_eval
  weights = jnp.where(view[:, None], is_eval, clean_w).astype(jnp.float32)
  return Batch(tokens, weights, lay, answer, m_B)


def eval_batch(key: jax.Array, batch: int, *, num_subgoals: int, steps: int,
               grid: int) -> Batch:
  """Clean walks with exactly M sub-goals (one layout for the batch)."""
  return sample_batch(key, batch, min_subgoals=num_subgoals,
                      max_subgoals=num_subgoals, steps=steps, grid=grid)


# ---------------------------------------------------------------------------
# Inference: generation with the micro self-check loop.

CHECKERS = ('learned', 'always_ok', 'random')


class Generation(NamedTuple):
  tokens_BxL: jax.Array     # the completed sequences
  answer_BxG: jax.Array     # the summary's state tokens
  revisions_B: jax.Array    # resampled steps per sequence
  checks_B: jax.Array       # FIX verdicts per sequence


def units(lay: Layout) -> tuple[np.ndarray, np.ndarray]:
  """Generation units of one layout: each micro step's action + state
  tokens (checked by the following eval token) and the summary's state +
  EOS (not checked). Returns (starts [N], checked [N]); every unit has
  G + 1 tokens."""
  gen = np.asarray(lay.generated)
  starts = [i for i in range(len(gen)) if gen[i] and (i == 0 or not gen[i - 1])]
  checked = [bool(lay.role[s] == R_STEP) for s in starts]
  return np.asarray(starts, np.int32), np.asarray(checked)


def generate(model: lm_model.Model, params, template_BxL: jax.Array,
             mask_LxL: jax.Array, lay: Layout, key: jax.Array, *,
             rounds=1, temperature=1.0, greedy=False, checker='learned',
             fix_rate=0.0) -> Generation:
  """Fills the generated tokens of `template_BxL` unit by unit, with the
  micro self-check loop: after a step's action and state, the eval token's
  distribution at that step decides OK / FIX; on FIX the step is resampled,
  at most `rounds` rounds in all (the last sample is kept). `checker`:
  'learned' (FIX when p(FIX) > p(OK)), 'always_ok' (never revises: the
  single pass), 'random' (FIX with probability `fix_rate`, blind to the
  step), or its index in CHECKERS. Round r of unit u samples token j with
  fold_in(key, u, r, j), so round 0 is the same under every checker.
  rounds, temperature, greedy, checker and fix_rate may be traced: one
  compiled program serves every variant.

  Tokens go through a KV cache one position at a time, each with its own
  row of `mask_LxL` (any mask, not only causal ones); a revision rewrites
  the step's positions (later rows never read a key past their own
  position, so stale entries are never seen).
  """
  if isinstance(checker, str):
    if checker not in CHECKERS:
      raise ValueError(f'generate: checker={checker!r}: use one of '
                       f'{CHECKERS}')
    checker = CHECKERS.index(checker)
  starts, checked = units(lay)
  gen = np.asarray(lay.generated)
  U = int(np.argmin(gen[starts[0]:]))        # tokens per unit (G + 1)
  gap = int(np.diff(np.concatenate([[0], starts])).max()) - U
  B, L = template_BxL.shape
  copy = np.asarray(lay.copy_from)
  template_BxL = jnp.where(jnp.asarray(gen | (copy >= 0)), PAD, template_BxL)
  mask_LxL = jnp.asarray(mask_LxL)
  decoder = model.module

  def feed(cache, tokens, pos, n):
    """Runs tokens[pos : pos + n] into the cache: (logits [B, n, V], kv)."""
    x = jax.lax.dynamic_slice_in_dim(tokens, pos, n, 1)
    m = jax.lax.dynamic_slice_in_dim(mask_LxL, pos, n, 0)
    logits, kv = decoder.apply({'params': params}, x,
                               jnp.broadcast_to(m, (B, n, L)),
                               cache=(*cache, pos))
    return logits.astype(jnp.float32), kv

  def reencode(tokens):   # a generated state is fed back as context
    return jnp.where(jnp.asarray(copy >= 0),
                     tokens[:, np.maximum(copy, 0)], tokens)

  def sample_unit(tokens, cache, logits_BxV, start, key_r, active_B):
    def one(c, j):
      tokens, cache, logits = c
      drawn = jax.random.categorical(jax.random.fold_in(key_r, j),
                                     logits / temperature)
      new = jnp.where(greedy, jnp.argmax(logits, -1), drawn)
      cur = jax.lax.dynamic_index_in_dim(tokens, start + j, 1, False)
      new = jnp.where(active_B, new.astype(tokens.dtype), cur)
      tokens = jax.lax.dynamic_update_index_in_dim(tokens, new, start + j, 1)
      out, cache = feed(cache, tokens, start + j, 1)
      return (tokens, cache, out[:, 0]), None
    return jax.lax.scan(one, (tokens, cache, logits_BxV), jnp.arange(U))[0]

  def unit(carry, xs):
    tokens, cache, revisions, fixes = carry
    u, start, check = xs
    k_unit = jax.random.fold_in(key, u)
    # The given tokens since the last unit (eval token, re-encoded state,
    # the next z_i or ANS), and the logits that predict this unit's first.
    out, cache = feed(cache, tokens, start - gap, gap)
    first = out[:, -1]

    def round_(c):
      r, tokens, cache, accepted, revisions, fixes = c
      k_r = jax.random.fold_in(k_unit, r)
      active = ~accepted
      tokens, cache, last = sample_unit(tokens, cache, first, start, k_r,
                                        active)
      revisions = revisions + (active & (r > 0))
      p = jax.nn.softmax(last, -1)
      blind = jax.random.bernoulli(jax.random.fold_in(k_r, U), fix_rate,
                                   (B,))
      fix = jnp.stack([p[:, FIX] > p[:, OK], jnp.zeros((B,), bool),
                       blind])[checker] & check
      fixes = fixes + (active & fix)
      return r + 1, tokens, cache, accepted | ~fix, revisions, fixes

    init = (0, tokens, cache, jnp.zeros((B,), bool), revisions, fixes)
    _, tokens, cache, _, revisions, fixes = jax.lax.while_loop(
        lambda c: (c[0] < rounds) & ~jnp.all(c[3]), round_, init)
    return (reencode(tokens), cache, revisions, fixes), None

  c = model.cfg
  shape = (c.num_layers, B, L, c.num_heads, c.d_head)
  cache = (jnp.zeros(shape, c.jdtype), jnp.zeros(shape, c.jdtype))
  first = int(starts[0]) - gap
  _, cache = feed(cache, template_BxL, 0, first)   # the prompt, at once
  zeros = jnp.zeros((B,), jnp.int32)
  xs = (jnp.arange(len(starts)), jnp.asarray(starts), jnp.asarray(checked))
  (tokens, _, revisions, fixes), _ = jax.lax.scan(
      unit, (template_BxL, cache, zeros, zeros), xs)
  ans = int(starts[-1])
  return Generation(tokens, tokens[:, ans:ans + U - 1], revisions, fixes)


def answer_accuracy(gen: Generation, answer_BxG: jax.Array) -> jax.Array:
  """Exact-match of the summary's final state: [B] in {0, 1}."""
  return jnp.all(gen.answer_BxG == answer_BxG, -1).astype(jnp.float32)


# ---------------------------------------------------------------------------
# Gradient probes of the mask.


def embedding_gradients(model: lm_model.Model, params, tokens_L: jax.Array,
                        mask_LxL: jax.Array, row: int,
                        direction_V: jax.Array) -> jax.Array:
  """|d (logits[row] . direction) / d embedding_k| for every position k: [L].

  The probe of nanodo's `test_causality`: a position the row may not read,
  directly or through any layer, gets exactly zero.
  """
  table = params['embed']['embedding']
  x_1xLxD = table[tokens_L][None]

  def out(x):
    logits = model.apply(params, tokens_L[None], mask_LxL, embeds_BxLxD=x)
    return logits[0, row] @ direction_V

  return jnp.linalg.norm(jax.grad(out)(x_1xLxD)[0], axis=-1)


def probe_sets(lay: Layout, subgoal: int, step: int) -> dict[str, np.ndarray]:
  """Positions a probe of step t of sub-goal i (chain c = (i - 1) T + t) and
  of the summary compares (`lay` unpadded, t >= 2 or i >= 2):

  row: the last state row of step t's generation (it predicts the eval
  token); summary_row: the summary's last state row; step_t_minus_2: every
  token of chain c - 2 (generation and state); step_t_minus_1_generation:
  the rows that generated step t - 1; state_t_minus_1: step t - 1's output
  state (what step t reads); subgoal: z_i; earlier_intermediates: the
  steps and non-final states of sub-goals before i; finals: the sub-goals'
  final states; intermediates: every step and non-final state (what the
  summary may not read).
  """
  role, chain = np.asarray(lay.role), np.asarray(lay.chain)
  sub, fin = np.asarray(lay.subgoal), np.asarray(lay.final)
  T = int(chain.max() // sub.max())
  c = (subgoal - 1) * T + step
  where = lambda m: np.flatnonzero(m)
  gen_t = where((role == R_STEP) & (chain == c) & np.asarray(lay.generated))
  summary = where((role == R_SUMMARY) & np.asarray(lay.generated))
  micro = (role == R_STEP) | (role == R_STATE)
  return {
      'row': gen_t[-1:], 'summary_row': summary[-2:-1],
      'step_t_minus_2': where(micro & (chain == c - 2)),
      'step_t_minus_1_generation': where((role == R_STEP) & (chain == c - 1)),
      'state_t_minus_1': where((role == R_STATE) & (chain == c - 1)),
      'subgoal': where((role == R_PLAN) & (sub == subgoal)),
      'earlier_intermediates': where(micro & (sub < subgoal) & (sub > 0)
                                     & ~fin),
      'finals': where((role == R_STATE) & fin),
      'intermediates': where(micro & ~fin),
  }
