"""Front-door CATE fixture from the released FDCATE.py (yonghanjung/FD-CATE).

  python tests/parity/generate/frontdoor.py --ref CHECKOUT [--rmse]

Runs the reference's own functions on its md DGP (n = 1000, d = 4, seed
2027): `fit_folds` (XGBoost nuisances), `tau_naive_oof` (FD-PI),
`tau_fd_dr_oof` (FD-DR) at delta = 0 and 0.5, and
`tau_fd_r_3way_oof_smoothed` (FD-R3, 'direct' g solver) at delta = 0. The
intermediate arrays each estimator computes (the nuisance cache, the
pseudo-outcome psi, the g-stage design and weights, b-hat, g(1, C), g(0, C)
and the final-stage target) are recorded by wrapping the module's own
helpers (`nuisance_cache_on`, `Ridge`, `_ridge_solve`, `new_xgb_regressor`),
so our code can be fed exactly the nuisances theirs used.

--rmse also runs the reference's `run_one_n` (d = 10, XGBoost nuisances,
5 replications, delta 0 and 0.5, n 2500 .. 20000) and writes
fixtures/frontdoor_rmse.json (the RMSE of FD-PI, FD-DR, FD-R3 per setting)
for the comparison with `experiments.frontdoor` (not part of the suite).

Needs numpy, pandas, scikit-learn, xgboost; matplotlib is stubbed.
"""

import datetime
import json
import platform
import sys
import types

import numpy as np

import _common

REPO = 'yonghanjung/FD-CATE'
N, D, SEED = 1000, 4, 2027


def _import(ref):
  plt = types.ModuleType('matplotlib.pyplot')
  mpl = types.ModuleType('matplotlib')
  mpl.pyplot = plt
  sys.modules.setdefault('matplotlib', mpl)
  sys.modules.setdefault('matplotlib.pyplot', plt)
  _common.add_path(ref)
  import FDCATE  # pylint: disable=g-import-not-at-top
  return FDCATE


class _Recorder:
  """Wraps reference helpers, appending what they were given / returned."""

  def __init__(self, mod):
    self.mod = mod
    self.caches, self.ridge_fits, self.ridge_preds = [], [], []
    self.solves, self.regressor_preds = [], []
    rec = self
    cache_fn, solve_fn, new_reg = (mod.nuisance_cache_on, mod._ridge_solve,  # pylint: disable=protected-access
                                   mod.new_xgb_regressor)

    def cache(nuis, c_eval, x_eval, delta, n_total, rng):
      out = cache_fn(nuis, c_eval, x_eval, delta, n_total, rng)
      rec.caches.append(dict(c=np.array(c_eval), **out))
      return out

    def solve(xmat, y, alpha=1e-6):
      theta = solve_fn(xmat, y, alpha)
      rec.solves.append(dict(xmat=xmat, y=y, alpha=alpha, theta=theta))
      return theta

    class Ridge(mod.Ridge):

      def fit(self, x, y, sample_weight=None):
        rec.ridge_fits.append(dict(x=np.array(x), y=np.array(y)))
        return super().fit(x, y, sample_weight)

      def predict(self, x):
        out = super().predict(x)
        rec.ridge_preds.append(np.array(out))
        return out

    def regressor(seed):
      model = new_reg(seed)
      predict = model.predict

      def recorded(x, *a, **k):
        out = predict(x, *a, **k)
        rec.regressor_preds.append(dict(seed=seed, x=np.array(x), out=out))
        return out

      model.predict = recorded
      return model

    mod.nuisance_cache_on, mod._ridge_solve = cache, solve  # pylint: disable=protected-access
    mod.Ridge, mod.new_xgb_regressor = Ridge, regressor

  def reset(self):
    for v in (self.caches, self.ridge_fits, self.ridge_preds, self.solves,
              self.regressor_preds):
      v.clear()


def _two_fold(mod, rec, data, folds, delta, out, tag):
  """FD-PI and FD-DR on the fitted folds; the caches and psi per fold."""
  c, x, z, y = data.C, data.X, data.Z, data.Y
  rec.reset()
  out[f'{tag}/fd_pi'] = mod.tau_naive_oof(c, x, z, y, folds, delta, None,
                                          None, SEED + 10)
  for k, cache in enumerate(rec.caches):    # FD-PI's own noise draw
    for name in ('e1', 'q1_1c', 'q1_0c', 'm00', 'm01', 'm10', 'm11'):
      out[f'{tag}/pi_fold{k}/{name}'] = cache[name]
  rec.reset()
  out[f'{tag}/fd_dr'], _ = mod.tau_fd_dr_oof(c, x, z, y, folds, delta, None,
                                             None, SEED + 20)
  assert len(rec.caches) == 2 and len(rec.ridge_fits) == 2   # psi on C
  for k, (fold, cache, fit) in enumerate(zip(folds, rec.caches,
                                             rec.ridge_fits)):
    for name in ('e1', 'e1_den', 'q1_xc', 'q1_xc_den', 'q1_1c', 'q1_0c',
                 'm00', 'm01', 'm10', 'm11'):
      out[f'{tag}/fold{k}/{name}'] = cache[name]
    out[f'{tag}/fold{k}/psi'] = fit['y']


def _fd_r3(mod, rec, data, out):
  """FD-R3 at delta = 0 and, per (test fold, permutation), the pieces."""
  c, x, z, y = data.C, data.X, data.Z, data.Y
  rec.reset()
  out['fd_r3'], _ = mod.tau_fd_r_3way_oof_smoothed(
      c, x, z, y, 0.0, None, None, SEED + 40, g_solver='direct',
      swap_average=True)
  # Per call: the nuisances' E[Y | C] Ridge fit, caches on D2 then D3 (each
  # predicting that Ridge), one g solve, b-hat = the b-model's prediction at
  # c3 (seed + 111 + k), then the final Ridge fit and predict.
  assert len(rec.solves) == 6 and len(rec.ridge_fits) == 12
  assert len(rec.ridge_preds) == 18
  rows = {tuple(r): i for i, r in enumerate(np.round(c, 12))}
  index = lambda cc: np.array([rows[tuple(r)] for r in np.round(cc, 12)])
  b_preds = [p for p in rec.regressor_preds
             if 112 <= p['seed'] - (SEED + 40) <= 114]
  assert len(b_preds) == 6
  for j in range(6):
    d2, d3 = rec.caches[2 * j], rec.caches[2 * j + 1]
    solve, fit = rec.solves[j], rec.ridge_fits[2 * j + 1]
    p = f'fd_r3/call{j}'
    out[f'{p}/d2'], out[f'{p}/d3'] = index(d2['c']), index(d3['c'])
    out[f'{p}/q1_xc_d2'], out[f'{p}/e1_d3'] = d2['q1_xc'], d3['e1']
    out[f'{p}/g_rhs'], out[f'{p}/g_theta'] = solve['y'], solve['theta']
    out[f'{p}/g_rz'] = solve['xmat'][:, 0]        # rZ2 * 1 (first feature)
    out[f'{p}/b_hat'] = b_preds[j]['out']
    out[f'{p}/target'], out[f'{p}/pred'] = fit['y'], rec.ridge_preds[3 * j + 2]


def rmse_table(mod) -> dict:
  """The reference's RMSEs on its own DGP (d = 10, XGBoost, 5 replications);
  `run_one_n` as in its `run_three_simulations` (base seeds 6060 at delta 0,
  7070 at delta 0.5)."""
  table = {}
  for delta, base in ((0.0, 6060), (0.5, 7070)):
    for n in (2500, 5000, 10000, 20000):
      pi, dr, r3 = mod.run_one_n(n, 10, R=5, noise_coeff=delta,
                                 base_seed=base)
      table[f'delta={delta}/n={n}'] = dict(
          fd_pi=pi.tolist(), fd_dr=dr.tolist(), fd_r3=r3.tolist())
      print(delta, n, pi.mean(), dr.mean(), r3.mean(), flush=True)
  return table


def main():
  p_args = sys.argv
  do_rmse = '--rmse' in p_args
  if do_rmse:
    sys.argv = [a for a in p_args if a != '--rmse']
  args = _common.cli(__doc__)
  mod = _import(args.ref)
  if do_rmse:
    path = args.out / 'frontdoor_rmse.json'
    path.write_text(json.dumps(dict(
        repo=REPO, commit=_common.commit_of(args.ref),
        command=(f'python tests/parity/generate/frontdoor.py --ref '
                 f'<checkout of {REPO}> --rmse'),
        packages=_common.versions('numpy', 'scikit-learn', 'xgboost'),
        python=platform.python_version(),
        date=datetime.date.today().isoformat(),
        rmse=rmse_table(mod)), indent=1) + '\n')
    print('wrote', path)
    return
  rec = _Recorder(mod)
  data = mod.simulate_fd_data_md(n=N, d=D, seed=SEED)
  folds = mod.fit_folds(data.C, data.X, data.Z, data.Y, SEED)
  out = dict(c=data.C, x=data.X, z=data.Z, y=data.Y, tau=data.tau_true)
  for k, fold in enumerate(folds):
    out[f'fold{k}/test_idx'] = fold.test_idx
  _two_fold(mod, rec, data, folds, 0.0, out, 'delta0')
  _two_fold(mod, rec, data, folds, 0.5, out, 'delta05')
  _fd_r3(mod, rec, data, out)
  # float32 / int32 storage: ours runs in float32; halves the fixture.
  out = {k: np.asarray(v).astype(np.float32 if np.asarray(v).dtype.kind == 'f'
                                 else np.int32) for k, v in out.items()}
  _common.write(
      'frontdoor', out, args=args, repo=REPO, files=['FDCATE.py'],
      what=('FD-PI, the FD-DR pseudo-outcome psi and final stage (delta 0 '
            'and 0.5), FD-R3 g-stage, zeta and final stage on the same data '
            'and fitted XGBoost nuisances'),
      packages=('numpy', 'scikit-learn', 'xgboost', 'pandas'))


if __name__ == '__main__':
  main()
