"""Diffusion training throughput, FLOP utilisation, and BWCache speedup.

  python -m benchmarks.diffusion [--chunk_steps=50] [--num_seeds=1]
      [--repeats=5] [--dot_n=2048] [--samples=256] [--sample_steps=50]
      [--reuse_steps=5] [--deltas=0,auto,0.15] [--perturb=1.0] [--quick]

Three parts, one process, one after another:

1. Training throughput. The default-config trainers of the two likelihood
   experiments: QDPM and VDM (`experiments.qdpm.make_trainer`,
   configs/qdpm.py default: ResMLP width 256, 3 blocks, Fourier features (2, 4), batch 128, digits
   D = 64 on [-1, 1]) and the rectified-flow DiT (`flow.make_trainer`,
   configs/bwcache.py default: width 64, depth 4, 4 heads, patch 2, batch 128,
   8x8x1 digits). One timed call is one compiled chunk of `--chunk_steps`
   training steps (`core.loop.chunk_fn`: `lax.scan` over steps, `vmap` over
   `--num_seeds` seeds, exactly what the experiments run); a step is the
   whole update (minibatch gather, loss, gradient, AdamW, EMA). The state is
   carried from chunk to chunk. images/s = seeds * steps * batch / time.

2. Model FLOP utilisation (MFU). FLOPs per step are XLA's own count:
   `jax.jit(vmap(step)).lower(...).compile().cost_analysis()['flops']` of one
   step (a scan body is counted once by the cost analysis, so the chunk's
   count is not used). This is the HLO count after XLA's optimisations
   (fusions, algebraic simplification): a dot counts 2 m n k, elementwise
   ops one per element (transcendentals are counted separately and not
   included), and it covers everything in the step (optimizer, EMA, the
   minibatch permutation), so it is not the "6 x params x tokens" model-FLOP
   count of the LLM literature. Achieved FLOP/s = flops * steps / time. The
   peak is a large float32 `jnp.dot` (`--dot_n`^2 @ `--dot_n`^2, jitted,
   2 n^3 / median time) measured in this process before and after the
   training rows; MFU uses the higher of the two. On CPU this "peak" is what
   XLA's dot reaches with the threads this process gets, not the hardware's
   peak; small matmuls (width 64-256) and elementwise-heavy steps cannot
   reach it, so MFU here is a ratio to the best dense kernel, not to the
   chip.

3. BWCache (`diffusion.bwcache`) on the default-size DiT (configs/bwcache.py)
   with RANDOM weights: training one is too slow for a benchmark. At init the
   adaLN-zero modulation and the output layer are zero (every block is the
   identity and the output is 0), so every all-zero kernel gets Gaussian
   noise N(0, (`--perturb` / sqrt(fan_in))^2) (1.0: LeCun-normal scale;
   biases stay 0). `--samples` noises are sampled by Euler with
   `--sample_steps` steps: uncached (`bwcache.reference_sample`, T N block
   evaluations), cached (`bwcache.make_sampler(model, T)(params, x1, delta,
   R)`, R = `--reuse_steps`) for each delta in `--deltas`, and the uniform
   sampler with fewer steps at the cached run's block budget
   (`bwcache.equal_compute_steps`). 'auto' is the median of the uncached
   run's indicator curve I_k (so the re-test triggers at some computed steps
   and not at others); delta 0 never triggers and shows the overhead of the
   cached scan (cond + indicator). Reported: computed steps, block
   evaluations, their ratio to the uncached count, wall time and wall-clock
   speedup over the uncached sampler, and PSNR against the uncached samples
   (data range 2; with random weights the "samples" are not images, so PSNR
   only says how far caching moves the output). Block counts depend on
   delta and on the model: a random network's indicator curve is flat (no
   J-shape as in the trained DiT), and the default perturbation gives
   I_k ~ 0.01, below the paper's delta 0.15, which then triggers whenever
   the schedule allows (T = 50, R = 5: 30 computed steps). On CPU a skipped
   step really skips the blocks: the sampler's un-batched `lax.cond` runs
   one branch (under `vmap` over the decision it would become a select and
   run both).

Every time is the median of `--repeats` calls after untimed warm-up calls
(one that compiles, then at least one more and at least 0.25 s), ended by
`block_until_ready`; a row whose last warm-up call shows that `--repeats`
calls would take over `--row_budget_s` gets fewer (the `calls` column).
`--quick` only checks that everything runs: the configs' smoke variants
(small nets, batch 32), short chunks, two repeats, a 1024 dot, the lowered
(pre-optimisation) step's FLOP count, a small BWCache run with delta 'auto'
only. Nothing here is asserted. On a machine shared with other jobs the absolute
numbers (and the dot peak) move from run to run; the load average is
printed.
"""

from __future__ import annotations

import os
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import timing
from configs import bwcache as bwcache_config
from configs import qdpm as qdpm_config
from experiments import qdpm as qdpm_exp
from iclrjax.core import loop
from iclrjax.diffusion import bwcache
from iclrjax.diffusion import dit
from iclrjax.diffusion import flow
from iclrjax.diffusion import images

_CHUNK = flags.DEFINE_integer('chunk_steps', 50,
                              'Training steps per timed (compiled) chunk.')
_SEEDS = flags.DEFINE_integer('num_seeds', 1, 'Seeds vmapped per chunk.')
_MODELS = flags.DEFINE_list('models', ['qdpm', 'vdm', 'flow_dit'],
                            'Training rows: qdpm, vdm, flow_dit.')
_REPEATS = flags.DEFINE_integer('repeats', 5, 'Timed calls per row.')
_BUDGET = flags.DEFINE_float(
    'row_budget_s', 12.0, 'Fewer timed calls for a row whose warm-up call '
    'shows --repeats would take longer than this.')
_DOT_N = flags.DEFINE_integer('dot_n', 2048, 'Size of the peak-FLOP/s dot.')
_SAMPLES = flags.DEFINE_integer('samples', 256, 'BWCache: noises sampled.')
_SAMPLE_STEPS = flags.DEFINE_integer('sample_steps', 50,
                                     'BWCache: Euler steps T.')
_REUSE = flags.DEFINE_integer('reuse_steps', 5, 'BWCache: R.')
_DELTAS = flags.DEFINE_list(
    'deltas', ['0', 'auto', '0.15'],
    "BWCache thresholds; 'auto' = median of the uncached indicator curve.")
_PERTURB = flags.DEFINE_float(
    'perturb', 1.0, 'Std of the noise added to the zero-initialised DiT '
    'kernels, in units of 1/sqrt(fan_in).')
_QUICK = flags.DEFINE_bool(
    'quick', False, 'Tiny run to check it works: the configs\' smoke '
    'variants (small nets, batch 32), 5-step chunks, 2 repeats, 1024 dot, '
    'FLOPs of the lowered step, BWCache 32 samples x 20 steps, R 2, '
    'delta auto only.')


def _flops(compiled) -> float:
  """'flops' of a Compiled's (or Lowered's) cost analysis (list or dict)."""
  cost = compiled.cost_analysis()
  if isinstance(cost, (list, tuple)):
    cost = cost[0] if cost else {}
  return float((cost or {}).get('flops', float('nan')))


def _dot_peak(n: int, repeats: int) -> tuple[float, float, int]:
  """(FLOP/s, seconds, calls) of a jitted float32 n x n @ n x n."""
  ka, kb = jax.random.split(jax.random.key(0))
  a = jax.random.normal(ka, (n, n), jnp.float32)
  b = jax.random.normal(kb, (n, n), jnp.float32)
  f = jax.jit(jnp.dot)
  t, calls = timing.median_time(lambda: jax.block_until_ready(f(a, b)), repeats,
                          _BUDGET.value)
  return 2.0 * n ** 3 / t, t, calls


def _trainers(variant: str | None):
  """{name: (init, step, data, batch, description)} for `variant`.

  `data` is the training split, passed to step(state, t, data).
  """
  out = {}
  qc = qdpm_config.get_config(variant)
  train_x = jnp.asarray(images.to_scale(images.digits('train'), qc.scale),
                        jnp.float32)
  levels = jnp.asarray(images.grid(images.DIGITS_LEVELS, qc.scale),
                       jnp.float32)
  for kind in ('qdpm', 'vdm'):
    init, step, _ = qdpm_exp.make_trainer(kind, qc, train_x, levels)
    out[kind] = (init, step, train_x, qc.batch_size,
                 f'ResMLP w{qc.width} x{qc.blocks}, D={train_x.shape[1]}')
  bc = bwcache_config.get_config(variant)
  model = dit.DiT(patch=bc.patch, width=bc.width, depth=bc.depth,
                  heads=bc.heads)
  flow_x = jnp.asarray(flow.digits('train'))
  init, step = flow.make_trainer(
      model, flow_x,
      dict(batch_size=bc.batch_size, learning_rate=bc.learning_rate,
           ema_decay=bc.ema_decay, objective='flow'))
  out['flow_dit'] = (init, step, flow_x, bc.batch_size,
                     f'DiT w{bc.width} x{bc.depth}, p{bc.patch}, 8x8x1')
  return out


def _train_row(init, step, data, chunk_steps: int, seeds: int, repeats: int,
               compiled_flops: bool = True):
  """(seconds per chunk, calls, HLO flops per step over all seeds).

  compiled_flops=False counts the lowered, not yet optimised, step
  (`Lowered.cost_analysis`: no second compile; --quick only).
  """
  state = loop.init_states(init, loop.seed_keys(0, seeds))
  vstep = jax.vmap(step, in_axes=(0, None, None))
  lowered = jax.jit(vstep).lower(state, jnp.int32(0), data)
  flops = _flops(lowered.compile() if compiled_flops else lowered)
  chunk = loop.chunk_fn(step, chunk_steps)
  box = {'state': state, 'start': 0}

  def call():
    box['state'], metrics = chunk(box['state'], jnp.int32(box['start']),
                                  data)
    jax.block_until_ready((box['state'], metrics))
    box['start'] += chunk_steps

  t, calls = timing.median_time(call, repeats, _BUDGET.value)
  return t, calls, flops


def _perturbed_dit_params(model: dit.DiT, scale: float, key: jax.Array):
  """Random DiT params; all-zero kernels += N(0, (scale / sqrt(fan_in))^2).

  Returns (params, names of the perturbed layers).
  """
  k_init, k_noise = jax.random.split(key)
  params = model.init(k_init, jnp.zeros((1, 8, 8, 1)), jnp.zeros((1,)))
  leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
  keys = jax.random.split(k_noise, len(leaves))
  out, names = [], []
  for (path, v), k in zip(leaves, keys):
    if getattr(path[-1], 'key', None) == 'kernel' and not np.any(
        np.asarray(v)):
      v = v + scale / np.sqrt(v.shape[0]) * jax.random.normal(k, v.shape,
                                                              v.dtype)
      names.append('/'.join(str(getattr(p, 'key', p)) for p in path[1:-1]))
    out.append(v)
  return jax.tree_util.tree_unflatten(treedef, out), names


def _bwcache(variant: str | None, samples: int, T: int, R: int,
             deltas: list[str], repeats: int) -> None:
  bc = bwcache_config.get_config(variant)
  model = dit.DiT(patch=bc.patch, width=bc.width, depth=bc.depth,
                  heads=bc.heads)
  params, perturbed = _perturbed_dit_params(model, _PERTURB.value,
                                            jax.random.key(bc.seed))
  x1 = jax.random.normal(jax.random.key(bc.seed + 4242), (samples, 8, 8, 1))
  depth = model.depth
  budget = _BUDGET.value

  def timed(fn, *args):
    box = {}

    def call():
      box['out'] = jax.block_until_ready(fn(*args))

    t, calls = timing.median_time(call, repeats, budget)
    return box['out'], t, calls

  ref_fn = bwcache.make_sampler(model, T, cache=False)
  ref, ref_t, ref_calls = timed(ref_fn, params, x1, 0.0, 0)
  ind = np.asarray(ref.indicator)[1:]
  auto = float(np.nanmedian(ind))
  uniform = {T: (ref, ref_t, ref_calls)}
  cached_fn = bwcache.make_sampler(model, T)
  print(f'\nBWCache: DiT w{bc.width} x{depth} blocks, heads {bc.heads}, patch '
        f'{bc.patch}, RANDOM weights (zero kernels + N(0, ({_PERTURB.value:g}'
        f'/sqrt(fan_in))^2): {len(perturbed)} kernels), {samples} noises '
        f'8x8x1, Euler T = {T}, R = {R}, one cache decision per batch')
  print(f'uncached indicator I_k (k = 1..{T - 1}): min {np.nanmin(ind):.4f}, '
        f'median {auto:.4f}, max {np.nanmax(ind):.4f}; auto delta = median')
  rows = [('uncached', '-', T, int(ref.block_evals), ref_t, ref_calls,
           float('inf'))]
  for d in deltas:
    delta = auto if d.strip() == 'auto' else float(d)
    res, t, calls = timed(cached_fn, params, x1, delta, R)
    evals = int(res.block_evals)
    rows.append((f'BWCache delta={d}', f'{delta:.4g}',
                 int(np.sum(np.asarray(res.computed))), evals, t, calls,
                 bwcache.psnr(res.samples, ref.samples)))
    steps = bwcache.equal_compute_steps(evals, depth)
    if steps not in uniform:
      uniform[steps] = timed(bwcache.make_sampler(model, steps, cache=False),
                             params, x1, 0.0, 0)
    uni, ut, ucalls = uniform[steps]
    rows.append((f'  uniform {steps} steps', '-', steps,
                 int(uni.block_evals), ut, ucalls,
                 float('inf') if steps == T else
                 bwcache.psnr(uni.samples, ref.samples)))
  ref_evals = rows[0][3]
  print(f'{"sampler":22s} {"delta":>7s} {"computed":>9s} {"blk evals":>10s} '
        f'{"x fewer":>8s} {"ms":>9s} {"wall x":>7s} {"PSNR dB":>8s} '
        f'{"calls":>6s}')
  for label, delta, steps, evals, t, calls, ps in rows:
    print(f'{label:22s} {delta:>7s} {steps:9d} {evals:10d} '
          f'{ref_evals / evals:7.2f}x {1e3 * t:9.1f} {ref_t / t:6.2f}x '
          f'{ps:8.1f} {calls:6d}')
  print('(computed: steps that ran the blocks; x fewer: uncached block '
        'evals / these; wall x: uncached time / this time; PSNR against the '
        'uncached samples of the same noise; inf: identical)')


def main(argv):
  del argv
  quick = _QUICK.value
  variant = 'smoke' if quick else None
  chunk_steps = 5 if quick else _CHUNK.value
  repeats = 2 if quick else _REPEATS.value
  dot_n = 1024 if quick else _DOT_N.value
  samples = 32 if quick else _SAMPLES.value
  T = 20 if quick else _SAMPLE_STEPS.value
  R = 2 if quick else _REUSE.value
  seeds = _SEEDS.value
  wall0 = time.perf_counter()
  print(f'jax devices: {jax.devices()} ({timing.num_cpus()} CPUs for this '
        f'process, load average {os.getloadavg()[0]:.2f})')
  print('versions: ' + ', '.join(f'{p} {timing.version(p)}' for p in
                                 ('jax', 'jaxlib', 'flax', 'optax')))

  peak0, dot_t0, dot_calls0 = _dot_peak(dot_n, repeats)
  print(f'\nfloat32 dot {dot_n}x{dot_n} @ {dot_n}x{dot_n} (before): '
        f'{1e3 * dot_t0:.1f} ms = {peak0 / 1e9:.1f} GFLOP/s '
        f'({dot_calls0} calls)')
  trainers = _trainers(variant)
  rows = []
  for name in _MODELS.value:
    init, step, data, batch, desc = trainers[name]
    t, calls, flops = _train_row(init, step, data, chunk_steps, seeds, repeats,
                                 compiled_flops=not quick)
    rows.append((name, desc, batch, t, calls, flops))
  peak1, dot_t1, dot_calls1 = _dot_peak(dot_n, repeats)
  print(f'float32 dot (after the training rows): {1e3 * dot_t1:.1f} ms = '
        f'{peak1 / 1e9:.1f} GFLOP/s ({dot_calls1} calls); MFU uses the higher '
        f'peak, {max(peak0, peak1) / 1e9:.1f} GFLOP/s')
  peak = max(peak0, peak1)
  print(f'\nTraining: {seeds} seed(s) x {chunk_steps} steps per compiled '
        f'chunk (core.loop.chunk_fn), {variant or "default"} configs, '
        'float32; GFLOP/step: XLA cost analysis of one '
        f'{"lowered (unoptimised)" if quick else "compiled"} step (all seeds)')
  print(f'{"model":9s} {"net":27s} {"batch":>5s} {"ms/step":>8s} '
        f'{"images/s":>9s} {"GFLOP/step":>10s} {"GFLOP/s":>8s} {"MFU":>6s} '
        f'{"calls":>6s}')
  for name, desc, batch, t, calls, flops in rows:
    per_step = t / chunk_steps
    achieved = flops / per_step
    print(f'{name:9s} {desc:27s} {batch:5d} {1e3 * per_step:8.2f} '
          f'{seeds * batch / per_step:9.0f} {flops / 1e9:10.3f} '
          f'{achieved / 1e9:8.2f} {100 * achieved / peak:5.1f}% {calls:6d}')
  print('(MFU = achieved HLO FLOP/s / the dot\'s FLOP/s in this process)')

  deltas = ['auto'] if quick else list(_DELTAS.value)
  _bwcache(variant, samples, T, R, deltas, repeats)
  print(f'\ntotal wall time {time.perf_counter() - wall0:.1f} s')


if __name__ == '__main__':
  app.run(main)
