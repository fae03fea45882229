"""Associative (parallel) vs sequential scan of the DCD recurrence.

  python -m benchmarks.ssm [--lengths=256,512,1024,2048,4096] [--batch=64]
      [--state=32] [--repeats=7]

h_t = lambda_t * h_{t-1} + b_t on complex64 [batch, L, state], computed by
`ssm.dcd.diag_scan` with `jax.lax.associative_scan` (O(log L) depth, O(L)
work) and with `jax.lax.scan` (L sequential steps), forward and forward +
backward (the gradient of a scalar loss). Each time is the median of
`--repeats` calls of a jitted function (compile excluded), ended by
`block_until_ready`. The ratio is sequential / associative time (> 1: the
associative scan is faster). On CPU the associative scan does ~2x the work
of the sequential one, so the gain comes from vectorisation; on a GPU the
O(log L) depth dominates.
"""

from __future__ import annotations

import statistics
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp

from iclrjax.ssm import dcd

_LENGTHS = flags.DEFINE_list('lengths', ['256', '512', '1024', '2048', '4096'],
                             'Sequence lengths.')
_BATCH = flags.DEFINE_integer('batch', 64, 'Sequences per call.')
_STATE = flags.DEFINE_integer('state', 32, 'Complex channels.')
_REPEATS = flags.DEFINE_integer('repeats', 7, 'Timed calls.')


def _median_time(fn, *args) -> float:
  jax.block_until_ready(fn(*args))
  times = []
  for _ in range(_REPEATS.value):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def main(argv):
  del argv
  print(f'{jax.devices()[0].platform}: batch {_BATCH.value}, state '
        f'{_STATE.value} (complex64)')
  print(f'{"L":>6s} {"fwd seq ms":>11s} {"fwd assoc ms":>13s} {"ratio":>6s} '
        f'{"grad seq ms":>12s} {"grad assoc ms":>14s} {"ratio":>6s}')
  for L in map(int, _LENGTHS.value):
    k1, k2 = jax.random.split(jax.random.key(L))
    shape = (_BATCH.value, L, _STATE.value)
    a = 0.99 * jnp.exp(1j * jax.random.uniform(k1, shape, maxval=6.28))
    b = jax.random.normal(k2, shape).astype(jnp.complex64)
    row = [L]
    for grad in (False, True):
      for method in ('sequential', 'associative'):
        scan = jax.vmap(lambda a_, b_, m=method: dcd.diag_scan(a_, b_,
                                                               method=m))
        if grad:
          fn = jax.jit(jax.grad(lambda a_, b_, s=scan: jnp.sum(
              jnp.abs(s(a_, b_)) ** 2), argnums=1))
        else:
          fn = jax.jit(scan)
        row.append(1e3 * _median_time(fn, a, b))
    print(f'{row[0]:6d} {row[1]:11.2f} {row[2]:13.2f} {row[1] / row[2]:6.2f} '
          f'{row[3]:12.2f} {row[4]:14.2f} {row[3] / row[4]:6.2f}')


if __name__ == '__main__':
  app.run(main)
