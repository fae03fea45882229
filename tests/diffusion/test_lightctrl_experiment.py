"""experiments/lightctrl.py: claim logic and controls on synthetic records,
config errors, the evaluation set, the smoke run, the default run (slow)."""

import jax
import numpy as np
import pytest

from configs import lightctrl as lightctrl_config
from experiments import lightctrl as exp
from iclrjax.core import config as cfg_lib
from iclrjax.diffusion import lightctrl as lc
from tests.conftest import find_claim, smoke_summary

S = 3


def _records(win: bool):
  """Per-seed metrics: the paper's pattern (win) or no effect at all.
  arm -> (excess centroid error, psnr, leakage, change) at beta = 0.6; at
  beta = 0 fusion changes nothing."""
  cfg = lightctrl_config.get_config()
  full = lambda v: np.full(S, float(v))
  arms = {'full': (1.0, 20.0, 0.1, 0.05), 'baseline': (3.0, 17.0, 0.3, 0.05),
          'no_fusion': (1.1, 18.5, 0.3, 0.05),
          'no_injection': (2.8, 18.0, 0.12, 0.05),
          'wrong_injection': (2.9, 17.5, 0.12, 0.05),
          'no_detail': (1.0, 19.0, 0.08, 0.06),
          'strong': (0.9, 19.5, 0.08, 0.06),
          'strong_no_fusion': (1.0, 19.0, 0.2, 0.06),
          'thw': (1.1, 19.5, 0.12, 0.05),
          'baseline_rerun': (3.0, 17.1, 0.3, 0.05),
          'perframe': (2.0, 15.0, 0.6, 0.2)}
  if not win:
    arms['full'] = (2.7, 17.2, 0.29, 0.07)
  m = {}
  for b in cfg.betas:
    bn = exp.beta_name(b)
    for arm, (c, p, l, ch) in arms.items():
      if b == 0.0 and arm == 'full':
        l = arms['no_fusion'][2]          # nothing for fusion to remove
      m[f'excess/{arm}/{bn}'] = full(c)
      m[f'centroid/{arm}/{bn}'] = full(c + 4.0)
      m[f'psnr/{arm}/{bn}'] = full(p)
      m[f'leakage/{arm}/{bn}'] = full(l)
      m[f'change/{arm}/{bn}'] = full(ch)
  for arm, (c, p, l, ch) in {'source': (8.0, 14.0, 1.0, 0.01),
                             'ground_truth': (0.0, None, 0.0, 0.05)}.items():
    m[f'excess/{arm}'], m[f'centroid/{arm}'] = full(c), full(c + 4.0)
    if p is not None:
      m[f'psnr/{arm}'] = full(p)
    m[f'leakage/{arm}'], m[f'change/{arm}'] = full(l), full(ch)
  return cfg, m


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  claims = exp.evaluate_claims(*_records(win=True))
  assert len(claims) == 4
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_without_an_effect():
  claims = exp.evaluate_claims(*_records(win=False))
  assert not any(c.holds for c in claims), claims


def test_controls_pass_when_the_mechanism_is_absent():
  """Each control can fail its claim: injection anywhere helping as much,
  a noisy baseline, fusion cutting leakage with nothing copied, a steady
  per-frame relighter."""
  cfg, m = _records(win=True)
  m['excess/wrong_injection/b0.6'] = m['excess/full/b0.6']
  m['psnr/baseline_rerun/b0.6'] = m['psnr/full/b0.6']
  m['leakage/full/b0'] = 0.5 * m['leakage/no_fusion/b0']
  m['change/perframe/b0'] = m['change/full/b0']
  for c in exp.evaluate_claims(cfg, m):
    assert c.holds and c.control.endswith('(passes)'), c


def test_config_errors_name_the_field():
  c = lightctrl_config.get_config('smoke')
  c.size = 18
  with pytest.raises(cfg_lib.ConfigError, match='size'):
    exp.EXPERIMENT.validate(c)
  c = lightctrl_config.get_config()
  c.prior.channel_mults = (1, 2, 2, 2, 2, 2)
  with pytest.raises(cfg_lib.ConfigError, match='prior.channel_mults'):
    exp.EXPERIMENT.validate(c)
  c = lightctrl_config.get_config()
  c.fft_axes = 'hwc'
  with pytest.raises(cfg_lib.ConfigError, match='fft_axes'):
    exp.EXPERIMENT.validate(c)
  c = lightctrl_config.get_config()
  c.betas = (0.3, 0.6)
  with pytest.raises(cfg_lib.ConfigError, match='betas'):
    exp.EXPERIMENT.validate(c)
  c = lightctrl_config.get_config()
  c.claim_beta = 0.5
  with pytest.raises(cfg_lib.ConfigError, match='claim_beta'):
    exp.EXPERIMENT.validate(c)
  for v in ('default', 'paper'):
    exp.EXPERIMENT.validate(lightctrl_config.get_config(v))


def test_eval_set_ground_truth_and_latents():
  cfg = lightctrl_config.get_config('smoke')
  ev = jax.jit(lambda k: exp.eval_set(cfg, k))(jax.random.key(0))
  b = cfg.eval_videos * len(cfg.trajectories)
  h = cfg.size // lc.PATCH
  assert ev['source'].shape == (b, cfg.num_frames, cfg.size, cfg.size, 3)
  assert ev['source_latent'].shape == (b, cfg.num_frames, h, h, 12)
  assert ev['mask'].shape == (b, cfg.num_frames, h, h, 1)
  np.testing.assert_array_equal(ev['mask_rotated'],
                                ev['mask'][:, :, ::-1, ::-1])
  np.testing.assert_allclose(lc.decode(ev['source_latent']), ev['source'],
                             atol=1e-5)
  # The ground truth scores as it should: no leakage, light near the centre.
  score = jax.jit(lambda v, ev: exp.scores(cfg, v, ev))
  sc = score(ev['target'], ev)
  assert np.all(np.abs(np.asarray(sc['leakage'])) < 1e-3)
  np.testing.assert_allclose(sc['excess'], 0.0, atol=1e-5)
  src = score(ev['source'], ev)
  assert np.all(np.asarray(src['leakage']) > 0.5)
  assert float(np.mean(sc['centroid'])) < float(np.mean(src['centroid']))


def test_smoke_run_records_every_score_and_claim():
  s = smoke_summary('lightctrl')
  cfg = lightctrl_config.get_config('smoke')
  assert len(s['claims']) == 4
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  keys = ['source', 'ground_truth']
  for b in cfg.betas:
    keys += [f'{a}/{exp.beta_name(b)}'
             for a in (*exp.arms_at(cfg, b), 'perframe')]
  assert len(keys) == len(set(keys)) > 2 + len(exp.ARMS)
  for arm in keys:
    for k in exp.SCORES:
      if (k, arm) == ('psnr', 'ground_truth'):
        continue
      v = s['metrics'][f'{k}/{arm}']['per_seed']
      assert len(v) == cfg.num_seeds and all(np.isfinite(v)), (k, arm)
  for name in ('relighter', 'prior'):
    assert len(s['metrics'][f'final_loss/{name}']['per_seed']) == (
        cfg.num_seeds)
  # The per-frame relighter flickers even untrained (fresh noise per frame).
  assert find_claim(s, 'LightCtrl is temporally')['control'].endswith(
      '(fails)')


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/lightctrl/default/summary.json."""
  return exp.EXPERIMENT.execute(lightctrl_config.get_config(),
                                tmp_path_factory.mktemp('lightctrl') / 'run')


# Measured at commit 2e1684d (1693 s on a loaded 2-core CPU; 3 trained
# relighters and priors, each seed 3 videos x 6 trajectories). Injection
# and fusion cost more than they buy in this toy world: the normal latent
# replaces the albedo's low frequencies (PSNR -2 to -3 dB at every beta).
_NEGATIVE = {
    'Light-map injection': 'excess centroid error 7.39 px vs 7.56 px without '
                           'injection: ratio 0.98 (0.98 in every seed), not '
                           '<= 0.7',
    "LightCtrl's PSNR": 'PSNR 14.49 dB vs baseline 16.56 dB: -2.07 dB (seeds '
                        '-0.88 to -3.17), not +1 dB',
}
# Marginal, so only their controls are pinned: fusion's leakage drop at
# beta = 0.6 is 34% (seeds 48%, 20%, 31%) against 30%; the frame change with
# the beta = 0 relighter is 1.13x the ground truth's (seeds 1.09 to 1.20)
# against 1.2x.
_MARGINAL = ('Geometry-aware normal fusion', 'LightCtrl is temporally')


@pytest.mark.slow
@pytest.mark.parametrize('start', [
    pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=v))
    for k, v in _NEGATIVE.items()])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.parametrize('start', [*_NEGATIVE, *_MARGINAL])
def test_default_run_controls_fail(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['control'].endswith('(fails)'), c
