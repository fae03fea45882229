"""Front-door back-door stages fixture: EconML's DRLearner and LinearDML.

EconML has no front-door estimator, but FD-R's b-stage (X -> Z given C) and
FD-DR's X -> Z term are back-door problems. On one drawn here (covariates C
~ N(0, I_4), n = 2000; binary X with P(X = 1 | C) = sigmoid(C a + a0);
binary Z with P(Z = 1 | X, C) = sigmoid(b0 + C b + X (g0 + C g)), so the
CATE b(C) = P(Z = 1 | 1, C) - P(Z = 1 | 0, C) varies with C), with two
fixed cross-fitting folds and sklearn `LogisticRegression()` nuisances:

* `econml.dr.DRLearner(discrete_outcome=True, model_final=LinearRegression())`
  fitted with `cache_values=True`: the cross-fitted propensity e(C) and
  outcome regressions mu_x(C) = P(Z = 1 | X = x, C) of its own per-fold
  models (`models_propensity`, `models_regression`, each predicting its
  held-out fold), its DR pseudo-outcomes (the cached nuisances, Y_pred[:, 1]
  - Y_pred[:, 0]) and `effect(C)`;
* `econml.dml.LinearDML(discrete_outcome=True, discrete_treatment=True)`
  with `cache_values=True`: its residuals Z - m_Z(C), X - e(C) (the cached
  nuisances), `coef_`, `intercept_` and `effect(C)`.

Per-sample arrays are stored in float32 (what ours computes in; rounding
6e-8 relative), the coefficients in float64. EconML runs as the installed
package (it has compiled extensions), pip econml==0.17.0; the script checks
that the Python files listed in FILES equal the checkout's (--ref, tag
v0.17.0, whose commit the fixture records).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

SEED = 2509
N, D = 2000, 4
FILES = ['econml/dr/_drlearner.py', 'econml/dml/dml.py',
         'econml/dml/_rlearner.py', 'econml/_ortho_learner.py',
         'econml/_cate_estimator.py', 'econml/utilities.py',
         'econml/sklearn_extensions/linear_model.py']


def main():
  args = _common.cli(__doc__)
  warnings.simplefilter('ignore')
  import econml
  from econml.dml import LinearDML
  from econml.dr import DRLearner
  from sklearn.linear_model import LinearRegression, LogisticRegression
  installed = Path(econml.__file__).resolve().parent.parent
  for f in FILES:
    if (installed / f).read_bytes() != (args.ref / f).read_bytes():
      raise SystemExit(f'{f}: the installed econml differs from --ref')

  rng = np.random.default_rng(SEED)
  sig = lambda t: 1 / (1 + np.exp(-t))
  # float32 covariates (what ours is fed), run by EconML in float64
  c = rng.normal(size=(N, D)).astype(np.float32).astype(np.float64)
  a, b, g = (0.6 * rng.normal(size=D) for _ in range(3))
  x = (rng.random(N) < sig(0.2 + c @ a)).astype(np.float64)
  logit_z = lambda xx: -0.3 + c @ b + xx * (0.8 + c @ g)
  z = (rng.random(N) < sig(logit_z(x))).astype(np.float64)
  b_true = sig(logit_z(1.0)) - sig(logit_z(0.0))
  perm = rng.permutation(N)
  half = N // 2
  folds = [(perm[:half], perm[half:]), (perm[half:], perm[:half])]

  dr = DRLearner(model_propensity=LogisticRegression(),
                 model_regression=LogisticRegression(),
                 model_final=LinearRegression(), discrete_outcome=True,
                 cv=folds)
  dr.fit(z, x, X=c, cache_values=True)
  y_pred = dr._cached_values.nuisances[0].reshape(N, 2)
  e1, mu1, mu0 = (np.zeros(N) for _ in range(3))
  for k, (_, te) in enumerate(folds):
    e1[te] = dr.models_propensity[0][k].predict_proba(c[te])[:, 1]
    reg = dr.models_regression[0][k]
    mu1[te], mu0[te] = (reg.predict_proba(np.column_stack(
        [c[te], np.full(len(te), v)]))[:, 1] for v in (1.0, 0.0))

  dml = LinearDML(model_y=LogisticRegression(), model_t=LogisticRegression(),
                  discrete_outcome=True, discrete_treatment=True, cv=folds,
                  random_state=0)
  dml.fit(z, x, X=c, cache_values=True)
  z_res, x_res = (np.asarray(v).reshape(N)
                  for v in dml._cached_values.nuisances)

  f32 = lambda v: np.asarray(v, np.float32)
  out = dict(
      c=f32(c), x=x.astype(np.uint8), z=z.astype(np.uint8),
      b_true=f32(b_true),
      fold_test=np.stack([te for _, te in folds]).astype(np.int16),
      e1=f32(e1), mu1=f32(mu1), mu0=f32(mu0),
      dr_pseudo=f32(y_pred[:, 1] - y_pred[:, 0]),
      dr_effect=f32(dr.effect(c).ravel()),
      dml_z_res=f32(z_res), dml_x_res=f32(x_res),
      dml_coef=np.asarray(dml.coef_, np.float64).ravel(),
      dml_intercept=np.float64(np.asarray(dml.intercept_).ravel()[0]),
      dml_effect=f32(dml.effect(c).ravel()))
  _common.write(
      'frontdoor_econml', out, args=args, repo='py-why/EconML', files=FILES,
      what=('DRLearner (discrete outcome, linear final) and LinearDML on a '
            'back-door problem with two fixed folds and LogisticRegression '
            'nuisances: the cross-fitted nuisances, DR pseudo-outcomes, '
            'residuals, final-stage coefficients and effects'),
      packages=('numpy', 'scikit-learn', 'econml'),
      notes='tag v0.17.0; the installed econml==0.17.0 runs (its Python '
            'files checked equal to the checkout)')


if __name__ == '__main__':
  main()
