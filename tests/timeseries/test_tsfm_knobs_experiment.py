"""experiments/tsfm_knobs.py: claim logic and controls on synthetic
metrics, config errors, the real series, the smoke run."""

import numpy as np
import pytest

from configs import tsfm_knobs as tsfm_config
from experiments import tsfm_knobs as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import find_claim, smoke_summary

S = 3


def _metrics(cfg, short_ratio, long_ratio, cos, shrink):
  """Per-seed metrics of the shape `run` records: MASE by period bin for
  the patch knob, band cosines, E|y_hat| / a."""
  last = len(cfg.eval.period_edges) - 2
  rng = np.random.default_rng(0)
  jitter = lambda v: v * (1 + 0.02 * rng.standard_normal(S))
  m = {'mase_period0/small': jitter(0.2),
       'mase_period0/large': jitter(0.2 * short_ratio),
       f'mase_period{last}/small': jitter(1.0),
       f'mase_period{last}/large': jitter(long_ratio)}
  same, cross = cos
  for name in ('base', 'untrained', 'raw_patches', 'quantised',
               'meanabs_base'):
    m[f'cos_same/{name}'] = jitter(same)
    m[f'cos_cross/{name}'] = jitter(cross)
  m['stable_rank/base'] = jitter(2.0)
  mse, med, ce_sample, ce_mean = shrink
  m.update({'shrink_point/base': jitter(mse),
            'shrink_point/pinball': jitter(med),
            'shrink_point/quantised': jitter(mse),
            'shrink_sample/ce': jitter(ce_sample),
            'shrink_point/ce': jitter(ce_mean)})
  return m


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  cfg = tsfm_config.get_config()
  m = _metrics(cfg, 2.0, 1.0, (0.6, 0.1), (0.05, 0.1, 1.0, 0.05))
  claims = exp.evaluate_claims(cfg, m, shuffled=(0.3, 0.3))
  assert len(claims) == 3
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  cfg = tsfm_config.get_config()
  # no frequency bias, no band structure, no shrinkage / collapsed samples
  for m in (_metrics(cfg, 1.0, 1.0, (0.3, 0.3), (0.9, 0.9, 0.2, 0.9)),
            _metrics(cfg, 2.0, 2.0, (0.3, 0.29), (0.05, 0.9, 1.0, 0.1))):
    claims = exp.evaluate_claims(cfg, m, shuffled=(0.3, 0.3))
    assert sum(c.holds for c in claims) == 0, claims


def test_config_errors_name_the_field():
  c = tsfm_config.get_config('smoke')
  c.model.patch_base = 5
  with pytest.raises(cfg_lib.ConfigError, match='model.patch_base'):
    exp.EXPERIMENT.validate(c)
  c = tsfm_config.get_config('smoke')
  c.eval.band_periods = (4.0, 8.0, 6.0, 16.0)
  with pytest.raises(cfg_lib.ConfigError, match='eval.band_periods'):
    exp.EXPERIMENT.validate(c)
  c = tsfm_config.get_config('smoke')
  c.model.positions = 'alibi'
  with pytest.raises(cfg_lib.ConfigError, match='model.positions'):
    exp.EXPERIMENT.validate(c)


def test_real_series_load_offline_and_window():
  real = exp.load_real_series(('sunspots', 'co2', 'nile'))
  assert {len(v) for v in real.values()} == {309, 2284, 100}
  assert all(np.all(np.isfinite(v)) for v in real.values())
  w = exp.real_windows(real['sunspots'], 128, 32, 4)
  assert w.shape == (4, 160)
  np.testing.assert_array_equal(w[0], real['sunspots'][-160:])
  np.testing.assert_array_equal(w[1], real['sunspots'][-192:-32])
  nile = exp.real_windows(real['nile'], 128, 32, 4)
  assert nile.shape == (1, 160)
  np.testing.assert_array_equal(nile[0, -100:], real['nile'])
  assert np.all(nile[0, :60] == real['nile'][0])


def test_variants_change_one_knob_each():
  v = exp.model_variants(tsfm_config.get_config())
  knobs = ('patch', 'norm', 'embed', 'loss')
  diff = lambda a, b: [k for k in knobs if getattr(v[a], k) != getattr(v[b],
                                                                       k)]
  for name in ('small', 'large'):
    assert diff(name, 'base') == ['patch']
  for name in ('pinball', 'ce'):
    assert diff(name, 'base') == ['loss']
  for role in ('small', 'base', 'large'):
    assert diff(f'meanabs_{role}', role) == ['norm']
  assert diff('quantised', 'meanabs_base') == ['embed']


def test_smoke_run_records_every_claim_and_metric():
  s = smoke_summary('tsfm_knobs')
  cfg = tsfm_config.get_config('smoke')
  assert len(s['claims']) == 3
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for name in exp.VARIANTS:
    for k in ('mase_synth', 'crps_synth', 'shrink_point', 'outlier_dev',
              'mase_sunspots', 'crps_co2', 'mase_nile', 'cos_same'):
      v = s['metrics'][f'{k}/{name}']['per_seed']
      assert len(v) == cfg.num_seeds and all(np.isfinite(v)), (k, name)
  assert set(s['outlier_interaction']) >= {'k8_zscore', 'k8_meanabs'}


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run (~7 min); only the slow tests use it. Its record:
  results/tsfm_knobs/default/summary.json."""
  return exp.EXPERIMENT.execute(tsfm_config.get_config(),
                                tmp_path_factory.mktemp('tsfm_knobs') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('start', ['Patch embeddings of disjoint',
                                   'Regression to the mean'])
def test_default_run_claims(default_summary, start):
  # Measured (default config at 023b0e4, 3 seeds, 463 s): band |cos| cross /
  # same 0.290 (shuffled-label control 1.011; untrained 0.340, raw patches
  # 0.252); E|y_hat| / a MSE 0.109, median 0.082, CE samples 1.011 (the CE
  # head's mean, the control, 0.062).
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'default config at 023b0e4 (3 seeds, 1500 steps, batch 64): MASE(k=32) '
    '/ MASE(k=4) on periods 4-8 is 1.051 (0.826 vs 0.785; k=16 0.545), not '
    '>= 1.5, while on periods 64-128 it is 0.596 (2.710 vs 4.550): k=4 is '
    'the slowest learner at every period but the shortest (32 tokens per '
    'context), and neither k=32 nor k=4 learns periods 4-8 well; '
    'seed-noise control 1.065. At 4000 steps (k=32 and k=4 only) the '
    'ratio is 0.75 (0.465 vs 0.624): more training moves it away from 1.5'))
def test_default_run_frequency_bias(default_summary):
  c = find_claim(default_summary, 'Patch size sets a frequency bias')
  assert c['holds'] and c['control'].endswith('(fails)'), c
