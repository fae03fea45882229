"""Compiled loop vs the usual Python training loop, side by side.

  python -m benchmarks.loop [--num_seeds=8] [--num_steps=2000]

Times the same linreg step (configs/linreg.py) three ways in one process:
  ours:        core.loop.chunk_fn: lax.scan over a chunk of steps, vmapped
               over seeds, one jit call per chunk;
  python+vmap: a Python for-loop calling a jitted, seed-vmapped step
               (the common flax/optax training loop);
  python/seed: a Python for-loop per seed calling a jitted step
               (one run per seed, as most paper code is launched).
and prints seed-steps per second and the ratios. Compile time is excluded
(each variant is run once to warm up).
"""

from __future__ import annotations

import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp

from configs import linreg as linreg_config
from iclrjax.core import loop
from iclrjax.examples import linreg

_SEEDS = flags.DEFINE_integer('num_seeds', 8, 'Seeds (vmapped).')
_STEPS = flags.DEFINE_integer('num_steps', 2000, 'Steps per seed.')
_CHUNK = flags.DEFINE_integer('chunk_size', 500, 'Steps per scan call.')


def _time(fn) -> float:
  fn()  # warm-up (compile)
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0


def main(argv):
  del argv
  cfg = linreg_config.get_config()
  init_fn, step_fn = linreg.make_init(cfg), linreg.make_step(cfg)
  keys = loop.seed_keys(0, _SEEDS.value)
  n, chunk = _STEPS.value, _CHUNK.value

  scan_chunk = loop.chunk_fn(step_fn, chunk, donate=False)
  vstep = jax.jit(jax.vmap(step_fn, in_axes=(0, None)))
  step1 = jax.jit(step_fn)
  states = loop.init_states(init_fn, keys)
  solo = [jax.tree.map(lambda x, i=i: x[i], states) for i in range(len(keys))]

  def ours():
    s = states
    for start in range(0, n, chunk):
      s, _ = scan_chunk(s, jnp.int32(start))
    jax.block_until_ready(s)

  def python_vmap():
    s = states
    for t in range(n):
      s, _ = vstep(s, jnp.int32(t))
    jax.block_until_ready(s)

  def python_per_seed():
    for s in solo:
      for t in range(n):
        s, _ = step1(s, jnp.int32(t))
      jax.block_until_ready(s)

  total = n * len(keys)
  times = {'ours (scan+vmap)': _time(ours),
           'python loop + vmap': _time(python_vmap),
           'python loop per seed': _time(python_per_seed)}
  base = times['ours (scan+vmap)']
  print(f'backend={jax.default_backend()} devices={jax.device_count()} '
        f'seeds={len(keys)} steps={n}')
  print(f'{"variant":<24}{"seconds":>10}{"seed-steps/s":>16}{"ours is x faster":>18}')
  for name, t in times.items():
    print(f'{name:<24}{t:>10.3f}{total / t:>16.0f}{t / base:>18.1f}')


if __name__ == '__main__':
  app.run(main)
