"""Parity fixture for the PLR / ACCEL level buffer (arXiv 2010.03934,
2203.01302) from jaxued's `LevelSampler` (DramaCow/jaxued), the buffer the
FGE release's ACCEL runs (`src/fge/core/bits/level_sampler.py` there is
jaxued's, reformatted).

  python tests/parity/generate/ued.py --ref <checkout of DramaCow/jaxued>

Environment: `pip install --no-deps jaxued==0.0.1` beside jax and chex
(the script checks that the installed `level_sampler.py` equals the
checkout's, tag-less commit 0824b4b of the PyPI release). Only the weight
functions run (`level_weights`, `score_weights`, `staleness_weights`):
`initialize` and `insert` call `jax.tree_map`, gone from current jax, so
the sampler dicts are built here.

Cases: a buffer of C = 8 with `size` filled slots (jaxued fills a prefix),
NumPy-drawn scores (some tied) and timestamps below the episode count, for
ACCEL's settings (temperature 0.3, staleness 0.3) and PLR's defaults in the
release (0.1, 0.1), full buffers (with and without staleness), and one whose
staleness is all zero; per case the weights and the slot the next insert
takes (`_get_next_idx`: the first free one, else the lowest weight).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import _common

SEED = 2203
C = 8
FILES = ['src/jaxued/level_sampler.py']
# (size, temperature, staleness coefficient, all staleness zero)
CASES = ((5, 0.3, 0.3, False), (8, 0.3, 0.3, False), (6, 0.1, 0.1, False),
         (8, 1.0, 0.5, False), (4, 0.3, 0.3, True), (1, 0.3, 0.3, False),
         (8, 0.3, 0.0, False))


def main():
  args = _common.cli(__doc__)
  import jax.numpy as jnp
  import jaxued
  from jaxued.level_sampler import LevelSampler
  installed = Path(jaxued.__file__).resolve().parent
  for f in FILES:
    if (installed / Path(f).name).read_bytes() != (args.ref / f).read_bytes():
      raise SystemExit(f'{f}: the installed jaxued differs from --ref')

  rng = np.random.default_rng(SEED)
  scores = np.round(rng.normal(size=(len(CASES), C)), 1).astype(np.float32)
  scores[:, 2] = scores[:, 0]   # a tie (stable order: the lower index first)
  count = np.full(len(CASES), 50, np.int32)
  stamps = rng.integers(0, 50, size=(len(CASES), C)).astype(np.int32)
  sizes, temps, stales = [], [], []
  weights, w_score, w_stale, next_idx = [], [], [], []
  for i, (size, temp, stale, zero) in enumerate(CASES):
    if zero:
      stamps[i] = count[i]
    ls = LevelSampler(C, staleness_coeff=stale, prioritization='rank',
                      prioritization_params={'temperature': temp})
    sampler = {'levels': jnp.zeros((C, 1)), 'scores': jnp.asarray(scores[i]),
               'timestamps': jnp.asarray(stamps[i]), 'size': size,
               'episode_count': int(count[i])}
    weights.append(np.asarray(ls.level_weights(sampler)))
    w_score.append(np.asarray(ls.score_weights(sampler)))
    w_stale.append(np.asarray(ls.staleness_weights(sampler)))
    next_idx.append(int(ls._get_next_idx(sampler)))  # pylint: disable=protected-access
    sizes.append(size)
    temps.append(temp)
    stales.append(stale)
  f32 = lambda v: np.asarray(v, np.float32)
  out = dict(scores=scores, timestamps=stamps, episode_count=count,
             size=np.asarray(sizes, np.int32), temperature=f32(temps),
             staleness=f32(stales), level_weights=f32(weights),
             score_weights=f32(w_score), staleness_weights=f32(w_stale),
             next_idx=np.asarray(next_idx, np.int32))
  _common.write(
      'ued', out, args=args, repo='DramaCow/jaxued', files=FILES,
      what=('LevelSampler (rank prioritisation) level, score and staleness '
            'weights of constructed buffers (prefix-filled, full, tied '
            'scores, all-zero staleness) and the slot an insert takes'),
      packages=('numpy', 'jax', 'jaxued'),
      notes=('commit 0824b4b, the PyPI 0.0.1 release; the installed '
             'jaxued==0.0.1 runs (its level_sampler.py checked equal to '
             'the checkout)'))


if __name__ == '__main__':
  main()
