"""FastMix's search beside RegMix's, one process, median of repeats
(experiments/fastmix.py part A at the default config, one seed).

  python -m benchmarks.fastmix [--proxies 64] [--repeats 5]

FastMix: one compiled proxy run of `search_steps` with its outer steps.
RegMix: `--proxies` compiled proxy runs of `search_steps` (one vmapped
program, as the experiment runs them), then the LightGBM fit and the
simplex search. Both are whole `jit(scan)` loops, compiled before timing;
per-example gradient evaluations are printed beside the wall clock.
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
  ap.add_argument('--proxies', type=int, default=None)
  ap.add_argument('--repeats', type=int, default=5)
  args = ap.parse_args()
  cfg = fastmix_config.get_config()
  a, f, rm = cfg.synthetic, cfg.fastmix, cfg.regmix
  M = args.proxies or a.num_proxies
  K = len(exp.SOURCES)
  task = exp.mlp_task(a)
  pools = jax.tree.map(lambda v: v[None], exp.make_pools(
      jax.random.PRNGKey(0), a))
  print(f'jax {jax.__version__}, lightgbm {timing.version("lightgbm")}, '
        f'{jax.devices()[0].platform} x{jax.device_count()}, '
        f'{timing.num_cpus()} CPUs; search_steps {a.search_steps}, '
        f'{M} RegMix proxies')

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

  def run_regmix():
    val = np.asarray(proxy(*px_args).val_loss)
    reg = fastmix.regmix_fit(mixtures, val)
    return fastmix.regmix_search(reg, K, num_samples=rm.num_samples,
                                 top_k=rm.top_k)

  print('FastMix mixture', np.round(run_fastmix(), 3), '| RegMix mixture',
        np.round(run_regmix(), 3), f'({exp.SOURCES})')
  t_fm, n = timing.median_time(run_fastmix, repeats=args.repeats,
                               budget_s=600.0, min_calls=args.repeats)
  t_rm, _ = timing.median_time(run_regmix, repeats=args.repeats,
                               budget_s=1800.0, min_calls=args.repeats)
  c_fm = fastmix.search_cost(a.search_steps, f.n_inner, K, a.batch_size,
                             f.outer_batch, f.beta)
  c_rm = M * a.search_steps * K * a.batch_size
  print(f'FastMix {t_fm:.3f} s, RegMix {t_rm:.3f} s per search (median of '
        f'{n}); RegMix / FastMix = {t_rm / t_fm:.1f}x wall clock, '
        f'{c_rm / c_fm:.1f}x gradient evaluations ({c_fm:,} vs {c_rm:,})')


if __name__ == '__main__':
  main()
