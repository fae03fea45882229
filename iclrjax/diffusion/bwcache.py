"""BWCache: block-wise caching of DiT features across sampling steps.

Cui et al., "Accelerating Video Diffusion Transformers through Block-Wise
Caching", arXiv 2509.13789 (ICLR 2026), Sec. 3 (the block-wise indicator
and reuse rule).

Sampling runs T steps k = 0..T-1 from t_k to t_{k+1} on the uniform grid
t_k = 1 - k / T (t = 1 noise, t = 0 data, `flow.time_grid`). At each step
the network is embed -> blocks 1..N -> final (`dit.DiT` pieces). Let
h_{k,i} be the output of block i at a *computed* step k.

* Indicator (Eqs. 5-7). At a computed step k with a previous computed step
  k' (the last one before k, which need not be k - 1),

    L1rel_i = ||h_{k,i} - h_{k',i}||_1 / ||h_{k',i}||_1,
    I_k = (1/|S|) sum_{i in S} L1rel_i,

  with S all blocks (default) or a subset (`indicator_blocks`, as the paper
  does for Wan 2.1 / HunyuanVideo). The norms run over every element of the
  batch tensor, so one decision is taken for the whole batch. I_k is
  undefined (NaN) at step 0 and at skipped steps.
* Trigger: reuse iff I_k < delta. Then the block outputs of step k are
  cached; since block i+1 consumes block i, reusing all of them is reusing
  the last block's output h_{k,N}. The next R steps skip all N blocks: their
  output is final(h_{k,N}, cond(t_s)) -- embedding (of t) and the final AdaLN
  layer are recomputed with the current t. After R skipped steps the blocks
  are recomputed and the indicator re-tested against step k (periodic
  recomputation, Eq. 8).
* Last-half rule: at the first trigger, at step k, the reuse horizon is fixed
  to e = k + floor((T - 1 - k) / 2): reuse is allowed only in the first half
  of the remaining steps k+1..T-1, i.e. at steps s <= e; a reuse window that
  reaches past e is cut there, and a trigger needs k < e. The second half is
  always fully computed.

Counting: a computed step costs N block evaluations (the indicator reuses
those outputs, so it costs no extra block evaluations), a skipped step 0.
The uncached sampler costs T * N. Example, delta = inf (triggers whenever
allowed), T = 10, R = 2: step 0 computed (nothing to compare), step 1
computed and triggers (k = 1, e = 1 + 4 = 5); 2, 3 skipped; 4 computed and
triggers; 5 skipped; 6 (window cut at e) and 7, 8, 9 computed: 7 computed
steps, 7 N block evaluations. With T = 50 this rule gives 30 (R = 5) and 34
(R = 2) computed steps, the pilot's 180 and 204 block evaluations at N = 6.

Implementation: one `lax.scan` over steps whose carry holds the state x, the
cached last-block output, the previous computed step's block outputs, the
skip counter, the horizon e and the evaluation count; the blocks run inside
`lax.cond`, so on a skipped step they are not executed (on CPU/GPU a
non-batched `cond` runs one branch). Under `vmap` over the decision (e.g.
one decision per example) `cond` becomes `select` and both branches run:
counts stay exact but wall-clock savings vanish. delta and R are traced, so
one compilation serves a whole sweep.

Samplers (`sampler`): 'euler' -- rectified flow, the network predicts the
velocity, x_{k+1} = x_k + (t_{k+1} - t_k) v; 'ddim_v' / 'ddim' -- VP
v- / eps-prediction, deterministic DDIM (`flow.ddim_v_update`,
`flow.ddim_update`; curved trajectories); or any callable
update(x, out, t, s) -> x_next.

A CPU pilot (not a test; one seed, DiT width 64 x 4 blocks, 1500 steps on
digits, 256 noises, PSNR against the converged solution of the same noise):
VP v-prediction + DDIM, whose uncached sampler is converged (T = 20: 36.4
dB, T = 50: 44.3 dB from 1000 DDIM steps): delta 0.15, R = 5 at T = 50
gives 124 evals (1.61x) at 36.9 dB vs 40.2 dB for uniform 31 steps; at
T = 20, R = 2: 60 evals, 34.3 vs 34.1 dB. Step reduction wins or ties, as
on rectified flow (T = 50: 33.5 vs 39.9 dB). An eps-prediction VP model
seemed to favour caching (+0.5 dB at T = 50), but its uncached 50-step DDIM
was 19 dB from its own converged solution: the comparison was between two
unconverged samplers.

The experiment (runner, sweeps, claims, plots) is `experiments/bwcache.py`.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.diffusion import dit as dit_lib
from iclrjax.diffusion import flow
from iclrjax.diffusion import images

Update = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]


class CacheResult(NamedTuple):
  """What BWCache sampling returns: the samples, the block evaluations it
  cost and, per step, the indicator and which steps ran or triggered."""

  samples: jax.Array      # x at t = 0, same shape as the initial noise
  block_evals: jax.Array  # int32 []: DiT block evaluations (batch shares them)
  indicator: jax.Array    # float32 [T]: I_k; NaN at step 0 and skipped steps
  computed: jax.Array     # bool [T]: step k ran the blocks
  triggered: jax.Array    # bool [T]: step k started a reuse window


def rel_l1(h: jax.Array, h_prev: jax.Array) -> jax.Array:
  """||h - h_prev||_1 / ||h_prev||_1 over all elements."""
  return jnp.sum(jnp.abs(h - h_prev)) / jnp.sum(jnp.abs(h_prev))


def indicator(hs: jax.Array, hs_prev: jax.Array,
              blocks: Sequence[int] | None = None) -> jax.Array:
  """Mean over blocks of `rel_l1`; hs, hs_prev [N_blocks, ...]."""
  idx = range(hs.shape[0]) if blocks is None else blocks
  return jnp.mean(jnp.stack([rel_l1(hs[i], hs_prev[i]) for i in idx]))


def _update_fn(sampler: str | Update) -> Update:
  if callable(sampler):
    return sampler
  if sampler not in flow.UPDATES:
    raise ValueError(f'sampler must be one of {sorted(flow.UPDATES)} or a '
                     f'callable, got {sampler!r}')
  return flow.UPDATES[sampler]


def sample_with_pieces(embed: Callable, block: Callable, final: Callable,
                       depth: int, x1: jax.Array, num_steps: int,
                       delta: jax.Array | float, reuse_steps: jax.Array | int,
                       *, sampler: str | Update = 'euler',
                       indicator_blocks: Sequence[int] | None = None,
                       cache: bool = True,
                       max_triggers: jax.Array | int | None = None,
                       open_at: jax.Array | None = None) -> CacheResult:
  """BWCache sampling with an arbitrary network given as pieces.

  Args:
    embed: (x, t) -> (h, cond).
    block: (h, cond, i) -> h, i a static int in [0, depth).
    final: (h, cond) -> network output (velocity or eps), shaped like x.
    depth: number of blocks N.
    x1: initial noise (any shape the pieces accept, e.g. [B, H, W, C]).
    num_steps: T.
    delta: trigger threshold (0: never; inf: whenever allowed).
    reuse_steps: R, the steps skipped per trigger.
    sampler: 'euler', 'ddim', 'ddim_v' or update(x, out, t, s).
    indicator_blocks: blocks averaged in the indicator (None: all).
    cache: False gives the uncached sampler (no `cond`, no skipping; the
      indicator is still recorded at every step k >= 1).
    max_triggers: at most this many reuse windows (None: no limit). With
      delta = inf it gives the schedule-only ablation: the same number of
      windows as a BWCache run, placed by the schedule alone (at the first
      steps it allows) instead of by the indicator.
    open_at: bool [T], the steps at which a reuse window may open (None:
      every step; unused with cache=False). With delta = inf, max_triggers
      and a mask from `random_placement` it gives the random-placement
      control: the same number of windows at random steps the schedule
      allows.

  Returns:
    CacheResult.
  """
  update = _update_fn(sampler)
  ts = flow.time_grid(num_steps)
  T = num_steps
  delta = jnp.asarray(delta, jnp.float32)
  reuse_steps = jnp.asarray(reuse_steps, jnp.int32)
  max_triggers = jnp.asarray(T + 1 if max_triggers is None else max_triggers,
                             jnp.int32)
  open_at = jnp.ones((T,), bool) if open_at is None else jnp.asarray(open_at)
  if open_at.shape != (T,) or open_at.dtype != jnp.bool_:
    raise ValueError(f'open_at must be bool of shape ({T},) (one flag per '
                     f'step), got {open_at.dtype} {open_at.shape}')

  def run_blocks(x, t):
    h, cond = embed(x, t)
    hs = []
    for i in range(depth):
      h = block(h, cond, i)
      hs.append(h)
    return jnp.stack(hs), final(h, cond)

  def skip_blocks(x, t, h_cache):
    _, cond = embed(x, t)  # the token embedding is dead code here (DCE'd)
    return final(h_cache, cond)

  # Shapes of the cached block outputs, without running anything.
  hs_shape = jax.eval_shape(lambda x: run_blocks(x, ts[0])[0], x1)
  hs0 = jnp.zeros(hs_shape.shape, hs_shape.dtype)
  nan = jnp.float32(jnp.nan)

  def computed_step(s, x, t, c):
    hs, out = run_blocks(x, t)
    ind = jnp.where(c['has_prev'], indicator(hs, c['hs_prev'],
                                             indicator_blocks), nan)
    horizon = jnp.where(c['first_done'], c['horizon'], s + (T - 1 - s) // 2)
    trig = (c['has_prev'] & (ind < delta) & (s < horizon) & (reuse_steps > 0)
            & (c['triggers'] < max_triggers) & open_at[s])
    new = dict(
        hs_prev=hs, has_prev=jnp.bool_(True),
        triggers=c['triggers'] + trig.astype(jnp.int32),
        skip_left=jnp.where(trig, reuse_steps, 0).astype(jnp.int32),
        horizon=jnp.where(trig, horizon, c['horizon']).astype(jnp.int32),
        first_done=c['first_done'] | trig,
        evals=c['evals'] + depth)
    return out, new, ind, trig

  def skipped_step(s, x, t, c):
    del s
    out = skip_blocks(x, t, c['hs_prev'][-1])
    new = dict(c, skip_left=c['skip_left'] - 1)
    return out, new, nan, jnp.bool_(False)

  def body(carry, s):
    x, c = carry
    t, t_next = ts[s], ts[s + 1]
    if cache:
      skip = (c['skip_left'] > 0) & (s <= c['horizon'])
      out, c, ind, trig = jax.lax.cond(
          skip, functools.partial(skipped_step, s, x, t),
          functools.partial(computed_step, s, x, t), c)
    else:
      skip = jnp.bool_(False)
      out, c, ind, trig = computed_step(s, x, t, c)
      trig = jnp.bool_(False)
    return (update(x, out, t, t_next), c), (ind, ~skip, trig)

  c0 = dict(hs_prev=hs0, has_prev=jnp.bool_(False), triggers=jnp.int32(0),
            skip_left=jnp.int32(0), horizon=jnp.int32(-1),
            first_done=jnp.bool_(False), evals=jnp.int32(0))
  (x, c), (ind, computed, trig) = jax.lax.scan(
      body, (x1, c0), jnp.arange(T, dtype=jnp.int32))
  return CacheResult(x, c['evals'], ind, computed, trig)


def cfg_pieces(model: dit_lib.DiT, params: Any, labels: jax.Array,
               guidance: jax.Array | float, hwc: Sequence[int]):
  """(embed, block, final) of the classifier-free-guided network.

  Each network evaluation runs the conditional and the unconditional model
  as one batch [x; x] with labels [y; null] (as DiT's `forward_with_cfg`),
  and the output is out_u + w (out_c - out_u) (Ho & Salimans 2022, Eq. 6;
  w = 1: the conditional model, w = 0: the unconditional one). The blocks,
  and so BWCache's indicator and cache, see the doubled batch.
  """
  if not model.num_classes:
    raise ValueError('labels given but the DiT is unconditional '
                     '(num_classes=0)')
  embed, block, final = dit_lib.pieces(model, params)
  labels = jnp.asarray(labels, jnp.int32)
  y2 = jnp.concatenate([labels, jnp.full_like(labels, model.null_label)])
  w = jnp.asarray(guidance, jnp.float32)

  def embed2(x, t):
    return embed(jnp.concatenate([x, x]), t, y2)

  def final2(h, cond):
    out_c, out_u = jnp.split(final(h, cond, hwc), 2)
    return out_u + w * (out_c - out_u)

  return embed2, block, final2


def sample(model: dit_lib.DiT, params: Any, x1: jax.Array, num_steps: int,
           delta: jax.Array | float = 0.15,
           reuse_steps: jax.Array | int | None = None, *,
           sampler: str | Update = 'euler',
           indicator_blocks: Sequence[int] | None = None,
           cache: bool = True, labels: jax.Array | None = None,
           guidance: jax.Array | float | None = None,
           max_triggers: jax.Array | int | None = None,
           open_at: jax.Array | None = None) -> CacheResult:
  """BWCache sampling of a `dit.DiT` from noise x1 [B, H, W, C] (or [H, W, C]).

  reuse_steps defaults to R = max(1, round(0.1 T)) (the paper's 10%).
  labels [B] (a class-conditional DiT): the conditional model alone with
  guidance None, else classifier-free guidance with scale `guidance`
  (`cfg_pieces`: a doubled batch, also at guidance 1). Not jitted itself:
  wrap it (see `make_sampler`) or call it inside a jit.
  """
  if reuse_steps is None:
    reuse_steps = max(1, round(0.1 * num_steps))
  hwc = tuple(x1.shape[-3:])
  if labels is None or guidance is None:
    embed, block, final = dit_lib.pieces(model, params)
    final_fn = lambda h, cond: final(h, cond, hwc)
    if labels is not None:
      y = jnp.asarray(labels, jnp.int32)
      embed = lambda x, t, embed=embed: embed(x, t, y)
  else:
    embed, block, final_fn = cfg_pieces(model, params, labels, guidance, hwc)
  return sample_with_pieces(
      embed, block, final_fn, model.depth, x1,
      num_steps, delta, reuse_steps, sampler=sampler,
      indicator_blocks=indicator_blocks, cache=cache,
      max_triggers=max_triggers, open_at=open_at)


def guided_velocity(model: dit_lib.DiT, params: Any,
                    labels: jax.Array | None = None,
                    guidance: jax.Array | float = 1.0):
  """The network as out(x, t) (scalar t), guided when labels are given:
  what `sample` integrates, for the reference solvers of `flow`."""

  def out(x, t):
    if labels is None:
      return model.apply(params, x, t)
    embed, block, final = cfg_pieces(model, params, labels, guidance,
                                     x.shape[-3:])
    h, cond = embed(x, t)
    for i in range(model.depth):
      h = block(h, cond, i)
    return final(h, cond)

  return out


def make_sampler(model: dit_lib.DiT, num_steps: int, *,
                 sampler: str | Update = 'euler',
                 indicator_blocks: Sequence[int] | None = None,
                 cache: bool = True):
  """jit(f)(params, x1, delta, reuse_steps, labels=None, guidance=None,
  max_triggers=None, open_at=None) -> CacheResult (guidance None: no
  unconditional pass, see `sample`).

  delta, reuse_steps, guidance, max_triggers and open_at are traced, so a
  sweep compiles once per (model, num_steps, sampler, indicator_blocks,
  cache) and labels/max_triggers/open_at being None or not; the jitted
  function is
  memoised on those (flax modules hash by value).
  """
  blocks = None if indicator_blocks is None else tuple(
      int(i) for i in indicator_blocks)
  return _make_sampler(model, int(num_steps), sampler, blocks, bool(cache))


@functools.lru_cache(maxsize=64)
def _make_sampler(model, num_steps, sampler, blocks, cache):

  @jax.jit
  def f(params, x1, delta, reuse_steps, labels=None, guidance=None,
        max_triggers=None, open_at=None):
    return sample(model, params, x1, num_steps, delta, reuse_steps,
                  sampler=sampler, indicator_blocks=blocks, cache=cache,
                  labels=labels, guidance=guidance,
                  max_triggers=max_triggers, open_at=open_at)

  return f


@functools.lru_cache(maxsize=16)
def _make_heun(model, num_steps):

  @jax.jit
  def f(params, x1, labels=None, guidance=1.0):
    return flow.sample(guided_velocity(model, params, labels, guidance), x1,
                       num_steps, method='heun')

  return f


def converged_reference(model: dit_lib.DiT, params: Any, x1: jax.Array,
                        num_steps: int, *, sampler: str | Update = 'euler',
                        labels: jax.Array | None = None,
                        guidance: jax.Array | float = 1.0) -> jax.Array:
  """The ODE solution from x1, solved finely: what caching and step
  reduction both approximate (jitted, memoised per model and num_steps).

  'euler' (a velocity model): Heun (second order) with num_steps steps;
  'ddim' / 'ddim_v' (a VP eps / v model): DDIM, a first-order solver of the
  VP probability-flow ODE in its exponential-integrator form, with
  num_steps steps.
  `reference_error` says how converged a given num_steps is.
  """
  if sampler == 'euler':
    return _make_heun(model, int(num_steps))(params, x1, labels, guidance)
  return make_sampler(model, num_steps, sampler=sampler, cache=False)(
      params, x1, 0.0, 0, labels, guidance).samples


def reference_error(model: dit_lib.DiT, params: Any, x1: jax.Array,
                    num_steps: int, **kwargs) -> float:
  """PSNR (dB) between the reference at num_steps and at num_steps // 2:
  high means the reference has converged (halving its steps barely moves
  it)."""
  a = converged_reference(model, params, x1, num_steps, **kwargs)
  b = converged_reference(model, params, x1, num_steps // 2, **kwargs)
  return psnr(b, a)


def reference_sample(model: dit_lib.DiT, params: Any, x1: jax.Array,
                     num_steps: int, *, sampler: str | Update = 'euler',
                     labels: jax.Array | None = None,
                     guidance: jax.Array | float = 1.0) -> CacheResult:
  """The uncached sampler (jitted): all N blocks at all T steps (T N evals).

  Its `indicator` is the full per-step curve I_k between consecutive steps.
  """
  return make_sampler(model, num_steps, sampler=sampler, cache=False)(
      params, x1, 0.0, 0, labels, guidance)


def equal_compute_steps(block_evals: int, depth: int) -> int:
  """Uniform steps with at most `block_evals` block evaluations (>= 1)."""
  return max(1, int(block_evals) // int(depth))


psnr = images.psnr  # kept as bwcache.psnr for callers


def timed(fn, *args, repeats: int = 1):
  """(output, median wall seconds over `repeats` calls after a warm-up)."""
  out = jax.block_until_ready(fn(*args))  # compile + warm up
  times = []
  for _ in range(max(1, repeats)):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t0)
  return out, float(np.median(times))


def delta_sweep(model: dit_lib.DiT, params: Any, x1: jax.Array,
                num_steps: int, deltas: Sequence[float],
                reuse_steps: Sequence[int] = (2, 5), *,
                sampler: str | Update = 'euler',
                indicator_blocks: Sequence[int] | None = None,
                repeats: int = 1, labels: jax.Array | None = None,
                guidance: float = 1.0, reference: jax.Array | None = None,
                score_fn: Callable[[jax.Array], dict[str, float]] | None = None,
                schedule_control: bool = False) -> dict[str, Any]:
  """BWCache vs the uncached and the equal-compute uniform sampler.

  For every (delta, R): BWCache samples from x1, their block evaluations,
  PSNR against the uncached T-step samples of the same noise ('psnr', the
  paper's metric), and the uniform sampler with T' = block_evals // N steps
  (the same budget). With `reference` (e.g. `converged_reference`): PSNR of
  every sampler against it ('*_psnr_ref'; the uncached T-step sampler's in
  'reference'). With `score_fn` (samples -> {name: value}, e.g. a Frechet
  distance to data): its values for every sampler, prefixed like the PSNRs.
  With `schedule_control`: the schedule-only ablation of every row
  ('sched_*': delta = inf, as many reuse windows as BWCache triggered,
  placed at the first steps the schedule allows). Wall-clock times are the
  median of `repeats` calls after a warm-up, reported, never asserted.

  Returns:
    {'reference': {'block_evals', 'wall_s', 'indicator' (np [T])[, 'psnr_ref',
                   score_fn's]},
     'rows': [{'delta', 'reuse_steps', 'block_evals', 'triggers', 'speedup',
               'reuse_fraction', 'psnr', 'wall_s', 'uniform_steps',
               'uniform_block_evals', 'uniform_psnr', 'uniform_wall_s'
               [, '<prefix>psnr_ref', '<prefix><score>' for prefixes '',
               'uniform_', 'sched_', and 'sched_block_evals']}]}
  """
  depth = model.depth
  cond = (labels, guidance)

  def extra(prefix, samples):
    out = {}
    if reference is not None:
      out[f'{prefix}psnr_ref'] = psnr(samples, reference)
    if score_fn is not None:
      out.update({f'{prefix}{k}': float(v)
                  for k, v in score_fn(samples).items()})
    return out

  ref_fn = make_sampler(model, num_steps, sampler=sampler, cache=False)
  ref, ref_wall = timed(ref_fn, params, x1, 0.0, 0, *cond, repeats=repeats)
  cached_fn = make_sampler(model, num_steps, sampler=sampler,
                           indicator_blocks=indicator_blocks)
  uniform: dict[int, tuple[CacheResult, float]] = {}
  rows = []
  for R in reuse_steps:
    for d in deltas:
      res, wall = timed(cached_fn, params, x1, float(d), int(R), *cond,
                         repeats=repeats)
      evals = int(res.block_evals)
      steps = equal_compute_steps(evals, depth)
      if steps not in uniform:
        uniform[steps] = timed(
            make_sampler(model, steps, sampler=sampler, cache=False),
            params, x1, 0.0, 0, *cond, repeats=repeats)
      uni, uni_wall = uniform[steps]
      triggers = int(np.sum(np.asarray(res.triggered)))
      row = dict(
          delta=float(d), reuse_steps=int(R), block_evals=evals,
          triggers=triggers, speedup=num_steps * depth / evals,
          reuse_fraction=1.0 - float(np.mean(np.asarray(res.computed))),
          psnr=psnr(res.samples, ref.samples), wall_s=wall,
          uniform_steps=steps, uniform_block_evals=int(uni.block_evals),
          uniform_psnr=psnr(uni.samples, ref.samples),
          uniform_wall_s=uni_wall,
          **extra('', res.samples), **extra('uniform_', uni.samples))
      if schedule_control:
        ctl = cached_fn(params, x1, math.inf, int(R), *cond, triggers)
        row.update(sched_block_evals=int(ctl.block_evals),
                   sched_psnr=psnr(ctl.samples, ref.samples),
                   **extra('sched_', ctl.samples))
      rows.append(row)
  return {'reference': {'block_evals': int(ref.block_evals),
                        'wall_s': ref_wall,
                        'indicator': np.asarray(ref.indicator),
                        **extra('', ref.samples)},
          'rows': rows}


def expected_computed_steps(num_steps: int, reuse_steps: int,
                            triggers: Callable[[int], bool] = lambda k: True
                            ) -> np.ndarray:
  """The schedule rule in plain Python: bool [T], step k runs the blocks.

  `triggers(k)` says whether the indicator at computed step k >= 1 is below
  delta (default: always, i.e. delta = inf). Mirrors the module docstring;
  used to check the scan implementation and to plan budgets.
  """
  T, R = num_steps, reuse_steps
  computed = np.zeros(T, bool)
  skip_left, horizon, first_done, has_prev = 0, -1, False, False
  for s in range(T):
    if skip_left > 0 and s <= horizon:
      skip_left -= 1
      continue
    computed[s] = True
    e = horizon if first_done else s + (T - 1 - s) // 2
    if has_prev and R > 0 and s < e and triggers(s):
      horizon, first_done, skip_left = e, True, R
    else:
      skip_left = 0
    has_prev = True
  return computed


def _num_spaced(lo: int, hi: int, m: int, gap: int) -> int:
  """Ways to choose m steps in [lo, hi] at least `gap` apart."""
  if m == 0:
    return 1
  n = hi - lo + 1 - (m - 1) * (gap - 1)
  return math.comb(n, m) if n >= m else 0


def num_placements(num_steps: int, reuse_steps: int, num_windows: int) -> int:
  """How many placements of `num_windows` reuse windows the schedule rule
  allows (`expected_computed_steps` with delta = inf, at most that many
  windows): a first window at k >= 1 fixes the horizon
  e = k + floor((T - 1 - k) / 2); each later window opens at a computed step
  below e, at least R + 1 steps after the one before."""
  T, R, m = int(num_steps), int(reuse_steps), int(num_windows)
  if m == 0:
    return 1
  if R < 1:
    return 0
  return sum(_num_spaced(k + R + 1, k + (T - 1 - k) // 2 - 1, m - 1, R + 1)
             for k in range(1, T) if k < k + (T - 1 - k) // 2)


def random_placement(rng: np.random.Generator, num_steps: int,
                     reuse_steps: int, num_windows: int, *,
                     skipped: int | None = None,
                     max_tries: int = 100_000) -> np.ndarray:
  """bool [T]: the steps opening `num_windows` reuse windows, drawn
  uniformly from the `num_placements` placements the schedule rule allows
  (with `skipped`: uniformly from those that skip exactly that many steps).

  The random-placement control of the indicator: `sample(..., delta=inf,
  max_triggers=num_windows, open_at=mask)` opens exactly these windows,
  placed without looking at the features. A window that would reach past
  the horizon is cut there, so placements of as many windows differ in
  cost; pass a BWCache run's skipped steps (T - block_evals / N) to match
  its block evaluations too (drawn by rejection, at most `max_tries`
  draws). Raises ValueError when the rule allows no such placement.
  """
  T, R, m = int(num_steps), int(reuse_steps), int(num_windows)
  if m < 0:
    raise ValueError(f'num_windows must be >= 0, got {m}')
  if skipped is None:
    return _uniform_placement(rng, T, R, m)
  for _ in range(max_tries):
    mask = _uniform_placement(rng, T, R, m)
    if T - int(np.sum(expected_computed_steps(
        T, R, lambda k, mask=mask: bool(mask[k])))) == skipped:
      return mask
  raise ValueError(f'no placement of {m} reuse windows of R = {R} steps in '
                   f'T = {T} steps skipping {skipped} steps in {max_tries} '
                   'draws (a window skips at most R; only the last one can '
                   'be cut at the horizon)')


def _uniform_placement(rng: np.random.Generator, T: int, R: int,
                       m: int) -> np.ndarray:
  total = num_placements(T, R, m)
  if total == 0:
    most = max(j for j in range(m) if num_placements(T, R, j))
    raise ValueError(f'no placement of {m} reuse windows of R = {R} steps '
                     f'in T = {T} steps: the schedule rule allows at most '
                     f'{most}; lower num_windows')
  mask = np.zeros(T, bool)
  if m == 0:
    return mask

  def choose(u, options):  # options: (value, placements that extend it)
    for value, n in options:
      if u < n:
        return value, u
      u -= n
    raise AssertionError('counts do not add up')

  # Sequential exact sampling: each choice with probability (placements
  # that extend it) / (placements left); u uniform on [0, total) for any
  # size of total (bias < 2^-64).
  u = int.from_bytes(rng.bytes(total.bit_length() // 8 + 9), 'little') % total
  horizon = lambda k: k + (T - 1 - k) // 2
  k, u = choose(u, ((k, _num_spaced(k + R + 1, horizon(k) - 1, m - 1, R + 1))
                    for k in range(1, T) if k < horizon(k)))
  e = horizon(k)
  mask[k] = True
  for left in range(m - 1, 0, -1):
    k, u = choose(u, ((s, _num_spaced(s + R + 1, e - 1, left - 1, R + 1))
                      for s in range(k + R + 1, e)))
    mask[k] = True
  return mask


__all__: Sequence[str] = [
    'CacheResult', 'cfg_pieces', 'converged_reference', 'delta_sweep',
    'equal_compute_steps', 'expected_computed_steps', 'guided_velocity',
    'indicator', 'make_sampler', 'num_placements', 'psnr',
    'random_placement', 'reference_error', 'reference_sample', 'rel_l1',
    'sample', 'sample_with_pieces', 'timed']
