"""experiments/rwom.py: claim logic and controls on synthetic records, config
errors, the smoke run, the default run (slow)."""

import numpy as np
import pytest

from configs import rwom as rwom_config
from experiments import rwom as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import find_claim, smoke_summary

S = 3


def _records(good: bool):
  cfg = rwom_config.get_config()
  full = lambda v: np.full(S, float(v))
  m = {'probe/next_state/v2': full(0.9 if good else 0.7),
       'probe/alignment/v2': full(0.55),
       'probe/next_state/v1': full(0.99), 'probe/alignment/v1': full(0.97),
       'success/h3/none': full(0.55), 'success/h1/none': full(0.6),
       'success/h3/distractor': full(0.5),
       'success/h3/raw_dense': full(0.6),
       'success/h3/retrieved': full(0.85 if good else 0.6),
       'success/h1/retrieved': full(0.8 if good else 0.65),
       'success/h3/oracle': full(0.95 if good else 0.55),
       'success/h3/retrieved_absolute': full(0.82 if good else 0.61),
       'success/h3/retrieved_random': full(0.05),
       'recall/raw_dense': full(0.4), 'recall/rewrite_dense': full(0.6),
       'recall/raw_rerank': full(0.45),
       'recall/rewrite_rerank': full(0.9 if good else 0.45),
       'recall/rewrite_rerank_untrained': full(0.3)}
  return cfg, m


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  claims = exp.evaluate_claims(*_records(good=True))
  assert len(claims) == 5
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  claims = exp.evaluate_claims(*_records(good=False))
  assert not any(c.holds for c in claims), claims


def test_a_distractor_that_helps_as_much_passes_the_control():
  cfg, m = _records(good=True)
  m['success/h3/distractor'] = m['success/h3/retrieved']
  c = find_claim({'claims': [x.to_json() for x in
                             exp.evaluate_claims(cfg, m)]}, 'Grounding')
  assert c['control'].endswith('(passes)'), c


def test_an_ungrounded_horizon_gain_fails_the_horizon_claim():
  cfg, m = _records(good=True)
  m['success/h1/none'] = np.full(S, 0.3)
  c = exp.evaluate_claims(cfg, m)[2]
  assert not c.holds and c.control.endswith('(passes)'), c


def test_config_errors_name_the_field():
  for field, value in (('train.kind_probs', (0.5, 0.5, 0.5)),
                       ('eval.horizons', (2, 3)), ('app.num_names', 3),
                       ('eval.top_k', 1000)):
    c = rwom_config.get_config('smoke')
    sec, name = field.split('.')
    c[sec][name] = value
    with pytest.raises(cfg_lib.ConfigError, match=field):
      exp.EXPERIMENT.validate(c)


def test_smoke_run_records_every_score_and_claim():
  s = smoke_summary('rwom')
  cfg = rwom_config.get_config('smoke')
  assert len(s['claims']) == 5
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for k, v in s['metrics'].items():
    assert len(v['per_seed']) == cfg.num_seeds and all(
        0.0 <= x <= 1.0 for x in v['per_seed']), k
  assert s['app']['changed_procedures'] >= round(
      cfg.app.drift_fraction * s['app']['num_goals'])


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/rwom/default/summary.json."""
  return exp.EXPERIMENT.execute(rwom_config.get_config(),
                                tmp_path_factory.mktemp('rwom') / 'run')


# Measured (35c4c53, 3 seeds, 199 s). Grounding and listwise held at
# 320d109, before GRPO scored completions at the sampling temperature
# (14b389d): oracle 0.775, retrieved 0.737, none 0.607 (retrieved - none
# +0.130 < 0.15); listwise 0.737 vs absolute 0.807 (-0.070); the per-seed
# spread (retrieved 0.635 .. 0.870) is as large as the margins. Horizons:
# retrieved 0.793 -> 0.737 (-0.057), none 0.570 -> 0.607 (+0.037), neither
# half holds (at 320d109 the grounded half held, +0.030); the v1 prior is
# exact on the 16 unchanged procedures, so longer imagined rollouts help
# there about as much as they mislead on the 11 changed ones.
def _fails(reason):
  return pytest.mark.xfail(strict=True, reason=reason)


@pytest.mark.slow
@pytest.mark.parametrize('start', [
    'Probe:', 'Retrieval:',
    pytest.param('Grounding helps', marks=_fails(
        'retrieved 0.737 vs none 0.607: +0.130 < 0.15 (35c4c53)')),
    pytest.param('Listwise', marks=_fails(
        'listwise 0.737 vs absolute 0.807: -0.070 < +0.01 (35c4c53)')),
    pytest.param('Longer horizons', marks=_fails(
        'h3 - h1: retrieved -0.057 (claim: > 0), none +0.037 (claim: <= 0)')),
])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c
