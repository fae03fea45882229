"""Front-door learners' back-door stages against EconML (fixture:
generate/frontdoor_econml.py).

EconML has no front-door estimator, but FD-R's b-stage (X -> Z given C) and
FD-DR's X -> Z term are back-door problems: on one (n = 2000, d = 4, binary
X and Z, two fixed folds, LogisticRegression nuisances), fed EconML's own
cross-fitted nuisances,
  * `fd.aipw_pseudo_outcome` (FD-DR's X -> Z term) gives
    `econml.dr.DRLearner`'s DR pseudo-outcomes (both clip propensities to
    [1e-6, 1 - 1e-6], `fd.clip_weight`; not reached here, e(C) is in
    [0.12, 0.91]), and `fd.final_stage` on them its effect with a linear
    final model;
  * `fd.r_stage` on [1, zscore(C)] (FD-R's b-stage R-loss) on LinearDML's
    residuals gives `econml.dml.LinearDML`'s coefficients, intercept and
    effect.
No deliberate differences (ours is a ridge with alpha 1e-6 where EconML
solves least squares: below float32 here).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.causal import frontdoor as fd
from tests.parity import common

PAPER = 'Debiased front-door learners (arXiv 2509.22531)'
FIXTURE = 'frontdoor_econml'
# float32 (ours) vs float64 (EconML) on identical nuisances, relative to
# the quantity's scale (pseudo-outcomes up to ~8, effects 0.1-0.4):
# measured max 1e-6 (pseudo-outcomes of scale 6), 2e-7 (effects), 5e-8
# (coefficients).
TOL = 1e-5


@functools.lru_cache(maxsize=None)
def _fixture():
  return common.load(FIXTURE)[0]


@jax.jit
def _stages(c, x, z, e1, mu1, mu0, z_res, x_res):
  psi = fd.aipw_pseudo_outcome(x, z, mu1, mu0, fd.clip_weight(e1))
  stats = fd.zscore_stats(c)
  feats = fd.linear_features(c, stats)
  w = fd.r_stage(feats, z_res, x_res)
  mu, sd = stats
  # w on [1, (C - mu) / sd] as coefficients on C and an intercept
  coef = w[1:] / sd
  intercept = w[0] - jnp.sum(coef * mu)
  return psi, fd.final_stage(c, psi), coef, intercept, feats @ w


@functools.lru_cache(maxsize=None)
def _ours():
  a = _fixture()
  f32 = lambda k: jnp.asarray(a[k], jnp.float32)
  return tuple(np.asarray(v) for v in _stages(
      *(f32(k) for k in ('c', 'x', 'z', 'e1', 'mu1', 'mu0', 'dml_z_res',
                         'dml_x_res'))))


def _scaled(quantity, ours, theirs):
  scale = max(0.1, float(np.max(np.abs(theirs))))
  return common.check(quantity, ours, theirs, TOL * scale)


def checks() -> list[common.Check]:
  a = _fixture()
  psi, dr, coef, intercept, r = _ours()
  return [
      _scaled('DR pseudo-outcome (DRLearner, cross-fitted nuisances)', psi,
              a['dr_pseudo']),
      _scaled('DR-learner effect b(C), linear final stage', dr,
              a['dr_effect']),
      _scaled('R-learner (LinearDML) coefficients on C', coef,
              a['dml_coef']),
      _scaled('R-learner (LinearDML) intercept', intercept,
              a['dml_intercept']),
      _scaled('R-learner (LinearDML) effect b(C)', r, a['dml_effect']),
  ]


def test_matches_reference():
  common.assert_checks(checks())


def test_both_stages_estimate_the_cate():
  """Both learners estimate b(C) = P(Z = 1 | 1, C) - P(Z = 1 | 0, C) of the
  drawn problem (RMSE well below the effect's spread)."""
  a = _fixture()
  _, dr, _, _, r = _ours()
  spread = float(np.std(a['b_true']))
  for est in (dr, r):
    assert float(fd.rmse(est, a['b_true'])) < 0.5 * spread
