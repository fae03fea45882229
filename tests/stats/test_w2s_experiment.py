"""experiments/w2s.py: claim logic and controls, config errors, the smoke
run."""

import numpy as np
import pytest

from configs import w2s as w2s_config
from experiments import w2s as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import smoke_summary, find_claim as _claim

S = 3


def _theory(cfg, student_fn, control_fn, align_gain, control_gain):
  """Synthetic [points, seeds, keys] tables: er_student = student_fn(eta_l,
  eta_u), teacher 1.0, closed form = simulation x 1.05, quoted x 1.6."""
  t = cfg.theory
  pts = exp.theory_points(t)
  jit = 1 + np.array([-0.01, 0.0, 0.01])[None, :]

  def table(rows):
    rows = np.asarray(rows, float)                      # [points, 2]
    tea, stu = rows[:, :1] * jit, rows[:, 1:] * jit
    return np.stack([tea, stu, tea * 1.05, stu * 1.05, tea * 1.6, stu * 1.6],
                    -1)

  return {
      'eta': table([(1.0, student_fn(el, eu)) for el, eu, *_ in pts['eta']]),
      'eta_control': table([(1.0, control_fn(el, eu))
                            for el, eu, *_ in pts['eta_control']]),
      'align': table([(1.0, 1.0 - gn) for gn in align_gain]),
      'align_control': table([(1.0, 1.0 - gn) for gn in control_gain]),
  }


def _digits(cfg, w2s_acc, enh_acc, rand_acc):
  out = {}
  for name, *_ in exp.settings(cfg.digits):
    acc = np.zeros((cfg.num_seeds, len(exp.HEADS), exp.NUM_GROUPS))
    for i, v in enumerate((0.6, w2s_acc, enh_acc, rand_acc, 0.9)):
      acc[:, i] = np.asarray(v, float).reshape(-1, 1)
    grid = np.repeat(acc[:, 2:3], len(exp.grid(cfg.enhanced)), axis=1)
    out[name] = {'group_acc': acc, 'grid_acc': grid,
                 'pseudo_acc': np.full(cfg.num_seeds, 0.7),
                 'subset_minority': np.full(cfg.num_seeds, 0.3)}
  return out


def _shift(el, eu):
  return 0.1 + (eu - el)**2


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  cfg = w2s_config.get_config()
  # The control student's risk grows with eta_u from 0: argmin 0, not eta_l.
  theory = _theory(cfg, _shift, lambda el, eu: 0.1 + eu,
                   align_gain=[0.5, 0.45, 0.3], control_gain=[0.5, 0.5, 0.5])
  seeds = cfg.num_seeds
  w2s_acc = 0.7 + 0.01 * np.arange(seeds)
  digits = _digits(cfg, w2s_acc, w2s_acc + 0.02,
                   w2s_acc - 0.01 * (np.arange(seeds) % 2))
  claims = exp.evaluate_claims(cfg, theory, digits)
  assert len(claims) == 5
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  cfg = w2s_config.get_config()
  flat = lambda el, eu: 0.2 - 0.1 * eu      # lowest at eta_u = 0.5
  theory = _theory(cfg, flat, flat, align_gain=[0.3, 0.4, 0.5],
                   control_gain=[0.3, 0.4, 0.5])
  theory['eta'][..., 2:4] *= 2.0            # closed form 2x off
  w2s_acc = np.full(cfg.num_seeds, 0.7)
  claims = exp.evaluate_claims(cfg, theory,
                               _digits(cfg, w2s_acc, w2s_acc - 0.01, w2s_acc))
  assert not any(c.holds for c in claims), claims


def test_config_errors_name_the_field():
  c = w2s_config.get_config('smoke')
  c.theory.n = 16
  with pytest.raises(cfg_lib.ConfigError, match='theory.n'):
    exp.EXPERIMENT.validate(c)
  c = w2s_config.get_config('smoke')
  c.enhanced.labels = 'oracle'
  with pytest.raises(cfg_lib.ConfigError, match='enhanced.labels'):
    exp.EXPERIMENT.validate(c)


def test_smoke_run_records_every_point_and_claim():
  s = smoke_summary('w2s')
  cfg = w2s_config.get_config('smoke')
  assert len(s['claims']) == 5
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for name, *_ in exp.settings(cfg.digits):
    for h in exp.HEADS:
      v = s['metrics'][f'digits_{name}/acc_{h}']['per_seed']
      assert len(v) == cfg.num_seeds and all(0 <= x <= 1 for x in v)
  t = cfg.theory
  for el in t.eta_ls:
    for eu in t.eta_us:
      tag = f'l{el:g}_u{eu:g}'.replace('.', 'p')
      v = s['metrics'][f'eta/{tag}/er_student']['per_seed']
      assert len(set(v)) == cfg.num_seeds and min(v) > 0


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run (a few minutes); only the slow tests use it. Its
  record: results/w2s/default/summary.json."""
  return exp.EXPERIMENT.execute(w2s_config.get_config(),
                                tmp_path_factory.mktemp('w2s') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('start', ['The student\'s risk is lowest',
                                   'The student\'s risk rises',
                                   'The W2S gain falls',
                                   'The simulated risks match'])
def test_default_run_theory_claims(default_summary, start):
  # Measured (default config at 023b0e4, 5 seeds, 89 s): argmin eta_u =
  # 0.1 / 0.3 for eta_l = 0.1 / 0.3 (control ||mu_S|| = 4: 0 / 0); far-end
  # rise +105% / +23%; gain 0.0552 / 0.0509 / 0.0416 at align 0 / 0.5 / 0.9
  # (control flat 0.0552); max |sim / closed form - 1| = 0.052 (quoted limit
  # 0.428).
  c = _claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'Enhanced-W2S at a-priori p = 0.5, q = 0.7, student labels '
    '(default config at 023b0e4, 5 seeds): beats vanilla W2S in 4/5 seeds at '
    '(eta_l, eta_u) = (0.05, 0.5) (balanced accuracy W2S 0.556 -> 0.562) but '
    '1/5 at (0.5, 0.05) (0.830 -> 0.826); retraining on a random subset of the '
    'same size wins 4/5 and 5/5: the gain is GCE self-training, not the '
    'ranking'))
def test_default_run_enhanced_w2s_beats_vanilla(default_summary):
  assert _claim(default_summary, 'Enhanced-W2S')['holds']
