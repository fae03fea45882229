"""Front-door learners' back-door stages against EconML (arXiv 2509.22531).

EconML has no front-door estimator, but X -> Z in the md DGP is a back-door
problem given C (U confounds only X and Y), with CATE b(C) = q(1 | 1, C) -
q(1 | 0, C): FD-R's b-stage. On it, with the SAME nuisance models
(sklearn LogisticRegression, fitted on the same two cross-fitting folds),
  * `fd.aipw_pseudo_outcome` regressed on C by `fd.final_stage` (FD-DR's
    X -> Z term and final stage) matches `econml.dr.DRLearner` with a linear
    final model;
  * `fd.r_stage` on [1, zscore(C)] (FD-R's b-stage R-loss) matches
    `econml.dml.LinearDML` (R-learner, linear final stage).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.causal import frontdoor as fd

econml = pytest.importorskip('econml')
from econml.dml import LinearDML  # pylint: disable=g-import-not-at-top,wrong-import-position
from econml.dr import DRLearner  # pylint: disable=g-import-not-at-top,wrong-import-position
from sklearn.base import clone  # pylint: disable=g-import-not-at-top,wrong-import-position
from sklearn.linear_model import LinearRegression, LogisticRegression  # pylint: disable=g-import-not-at-top,wrong-import-position

# float32 (ours) vs float64 (EconML) final stages on identical nuisances:
# measured max |difference| 8e-8 (DR) and 1e-7 (R), with |b(C)| ~ 0.1-0.4.
ATOL = 1e-5


@pytest.fixture(scope='module')
def backdoor():
  """X -> Z of the md DGP (n = 4000, d = 4), two fixed folds, and the
  cross-fitted nuisances e(C), E[Z | X = x, C], P(Z = 1 | C) of the models
  EconML is given."""
  data = fd.simulate(jax.random.key(11), 4000, 4, 'md')
  c, x, z = (np.asarray(a, np.float64) for a in (data.c, data.x, data.z))
  perm = np.random.default_rng(0).permutation(len(x))
  half = len(x) // 2
  folds = [(perm[:half], perm[half:]), (perm[half:], perm[:half])]
  model = LogisticRegression()
  e1, mu1, mu0, m_z = (np.zeros(len(x)) for _ in range(4))
  for tr, te in folds:
    e1[te] = clone(model).fit(c[tr], x[tr]).predict_proba(c[te])[:, 1]
    mu = clone(model).fit(np.column_stack([c[tr], x[tr]]), z[tr])
    mu1[te], mu0[te] = (mu.predict_proba(np.column_stack(
        [c[te], np.full(len(te), v)]))[:, 1] for v in (1.0, 0.0))
    m_z[te] = clone(model).fit(c[tr], z[tr]).predict_proba(c[te])[:, 1]
  b_true = np.asarray(fd.q1(data.params, data.c, 1.0)
                      - fd.q1(data.params, data.c, 0.0))
  return dict(c=c, x=x, z=z, folds=folds, model=model, e1=e1, mu1=mu1,
              mu0=mu0, m_z=m_z, b_true=b_true)


# DRLearner hands its classifier a column-vector outcome.
@pytest.mark.filterwarnings('ignore:A column-vector y was passed')
def test_dr_stage_matches_econml_drlearner(backdoor):
  bd = backdoor
  est = DRLearner(model_propensity=bd['model'], model_regression=bd['model'],
                  model_final=LinearRegression(), discrete_outcome=True,
                  cv=bd['folds'])
  est.fit(bd['z'], bd['x'], X=bd['c'])
  theirs = est.effect(bd['c']).ravel()
  f32 = lambda k: jnp.asarray(bd[k], jnp.float32)
  # DRLearner clips propensities to [1e-6, 1 - 1e-6], as clip_weight does.
  psi = fd.aipw_pseudo_outcome(f32('x'), f32('z'), f32('mu1'), f32('mu0'),
                               fd.clip_weight(f32('e1')))
  ours = np.asarray(fd.final_stage(f32('c'), psi))
  np.testing.assert_allclose(ours, theirs, atol=ATOL)
  assert fd.rmse(ours, bd['b_true']) < 0.06   # 0.040: both estimate b(C)


def test_r_stage_matches_econml_linear_dml(backdoor):
  bd = backdoor
  est = LinearDML(model_y=bd['model'], model_t=bd['model'],
                  discrete_outcome=True, discrete_treatment=True,
                  cv=bd['folds'], random_state=0)
  est.fit(bd['z'], bd['x'], X=bd['c'])
  theirs = est.effect(bd['c']).ravel()
  f32 = lambda k: jnp.asarray(bd[k], jnp.float32)
  feats = fd.linear_features(f32('c'), fd.zscore_stats(f32('c')))
  w_b = fd.r_stage(feats, f32('z') - f32('m_z'), f32('x') - f32('e1'))
  ours = np.asarray(feats @ w_b)
  np.testing.assert_allclose(ours, theirs, atol=ATOL)
  assert fd.rmse(ours, bd['b_true']) < 0.06   # 0.039
