"""experiments/arbuffer.py: claim logic and controls on synthetic records,
config errors, the smoke run, the default run (slow)."""

import numpy as np
import pytest

from configs import arbuffer as arbuffer_config
from experiments import arbuffer as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import find_claim, smoke_summary

S = 3


def _nll(buffer, reencode, marginal, wrong, gap=1e-6):
  full = lambda v: np.full(S, float(v))
  return {'buffer': full(buffer), 'reencode': full(reencode),
          'marginal': full(marginal), 'buffer_wrong_y': full(wrong),
          'gp_joint': full(buffer - 0.1), 'gp_marginal': full(marginal - 0.1),
          'exact_gap': full(gap), 'leak_gap': full(0.3)}


def _records(close, speedup, perm_ctx=1e-7, gap=1e-6):
  cfg = arbuffer_config.get_config()
  d = 0.01 if close else 0.2
  gp = {n: _nll(0.5 + d, 0.5, 0.8, 1.1, gap) for n in cfg.eval.context_sizes}
  dia = {n: _nll(1.2 + d, 1.2, 1.3, 1.5)
         for n in cfg.eval.diabetes_context_sizes}
  speed = {'buffer_s': 0.01, 'reencode_s': 0.01 * speedup,
           'nocache_s': 0.011 * speedup, 'buffer_calls': 5,
           'reencode_calls': 5, 'buffer_flops': 1e8,
           'reencode_flops': 1e8 * speedup * 3, 'nocache_flops': 3e8}
  perm = {'context': perm_ctx, 'context_logpdf': perm_ctx * 3,
          'buffer': 0.05}
  return cfg, gp, dia, speed, perm


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  claims = exp.evaluate_claims(*_records(close=True, speedup=12.0))
  assert len(claims) == 5
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  claims = exp.evaluate_claims(*_records(close=False, speedup=1.5,
                                         perm_ctx=1e-3, gap=1e-3))
  assert not any(c.holds for c in claims), claims


def test_config_errors_name_the_field():
  c = arbuffer_config.get_config('smoke')
  c.data.num_target = 2 * c.model.buffer_size + 1
  with pytest.raises(cfg_lib.ConfigError, match='data.num_target'):
    exp.EXPERIMENT.validate(c)
  c = arbuffer_config.get_config('smoke')
  c.eval.num_target = c.model.buffer_size + 1
  with pytest.raises(cfg_lib.ConfigError, match='eval.num_target'):
    exp.EXPERIMENT.validate(c)


def test_smoke_run_records_every_score_and_claim():
  s = smoke_summary('arbuffer')
  cfg = arbuffer_config.get_config('smoke')
  assert len(s['claims']) == 5
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for n in cfg.eval.context_sizes:
    for k in exp.METHODS:
      v = s['metrics'][f'nll_nc{n}/{k}']['per_seed']
      assert len(v) == cfg.num_seeds and all(np.isfinite(v)), k
  # exactness holds at any weights
  assert find_claim(s, 'The one-pass teacher-forced')['holds']
  sp = s['speed']
  assert sp['buffer_flops'] < sp['reencode_flops']


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/arbuffer/default/summary.json."""
  return exp.EXPERIMENT.execute(arbuffer_config.get_config(),
                                tmp_path_factory.mktemp('arbuffer') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('start', ['The one-pass teacher-forced',
                                   'Permuting the context',
                                   'On held-out GP tasks',
                                   'Joint sampling of'])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c
