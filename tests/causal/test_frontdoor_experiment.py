"""experiments/frontdoor.py: claim logic and controls, the smoke run."""

import numpy as np
import pytest

from configs import frontdoor as fd_config
from experiments import frontdoor as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import smoke_summary, find_claim as _claim


def _tables(cfg, pi, dr, r, pi0, dr0, r0, k_dr, k_r):
  """Synthetic [points, seeds, estimators] tables with the given means
  (3 seeds)."""
  jit = np.array([-0.01, 0.0, 0.01])[None, :]
  def tab(cols):
    return np.stack([np.asarray(c, float)[:, None] + jit for c in cols], -1)
  return {
      'n': tab([pi, dr, r, r]),
      'n_delta0': tab([pi0, dr0, r0, r0]),
      'delta': tab([[0.3] * len(cfg.delta_grid)] * 4),
      'kappa': tab([[0.2] * len(cfg.kappa_grid), k_dr, k_r, k_r]),
  }


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  cfg = fd_config.get_config()
  ns = np.asarray(cfg.n_grid, float)
  t = _tables(cfg, pi=0.5 * ns**-0.05, dr=3.0 * ns**-0.5, r=2.5 * ns**-0.45,
              pi0=0.5 * ns**-0.5, dr0=3.0 * ns**-0.5, r0=3.0 * ns**-0.5,
              k_dr=[0.3, 0.4, 0.5, 0.6, 0.8], k_r=[0.35, 0.4, 0.45, 0.5, 0.5])
  claims = exp.evaluate_claims(cfg, t)
  assert len(claims) == 3
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_when_the_plug_in_wins():
  cfg = fd_config.get_config()
  ns = np.asarray(cfg.n_grid, float)
  t = _tables(cfg, pi=0.5 * ns**-0.5, dr=3.0 * ns**-0.3, r=3.0 * ns**-0.3,
              pi0=0.5 * ns**-0.5, dr0=3.0 * ns**-0.5, r0=3.0 * ns**-0.5,
              k_dr=[0.3] * 5, k_r=[0.9] * 5)
  assert not any(c.holds for c in exp.evaluate_claims(cfg, t))


def test_config_errors_name_the_field():
  c = fd_config.get_config('smoke')
  c.claim_ns = (600, 5000)
  with pytest.raises(cfg_lib.ConfigError, match='claim_ns'):
    exp.EXPERIMENT.validate(c)


def test_unknown_nuisance_learner_is_a_one_line_error():
  c = fd_config.get_config('smoke')
  c.nuisance = 'xgboost'
  with pytest.raises(cfg_lib.ConfigError,
                     match=r"nuisance='xgboost'.*'linear', 'xgb', 'mlp'"):
    exp.EXPERIMENT.validate(c)


def test_paper_variant_uses_the_references_xgboost_nuisances():
  assert fd_config.get_config('paper').nuisance == 'xgb'
  assert fd_config.get_config().nuisance == 'linear'


def test_smoke_run_has_every_setting_per_replication():
  s = smoke_summary('frontdoor')
  cfg = fd_config.get_config('smoke')
  names = [x[0] for rows in exp.settings(cfg).values() for x in rows]
  for name in names:
    for k in exp.ESTIMATORS:
      v = s['metrics'][f'rmse_{name}/{k}']['per_seed']
      assert len(v) == cfg.num_seeds and len(set(v)) == cfg.num_seeds
  assert len(s['claims']) == 3
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run (~2 min, 5 replications); only the slow tests use it.
  Its record: results/frontdoor/default/summary.json."""
  return exp.EXPERIMENT.execute(fd_config.get_config(),
                                tmp_path_factory.mktemp('frontdoor') / 'run')


@pytest.mark.slow
def test_default_run_debiased_learners_beat_the_plug_in(default_summary):
  # Measured (806f9cb, 5 replications): delta 0.5, n = 2500 .. 20000:
  # FD-PI 0.347 / 0.317 / 0.291 / 0.266, FD-DR 0.216 / 0.146 / 0.101 / 0.080,
  # FD-R 0.169 / 0.135 / 0.110 / 0.092; slopes DR -0.484, PI -0.127, R
  # -0.293; at delta 0 the plug-in wins (0.045 .. 0.020): the control fails.
  for start in ('With structural nuisance noise', 'Rates at delta'):
    c = _claim(default_summary, start)
    assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'weak overlap with linear / logistic nuisances (806f9cb, n = 5000, '
    'delta 0): FD-R 0.152 / 0.289 / 0.406 / 0.448 / 0.552 vs FD-DR 0.147 / '
    '0.255 / 0.289 / 0.315 / 0.333 at kappa 2 .. 10: FD-R degrades faster'))
def test_default_run_fd_r_is_most_stable_under_weak_overlap(default_summary):
  assert _claim(default_summary, 'Weak overlap')['holds']
