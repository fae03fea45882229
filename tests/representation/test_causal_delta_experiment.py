"""experiments/causal_delta.py: claim logic and controls on synthetic
records, config errors, the smoke run, the default run (slow)."""

import json
import pathlib

import numpy as np
import pytest

from configs import causal_delta as cde_config
from experiments import causal_delta as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import ROOT, find_claim, smoke_summary

S = 5


def _rec(id_acc, ood_acc, cos_opp=-0.9, cos_non=0.0):
  full = lambda v: np.full(S, float(v))
  return {'id_acc': full(id_acc), 'ood_acc': full(ood_acc),
          'cos_opposing': full(cos_opp), 'cos_non_opposing': full(cos_non),
          'mean_deltas': np.zeros((S, 5, 4))}


def _records(gain, id_gap=0.0, cos_opp=-0.9):
  res = {'concat': _rec(0.95, 0.55), 'delta': _rec(0.95, 0.55 + gain),
         'cde': _rec(0.95 - id_gap, 0.55 + gain, cos_opp),
         'cde_patch': _rec(0.9, 0.6)}
  untrained = {m: _rec(0.2, 0.2, -0.6, -0.1) for m in res}
  return cde_config.get_config(), res, untrained


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  claims = exp.evaluate_claims(*_records(gain=0.1))
  assert len(claims) == 3
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  claims = exp.evaluate_claims(*_records(gain=0.0, id_gap=0.05,
                                         cos_opp=0.2))
  assert not any(c.holds for c in claims), claims


def test_controls_pass_when_they_should():
  cfg, res, untrained = _records(gain=0.1)
  res['cde']['cos_non_opposing'][:] = -0.8    # every pair anti-parallel
  res['cde']['id_acc'][:] = 0.95 + 0.2        # the gain is not OOD-specific
  untrained = {m: _rec(0.95, 0.2) for m in res}  # chance = trained
  claims = exp.evaluate_claims(cfg, res, untrained)
  assert all(c.control.endswith('(passes)') for c in claims), claims


def test_config_errors_name_the_field():
  c = cde_config.get_config('smoke')
  c.model.top_k = 100
  with pytest.raises(cfg_lib.ConfigError, match='model.top_k'):
    exp.EXPERIMENT.validate(c)
  c = cde_config.get_config('smoke')
  c.model.patch_size = 5
  with pytest.raises(cfg_lib.ConfigError, match='model.patch_size'):
    exp.EXPERIMENT.validate(c)
  c = cde_config.get_config('smoke')
  c.models = ('concat', 'concat')
  with pytest.raises(cfg_lib.ConfigError, match='models'):
    exp.EXPERIMENT.validate(c)
  c = cde_config.get_config('smoke')
  c.data.spurious = 1.5
  with pytest.raises(cfg_lib.ConfigError, match='data.spurious'):
    exp.EXPERIMENT.validate(c)
  with pytest.raises(ValueError, match='Unknown variant'):
    cde_config.get_config('big')


def test_smoke_run_records_every_score_and_claim():
  s = smoke_summary('causal_delta')
  cfg = cde_config.get_config('smoke')
  assert len(s['claims']) == 3
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for m in cfg.models:
    for k in ('id_acc', 'ood_acc', 'untrained_id_acc'):
      v = s['metrics'][f'{k}/{m}']['per_seed']
      assert len(v) == cfg.num_seeds and all(0 <= x <= 1 for x in v), (k, m)
  assert s['data']['ood_pairs'] == 25
  assert s['data']['style_equals_action_train'] > 0.8


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/causal_delta/default/summary.json."""
  return exp.EXPERIMENT.execute(cde_config.get_config(),
                                tmp_path_factory.mktemp('cde') / 'run')


RECORD = ROOT / 'results' / 'causal_delta' / 'default' / 'summary.json'


def test_the_recorded_default_run_matches_its_claims():
  """results/causal_delta/default/summary.json: the claims' verdicts as
  recorded (the slow tests below rerun them)."""
  s = json.loads(RECORD.read_text())
  assert s['config'] == json.loads(json.dumps(
      cfg_lib.to_dict(cde_config.get_config())))
  assert find_claim(s, 'Under the compositional shift')['holds']
  assert find_claim(s, 'Opposing actions')['holds']
  assert not find_claim(s, 'In distribution')['holds']
  for c in s['claims']:
    assert c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.parametrize('start', ['Under the compositional shift',
                                   'Opposing actions'])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'ID parity does not reproduce at the default size (results at 35c4c53, '
    '5 seeds): ID accuracy concat 0.960, delta 0.969, cde 0.928 (spread '
    '0.041 > 0.01); CE + SupCon (alpha 0.5) + L1 costs cde ~0.03-0.04 ID '
    'accuracy at 2000 steps'))
def test_default_run_id_parity(default_summary):
  c = find_claim(default_summary, 'In distribution')
  assert c['holds'] and c['control'].endswith('(fails)'), c
