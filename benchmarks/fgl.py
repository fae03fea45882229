"""FGL's cost against graph size: one spanning tree sampled (perturb-and-MAP
Kruskal and Wilson's exact sampler, host code) and the two-pass tree filter
(one `jit`, 16 features, compiled before timing) on CSBM graphs of n nodes
and m = 3 n edges, median of repeats; the fitted log-log slope of each
against n + m (1: linear), beside a 2-layer GCN propagation (the peer's
O(n + m) message passing, `segment_sum`) and the quadratic path-product
definition at small n (the control: slope 2).

  python -m benchmarks.fgl [--sizes 1000 10000 100000] [--repeats 5]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import timing
from experiments import fgl as exp
from iclrjax.graph import data as gdata
from iclrjax.graph import fgl


def _median(fn, repeats: int) -> float:
  return exp._median_time(fn, repeats)  # pylint: disable=protected-access


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument('--sizes', type=int, nargs='+',
                  default=[1000, 3000, 10000, 30000, 100000])
  ap.add_argument('--dense', type=int, nargs='+', default=[250, 500, 1000])
  ap.add_argument('--repeats', type=int, default=5)
  args = ap.parse_args()
  print(f'jax {jax.__version__} on {jax.devices()[0].device_kind} '
        f'({timing.num_cpus()} CPUs); CSBM, m = 3 n, 16 features, median of '
        f'{args.repeats}')
  print(f'{"n":>7} {"n+m":>7} {"kruskal s":>10} {"wilson s":>9} '
        f'{"filter ms":>10} {"gcn ms":>8}')
  rng = np.random.default_rng(0)
  filt = jax.jit(fgl.normalized_filter)
  gcn = jax.jit(fgl.gcn_propagate)
  rows = {k: [] for k in ('nm', 'kruskal', 'wilson', 'filter', 'gcn')}
  for n in args.sizes:
    g = gdata.csbm(rng, n, 5, 16, 6.0, 0.7, 0.5, 1, 0)
    w = rng.uniform(0.1, 1.0, len(g.edges))
    kr = _median(lambda: fgl.kruskal_tree(rng, n, g.edges, w), args.repeats)
    wi = _median(lambda: fgl.wilson_tree(rng, n, g.edges, w, 0.05),
                 max(1, args.repeats // 2))
    parent, order = fgl.kruskal_tree(rng, n, g.edges, w)
    a, x = jnp.full(n, 0.5), jnp.asarray(g.x)
    fi = _median(lambda: filt(parent, order, a, x).block_until_ready(),
                 args.repeats)
    e, mask = jnp.asarray(g.edges), jnp.ones(len(g.edges))
    gc = _median(lambda: gcn(e, mask, x).block_until_ready(), args.repeats)
    nm = n + len(g.edges)
    for k, v in zip(rows, (nm, kr, wi, fi, gc)):
      rows[k].append(v)
    print(f'{n:>7} {nm:>7} {kr:>10.3f} {wi:>9.3f} {fi * 1e3:>10.2f} '
          f'{gc * 1e3:>8.2f}')
  dense = []
  for n in args.dense:
    parent, _ = exp.random_forest(rng, n)
    x = rng.normal(size=(n, 16))
    dense.append(_median(
        lambda: fgl.path_product_matrix(parent, np.full(n, 0.5)) @ x, 1))
  slope = lambda t: exp.slope(rows['nm'], t)
  print(f'log-log slope vs n + m: kruskal {slope(rows["kruskal"]):.2f}, '
        f'wilson {slope(rows["wilson"]):.2f}, filter '
        f'{slope(rows["filter"]):.2f}, gcn {slope(rows["gcn"]):.2f}; '
        f'dense path products {exp.slope([4 * n for n in args.dense], dense):.2f}'
        f' (n = {args.dense})')


if __name__ == '__main__':
  main()
