"""experiments/token_guard.py: the task, claim logic and controls on
synthetic records, config errors, the smoke run, the default run (slow)."""

import jax
import numpy as np
import pytest

from configs import token_guard as tg_config
from experiments import token_guard as exp
from iclrjax.core import config as cfg_lib
from iclrjax.lm import tasks
from tests.conftest import find_claim, smoke_summary

S = 3


def test_task_binds_values_and_segments():
  c = tg_config.get_config()
  b = exp.make_task(c)(jax.random.PRNGKey(0), 32)
  lay = exp.layout(c)
  assert b.prompt_BxP.shape == (32, lay.prompt_len)
  assert b.target_BxT.shape == (32, lay.seg_len * lay.num_segments)
  tok = tasks.TOKENIZER
  for p, t in zip(np.asarray(b.prompt_BxP), np.asarray(b.target_BxT)):
    text, ans = tok.decode(p), tok.decode(t)
    pairs, query = text.split('?')
    query = query.rstrip('=')
    vals = {pairs[i]: pairs[i + 1:i + 3] for i in range(0, len(pairs), 3)}
    assert ''.join(vals) == 'abcd'                 # alphabetical keys
    assert len(set(query)) == 3
    assert ans == '>'.join(vals[q] for q in query)
    assert t[-1] == tasks.EOS
  correct = exp.segment_correct(b.target_BxT, b.target_BxT, lay)
  assert correct.all()
  wrong = b.target_BxT.at[:, 4].set(b.target_BxT[:, 4] % 9 + 3)
  seg = np.asarray(exp.segment_correct(wrong, b.target_BxT, lay))
  assert (~seg[:, 1]).all() and seg[:, [0, 2]].all()


def _dec(em, halluc, passes):
  arm = lambda e, h, p: {'exact_match': np.full(S, e),
                         'hallucination': np.full(S, h),
                         'passes_ratio': np.full(S, p),
                         'passes': np.full(S, 9.0 * p)}
  return {'greedy': arm(0.2, 0.5, 1.0), 'temperature': arm(0.1, 0.6, 1.0),
          'best_of_n': arm(0.22, 0.48, 8.0),
          'phi': arm(em['phi'], halluc['phi'], 6.0),
          'token_guard': arm(em['tg'], halluc['tg'], passes),
          'token_guard_no_hidden': arm(em['lik'], 0.45, passes)}


def _records(win: bool):
  det = {'auroc_fseg': np.full(S, 0.8 if win else 0.6),
         'auroc_logp': np.full(S, 0.7), 'auroc_fseg_no_hidden':
             np.full(S, 0.69), 'segment_accuracy': np.full(S, 0.5)}
  if win:
    dec = _dec({'phi': 0.22, 'tg': 0.35, 'lik': 0.225},
               {'phi': 0.47, 'tg': 0.3}, 7.5)
  else:
    dec = _dec({'phi': 0.3, 'tg': 0.22, 'lik': 0.3},
               {'phi': 0.4, 'tg': 0.45}, 9.0)
  return tg_config.get_config(), det, dec


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  claims = exp.evaluate_claims(*_records(True))
  assert len(claims) == 3
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  claims = exp.evaluate_claims(*_records(False))
  assert not any(c.holds for c in claims), claims
  assert 'latent terms add nothing' in claims[0].evidence


def test_budget_alone_fails_the_decoding_claim():
  c, det, dec = _records(True)
  dec['token_guard']['passes_ratio'] = np.full(S, 8.5)
  assert not exp.evaluate_claims(c, det, dec)[1].holds


def test_config_errors_name_the_field():
  c = tg_config.get_config('smoke')
  c.task.num_queries = c.task.num_pairs + 1
  with pytest.raises(cfg_lib.ConfigError, match='task.num_queries'):
    exp.EXPERIMENT.validate(c)
  c = tg_config.get_config('smoke')
  c.model.max_len = 8
  with pytest.raises(cfg_lib.ConfigError, match='model.max_len'):
    exp.EXPERIMENT.validate(c)
  c = tg_config.get_config('smoke')
  c.token_guard.num_rollout = 0
  with pytest.raises(cfg_lib.ConfigError, match='token_guard.num_rollout'):
    exp.EXPERIMENT.validate(c)


def test_smoke_run_records_every_arm_and_claim():
  s = smoke_summary('token_guard')
  cfg = tg_config.get_config('smoke')
  assert len(s['claims']) == 3
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  m = s['metrics']
  for arm in exp.ARMS:
    for k in ('exact_match', 'hallucination', 'passes_ratio'):
      v = m[f'{k}/{arm}']['per_seed']
      assert len(v) == cfg.num_seeds and all(np.isfinite(v)), (k, arm)
  assert m['passes_ratio/greedy']['mean'] == 1.0
  assert m['passes_ratio/best_of_n']['mean'] == cfg.eval.best_of_n
  # Scoring and refinement cost passes on top of the same search.
  assert (m['passes_ratio/token_guard']['mean']
          > m['passes_ratio/phi']['mean'])


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/token_guard/default/summary.json."""
  return exp.EXPERIMENT.execute(tg_config.get_config(),
                                tmp_path_factory.mktemp('token_guard') / 'run')


_NEGATIVE = {
    'F_seg (Eq. 9': (
        'default run at 023b0e4 (results/token_guard/default): AUROC of F_seg '
        '0.608, 0.589, 0.569 vs the segment log-prob 0.814, 0.851, 0.830 and '
        'F_seg without hidden terms 0.785, 0.842, 0.800 (3/3 seeds fail: '
        'latent terms add nothing at this scale; a 4-layer model gave 0.674, '
        '0.511, 0.514 vs 0.818, 0.870, 0.853)'),
    'Token-Guard decoding cuts': (
        'default run: exact match Token-Guard 0.097, 0.117, 0.053 vs greedy '
        '0.097, 0.120, 0.073; hallucination 0.509, 0.461, 0.526 vs 0.512, '
        '0.464, 0.520 at 7.57x greedy\'s passes (phi-decoding 0.097, 0.113, '
        '0.063 at 6.54x)'),
    'Token-Guard\'s exact match exceeds': (
        'default run: gaps to phi 0.000, 0.003, -0.010; to the '
        'likelihood-only ablation -0.003, 0.000, 0.000'),
}


@pytest.mark.slow
@pytest.mark.parametrize('start', [
    pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=r))
    for s, r in _NEGATIVE.items()])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
def test_default_run_budgets_match(default_summary):
  """The arms run at a matched forward-pass budget: Token-Guard (scoring
  and refinement included) within 8x greedy's, best-of-8 at 8x, and the
  scorer's ablations within the same budget."""
  m = default_summary['metrics']
  for arm in ('token_guard', 'token_guard_no_hidden', 'phi'):
    assert max(m[f'passes_ratio/{arm}']['per_seed']) <= 8.0, arm
  assert m['passes_ratio/best_of_n']['mean'] == 8.0
  assert (m['passes_ratio/token_guard']['mean']
          > m['passes_ratio/phi']['mean'])
