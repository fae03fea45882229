"""experiments/lm_grpo.py: the claim and its control; the default run (slow)."""

import numpy as np
import pytest

from configs import lm_grpo as lm_config
from experiments import lm_grpo as exp


def test_claim_holds_only_when_every_seed_gains_and_its_control_fails():
  cfg = lm_config.get_config()
  acc = {'sft': np.array([0.15, 0.20, 0.30]),
         'grpo': np.array([0.30, 0.28, 0.40]),
         'grpo_equal_rewards': np.array([0.15, 0.20, 0.30])}
  (c,) = exp.evaluate_claims(cfg, acc, np.array([300, 400, 500]))
  assert c.holds and c.control.endswith('(fails)'), c
  assert '300, 400, 500 of 1500 steps' in c.evidence
  # One seed gains less than min_gain: the claim fails.
  low = dict(acc, grpo=np.array([0.30, 0.22, 0.40]))
  assert not exp.evaluate_claims(cfg, low)[0].holds
  # A control that gains as much passes, and says so.
  same = dict(acc, grpo_equal_rewards=acc['grpo'])
  assert exp.evaluate_claims(cfg, same)[0].control.endswith('(passes)')


@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  return exp.EXPERIMENT.execute(lm_config.get_config(),
                                tmp_path_factory.mktemp('lm_grpo_default'))


@pytest.mark.slow
def test_default_run_grpo_raises_exact_match_on_every_seed(default_run):
  # Measured (35c4c53, 3 seeds, 244 s): SFT stopped by the 256-prompt probe
  # (>= 0.2) after 1360 / 870 / 250 steps; held-out greedy exact-match SFT
  # 0.258 / 0.287 / 0.230 -> GRPO 0.385 / 0.375 / 0.326 (+0.127 / +0.088 /
  # +0.096); equal-rewards control +0.004 / -0.006 / -0.010.
  (c,) = default_run['claims']
  assert c['control'].endswith('(fails)'), c
  assert c['holds'], c
