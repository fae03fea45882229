"""experiments/unicot.py: claim logic and controls on synthetic records,
config errors, the smoke run, the default run (slow)."""

import numpy as np
import pytest

from configs import unicot as unicot_config
from experiments import unicot as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import find_claim, smoke_summary

S = 3
ZERO = ('step/step_t_minus_2', 'step/step_t_minus_1_generation',
        'step/earlier_intermediates', 'summary/intermediates')
LIVE = ('step/state_t_minus_1', 'step/subgoal', 'summary/finals',
        'summary/subgoal')


def _probe(leak):
  p = {f'{k}/max': leak for k in ZERO}
  p.update({f'{k}/min_jit_or_not': 1.0 for k in LIVE})
  return p


def _records(good: bool):
  cfg = unicot_config.get_config()
  full = lambda v: np.full(S, float(v))
  acc = {'short/unicot': full(0.99 if good else 0.9),
         'short/long_chain': full(1.0), 'short/untrained': full(0.0),
         'long/unicot': full(0.7 if good else 0.3),
         'long/long_chain': full(0.3),
         'long/unicot_causal_mask': full(0.05),
         'check/single': full(0.55),
         'check/learned': full(0.65 if good else 0.56),
         'check/random': full(0.54)}
  probe = {'unicot': _probe(0.0 if good else 0.5), 'causal': _probe(2.0)}
  M = cfg.cost.subgoals
  pairs = {f'unicot/M{M}': 1000, f'unicot/M{2 * M}': 2050 if good else 2600,
           f'long_chain/M{M}': 1000, f'long_chain/M{2 * M}': 3600}
  return cfg, acc, probe, pairs


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  claims = exp.evaluate_claims(*_records(good=True))
  assert len(claims) == 5
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  claims = exp.evaluate_claims(*_records(good=False))
  assert not any(c.holds for c in claims), claims


def test_a_blind_checker_that_gains_as_much_passes_the_control():
  cfg, acc, probe, pairs = _records(good=True)
  acc['check/random'] = acc['check/learned']
  c = exp.evaluate_claims(cfg, acc, probe, pairs)[-1]
  assert c.control.endswith('(passes)'), c


def test_config_errors_name_the_field():
  c = unicot_config.get_config('smoke')
  c.train.min_subgoals = c.train.max_subgoals + 1
  with pytest.raises(cfg_lib.ConfigError, match='train.min_subgoals'):
    exp.EXPERIMENT.validate(c)
  c = unicot_config.get_config('smoke')
  c.task.grid = 99
  with pytest.raises(cfg_lib.ConfigError, match='task.grid'):
    exp.EXPERIMENT.validate(c)
  c = unicot_config.get_config('smoke')
  c.eval.short_subgoals = 1
  with pytest.raises(cfg_lib.ConfigError, match='eval.short_subgoals'):
    exp.EXPERIMENT.validate(c)


def test_smoke_run_records_every_score_and_claim():
  s = smoke_summary('unicot')
  cfg = unicot_config.get_config('smoke')
  assert len(s['claims']) == 5
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for k, v in s['metrics'].items():
    assert len(v['per_seed']) == cfg.num_seeds and all(
        np.isfinite(v['per_seed'])), k
  # The mask and the cost hold at any weights.
  assert find_claim(s, 'The macro/micro mask is exact')['holds']
  assert find_claim(s, 'Attention cost is linear')['holds']


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/unicot/default/summary.json."""
  return exp.EXPERIMENT.execute(unicot_config.get_config(),
                                tmp_path_factory.mktemp('unicot') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('start', ['The macro/micro mask is exact',
                                   'Attention cost is linear',
                                   'With an equal training budget'])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


# Measured (35c4c53, 3 seeds, 292 s; 0897238 and d4f5333 gave +0.040):
# greedy final-state exact-match on M = 5 walks (trained on M = 2-3), Uni-CoT
# 0.348 / 0.297 / 0.297 vs long chain 0.277 / 0.469 / 0.180: +0.005 < 0.05
# (the Uni-CoT weights under the causal mask: 0.027). Both models are nearly
# exact on M = 3 (0.996, 0.995) and degrade on the unseen sub-goals 4-5
# (absolute rope positions put the input and the macro tokens at unseen
# distances from the micro rows). A 400-step, batch-64 pilot without the
# STEP token had Uni-CoT 0.651 vs 0.299.
@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'M = 5: Uni-CoT 0.314 vs long chain 0.309, gain +0.005 < 0.05'))
def test_default_run_longer_chains(default_summary):
  c = find_claim(default_summary, 'On longer chains')
  assert c['holds'] and c['control'].endswith('(fails)'), c


# Measured (35c4c53): M = 5, sampling at temperature 1, R <= 4: single pass
# 0.355 / 0.281 / 0.273 -> self-check 0.383 / 0.305 / 0.289 (+0.022; 0.4-1.9
# revisions per walk); a blind checker at the learned FIX rate (0.11):
# +0.000; always-ok: +0.000 by construction.
@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'self-check +0.022 < 0.05 (single 0.303 -> 0.326; blind checker +0.000)'))
def test_default_run_self_check(default_summary):
  c = find_claim(default_summary, 'The micro self-check loop')
  assert c['holds'] and c['control'].endswith('(fails)'), c
