"""FastMix's search beside RegMix's, one process, median of repeats
(experiments/fastmix.py at a config variant, one seed).

  python -m benchmarks.fastmix [--part synthetic|lm] [--variant default]
      [--proxies M] [--steps T] [--repeats 5]

FastMix: one compiled proxy run of `search_steps` with its outer steps.
RegMix: `--proxies` compiled proxy runs of `search_steps` (one vmapped
program, as the experiment runs them), then the LightGBM fit and the
simplex search (timed apart; skipped where lightgbm is not installed).
Both are whole `jit(scan)` loops, compiled before timing; per-example
gradient evaluations are printed beside the wall clock. `--steps`
shortens every run alike (the ratio is per step).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import timing
from configs import fastmix as fastmix_config
from experiments import fastmix as exp
from iclrjax.stats import fastmix


def compiled_loop(init, step, steps: int):
  """(keys, args, data) -> final row states: vmapped rows, scanned steps."""

  @jax.jit
  def go(keys, args, data):
    rows = jax.vmap(init)(keys, args)

    def body(s, t):
      s, _ = jax.vmap(step, in_axes=(0, None, None))(s, t, data)
      return s, None

    return jax.lax.scan(body, rows, jnp.arange(steps))[0]

  return go


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument('--part', choices=('synthetic', 'lm'), default='synthetic')
  ap.add_argument('--variant', default='default')
  ap.add_argument('--proxies', type=int, default=None)
  ap.add_argument('--steps', type=int, default=None)
  ap.add_argument('--repeats', type=int, default=5)
  args = ap.parse_args()
  cfg = fastmix_config.get_config(args.variant)
  a, f, rm = cfg[args.part], cfg.fastmix, cfg.regmix
  a.search_steps = args.steps or a.search_steps
  M = args.proxies or a.num_proxies
  K = len(exp.SOURCES)
  if args.part == 'synthetic':
    task = exp.mlp_task(a)
    pools = exp.make_pools(jax.random.PRNGKey(0), a)
  else:
    task = exp.lm_task(a.proxy, exp.lm_length(a))
    pools = exp.make_lm_pools(jax.random.PRNGKey(0), a)
  pools = jax.tree.map(lambda v: v[None], pools)
  print(f'jax {jax.__version__}, lightgbm {timing.version("lightgbm")}, '
        f'{jax.devices()[0].device_kind} x{jax.device_count()}, '
        f'{timing.num_cpus()} CPUs; {args.part} ({args.variant}), '
        f'search_steps {a.search_steps}, {M} RegMix proxies')

  fm = compiled_loop(*exp.make_fastmix(a, f, task), a.search_steps)
  fm_args = (jax.random.split(jax.random.PRNGKey(1), 1),
             (jnp.zeros(1, jnp.int32), jnp.zeros(1, bool)), pools)
  proxy = compiled_loop(*exp.make_fixed(a, task, a.search_steps),
                        a.search_steps)
  mixtures = exp.dirichlet_mixtures(0, M, K)
  px_args = (jax.random.split(jax.random.PRNGKey(2), M),
             (jnp.zeros(M, jnp.int32), jnp.asarray(mixtures, jnp.float32)),
             pools)

  def run_fastmix():
    return np.asarray(jax.nn.softmax(fm(*fm_args).search.z[0]))

  def run_proxies():
    return np.asarray(proxy(*px_args).val_loss)

  val = run_proxies()

  def run_fit():
    reg = fastmix.regmix_fit(mixtures, val)
    return fastmix.regmix_search(reg, K, num_samples=rm.num_samples,
                                 top_k=rm.top_k)

  try:
    import lightgbm  # pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    run_fit = None
  print('FastMix mixture', np.round(run_fastmix(), 3), '| RegMix mixture',
        np.round(run_fit(), 3) if run_fit else '(no lightgbm)',
        f'({exp.SOURCES})')
  t_fm, n = timing.median_time(run_fastmix, repeats=args.repeats,
                               budget_s=600.0, min_calls=args.repeats)
  t_px, _ = timing.median_time(run_proxies, repeats=args.repeats,
                               budget_s=1800.0, min_calls=args.repeats)
  t_fit = timing.median_time(run_fit, repeats=args.repeats, budget_s=60.0,
                             min_calls=args.repeats)[0] if run_fit else 0.0
  t_rm = t_px + t_fit
  c_fm = fastmix.search_cost(a.search_steps, f.n_inner, K, a.batch_size,
                             a.outer_batch, f.beta)
  c_rm = M * a.search_steps * K * a.batch_size
  print(f'FastMix {t_fm:.3f} s, RegMix {t_rm:.3f} s per search ({t_px:.3f} '
        f's proxies + {t_fit:.3f} s LightGBM fit and search; medians of '
        f'{n}); RegMix / FastMix = {t_rm / t_fm:.1f}x wall clock, '
        f'{c_rm / c_fm:.1f}x gradient evaluations ({c_fm:,} vs {c_rm:,})')


if __name__ == '__main__':
  main()
