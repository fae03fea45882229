"""experiments/sgd_llc.py: claim logic and controls on synthetic records,
config errors, the smoke run."""

import types

import numpy as np
import pytest

from configs import sgd_llc as sgd_llc_config
from experiments import sgd_llc as exp
from iclrjax.core import config as cfg_lib
from iclrjax.core import launch
from tests.conftest import smoke_summary

R = 20


def _fit(alpha, r2):
  return types.SimpleNamespace(alpha=np.asarray(alpha, float),
                               r2=np.asarray(r2, float))


def _records(cfg, calib_scale, late_alpha, sgd_llc, sgld_llc, kls):
  """Synthetic run records: calibration = truth x calib_scale (the rank
  control and the regular 2-parameter model as measured in the pilot)."""
  truth = exp.true_llcs(cfg.llc)
  calib = np.array([[truth[m] * calib_scale for m in exp.MODELS]] * 5)
  calib[:, exp.MODELS.index('rank_deficient')] = 2.4
  calib[:, exp.MODELS.index('regular_2')] = 0.95
  late = _fit(np.full(R, late_alpha), np.full(R, 0.98))
  early = _fit(np.full(R, 0.9), np.full(R, 0.99))
  res = {'sgd': {'llc': np.asarray(sgd_llc, float)},
         'sgld': {'llc': np.asarray(sgld_llc, float)}}
  d_s = 2 * res['sgd']['llc'] * late.alpha
  conc = {'llc_kl_heldout': kls[0], 'raw_kl_heldout': kls[1],
          'reversed_kl_heldout': kls[2], 'llc_xi': 1.3, 'raw_kl': 0.05,
          'full_scan': (np.ones(3), np.array([0.04, 0.02, 0.03])),
          'mass_sgd': np.array([0.7, 0.3]), 'mass_sgld': np.array([0.5, 0.5]),
          'llc_c': np.array([10.0, 14.0])}
  return calib, late, early, d_s, res, conc


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  cfg = sgd_llc_config.get_config()
  rng = np.random.default_rng(0)
  recs = _records(cfg, 1.0, 0.2, 10 + rng.normal(0, 0.5, R),
                  14 + rng.normal(0, 0.5, R), (0.01, 0.05, 0.08))
  claims = exp.evaluate_claims(cfg, *recs)
  assert len(claims) == 5
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  cfg = sgd_llc_config.get_config()
  # the regular count for everything, super-diffusion, SGD above SGLD,
  # tempering worse than raw
  recs = _records(cfg, 1.5, 0.7, np.full(R, 14.0) + np.arange(R) % 2,
                  np.full(R, 10.0) + np.arange(R) % 2, (0.09, 0.05, 0.02))
  claims = exp.evaluate_claims(cfg, *recs)
  assert not any(c.holds for c in claims), claims


def test_config_errors_name_the_field():
  c = sgd_llc_config.get_config('smoke')
  c.llc.rank = c.llc.d
  with pytest.raises(cfg_lib.ConfigError, match='llc.rank'):
    launch.validate(c, exp.EXPERIMENT.full_schema(), exp.check_config)
  c = sgd_llc_config.get_config('smoke')
  c.moons.early_window = c.moons.warmup_steps + 1
  with pytest.raises(cfg_lib.ConfigError, match='moons.early_window'):
    exp.EXPERIMENT.validate(c)


def test_smoke_run_records_every_estimate_and_claim():
  s = smoke_summary('sgd_llc')
  cfg = sgd_llc_config.get_config('smoke')
  assert len(s['claims']) == 5
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for m in exp.MODELS:
    v = s['metrics'][f'llc/{m}']['per_seed']
    assert len(v) == cfg.num_seeds and all(np.isfinite(v))
  for k in ('alpha', 'llc_sgd', 'llc_sgld'):
    v = s['moons_runs'][k]
    assert len(v) == cfg.moons.num_runs and all(np.isfinite(v)), k
  masses = s['clusters']
  assert sum(masses['mass_sgd']) == pytest.approx(1.0, abs=1e-4)
  assert sum(masses['mass_sgld']) == pytest.approx(1.0, abs=1e-4)
