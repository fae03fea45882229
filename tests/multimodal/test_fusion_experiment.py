"""experiments/fusion.py: claim logic and controls on synthetic records,
the tasks' construction, config errors, the smoke run, the default run
(slow)."""

import jax
import numpy as np
import pytest

from configs import fusion as fusion_config
from experiments import fusion as exp
from iclrjax.core import config as cfg_lib
from tests.conftest import find_claim, smoke_summary

S = 5


def _records(if_gap, lf_xor, add_gap, digits_gap, iid_gain, noise=0.0):
  """Accuracies per seed with the given pattern (IF = 0.9 on the XOR)."""
  cfg = fusion_config.get_config()
  rng = np.random.default_rng(0)
  jitter = lambda: rng.normal(0, 0.004, S)
  acc = {}
  for n in cfg.xor.n_train:
    acc[f'xor_n{n}/lf'] = np.full(S, lf_xor) + jitter()
    acc[f'xor_n{n}/if'] = np.full(S, lf_xor + if_gap) + jitter()
    acc[f'xor_n{n}/iid'] = acc[f'xor_n{n}/if'] + iid_gain + jitter()
    acc[f'xor_n{n}/if_reseed'] = acc[f'xor_n{n}/if'] + noise + jitter()
    acc[f'xor_n{n}/single_a'] = np.full(S, 0.5) + jitter()
    acc[f'add_n{n}/lf'] = np.full(S, 0.93) + jitter()
    acc[f'add_n{n}/if'] = np.full(S, 0.93 + add_gap) + jitter()
  acc['digits/lf'] = np.full(S, 0.5) + jitter()
  acc['digits/if'] = np.full(S, 0.5 + digits_gap) + jitter()
  acc['digits/iid'] = acc['digits/if'] + iid_gain + jitter()
  acc['digits/if_reseed'] = acc['digits/if'] + noise + jitter()
  acc['digits/single_a'] = np.full(S, 0.5) + jitter()
  return cfg, acc


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  claims = exp.evaluate_claims(*_records(0.4, 0.5, 0.0, 0.2, 0.03))
  assert len(claims) == 3
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  claims = exp.evaluate_claims(*_records(0.1, 0.7, 0.0, 0.02, -0.03))
  assert not any(c.holds for c in claims), claims


def test_controls_pass_when_they_should():
  """An additive-label gap, a useful single half or a reseeding shift
  would pass the claim: the controls then say so."""
  cfg, acc = _records(0.4, 0.5, 0.0, 0.2, 0.03, noise=0.05)
  for n in cfg.xor.n_train:
    acc[f'add_n{n}/lf'] = acc[f'xor_n{n}/lf']
    acc[f'add_n{n}/if'] = acc[f'xor_n{n}/if']
  acc['digits/single_a'] = acc['digits/if']
  for c in exp.evaluate_claims(cfg, acc):
    assert c.control.endswith('(passes)'), c


def test_either_n_failing_fails_the_xor_claim():
  cfg, acc = _records(0.4, 0.5, 0.0, 0.2, 0.03)
  n = max(cfg.xor.n_train)
  acc[f'xor_n{n}/lf'] = acc[f'xor_n{n}/if'] - 0.2
  assert not exp.evaluate_claims(cfg, acc)[0].holds


def test_digits_halves_alone_carry_no_label_information():
  """The label is the parity of two independent images' digit sum: given
  either image's digit, the label stays ~balanced."""
  c = fusion_config.get_config('smoke')
  data = exp.digits_data(c)
  x, t = data['x_train'], data['t_train']
  p = exp.digits_pairs(jax.random.key(0), c, x, t, 4000)
  assert p.xa.shape == (4000, 32) and p.xb.shape == (4000, 32)
  ki, kj = jax.random.split(jax.random.key(0))   # digits_pairs' draws
  i = np.asarray(jax.random.randint(ki, (4000,), 0, x.shape[0]))
  j = np.asarray(jax.random.randint(kj, (4000,), 0, x.shape[0]))
  np.testing.assert_array_equal(p.xa, x[i, :32])
  y = np.asarray(p.y)
  np.testing.assert_array_equal(y, (t[i] + t[j]) % 2)
  for d in range(10):
    assert abs(y[t[i] == d].mean() - 0.5) < 0.1, d
    assert abs(y[t[j] == d].mean() - 0.5) < 0.1, d
  assert len(data['t_test']) + len(t) == 1797


def test_xor_label_needs_both_modalities_and_b_is_incoherent():
  c = fusion_config.get_config('smoke')
  p = exp.xor_sample(jax.random.key(1), c, 4000)
  q = exp.xor_sample(jax.random.key(1), c, 4000, additive=True)
  np.testing.assert_array_equal(p.xa, q.xa)
  assert abs(float(p.y.mean()) - 0.5) < 0.05
  assert float(p.xb.mean()) > float(p.xa.mean()) + 2.0
  assert float(p.xb.std()) > 3 * float(p.xa.std())


def test_config_errors_name_the_field():
  c = fusion_config.get_config('smoke')
  c.model.rip_dim = c.model.latent + 1
  with pytest.raises(cfg_lib.ConfigError, match='model.rip_dim'):
    exp.EXPERIMENT.validate(c)
  c = fusion_config.get_config('smoke')
  c.num_seeds = 1
  with pytest.raises(cfg_lib.ConfigError, match='num_seeds'):
    exp.EXPERIMENT.validate(c)
  c = fusion_config.get_config('smoke')
  c.xor.n_train = (50, 50)
  with pytest.raises(cfg_lib.ConfigError, match='xor.n_train'):
    exp.EXPERIMENT.validate(c)


def test_smoke_run_records_every_model_and_claim():
  s = smoke_summary('fusion')
  cfg = fusion_config.get_config('smoke')
  assert len(s['claims']) == 3
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for task, kinds in exp.tasks(cfg).items():
    for k in kinds:
      v = s['metrics'][f'acc_{task}/{k}']['per_seed']
      assert len(v) == cfg.num_seeds and all(0 <= a <= 1 for a in v), (task,
                                                                        k)


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/fusion/default/summary.json."""
  return exp.EXPERIMENT.execute(fusion_config.get_config(),
                                tmp_path_factory.mktemp('fusion') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('start', ['Intermediate fusion beats late fusion',
                                   'On a real two-view task'])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'default run at 35c4c53 (5 seeds): IID - IF = +0.001 +- 0.011 on the XOR '
    'at n_train 200 (+-0.003 at 2000, -0.007 +- 0.011 on digits), the same '
    'as the reseeded-IF noise control (+0.001 +- 0.011): the reconstructed '
    'informatic constraint + sliced-Wasserstein cohering (weights 0.1) do '
    'not move accuracy; the paper\'s own losses were not available'))
def test_default_run_cohering_effect(default_summary):
  c = find_claim(default_summary, 'The informatic constraint')
  assert c['holds'] and c['control'].endswith('(fails)'), c
