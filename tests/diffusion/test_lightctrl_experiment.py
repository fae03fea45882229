"""experiments/lightctrl.py: claim logic and controls on synthetic records,
config errors, the evaluation set, the smoke run, the default run (slow)."""

import jax
import jax.numpy as jnp
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
  arm -> (excess centroid error, psnr, leakage, change, change error) at
  beta = 0.6; at beta = 0 fusion changes nothing. The ground truth's frame
  change is 0.05; the source video is static (change 0.01, change error
  0.05: the ground truth's change)."""
  cfg = lightctrl_config.get_config()
  full = lambda v: np.full(S, float(v))
  arms = {'full': (1.0, 20.0, 0.1, 0.05, 0.02),
          'baseline': (3.0, 17.0, 0.3, 0.05, 0.04),
          'no_fusion': (1.1, 18.5, 0.3, 0.05, 0.03),
          'no_injection': (2.8, 18.0, 0.12, 0.05, 0.04),
          'wrong_injection': (2.9, 17.5, 0.12, 0.05, 0.04),
          'no_detail': (1.0, 19.0, 0.08, 0.06, 0.03),
          'low_strength': (0.9, 19.5, 0.08, 0.06, 0.03),
          'low_strength_no_fusion': (1.0, 19.0, 0.2, 0.06, 0.03),
          'low_strength_no_injection': (2.5, 18.0, 0.1, 0.06, 0.04),
          'thw': (1.1, 19.5, 0.12, 0.05, 0.03),
          'baseline_rerun': (3.0, 17.1, 0.3, 0.05, 0.04),
          'perframe': (2.0, 15.0, 0.6, 0.2, 0.15)}
  if not win:
    arms['full'] = (2.7, 17.2, 0.29, 0.07, 0.045)
  m = {}
  for b in cfg.betas:
    bn = exp.beta_name(b)
    for arm, (c, p, l, ch, ce) in arms.items():
      if b == 0.0 and arm == 'full':
        l = arms['no_fusion'][2]          # nothing for fusion to remove
      m[f'excess/{arm}/{bn}'] = full(c)
      m[f'centroid/{arm}/{bn}'] = full(c + 4.0)
      m[f'psnr/{arm}/{bn}'] = full(p)
      m[f'leakage/{arm}/{bn}'] = full(l)
      m[f'change/{arm}/{bn}'] = full(ch)
      m[f'change_error/{arm}/{bn}'] = full(ce)
  for arm, (c, p, l, ch, ce) in {
      'source': (8.0, 14.0, 1.0, 0.01, 0.05),
      'ground_truth': (0.0, None, 0.0, 0.05, 0.0)}.items():
    m[f'excess/{arm}'], m[f'centroid/{arm}'] = full(c), full(c + 4.0)
    if p is not None:
      m[f'psnr/{arm}'] = full(p)
    m[f'leakage/{arm}'], m[f'change/{arm}'] = full(l), full(ch)
    m[f'change_error/{arm}'] = full(ce)
  return cfg, m


def _claim(claims, start):
  hits = [c for c in claims if c.claim.startswith(start)]
  assert len(hits) == 1, (start, claims)
  return hits[0]


INJECTION, PSNR, LEAKAGE, TEMPORAL = (
    'Light-map injection', "LightCtrl's PSNR", 'Geometry-aware normal fusion',
    'LightCtrl is temporally')


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
  doing nothing clearing the PSNR bar, fusion cutting leakage with nothing
  copied, a steady per-frame relighter that follows the light."""
  cfg, m = _records(win=True)
  m['excess/wrong_injection/b0.6'] = m['excess/full/b0.6']
  m['psnr/source'] = m['psnr/full/b0.6'] - 0.5     # >= baseline + 1 dB
  m['leakage/full/b0'] = 0.5 * m['leakage/no_fusion/b0']
  for k in ('change', 'change_error'):
    m[f'{k}/perframe/b0'] = m[f'{k}/full/b0']
  for c in exp.evaluate_claims(cfg, m):
    assert c.holds and c.control.endswith('(passes)'), c


@pytest.mark.parametrize('start,key,values', [
    # Each seed list has the passing mean of _records but one seed misses.
    (INJECTION, 'excess/full/b0.6', [2.2, 0.4, 0.4]),          # <= 1.96
    (PSNR, 'psnr/full/b0.6', [17.5, 21.25, 21.25]),           # >= 18
    (LEAKAGE, 'leakage/full/b0.6', [0.25, 0.025, 0.025]),     # <= 0.21
    (TEMPORAL, 'change/full/b0', [0.065, 0.0425, 0.0425]),    # <= 0.06
    (TEMPORAL, 'change_error/full/b0', [0.04, 0.01, 0.01]),   # <= 0.035
])
def test_one_seed_below_the_threshold_fails_the_claim(start, key, values):
  """The verdict needs every seed, not the seed mean: the same mean holds
  with equal seeds and fails with one seed past the threshold; the
  evidence lists the seeds."""
  cfg, m = _records(win=True)
  assert np.mean(values) == pytest.approx(float(np.mean(m[key])))
  assert _claim(exp.evaluate_claims(cfg, m), start).holds
  m[key] = np.asarray(values)
  c = _claim(exp.evaluate_claims(cfg, m), start)
  assert not c.holds, c
  assert 'per seed [' in c.evidence, c


def test_controls_need_every_seed_too():
  """A control that clears the bar on some seeds only fails, as a claim
  would."""
  cfg, m = _records(win=True)
  m['excess/wrong_injection/b0.6'] = np.array([1.0, 1.0, 2.9])
  c = _claim(exp.evaluate_claims(cfg, m), INJECTION)
  assert c.holds and c.control.endswith('(fails)'), c
  m['excess/wrong_injection/b0.6'] = np.array([1.0, 1.0, 1.0])
  c = _claim(exp.evaluate_claims(cfg, m), INJECTION)
  assert c.control.endswith('(passes)'), c


def test_a_static_video_fails_the_temporal_claim():
  """The untouched source video (static) scores change error 1x the ground
  truth's change, so it fails although its frame change (0.2x) passes the
  one-sided bound; in LightCtrl's place it fails the claim too, and it is
  one of the claim's two controls."""
  f, s = 5, 8
  gt = jnp.cumsum(jax.random.normal(jax.random.key(0), (f, s, s, 3)), 0)
  static = jnp.broadcast_to(gt[:1], gt.shape)
  np.testing.assert_allclose(lc.change_error(static, gt),
                             lc.frame_change(gt), rtol=1e-6)
  assert float(lc.change_error(gt, gt)) == 0.0
  cfg, m = _records(win=True)
  c = _claim(exp.evaluate_claims(cfg, m), TEMPORAL)
  assert c.holds and c.control.endswith('(fails)'), c
  assert ('source video change [0.20, 0.20, 0.20], error [1.00, 1.00, 1.00]: '
          'misses') in c.control, c
  for k in ('change', 'change_error'):
    m[f'{k}/full/b0'] = m[f'{k}/source']
  c = _claim(exp.evaluate_claims(cfg, m), TEMPORAL)
  assert not c.holds, c
  # The source video alone passing (a ground truth that barely changes)
  # makes the control pass although the per-frame relighter fails.
  cfg, m = _records(win=True)
  m['change_error/source'] = 0.5 * m['change/ground_truth']
  c = _claim(exp.evaluate_claims(cfg, m), TEMPORAL)
  assert 'misses; source video' in c.control, c
  assert c.control.endswith('(passes)'), c


def test_the_source_video_is_the_psnr_control():
  """Doing nothing is the PSNR claim's control: the source video scoring
  below the pipeline and the baseline's bar fails it; a source video that
  clears the bar passes it; one at the pipeline's PSNR also fails the
  claim (the pipeline must beat doing nothing). The baseline rerun is only
  the noise floor."""
  cfg, m = _records(win=True)
  c = _claim(exp.evaluate_claims(cfg, m), PSNR)
  assert c.holds and c.control.startswith('the untouched source video'), c
  assert c.control.endswith('(fails)'), c
  assert 'full - source per seed [6.00, 6.00, 6.00]' in c.evidence, c
  assert 'noise floor' in c.evidence, c
  m['psnr/source'] = m['psnr/full/b0.6'] - 1.0
  c = _claim(exp.evaluate_claims(cfg, m), PSNR)
  assert c.holds and c.control.endswith('(passes)'), c
  m['psnr/source'] = m['psnr/full/b0.6'] + 0.1
  c = _claim(exp.evaluate_claims(cfg, m), PSNR)
  assert not c.holds and c.control.endswith('(passes)'), c
  # The rerun no longer decides the control.
  cfg, m = _records(win=True)
  m['psnr/baseline_rerun/b0.6'] = m['psnr/full/b0.6']
  c = _claim(exp.evaluate_claims(cfg, m), PSNR)
  assert c.holds and c.control.endswith('(fails)'), c


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


# The default run at 725d454 (3 trained seeds, release noise level, per-seed
# verdicts, 1275 s idle): 0 of 4 hold. Three failures are decisive and
# pinned below; fusion's leakage drop (55/21/31% against 30% on every seed)
# is not. Every control fails, and every verdict follows the per-seed rule.
_CLAIMS = (INJECTION, PSNR, LEAKAGE, TEMPORAL)


@pytest.mark.slow
@pytest.mark.parametrize('start', _CLAIMS)
def test_default_run_controls_fail(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['control'].endswith('(fails)'), c


@pytest.mark.slow
def test_default_run_verdicts_follow_the_per_seed_rule(default_summary):
  """Each recorded verdict is the rule applied to the recorded per-seed
  metrics, and a claim that holds holds on every seed."""
  cfg = lightctrl_config.get_config()
  m = {k: np.asarray(v['per_seed'])
       for k, v in default_summary['metrics'].items()}
  assert all(len(m[k]) == cfg.num_seeds for k in m if '/' in k
             and not k.startswith('final_loss')), m.keys()
  redo = {c.claim: c for c in exp.evaluate_claims(cfg, m)}
  for c in default_summary['claims']:
    assert redo[c['claim']].holds == c['holds'], c
    assert redo[c['claim']].control == c['control'], c
  cb = exp.beta_name(cfg.claim_beta)
  full, none = m[f'excess/full/{cb}'], m[f'excess/no_injection/{cb}']
  if find_claim(default_summary, INJECTION)['holds']:
    assert np.all(full <= cfg.centroid_ratio * none)
  if find_claim(default_summary, TEMPORAL)['holds']:
    gt = m['change/ground_truth']
    assert np.all(m['change_error/full/b0'] <= cfg.change_error_ratio * gt)


_DECISIVE = {
    INJECTION: ('excess centroid error 7.51 px with injection vs 7.60 '
                'without (ratio 0.99/0.98/0.99 per seed, bar 0.7); 0.98 at '
                'sigma 1 too'),
    PSNR: ('PSNR 13.89 dB vs baseline 16.16 (full - baseline -1.10/-2.34/'
           '-3.39 per seed, bar +1); the untouched source video 13.74'),
    TEMPORAL: ('beta 0: change error 1.35/1.39/1.47x the ground truth\'s '
               'frame change (bar 0.7x; the static source video 1.01x) and '
               'frame change 1.26-1.38x (bar 1.2x)'),
}


@pytest.mark.slow
@pytest.mark.parametrize('start', [
    pytest.param(k, marks=pytest.mark.xfail(
        strict=True, reason=f'measured at 725d454: {why}'))
    for k, why in _DECISIVE.items()])
def test_default_run_decisive_failures(default_summary, start):
  assert find_claim(default_summary, start)['holds']
