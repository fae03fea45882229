"""Diffusion language models as parallel samplers: the exact round model.

Paper: "Diffusion Language Models are Provably Optimal Parallel Samplers"
(Jiang, Haghtalab, Chen; arXiv 2512.25014, ICLR 2026; no official code).
Theorem numbers are the paper's as a secondary summary reports them
(unchecked against its PDF). This module is the EXACT part:
oracle predictors and exact distributions by enumeration, no learning.

Round model. A state is a length-L sequence over tokens {0..V-1} plus
`MASK` (= -1). One round maps a state x to a transition table
`trans [L, V + 1]`: row i is the distribution of the new symbol at position
i, indexed by symbol (so `trans[i, MASK]`, i.e. the last column, is the
probability of MASK). All positions are sampled INDEPENDENTLY given x; a
position that is not chosen has a point mass on its current symbol. What a
round may change is the variant (`mode`):

* 'none'   (no revision): only masked positions may change; once a token is
           written it is frozen.
* 'remask' (remasking): masked positions may be written; a token may only
           stay or go back to MASK.
* 'revise' (revision): anything, token -> other token included.

A policy `policy(t, states [S, L]) -> trans [S, L, V + 1]` is the unmasking
schedule and the predictor together (a batch of states at once, so the
same policy drives exact propagation and Monte Carlo). A state whose
transition is the identity is finished; the process stops when every
reachable state is finished, and `Run.rounds` counts the rounds in which
some reachable state changed (never hard-coded). The exact law of the
states is propagated round by round as a sparse table (`Dist`: unique
support rows and float64 probabilities), by expanding every position over
the support of its row (`propagate_round`). NumPy, not JAX: the support
size is data-dependent and the laws must be exact in float64.

Claims reproduced (exact, n small):

1. Expressivity gap on the uniform one-hot law U_n (one 1 among n bits at
   a uniform position). No revision, left-to-right blocks, ORACLE
   predictor (each chosen position drawn from U_n's true conditional
   marginal given the visible state): TV > 0 for every r < n rounds and 0
   at r = n (`onehot_norevision_tv`). The blocks are np.array_split's (the
   first n mod r rounds take ceil(n/r) positions, the rest floor(n/r)),
   which gives exactly r rounds; that is the construction behind the pilot
   numbers (n=4: 0.578, 0.344, 0.125, 0, exactly 37/64, 11/32, 1/8, 0;
   n=8: 0.607, 0.418, 0.284, 0.220, 0.119, 0.069, 0.031, 0). A literal
   "ceil(n/r) positions per round" would use only ceil(n / ceil(n/r))
   rounds (n=4, r=3: 2 rounds, TV 0.344), and block boundaries
   ceil(k n / r) (sizes 2,2,1,2,1 for n=8, r=5) give 0.141 / 0.090 at
   r = 5 / 6 instead of the pilot's 0.119 / 0.069. Off the support (a
   visible prefix with two 1s) the oracle falls back to uniform tokens;
   the TV does not depend on that choice because such a prefix never
   completes to a one-hot string. With revision
   (`onehot_revision_policy`): round 1 writes log2 n fair bits encoding a
   uniform index I; round 2 revises every position j to 1[j == I]: TV = 0
   in 2 rounds ("with unrestricted predictors the one-hot law needs n
   rounds without revision and 2 with", the Thm 4.1/4.5 discussion).
2. CoT simulation of a randomized circuit of depth d in d + 1 rounds
   (Thm, "CoT simulation"): round 1 draws the random input bits, round
   l + 1 writes layer l from the visible layer l - 1 (the chain of thought
   is the intermediate gate values). `xor_tree(n)` samples (U, PARITY(U))
   exactly in log2(n) + 1 rounds.
3. Space: without remasking the peak number of unmasked tokens is the
   circuit size (inputs + all layers); with remasking (layer l - 1 is
   re-masked in the round that writes layer l) it is the width, in the
   same d + 1 rounds and with the same (exact) output law
   (`simulate_circuit`, `ring_circuit`: a ring of width w, rule-30 gate
   new_i = x_{i-1} XOR (x_i OR x_{i+1}), depth d).

`summary()` returns every number above as a dict. The learned demo (MDLM
training, ReMDM remasking and revision samplers on constrained languages)
is `dlm_learned.py`; its experiment (`experiments/dlm.py`) reports these
exact claims too.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import numpy as np

MASK = -1
MODES = ('none', 'remask', 'revise')

# policy(t, states [S, L] int8) -> trans [S, L, V + 1] float64.
Policy = Callable[[int, np.ndarray], np.ndarray]


# -- exact distributions over sequences --------------------------------------------
@dataclasses.dataclass(frozen=True)
class Dist:
  """A law over length-L sequences: unique rows `states` [S, L] (int8, MASK =
  -1) with probabilities `probs` [S] (float64, > 0)."""
  states: np.ndarray
  probs: np.ndarray

  @property
  def length(self) -> int:
    return self.states.shape[1]

  def to_dict(self) -> dict[tuple[int, ...], float]:
    return {tuple(int(v) for v in s): float(p)
            for s, p in zip(self.states, self.probs)}


def make_dist(states: np.ndarray, probs: np.ndarray) -> Dist:
  """Merges duplicate rows and drops zero-probability ones."""
  states = np.asarray(states, np.int8)
  probs = np.asarray(probs, np.float64)
  if states.ndim != 2 or probs.shape != states.shape[:1]:
    raise ValueError(f'states {states.shape} / probs {probs.shape}')
  keep = probs > 0
  states, probs = states[keep], probs[keep]
  uniq, inv = _unique_rows(states)
  merged = np.zeros(len(uniq), np.float64)
  np.add.at(merged, inv, probs)
  return Dist(uniq, merged)


def _unique_rows(states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(sorted unique rows, inverse index) of [S, L]; lexsort is much faster
  than np.unique(axis=0) on wide int8 rows."""
  if not len(states):
    return states, np.zeros(0, np.int64)
  order = np.lexsort(states.T[::-1])
  srt = states[order]
  new = np.concatenate([[True], np.any(srt[1:] != srt[:-1], axis=1)])
  inv = np.empty(len(states), np.int64)
  inv[order] = np.cumsum(new) - 1
  return srt[new], inv


def point_mass(state: Sequence[int]) -> Dist:
  return make_dist(np.asarray([state], np.int8), np.ones(1))


def all_masked(length: int) -> Dist:
  return point_mass([MASK] * length)


def project(dist: Dist, positions: Sequence[int]) -> Dist:
  """The marginal law of the sub-sequence at `positions`."""
  return make_dist(dist.states[:, list(positions)], dist.probs)


def tv(p: Dist, q: Dist) -> float:
  """Total variation distance 1/2 sum_x |p(x) - q(x)| (same length)."""
  if p.length != q.length:
    raise ValueError(f'lengths {p.length} != {q.length}')
  _, inv = _unique_rows(np.concatenate([p.states, q.states]))
  diff = np.zeros(inv.max() + 1, np.float64)
  np.add.at(diff, inv[:len(p.probs)], p.probs)
  np.add.at(diff, inv[len(p.probs):], -q.probs)
  return float(0.5 * np.abs(diff).sum())


def num_unmasked(states: np.ndarray) -> np.ndarray:
  """Footprint: non-MASK tokens per state, [S]."""
  return np.sum(np.asarray(states) != MASK, axis=-1)


# -- one round ------------------------------------------------------------------------
def _is_current(states: np.ndarray, vocab: int) -> np.ndarray:
  """[S, L, V + 1] bool: the symbol each position holds (MASK is index V)."""
  sym = np.asarray(states).astype(np.int64) % (vocab + 1)
  return sym[..., None] == np.arange(vocab + 1)


def identity_trans(states: np.ndarray, vocab: int) -> np.ndarray:
  """trans [S, L, V + 1] that keeps every symbol (nothing chosen)."""
  return _is_current(states, vocab).astype(np.float64)


def changes(states: np.ndarray, trans: np.ndarray) -> np.ndarray:
  """[S] whether a state's transition moves any position (not finished)."""
  return np.any(trans != _is_current(states, trans.shape[-1] - 1),
                axis=(1, 2))


def check_trans(states: np.ndarray, trans: np.ndarray, mode: str) -> None:
  """Raises ValueError if `trans` is not a valid round of the variant `mode`."""
  if mode not in MODES:
    raise ValueError(f'mode {mode!r} not in {MODES}')
  states = np.asarray(states)
  vocab = trans.shape[-1] - 1
  if trans.shape != states.shape + (vocab + 1,):
    raise ValueError(f'trans {trans.shape} for states {states.shape}')
  if np.any(trans < 0) or not np.allclose(trans.sum(-1), 1.0, atol=1e-12):
    raise ValueError('transition rows must be probability vectors')
  if mode == 'revise':
    return
  token = states != MASK                                   # [S, L]
  allowed = _is_current(states, vocab)                     # current symbol
  if mode == 'remask':
    allowed[..., MASK] = True
  moved = np.any((trans > 0) & ~allowed, axis=-1) & token  # [S, L]
  if np.any(moved):
    s, i = np.argwhere(moved)[0]
    raise ValueError(f'mode {mode!r}: position {i} of state '
                     f'{states[s].tolist()} would change token '
                     f'{states[s, i]} with row {trans[s, i].tolist()}')


def propagate_round(dist: Dist, trans: np.ndarray, mode: str) -> Dist:
  """The exact law after one round from `dist` with transitions `trans`.

  Positions are independent given the state, so the next law is a product
  per state; it is built position by position, each row branching over the
  support of its transition (deterministic positions do not branch).
  """
  check_trans(dist.states, trans, mode)
  vocab = trans.shape[-1] - 1
  states, probs, src = dist.states.copy(), dist.probs.copy(), np.arange(
      len(dist.probs))
  for i in range(dist.length):
    p_i = trans[src, i]                                    # [S', V + 1]
    if np.all(np.max(p_i, axis=1) == 1.0):                 # no branching
      sym = np.argmax(p_i, axis=1)
      states[:, i] = np.where(sym == vocab, MASK, sym)
      continue
    row, sym = np.nonzero(p_i > 0)
    states, probs, src = states[row], probs[row] * p_i[row, sym], src[row]
    states[:, i] = np.where(sym == vocab, MASK, sym)
  return make_dist(states, probs)


def sample_round(states: np.ndarray, trans: np.ndarray,
                 rng: np.random.Generator, mode: str) -> np.ndarray:
  """One sampled round: each position of each state drawn independently."""
  check_trans(states, trans, mode)
  vocab = trans.shape[-1] - 1
  cdf = np.cumsum(trans, axis=-1)
  u = rng.random(states.shape)[..., None]
  sym = np.minimum(np.sum(u >= cdf, axis=-1), vocab)
  # Never pick a zero-probability symbol through round-off at the top.
  sym = np.where(np.take_along_axis(trans, sym[..., None], -1)[..., 0] > 0,
                 sym, np.argmax(trans, axis=-1))
  return np.where(sym == vocab, MASK, sym).astype(np.int8)


# -- whole runs -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Run:
  """A finished process: the final law, rounds used and the footprint.

  `footprint[t]` is the largest number of unmasked tokens over reachable
  states after t rounds (t = 0: the start); `peak` its maximum.
  """
  final: Dist
  rounds: int
  footprint: tuple[int, ...]

  @property
  def peak(self) -> int:
    return max(self.footprint)


def run_exact(policy: Policy, init: Dist, vocab: int, mode: str,
              max_rounds: int = 1000) -> Run:
  """Propagates the exact law until every reachable state is finished."""
  dist, rounds = init, 0
  footprint = [int(num_unmasked(dist.states).max())]
  for t in range(max_rounds + 1):
    trans = policy(t, dist.states)
    if not np.any(changes(dist.states, trans)):
      return Run(dist, rounds, tuple(footprint))
    if t == max_rounds:
      break
    dist = propagate_round(dist, trans, mode)
    rounds += 1
    footprint.append(int(num_unmasked(dist.states).max()))
  raise RuntimeError(f'not finished after {max_rounds} rounds')


def run_monte_carlo(policy: Policy, init: Dist, vocab: int, mode: str,
                    num: int, seed: int = 0, max_rounds: int = 1000) -> Run:
  """The same process sampled `num` times; `final` is the empirical law."""
  rng = np.random.default_rng(seed)
  idx = rng.choice(len(init.probs), size=num, p=init.probs)
  states, rounds = init.states[idx], 0
  footprint = [int(num_unmasked(states).max())]
  for t in range(max_rounds + 1):
    trans = policy(t, states)
    if not np.any(changes(states, trans)):
      return Run(make_dist(states, np.full(num, 1.0 / num)), rounds,
                 tuple(footprint))
    if t == max_rounds:
      break
    states = sample_round(states, trans, rng, mode)
    rounds += 1
    footprint.append(int(num_unmasked(states).max()))
  raise RuntimeError(f'not finished after {max_rounds} rounds')


# -- oracle predictors and the one-hot expressivity gap -----------------------------
def oracle_marginals(target: Dist, states: np.ndarray,
                     vocab: int) -> np.ndarray:
  """p(x_i = v | visible tokens of the state) under `target`, [S, L, V].

  Conditions on the non-MASK positions of each state (MASK rows of
  `target` are not allowed). If a state has zero probability under the
  target (off the support), every position is uniform over the vocab.
  """
  states = np.asarray(states)
  sup = target.states                                      # [K, L]
  if np.any(sup == MASK) or np.any(sup >= vocab):
    raise ValueError('target must be over tokens 0..vocab-1')
  ok = np.all((states[:, None, :] == MASK)
              | (states[:, None, :] == sup[None]), axis=-1)  # [S, K]
  w = ok * target.probs[None]                              # [S, K]
  onehot = (sup[..., None] == np.arange(vocab)).astype(np.float64)  # [K,L,V]
  marg = np.einsum('sk,klv->slv', w, onehot)
  z = w.sum(-1)[:, None, None]
  return np.where(z > 0, marg / np.where(z > 0, z, 1.0), 1.0 / vocab)


def uniform_onehot(n: int) -> Dist:
  """U_n: exactly one 1 among n bits, at a uniform position."""
  return make_dist(np.eye(n, dtype=np.int8), np.full(n, 1.0 / n))


def left_to_right_blocks(n: int, rounds: int) -> list[np.ndarray]:
  """r contiguous blocks, sizes ceil(n/r) first then floor(n/r) (r <= n)."""
  if not 1 <= rounds <= n:
    raise ValueError(f'need 1 <= rounds <= n, got {rounds}, {n}')
  return np.array_split(np.arange(n), rounds)


def oracle_policy(target: Dist, vocab: int,
                  blocks: Sequence[np.ndarray]) -> Policy:
  """No revision: round t unmasks `blocks[t]`, each position drawn from the
  target's conditional marginal given the visible state."""

  def policy(t: int, states: np.ndarray) -> np.ndarray:
    trans = identity_trans(states, vocab)
    if t >= len(blocks):
      return trans
    blk = np.asarray(blocks[t])
    marg = oracle_marginals(target, states, vocab)
    masked = states[:, blk] == MASK                        # [S, |blk|]
    new = np.concatenate([marg[:, blk], np.zeros(masked.shape + (1,))], -1)
    trans[:, blk] = np.where(masked[..., None], new, trans[:, blk])
    return trans

  return policy


def onehot_norevision(n: int, rounds: int) -> tuple[Run, float]:
  """(run, TV to U_n) for the oracle no-revision left-to-right sampler."""
  target = uniform_onehot(n)
  run = run_exact(oracle_policy(target, 2, left_to_right_blocks(n, rounds)),
                  all_masked(n), 2, 'none')
  return run, tv(run.final, target)


def onehot_norevision_tv(n: int, rounds: int) -> float:
  return onehot_norevision(n, rounds)[1]


def onehot_revision_policy(n: int) -> Policy:
  """Revision sampler for U_n (n a power of 2), 2 rounds.

  Round 1 (all masked): positions 0..k-1 (k = log2 n) get fair bits, the
  binary code (most significant first) of a uniform index I. Round 2 (the
  code visible, the rest masked): every position j is revised/written to
  1[j == I]. Then finished.
  """
  k = int(round(math.log2(n)))
  if 2 ** k != n or k < 1:
    raise ValueError(f'n must be a power of 2 >= 2, got {n}')
  weights = 2 ** np.arange(k - 1, -1, -1)

  def policy(t: int, states: np.ndarray) -> np.ndarray:
    del t  # the state says which round it is
    trans = identity_trans(states, 2)
    start = np.all(states == MASK, axis=1)
    code = np.all(states[:, :k] != MASK, axis=1) & np.all(
        states[:, k:] == MASK, axis=1)
    trans[start, :k] = [0.5, 0.5, 0.0]
    idx = (np.where(states[:, :k] == MASK, 0, states[:, :k]) * weights).sum(1)
    bits = (np.arange(n)[None] == idx[:, None]).astype(np.int64)  # [S, n]
    det = np.zeros(states.shape + (3,))
    np.put_along_axis(det, bits[..., None], 1.0, axis=-1)
    trans[code] = det[code]
    return trans

  return policy


def onehot_revision(n: int) -> tuple[Run, float]:
  """(run, TV to U_n) for the 2-round revision sampler."""
  run = run_exact(onehot_revision_policy(n), all_masked(n), 2, 'revise')
  return run, tv(run.final, uniform_onehot(n))


# -- circuits and their chain-of-thought simulation -------------------------------
@dataclasses.dataclass(frozen=True)
class Circuit:
  """A layered Boolean circuit with uniformly random input bits.

  `layers[l] = (wires [m, k], tables [m, 2^k])`: gate g of layer l + 1
  reads bits wires[g] of layer l (layer 0 = the inputs) and outputs
  `tables[g][sum_j bit_j 2^(k-1-j)]`. The output is the last layer.
  """
  n_inputs: int
  layers: tuple[tuple[np.ndarray, np.ndarray], ...]

  @property
  def widths(self) -> tuple[int, ...]:
    return (self.n_inputs,) + tuple(len(w) for w, _ in self.layers)

  @property
  def depth(self) -> int:
    return len(self.layers)

  @property
  def size(self) -> int:
    """Inputs + gates: the length of the no-remask chain of thought."""
    return sum(self.widths)

  @property
  def width(self) -> int:
    return max(self.widths)

  @property
  def offsets(self) -> np.ndarray:
    """Start of each layer in the CoT sequence, [depth + 2]."""
    return np.concatenate([[0], np.cumsum(self.widths)])


def _gate(prev: np.ndarray, wires: np.ndarray, tables: np.ndarray
          ) -> np.ndarray:
  """Gate values [B, m] from the previous layer [B, m_prev]."""
  k = wires.shape[1]
  idx = np.zeros((prev.shape[0], wires.shape[0]), np.int64)
  for j in range(k):
    idx = 2 * idx + prev[:, wires[:, j]]
  return tables[np.arange(wires.shape[0])[None], idx].astype(np.int8)


def xor_tree(n: int) -> Circuit:
  """A balanced XOR tree over n = 2^k inputs: outputs PARITY(U)."""
  k = int(round(math.log2(n)))
  if 2 ** k != n:
    raise ValueError(f'n must be a power of 2, got {n}')
  layers, m = [], n
  while m > 1:
    wires = np.arange(m).reshape(m // 2, 2)
    layers.append((wires, np.tile(np.array([0, 1, 1, 0], np.int8),
                                  (m // 2, 1))))
    m //= 2
  return Circuit(n, tuple(layers))


def ring_circuit(width: int, depth: int, rule: int = 30) -> Circuit:
  """A ring of `width` cells, `depth` layers of an elementary CA `rule`
  (rule 30: new_i = x_{i-1} XOR (x_i OR x_{i+1}), indices mod width)."""
  i = np.arange(width)
  wires = np.stack([(i - 1) % width, i, (i + 1) % width], axis=1)
  table = np.array([(rule >> v) & 1 for v in range(8)], np.int8)
  tables = np.tile(table, (width, 1))
  return Circuit(width, tuple((wires, tables) for _ in range(depth)))


def circuit_values(circ: Circuit, inputs: np.ndarray) -> list[np.ndarray]:
  """All layer values [B, m_l] for inputs [B, n] (layer 0 = the inputs)."""
  vals = [np.asarray(inputs, np.int8)]
  for wires, tables in circ.layers:
    vals.append(_gate(vals[-1], wires, tables))
  return vals


def circuit_law(circ: Circuit, layers: Sequence[int] | None = None) -> Dist:
  """The law of the chosen layers (default: the output) by enumerating all
  2^n inputs; concatenated in the given order."""
  n = circ.n_inputs
  inputs = (np.arange(2 ** n)[:, None] >> np.arange(n - 1, -1, -1)) & 1
  vals = circuit_values(circ, inputs)
  layers = [circ.depth] if layers is None else list(layers)
  return make_dist(np.concatenate([vals[l] for l in layers], axis=1),
                   np.full(2 ** n, 2.0 ** -n))


def cot_policy(circ: Circuit, remask: bool) -> Policy:
  """Chain-of-thought DLM for `circ`, sequence = [inputs, layer 1, ...].

  Let l be the highest fully written layer (-1 if none). If l = depth the
  state is finished; else the round writes layer l + 1: fair bits for the
  inputs, the gate values (an exact, deterministic predictor) otherwise,
  from the visible layer l. With `remask`, layer l is re-masked in the
  same round.
  """
  off = circ.offsets

  def policy(t: int, states: np.ndarray) -> np.ndarray:
    del t
    trans = identity_trans(states, 2)
    written = np.stack([np.all(states[:, off[l]:off[l + 1]] != MASK, axis=1)
                        for l in range(circ.depth + 1)], axis=1)  # [S, d+1]
    top = np.where(written.any(1),
                   circ.depth - np.argmax(written[:, ::-1], axis=1), -1)
    for l in range(-1, circ.depth):
      rows = np.nonzero(top == l)[0]
      if not len(rows):
        continue
      nxt = slice(off[l + 1], off[l + 2])
      if l < 0:
        trans[rows, nxt] = [0.5, 0.5, 0.0]
        continue
      cur = slice(off[l], off[l + 1])
      wires, tables = circ.layers[l]
      vals = _gate(states[rows, cur], wires, tables).astype(np.int64)
      det = np.zeros(vals.shape + (3,))
      np.put_along_axis(det, vals[..., None], 1.0, axis=-1)
      trans[rows, nxt] = det
      if remask:
        trans[rows, cur] = [0.0, 0.0, 1.0]
    return trans

  return policy


def simulate_circuit(circ: Circuit, remask: bool) -> dict[str, float | int]:
  """Runs the CoT DLM exactly; rounds, peak footprint, output TV.

  `tv_output`: TV between the law of the last layer at the end of the run
  and `circuit_law`. `tv_io` (no remask only; with remasking the inputs are
  gone): TV of (inputs, output) vs the enumerated joint.
  """
  run = run_exact(cot_policy(circ, remask), all_masked(circ.size), 2,
                  'remask' if remask else 'none')
  off = circ.offsets
  out = np.arange(off[-2], off[-1])
  res = {'rounds': run.rounds, 'peak_unmasked': run.peak,
         'depth': circ.depth, 'size': circ.size, 'width': circ.width,
         'tv_output': tv(project(run.final, out), circuit_law(circ))}
  if not remask:
    io = np.concatenate([np.arange(off[0], off[1]), out])
    res['tv_io'] = tv(project(run.final, io),
                      circuit_law(circ, [0, circ.depth]))
  return res


def parity_law(n: int) -> Dist:
  """(U, PARITY(U)) for U uniform on {0,1}^n, written directly."""
  u = (np.arange(2 ** n)[:, None] >> np.arange(n - 1, -1, -1)) & 1
  return make_dist(np.concatenate([u, u.sum(1, keepdims=True) % 2], 1),
                   np.full(2 ** n, 2.0 ** -n))


def simulate_parity(n: int) -> dict[str, float | int]:
  """The XOR-tree CoT DLM: TV of (inputs, root) vs (U, PARITY(U))."""
  circ = xor_tree(n)
  run = run_exact(cot_policy(circ, False), all_masked(circ.size), 2, 'none')
  io = np.concatenate([np.arange(n), [circ.size - 1]])
  return {'rounds': run.rounds, 'depth': circ.depth,
          'peak_unmasked': run.peak, 'size': circ.size,
          'tv': tv(project(run.final, io), parity_law(n))}


def autoregressive_parity_rounds(n: int) -> dict[str, float | int]:
  """The control of the CoT claim: the XOR-tree chain of `simulate_parity`
  decoded autoregressively (one position per round, left to right, exact
  conditionals): exact, but in `size` rounds instead of depth + 1."""
  circ = xor_tree(n)
  law = circuit_law(circ, range(circ.depth + 1))
  policy = oracle_policy(law, 2, left_to_right_blocks(circ.size, circ.size))
  run = run_exact(policy, all_masked(circ.size), 2, 'none')
  return {'rounds': run.rounds, 'size': circ.size,
          'tv': tv(run.final, law)}


# -- all numbers --------------------------------------------------------------------
RING_CASES = ((8, 4), (8, 8), (10, 12))


def summary(onehot_ns: Sequence[int] = (4, 8),
            parity_ns: Sequence[int] = (4, 8, 16),
            ring_cases: Sequence[tuple[int, int]] = RING_CASES
            ) -> dict[str, dict]:
  """Every number of the exact part, as nested dicts.

  Keys: 'onehot_norevision'[n] = {'tv': [r = 1..n], 'rounds': [...]},
  'onehot_revision'[n] = {'tv', 'rounds'}, 'parity'[n] =
  `simulate_parity(n)`, 'ring'['w{w}_d{d}'] = {'noremask': ...,
  'remask': ...} from `simulate_circuit`.
  """
  out: dict[str, dict] = {'onehot_norevision': {}, 'onehot_revision': {},
                          'parity': {}, 'ring': {}}
  for n in onehot_ns:
    runs = [onehot_norevision(n, r) for r in range(1, n + 1)]
    out['onehot_norevision'][n] = {'tv': [t for _, t in runs],
                                   'rounds': [run.rounds for run, _ in runs]}
    run, t = onehot_revision(n)
    out['onehot_revision'][n] = {'tv': t, 'rounds': run.rounds}
  for n in parity_ns:
    out['parity'][n] = simulate_parity(n)
  for w, d in ring_cases:
    circ = ring_circuit(w, d)
    out['ring'][f'w{w}_d{d}'] = {
        'noremask': simulate_circuit(circ, remask=False),
        'remask': simulate_circuit(circ, remask=True)}
  return out
