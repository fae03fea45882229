"""experiments/fastmix.py: the sources, the LM pools, claim logic and its
controls, config errors, the smoke run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import fastmix as fastmix_config
from experiments import fastmix as exp
from iclrjax.core import config as cfg_lib
from iclrjax.lm import tasks
from tests.conftest import find_claim, smoke_summary

S, K = 5, len(exp.SOURCES)


def test_synthetic_sources_have_the_notes_structure():
  a = fastmix_config.get_config('smoke').synthetic
  p = exp.make_pools(jax.random.PRNGKey(0), a)
  x, y = p.train
  assert x.shape == (K, a.pool_size, a.dim) and y.shape == (K, a.pool_size)
  # S2 is shifted and rescaled; the others are standard normal inputs.
  assert float(jnp.linalg.norm(x[1].mean(0))) > 0.7 * a.shift
  assert float(jnp.linalg.norm(x[0].mean(0))) < 0.5 * a.shift
  np.testing.assert_allclose(float(x[1].std()), a.shift_scale, rtol=0.1)
  # The control's validation set shares the inputs, not the labels.
  np.testing.assert_array_equal(p.val[0], p.alt[0])
  assert np.mean(np.asarray(p.val[1]) == np.asarray(p.alt[1])) < 0.7


def test_lm_sources_are_reverse_shifted_noise_and_copy():
  b = fastmix_config.get_config('smoke').lm
  p = exp.make_lm_pools(jax.random.PRNGKey(1), b)
  tok, mask = p.train
  L = exp.lm_length(b)
  assert tok.shape == (K, b.pool_size, L) and mask.shape == tok.shape
  dec = lambda row: tasks.TOKENIZER.decode(row, stop_at_eos=False)
  n = b.length
  for k, want in ((0, lambda s: s[::-1]), (3, lambda s: s)):
    row = np.asarray(tok[k, 0])
    s, ans = dec(row[1:n + 1]), dec(row[n + 2:2 * n + 2])
    assert ans == want(s), (k, s, ans)
    assert np.asarray(mask[k, 0]).sum() == n + 1          # answer + EOS
  m = b.shift_length
  row = np.asarray(tok[1, 0])
  assert dec(row[m + 2:2 * m + 2]) == dec(row[1:m + 1])[::-1]
  # The control's validation answers are the copy task's on the same
  # prompts.
  vt, at = np.asarray(p.val[0][0]), np.asarray(p.alt[0][0])
  np.testing.assert_array_equal(vt[:n + 2], at[:n + 2])
  assert dec(at[n + 2:2 * n + 2]) == dec(vt[1:n + 1])


def _part(fastmix_mix, control_mix, loss):
  mix = {'fastmix': np.tile(fastmix_mix, (S, 1)),
         'fastmix_control': np.tile(control_mix, (S, 1))}
  return {'mix': mix,
          'test_loss': {n: np.full(S, v) for n, v in loss.items()},
          'cost': {'fastmix': 10, 'fastmix_control': 10, 'regmix': 640,
                   'doremi': 30, 'random_budget': 20},
          'wall': {'fastmix': 1.0, 'regmix': 9.0},
          'm_budget': 2}


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  cfg = fastmix_config.get_config()
  cfg.num_seeds = S
  loss = {'uniform': 1.0, 'fastmix': 0.9, 'fastmix_control': 2.0,
          'regmix': 0.9, 'random_budget': 0.99, 'doremi': 1.1}
  part = _part([0.5, 0.4, 0.05, 0.05], [0.0, 0.05, 0.05, 0.9], loss)
  claims = exp.part_claims(cfg, 'synthetic', part)
  assert [c.holds for c in claims] == [True, True, True]
  assert all(c.control.endswith('(fails)') for c in claims), claims

  # One seed keeping the noise source fails the mixture claim; a loss 3%
  # above RegMix fails the quality (and so the cost-at-quality) claim.
  part['mix']['fastmix'][2] = [0.4, 0.3, 0.2, 0.1]
  part['test_loss']['fastmix'] = np.full(S, 0.927)
  assert [c.holds for c in exp.part_claims(cfg, 'lm', part)] == [
      False, False, False]


def test_config_errors_name_the_field():
  cfg = fastmix_config.get_config('smoke')
  cfg.synthetic.search_steps = cfg.fastmix.n_inner - 1
  with pytest.raises(cfg_lib.ConfigError, match='synthetic.search_steps'):
    exp.check_config(cfg)
  with pytest.raises(ValueError, match='variant'):
    fastmix_config.get_config('huge')


def test_smoke_run_records_every_claim_with_a_control():
  s = smoke_summary('fastmix')
  for part in ('', 'LM: '):
    for prefix in ('FastMix\'s search ends', 'A fresh model',
                   'FastMix\'s search costs'):
      c = find_claim(s, part + prefix)
      assert c['control'] and c['evidence']
  cost = s['synthetic']['cost_grad_evals']
  assert cost['fastmix'] < cost['regmix']
  for part in ('synthetic', 'lm'):
    for n in exp.METHODS:
      assert np.isfinite(s['metrics'][f'{part}/test_loss_{n}']['mean'])


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run (about 13 minutes on 2 cores); only the slow tests use
  it. Its record: results/fastmix/default/summary.json."""
  return exp.EXPERIMENT.execute(fastmix_config.get_config(),
                                tmp_path_factory.mktemp('fastmix') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('start', ['FastMix\'s search ends', 'A fresh model',
                                   'FastMix\'s search costs',
                                   'LM: FastMix\'s search ends'])
def test_default_run_claims(default_summary, start):
  # Measured (default config at 35c4c53, 5 seeds): synthetic alpha_noise max
  # 0.025, useful min 0.947 (control 0.924 on the unrelated source); test
  # loss FastMix 0.891, RegMix 0.907, uniform 1.093 (control 2.092); cost
  # 1/33.9 of RegMix (random search at that cost 1.002); LM alpha_noise max
  # 0.091, useful min 0.852 (control 0.782 on copy).
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'LM part (default config at 35c4c53, 5 seeds): the larger decoder '
    'trained on FastMix\'s mixture (0.70 target, 0.18 longer reverse) reaches '
    'test loss 0.768, RegMix\'s (0.39 / 0.48) 0.474, the oracle\'s (0.37 / '
    '0.54) 0.346, uniform 1.285: the one-step gradient alignment ranks the '
    'target source above the longer-reverse one that trains the target best'))
@pytest.mark.parametrize('start', ['LM: A fresh model',
                                   'LM: FastMix\'s search costs'])
def test_default_run_lm_quality(default_summary, start):
  assert find_claim(default_summary, start)['holds']


def test_rows_trained_in_groups_equal_rows_trained_at_once():
  """`rows_per_call` (the paper variant's memory) only splits the vmapped
  rows into phases: every row's final state is the same, in order."""
  from iclrjax.core import loop  # pylint: disable=g-import-not-at-top

  class Run:   # Run.train's contract: core.train with this run's seed
    def train(self, init, step, *, phase, **kwargs):
      del phase
      return loop.train(init, step, seed=0, progress=False, **kwargs)

  init = lambda key, a: {'w': jax.random.normal(key, (3,)) * a}
  step = lambda s, t: ({'w': s['w'] * 0.9 + t}, {})
  args = dict(num_seeds=5, seed_ids=[0, 1, 0, 1, 0],
              init_args=jnp.arange(1.0, 6.0), num_steps=4, chunk_size=2)
  whole = exp._train_rows(Run(), init, step, phase='p', rows_per_call=0,
                          **args)
  groups = exp._train_rows(Run(), init, step, phase='p', rows_per_call=2,
                           **args)
  np.testing.assert_allclose(groups.result.state['w'],
                             whole.result.state['w'], rtol=1e-6)
  assert groups.result.state['w'].shape == (5, 3)
