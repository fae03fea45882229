"""FGE's cost per PPO iteration against the baselines on the same PPO core.

  python -m benchmarks.fge [--num_seeds=3] [--iters=50] [--task=toylevels]

The paper's code cannot be timed beside ours here (it calls
`jax.devices("gpu")` directly), so the peer is the cheapest method on the same
core: domain randomisation (DR: PPO alone, theta ~ rho). Every method runs
`--iters` compiled iterations (`core.loop.chunk_fn`: scan over iterations,
vmap over seeds) of the default config after a warm-up chunk that compiles;
the time is the median over `--repeats` chunks. The FGE breakdown changes
one part at a time: the KDE instead of the spline flow, one classifier step
instead of two, a smaller predicted-feasible rejection sample (512 instead
of 2048).
"""

from __future__ import annotations

import statistics
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp

from configs import fge as fge_config
from iclrjax.core import loop
from experiments import fge as fge_exp
from iclrjax.rl import curricula
from iclrjax.rl import reach

_SEEDS = flags.DEFINE_integer('num_seeds', 3, 'Seeds vmapped.')
_ITERS = flags.DEFINE_integer('iters', 50, 'PPO iterations per timed chunk.')
_REPEATS = flags.DEFINE_integer('repeats', 5, 'Timed chunks per method.')
_TASK = flags.DEFINE_string('task', 'toylevels', 'toylevels or pendulum.')


def _time(task, cfg, method: str) -> float:
  """Median seconds per iteration (all seeds together)."""
  init, step, _ = curricula.make_trainer(
      task, cfg, fge_exp.make_sampler(method, task, cfg), 10_000)
  state = loop.init_states(init, loop.seed_keys(0, _SEEDS.value))
  chunk = loop.chunk_fn(step, _ITERS.value)
  state, m = chunk(state, jnp.int32(0))
  jax.block_until_ready(m)
  times = []
  for r in range(_REPEATS.value):
    t0 = time.perf_counter()
    state, m = chunk(state, jnp.int32((r + 1) * _ITERS.value))
    jax.block_until_ready(m)
    times.append((time.perf_counter() - t0) / _ITERS.value)
  return statistics.median(times)


def main(argv):
  del argv
  base_cfg = fge_config.get_config(
      'pendulum' if _TASK.value == 'pendulum' else None)
  task = reach.make_task(base_cfg.task, **base_cfg.task_kwargs.to_dict())
  steps = base_cfg.ppo.num_envs * base_cfg.ppo.num_steps * _SEEDS.value
  rows = []
  dr = _time(task, base_cfg, 'dr')
  rows.append(('DR (peer)', dr))
  for method in ('plr', 'rarl', 'fge'):
    rows.append((fge_exp.LABELS[method], _time(task, base_cfg, method)))
  variants = {
      'FGE, KDE novelty': dict(density='kde'),
      'FGE, 1 classifier step': dict(clf_steps=1),
      'FGE, 512 predci candidates': dict(predci_candidates=512,
                                         predci_capacity=256),
  }
  for label, override in variants.items():
    cfg = fge_config.get_config(
        'pendulum' if _TASK.value == 'pendulum' else None)
    cfg.fge.update(override)
    rows.append((label, _time(task, cfg, 'fge')))
  print(f'{task.name}, {_SEEDS.value} seeds x {base_cfg.ppo.num_envs} envs x '
        f'{base_cfg.ppo.num_steps} steps per iteration, '
        f'{jax.devices()[0].platform}')
  print(f'{"method":32s} {"ms/iter":>9s} {"env-steps/s":>12s} {"time / DR":>10s}')
  for label, t in rows:
    print(f'{label:32s} {1e3 * t:9.1f} {steps / t:12.0f} {t / dr:10.2f}')


if __name__ == '__main__':
  app.run(main)
