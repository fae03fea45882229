"""experiments/marc.py: claim logic and controls on synthetic records,
config errors, the smoke run, the default run (slow)."""

import numpy as np
import pytest

from configs import marc as marc_config
from experiments import marc as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import find_claim, smoke_summary

S = 3


def _acc(teacher, untrained, untrained_random, sft, sft_random, grpo, cgrpo,
         ungated):
  full = lambda v: np.full(S, float(v))
  return {'teacher': full(teacher), 'untrained': full(untrained),
          'untrained_random': full(untrained_random), 'sft': full(sft),
          'sft_random': full(sft_random), 'grpo': full(grpo),
          'cgrpo': full(cgrpo), 'cgrpo_ungated': full(ungated)}


VMR_OK = {'f1': 0.999, 'recall': 0.99, 'f1_uniform': 0.3,
          'recall_random': 0.6, 'segments': 5.0}
VMR_BAD = {'f1': 0.80, 'recall': 0.70, 'f1_uniform': 0.3,
           'recall_random': 0.6, 'segments': 7.0}


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  cfg = marc_config.get_config()
  acc = _acc(0.95, 0.30, 0.25, 0.88, 0.30, 0.87, 0.89, 0.87)
  claims = exp.evaluate_claims(cfg, acc, VMR_OK)
  assert len(claims) == 5
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  cfg = marc_config.get_config()
  acc = _acc(0.95, 0.90, 0.80, 0.60, 0.55, 0.72, 0.70, 0.75)
  claims = exp.evaluate_claims(cfg, acc, VMR_BAD)
  assert not any(c.holds for c in claims), claims
  # the ungated arm beating GRPO makes that control pass, and it says so
  c = find_claim({'claims': [c.to_json() for c in claims]}, 'C-GRPO\'s gated')
  assert c['control'].endswith('(passes)')


def test_config_errors_name_the_field():
  c = marc_config.get_config('smoke')
  c.model.max_len = 32
  with pytest.raises(cfg_lib.ConfigError, match='model.max_len'):
    exp.EXPERIMENT.validate(c)
  c = marc_config.get_config('smoke')
  c.vmr.top_k = c.video.num_events + 1
  with pytest.raises(cfg_lib.ConfigError, match='vmr.top_k'):
    exp.EXPERIMENT.validate(c)
  c = marc_config.get_config('smoke')
  c.video.num_events = 12
  with pytest.raises(cfg_lib.ConfigError, match='video.num_events'):
    exp.EXPERIMENT.validate(c)


def test_smoke_run_records_every_arm_claim_and_the_reduction():
  s = smoke_summary('marc')
  cfg = marc_config.get_config('smoke')
  assert len(s['claims']) == 5
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for arm in ('teacher', 'untrained_random') + exp.ARMS:
    v = s['metrics'][f'accuracy/{arm}']['per_seed']
    assert len(v) == cfg.num_seeds and all(np.isfinite(v)), arm
  e = s['efficiency']
  assert e['visual_token_ratio'] == cfg.video.num_frames
  assert e['memory_ratio'] > 1 and e['latency_s_full'] > 0
  # the VMR works at any weights
  assert find_claim(s, 'The Visual Memory Retriever')['holds']


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/marc/default/summary.json."""
  return exp.EXPERIMENT.execute(marc_config.get_config(),
                                tmp_path_factory.mktemp('marc') / 'run')


# Measured (265e58d, 3 seeds, 436 s): VMR F1 1.000 / recall 1.000 (equal
# segments 0.148, random clips 0.602); teacher 1.000, untrained student on 4
# VMR tokens 0.340 (-66 points), SFT on VMR 0.898 vs on random tokens 0.344
# (+55 points; untrained 0.340 vs 0.254); GRPO 0.782, C-GRPO 0.803, ungated
# 0.805 after 150 steps; tokens 129 -> 5, XLA peak memory 79.8x and latency
# 47.9x lower.
CGRPO_SHORT = ('C-GRPO 0.797 (0.809, 0.811, 0.771) < 0.9 x teacher 1.000 '
               'after 150 RL steps (GRPO 0.812, SFT 0.898; 35c4c53); at '
               '265e58d: 0.803, still climbing over the last 50 steps')
# The issue's own C-GRPO > GRPO comparison (not the paper's): +2.1 points at
# 265e58d, -1.6 at 35c4c53 (per seed -0.008, 0.002, -0.041), after C-GRPO
# began scoring completions at the sampling temperature (ee901ec). Its
# control (ungated - GRPO) is structurally the same contest, see the page.
CGRPO_VS_GRPO = ('C-GRPO - GRPO = -1.6 points (35c4c53); the gated reward '
                 'equals GRPO up to the format term, so the sign is noise')


@pytest.mark.slow
@pytest.mark.parametrize('start', [
    'The Visual Memory Retriever', 'Compression costs accuracy',
    'Retrieval + compression matter',
    pytest.param('The C-GRPO student', marks=pytest.mark.xfail(
        strict=True, reason=CGRPO_SHORT)),
    pytest.param("C-GRPO's gated", marks=pytest.mark.xfail(
        strict=True, reason=CGRPO_VS_GRPO))])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c
