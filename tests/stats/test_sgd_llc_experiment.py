"""experiments/sgd_llc.py: claim logic and controls on synthetic records,
config errors, the smoke run."""

import types

import numpy as np
import pytest

from configs import sgd_llc as sgd_llc_config
from experiments import sgd_llc as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import find_claim, smoke_summary

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
    exp.EXPERIMENT.validate(c)
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


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run (~2 min); only the slow tests use it. Its record:
  results/sgd_llc/default/summary.json."""
  return exp.EXPERIMENT.execute(sgd_llc_config.get_config(),
                                tmp_path_factory.mktemp('sgd_llc') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('start', ['The LLC estimator recovers d/2',
                                   'The LLC estimator recovers 1/2'])
def test_default_run_llc_claims(default_summary, start):
  # Measured (default config at 35c4c53, 5 seeds, 76 s): regular 5.048
  # (control, rank-5 design: 2.748); product 0.432 (control, regular
  # 2-parameter model: 1.040); DLN (5, 4, 3, 5) rank 2: 9.341 vs Aoyagi's 9.
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
def test_default_run_tempering_claim(default_summary):
  # Measured: held-out KL 0.0207 tempered vs 1.0633 raw, but the control
  # (cluster LLCs in reverse order) also passes (0.0864): the xi found
  # (6.6e-8) flattens every cluster towards uniform, as the SGLD masses are.
  c = find_claim(default_summary, 'Tempering the SGD cluster masses')
  assert c['holds'], c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'two moons, default config at 35c4c53 (64 runs, 5000 + 10000 steps, '
    'lr 0.05, batch 64): late alpha median 0.605 (0.521..0.730), r^2 median '
    '0.963, 0/64 runs sub-diffusive and d_s <= lambda in 0/64: the loss is '
    'still falling at t0 and the weights drift (R ~ tau^1 past tau ~ 1000; '
    'below tau ~ 300 the slope is ~0.35); early-window control alpha 0.716'))
def test_default_run_late_sgd_is_sub_diffusive(default_summary):
  assert find_claim(default_summary, 'Late-stage SGD')['holds']


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'two moons, default config at 35c4c53: mean LLC of the SGD endpoints '
    '6.31 vs 4.86 for the SGLD posterior samples (difference +1.45, 2 s.e. '
    '0.26): SGD sits higher, the opposite of the paper (even vs odd SGD '
    'runs: +0.10)'))
def test_default_run_sgd_llc_below_sgld(default_summary):
  assert find_claim(default_summary, 'SGD solutions sit at lower LLC')['holds']
