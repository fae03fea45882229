"""Flow2GAN: losses against direct computations, samplers, nets, claims (slow)."""

import functools
import textwrap
import types

import jax
from jax.extend import core as jex_core
import jax.numpy as jnp
import numpy as np
import pytest

from configs import flow2gan as f2g_config
from experiments import flow2gan as f2g_exp
from iclrjax.core import logging as log_lib
from iclrjax.diffusion import audio
from iclrjax.diffusion import flow2gan as f2g
from tests.conftest import find_claim as _claim
from tests.diffusion.conftest import random_params


def _np_power_spec(x, n_fft, hop):
  xp = np.pad(x, (n_fft // 2, n_fft // 2), mode='reflect')
  w = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
  return np.array([np.abs(np.fft.rfft(xp[m * hop:m * hop + n_fft] * w)) ** 2
                   for m in range(1 + len(x) // hop)])


def _np_linear_fb(sr, n_fft, n_filters):
  freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
  corners = np.linspace(0, sr / 2, n_filters + 2)
  fb = np.zeros((len(freqs), n_filters))
  for m in range(n_filters):
    lo, mid, hi = corners[m:m + 3]
    fb[:, m] = np.clip(np.minimum((freqs - lo) / (mid - lo),
                                  (hi - freqs) / (hi - mid)), 0, None)
  return fb


def test_spectral_scaled_loss_matches_numpy():
  rng = np.random.default_rng(0)
  x1 = rng.normal(size=(2, 800)) * 0.3
  x1[:, 300:500] = 0.0  # silence: the scale clamps at 1e2
  x1[1] *= 1e3  # loud: the scale clamps at 1e-2 in places
  err = rng.normal(size=(2, 800)) * 0.05
  fb = _np_linear_fb(8000, 128, 32)
  total = 0.0
  for i in range(2):
    s_err = _np_power_spec(err[i], 128, 32) @ fb
    s_ref = _np_power_spec(x1[i], 128, 32) @ fb
    scale = np.clip((s_ref + 1e-7) ** -0.5, 1e-2, 1e2)
    total += np.sum(s_err * scale)
  ref = total / (2 * s_err.shape[0] * 32)  # / (#frames * #filters)
  ours = f2g.spectral_scaled_loss(
      jnp.asarray(err, jnp.float32), jnp.asarray(x1, jnp.float32),
      sample_rate=8000, n_fft=128, hop=32, n_filters=32)
  np.testing.assert_allclose(ours, ref, rtol=2e-3)
  # Both clamps are active in this example.
  s_all = np.stack([_np_power_spec(x1[i], 128, 32) @ fb for i in range(2)])
  sc = (s_all + 1e-7) ** -0.5
  assert (sc > 1e2).any() and (sc < 1e-2).any()


def test_endpoint_euler_equals_velocity_form():
  rng = np.random.default_rng(1)
  x = jnp.asarray(rng.normal(size=(3, 50)), jnp.float32)
  xhat1 = jnp.asarray(rng.normal(size=(3, 50)), jnp.float32)
  t = jnp.asarray([0.0, 0.3, 0.9])
  v = f2g.endpoint_velocity(xhat1, x, t)
  # Velocity form: v = xhat1 - xhat0, xhat0 the x0 of the straight path
  # through x at time t ending at xhat1: x = (1 - t) xhat0 + t xhat1.
  xhat0 = (x - t[:, None] * xhat1) / (1 - t[:, None])
  np.testing.assert_allclose(v, xhat1 - xhat0, rtol=1e-5, atol=1e-5)
  # Whole samplers: endpoint net f vs velocity net (f(x, t) - x) / (1 - t).
  w = jnp.asarray(rng.normal(size=(50, 50)) / 10, jnp.float32)
  f = lambda x, t: jnp.tanh(x @ w) + t[:, None]
  g = lambda x, t: (f(x, t) - x) / (1 - t[:, None])
  for n in (1, 2, 4):
    np.testing.assert_allclose(
        f2g.euler_sample(f, x, n, pred_x1=True),
        f2g.euler_sample(g, x, n, pred_x1=False), rtol=1e-5, atol=1e-5)
  # One endpoint Euler step lands exactly on the prediction at t = 0.
  np.testing.assert_allclose(f2g.euler_sample(f, x, 1, pred_x1=True),
                             f(x, jnp.zeros(3)), atol=1e-6)


def test_oracle_fm_losses_vanish_and_oracle_samplers_are_exact():
  x1 = audio.synth_batch(jax.random.key(0), 2)['audio']
  key = jax.random.key(3)
  k0, kt = jax.random.split(key)
  x0 = 0.1 * jax.random.normal(k0, x1.shape)  # what fm_loss draws
  t = jax.random.uniform(kt, (2,))
  xt = (1 - t[:, None]) * x0 + t[:, None] * x1

  def endpoint_oracle(x, tt):
    np.testing.assert_allclose(x, xt, atol=1e-6)  # (FM-1)
    np.testing.assert_allclose(tt, t)
    return x1

  kw = dict(noise_scale=0.1, spec_kwargs=dict(sample_rate=8000, n_fft=256,
                                              hop=64, n_filters=64))
  for spectral in (False, True):
    assert float(f2g.fm_loss(endpoint_oracle, x1, key, pred_x1=True,
                             spectral=spectral, **kw)) < 1e-10
    loss = jax.jit(lambda f, pred_x1, spectral=spectral: f2g.fm_loss(
        f, x1, key, pred_x1=pred_x1, spectral=spectral, **kw),
                   static_argnums=(0, 1))
    vel_oracle = lambda x, tt: x1 - x0
    assert float(loss(vel_oracle, False)) < 1e-10
    # A wrong target is penalised: predicting x1 - x0 for the endpoint.
    assert float(loss(vel_oracle, True)) > 1e-4
  # Oracles on the straight path reach x1 in any number of Euler steps.
  ep = lambda x, tt: x1
  vel = lambda x, tt: x1 - (x - tt[:, None] * x1) / (1 - tt[:, None])
  for n in (1, 3):
    np.testing.assert_allclose(f2g.euler_sample(ep, x0, n, pred_x1=True), x1,
                               atol=1e-5)
    np.testing.assert_allclose(f2g.euler_sample(vel, x0, n, pred_x1=False),
                               x1, atol=1e-5)


def test_hinge_and_feature_matching_hand_cases():
  real = [jnp.array([2.0, 0.5]), jnp.array([-1.0])]
  fake = [jnp.array([-2.0, 0.0]), jnp.array([1.0])]
  # D: mean(relu(1 - [2, .5])) = .25, mean(relu(1 + [-2, 0])) = .5;
  #    relu(1 + 1) = 2 and relu(1 - (-1)) = 2 -> 0.25 + 0.5 + 2 + 2.
  assert float(f2g.hinge_d_loss(real, fake)) == pytest.approx(4.75)
  # G: mean(relu(1 - [-2, 0])) = 2, relu(1 - 1) = 0.
  assert float(f2g.hinge_g_loss(fake)) == pytest.approx(2.0)
  fr = [[jnp.ones((2, 3)), jnp.zeros(4)], [jnp.full((5,), 2.0)]]
  ff = [[jnp.zeros((2, 3)), jnp.full((4,), -0.5)], [jnp.full((5,), 1.0)]]
  assert float(f2g.feature_matching_loss(fr, ff)) == pytest.approx(2.5)
  # The real side is a constant: no gradient flows into it.
  g = jax.grad(lambda r: f2g.feature_matching_loss([[r]], [[jnp.zeros(3)]]))(
      jnp.ones(3))
  np.testing.assert_array_equal(g, 0.0)


class _TableDisc:
  """Stands in for `Discriminators`: apply(g, y) gives the hand case above
  (MP: one discriminator, real scores [2, .5], fake [-2, 0], maps as `fr` /
  `ff`'s first; MR: real [-1], fake [1], maps [2] * 5 / [1] * 5) for y the
  real clips and for any other y, each output times the parameter g."""

  def __init__(self, real):
    self.real = real

  def apply(self, g, y):
    r = jnp.all(y == self.real).astype(jnp.float32)   # 1: the real clips
    pick = lambda a, b: g * (r * jnp.asarray(a) + (1 - r) * jnp.asarray(b))
    return {'mp': [(pick([2.0, 0.5], [-2.0, 0.0]),
                    [pick(jnp.ones((2, 3)), jnp.zeros((2, 3))),
                     pick(jnp.zeros(4), jnp.full((4,), -0.5))])],
            'mr': [(pick([-1.0], [1.0]),
                    [pick(jnp.full((5,), 2.0), jnp.full((5,), 1.0))])]}


_MEL_KW = dict(sample_rate=8000, mel_n_ffts=(32, 128), mel_n_mels=(5, 20))


def test_gan_losses_weigh_the_hand_cases():
  x = audio.synth_batch(jax.random.key(1), 2)['audio']
  y = 0.5 * x
  disc = _TableDisc(x)
  mel = float(f2g.multiscale_mel_loss(x, y, 8000, (32, 128), (5, 20)))
  # (GAN-1): L_D^MP = .25 + .5, L_D^MR = 2 + 2 (the hinge hand case).
  d, dp = f2g.discriminator_loss(disc, 1.0, x, y)
  assert float(dp['d_mp']) == pytest.approx(0.75)
  assert float(dp['d_mr']) == pytest.approx(4.0)
  assert float(d) == pytest.approx(0.75 + 0.1 * 4.0)        # 1.0 / 0.1
  w = f2g.GANWeights(adv_mp=2.0, adv_mr=3.0, fm_mp=0.5, fm_mr=4.0, mel=1.0,
                     disc_mp=2.0, disc_mr=0.5)
  assert float(f2g.discriminator_loss(disc, 1.0, x, y, w)[0]) == (
      pytest.approx(2 * 0.75 + 0.5 * 4.0))
  # The fake side is held constant in the discriminators' loss (not in the
  # generator's): a discriminator linear in y.
  lin = types.SimpleNamespace(apply=lambda g, v: {
      k: [(g * v[:, :4], [g * v[:, :4]])] for k in ('mp', 'mr')})
  grad = lambda fn: jax.jit(jax.grad(lambda f: fn(lin, 1.0, x, f)[0]))(y)
  np.testing.assert_array_equal(grad(f2g.discriminator_loss), 0.0)
  assert np.abs(grad(functools.partial(f2g.generator_loss, **_MEL_KW))[
      :, :4]).min() > 0
  # (GAN-2): adv_MP = mean(relu(1 - [-2, 0])) = 2, adv_MR = relu(1 - 1) = 0,
  # FM_MP = 1 + .5, FM_MR = 1, mel as multiscale_mel_loss.
  g, gp = f2g.generator_loss(disc, 1.0, x, y, **_MEL_KW)
  want = {'adv_mp': 2.0, 'adv_mr': 0.0, 'fm_mp': 1.5, 'fm_mr': 1.0,
          'mel': mel}
  assert {k: float(v) for k, v in gp.items()} == pytest.approx(want)
  assert float(g) == pytest.approx(2.0 + 0.0 + 1.5 + 0.1 * 1.0 + 45 * mel,
                                   rel=1e-6)
  assert float(f2g.generator_loss(disc, 1.0, x, y, w, **_MEL_KW)[0]) == (
      pytest.approx(2 * 2.0 + 0.5 * 1.5 + 4.0 * 1.0 + mel, rel=1e-6))


def test_mel_only_generator_loss_ignores_the_discriminators():
  x = audio.synth_batch(jax.random.key(1), 2)['audio']
  y = 0.5 * x
  disc = _TableDisc(x)
  loss = lambda g, w, d=disc: jax.value_and_grad(
      lambda f: f2g.generator_loss(d, g, x, f, w, **_MEL_KW)[0])(y)
  full = f2g.GANWeights()
  # The full loss moves with the discriminators' parameters ...
  assert float(loss(2.0, full)[0]) != pytest.approx(float(loss(1.0, full)[0]))
  # ... the mel-only one does not: same value and gradient for any
  # parameters, and without discriminators at all.
  mo = full.mel_only()
  assert mo == f2g.GANWeights(0.0, 0.0, 0.0, 0.0, 45.0, 1.0, 0.1)
  assert full.uses_discriminator and not mo.uses_discriminator
  ref_val, ref_grad = loss(None, mo, None)
  for g in (1.0, 2.0, -3.0):
    val, grad = loss(g, mo)
    assert float(val) == float(ref_val)
    np.testing.assert_array_equal(grad, ref_grad)
  mel = f2g.multiscale_mel_loss(x, y, 8000, (32, 128), (5, 20))
  val, parts = f2g.generator_loss(None, None, x, y, mo, **_MEL_KW)
  assert list(parts) == ['mel'] and float(val) == float(45.0 * mel)
  # A traced weight counts as used (its value is not known when tracing).
  seen = []
  jax.jit(lambda a: seen.append(
      f2g.GANWeights(0.0, 0.0, a, 0.0).uses_discriminator) or a)(0.0)
  assert seen == [True]


def test_gan_settings_and_weights_default_to_the_default_config():
  c = f2g_config.get_config()
  assert f2g.gan_weights(c) == f2g.GANWeights()
  assert f2g.gan_weights(f2g.GANSettings()) == f2g.GANWeights()
  for k, v in f2g.GANSettings()._asdict().items():
    assert v == (tuple(c[k]) if isinstance(v, tuple) else c[k]), k


def test_multiscale_mel_loss():
  x = audio.synth_batch(jax.random.key(1), 2)['audio']
  kw = dict(sample_rate=8000, n_ffts=(32, 128), n_mels=(5, 20))
  assert float(f2g.multiscale_mel_loss(x, x, **kw)) == 0.0
  y = 0.5 * x  # halving the magnitude: |log 0.5| on bins above the floor
  val = float(f2g.multiscale_mel_loss(x, y, **kw))
  ref = 0.0
  for nf, nm in zip((32, 128), (5, 20)):
    a = audio.mel_spectrogram(x, 8000, nf, nf // 4, nm)
    ref += float(jnp.mean(jnp.abs(jnp.log(jnp.maximum(a, 1e-7))
                                  - jnp.log(jnp.maximum(0.5 * a, 1e-7)))))
  assert val == pytest.approx(ref, rel=1e-4)
  assert 0.3 < val / 2 < np.log(2) + 1e-4  # gaps sit at the floor


def test_branch_dropout_weights():
  w = np.asarray(f2g.branch_dropout_weights(jax.random.key(0), 4000, 3, 0.5))
  dropped = (w == 0).any(1)
  assert 0.45 < dropped.mean() < 0.55
  np.testing.assert_allclose(w[~dropped], 1.0)
  np.testing.assert_allclose(np.sort(w[dropped], 1), np.tile([0, 1.5, 1.5], (
      dropped.sum(), 1)))
  np.testing.assert_allclose(w.mean(1), 1.0)  # the average is unbiased
  np.testing.assert_array_equal(
      f2g.branch_dropout_weights(jax.random.key(0), 5, 1, 0.5), 1.0)


@pytest.fixture(scope='module')
def smoke_cfg():
  return f2g_config.get_config('smoke')


def test_generator_shapes_branch_average_and_discriminators(smoke_cfg):
  c = smoke_cfg.copy_and_resolve_references()
  c.n_ffts, c.hops, c.channels = (128, 64, 32), (64, 32, 16), (8, 8, 8)
  c.num_layers = 1
  model = f2g.make_generator(c, 'multi')
  mel, x, t = f2g._example_inputs(c, 2)  # pylint: disable=protected-access
  x = jax.random.normal(jax.random.key(0), x.shape)
  params = random_params(model.init, mel, x, t, seed=1,
                         method=f2g.Generator.init_all)
  # Rows 0-2: only branch i, weight 3 (undoes the mean); row 3: branch 0
  # dropped, the others rescaled by 3 / 2.
  rows = jnp.concatenate([jnp.eye(3) * 3, jnp.array([[0.0, 1.5, 1.5]])])

  @jax.jit
  def outputs(params):
    cond = model.apply(params, mel, method=f2g.Generator.encode)
    per_row = jax.vmap(lambda r: model.apply(
        params, x, t, cond, jnp.tile(r[None], (2, 1))))(rows)
    return cond, model.apply(params, x, t, cond), list(per_row[:3]), per_row[3]

  cond, out, single, dropped = outputs(params)
  assert cond.shape == (2, 1 + c.clip_length // c.mel_hop, c.cond_channels)
  assert out.shape == x.shape and np.isfinite(np.asarray(out)).all()
  np.testing.assert_allclose(out, sum(single) / 3, atol=1e-6)
  # Dropping branch 0 with weights (0, 1.5, 1.5) = mean of the others.
  np.testing.assert_allclose(dropped, (single[1] + single[2]) / 2, atol=1e-6)
  up = f2g.upsample_cond(jnp.arange(3.0)[None, :, None], 2, 5)
  np.testing.assert_array_equal(up[0, :, 0], [0, 0, 1, 1, 2])
  disc = f2g.Discriminators(periods=(2, 3), mp_channels=(4, 4),
                            resolutions=(64, 128), mr_channels=4)
  dp = random_params(disc.init, x, seed=2)
  outs = jax.jit(disc.apply)(dp, x)
  assert len(outs['mp']) == 2 and len(outs['mr']) == 2
  # Feature maps leave out each stack's first conv (the reference's
  # discriminators.py:95 and :206; tests/parity/test_flow2gan.py compares).
  for score, fmaps in outs['mp']:
    assert score.shape[0] == 2 and len(fmaps) == 2  # 2nd conv + post
  for score, fmaps in outs['mr']:
    # 5 bands x (3 strided + last) + post.
    assert score.shape[0] == 2 and len(fmaps) == 21


def test_mrd_input_normalises_and_splits_bands():
  # DC removed, peak 0.8, complex STFT (hop n_fft / 4) cut at int(f K),
  # K = 33 bins for n_fft 64 (the reference's discriminators.py:166-196).
  t = np.arange(512) / 8000.0
  y = jnp.asarray(np.stack([3.0 + np.sin(2 * np.pi * 440 * t),
                            0.01 * np.cos(2 * np.pi * 1000 * t)]), jnp.float32)
  bands = f2g.mrd_input(y, 64)
  assert [b.shape[-2] for b in bands] == [3, 5, 8, 8, 9]
  z = y - y.mean(-1, keepdims=True)
  z = 0.8 * z / (jnp.abs(z).max(-1, keepdims=True) + 1e-9)
  s = audio.stft(z, 64, 16)
  np.testing.assert_allclose(jnp.concatenate(bands, -2),
                             jnp.stack([s.real, s.imag], -1), atol=1e-6)


@pytest.mark.parametrize('variant', ['default', 'paper'])
def test_multi_and_single_branch_parameter_counts_match(variant):
  # The paper's single branch is 1098 wide (78.9M parameters; a search
  # capped at 1024 gave 70.6M).
  c = f2g_config.get_config(variant)
  multi = f2g.param_count(f2g.make_generator(c, 'multi'), c)
  single_model = f2g.make_generator(c, 'single')
  single = f2g.param_count(single_model, c)
  assert len(single_model.n_ffts) == 1
  assert single_model.n_ffts[0] == c.single_n_fft
  assert abs(single - multi) / multi < 0.02, (multi, single)


# -- the default run (slow) --------------------------------------------------------------
@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  from experiments.flow2gan import EXPERIMENT  # pylint: disable=g-import-not-at-top
  return EXPERIMENT.execute(f2g_config.get_config(),
                            tmp_path_factory.mktemp('flow2gan') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('prefix', ['(i)', '(ii)'])
def test_default_run_claims(default_run, prefix):
  # At 3f70e19 (600 FM steps, 3 seeds, 868 s idle): (i) gap RMS at 2 steps
  # velocity 7.00e-3 vs endpoint 1.73e-3 (4.0x; velocity's seed spread
  # 1.16x), LSD 28.58 vs 15.89 dB; (ii) quiet-bin LSD spectral 11.18 vs MSE
  # 25.37 dB (56% lower; seed spread 1.7%). Both far beyond their bars.
  c = _claim(default_run, prefix)
  assert c['holds'], c
  assert c['control'].endswith('(fails)'), c


def _per_seed(summary, key):
  return np.asarray(summary['metrics'][key]['per_seed'], float)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'measured at 3f70e19 (3 seeds): the 1-step GAN-tuned generator 14.63 dB '
    'LSD vs the mel-only-tuned 14.60 (mel-only - GAN -0.04 +- 0.01 dB, '
    'lower on every seed) and the 4-step teacher 15.52: the 45x mel L1 '
    'alone makes the gain; 100 GAN steps add nothing measurable on LSD'))
def test_default_run_gan_claim(default_run):
  assert _claim(default_run, '(iii)')['holds']


@pytest.mark.slow
def test_default_run_gan_claim_follows_its_rule(default_run):
  """(iii) against the mel-only control: its verdict is its rule on the
  recorded per-seed LSDs (paired CI), and its control fails whenever it
  holds."""
  c = _claim(default_run, '(iii)')
  gan = _per_seed(default_run, 'lsd/gan1_1step')
  mel_only = _per_seed(default_run, 'lsd/melonly1_1step')
  teacher = _per_seed(default_run, 'lsd/endpoint_4step')
  d, ci = log_lib.mean_ci95(mel_only - gan)
  assert c['holds'] == bool(gan.mean() <= teacher.mean() and d - ci > 0), c
  assert c['control'].endswith('(passes)' if (
      mel_only.mean() <= teacher.mean() and -d - ci > 0) else '(fails)'), c
  assert not c['holds'] or c['control'].endswith('(fails)'), c


@pytest.fixture(scope='module')
def branches_run(tmp_path_factory):
  from experiments.flow2gan import EXPERIMENT  # pylint: disable=g-import-not-at-top
  return EXPERIMENT.execute(f2g_config.get_config('branches'),
                            tmp_path_factory.mktemp('flow2gan_b') / 'run')


# At 16bf032 (16 seeds, 600 FM steps, 641 s idle): single - multi +1.27 +-
# 0.16 dB (LSD multi 15.73 vs single 17.00), the null control single vs
# single +0.07 +- 0.09: decisive, so the verdict is pinned. (At 14b389d, 8
# seeds x 300 FM steps, it was +0.32 +- 0.30, too thin to pin.)
@pytest.mark.slow
def test_branches_claim_follows_its_ci(branches_run):
  c = _claim(branches_run, '(iv)')
  diff = (_per_seed(branches_run, 'lsd/single_2step')
          - _per_seed(branches_run, 'lsd/endpoint_2step'))
  assert len(diff) == f2g_config.get_config('branches').num_seeds == 16
  d, ci = log_lib.mean_ci95(diff)
  verdict = ('multi better' if d - ci > 0 else 'single better'
             if d + ci < 0 else 'no difference')
  assert f'over 16 seeds ({verdict})' in c['evidence'], (c, d, ci)
  assert c['holds'] == (d - ci > 0), (c, d, ci)
  assert c['control'].endswith('(fails)'), c
  assert c['holds'], c


def test_branch_claim_is_a_paired_ci_with_a_null_control():
  c = f2g_config.get_config('branches')
  single = np.array([17.0, 17.1, 16.9, 17.2, 17.0, 17.1, 16.9, 17.0])

  def claim(multi):
    m = {'lsd/endpoint_2step': np.asarray(multi), 'lsd/single_2step': single,
         'params/endpoint': np.full(8, 1e5), 'params/single': np.full(8, 1e5)}
    (cl,) = [x for x in f2g_exp.evaluate_claims(c, m) if x.claim.startswith('(iv)')]
    return cl

  win = claim(single - 0.3 + 0.02 * np.arange(8) % 0.05)
  assert win.holds and 'multi better' in win.evidence, win
  assert win.control.endswith('(fails)'), win      # single vs single: no win
  tie = claim(single[::-1])                         # same values, re-paired
  assert not tie.holds and 'no difference' in tie.evidence, tie
  lose = claim(single + 0.3)
  assert not lose.holds and 'single better' in lose.evidence, lose


def test_gan_claim_is_judged_against_the_mel_only_control():
  c = f2g_config.get_config()

  def claim(gan, mel_only, teacher=16.8):
    m = {}
    for tag, v in (('gan1_1step', gan), ('melonly1_1step', mel_only),
                   ('endpoint_4step', teacher), ('endpoint_1step', 17.7)):
      m[f'lsd/{tag}'] = np.asarray(v, float) + np.array([0.0, 0.1, -0.1])
      m[f'mrstft/{tag}'] = np.full(3, 3.0)
    (cl,) = [x for x in f2g_exp.evaluate_claims(c, m)
             if x.claim.startswith('(iii)')]
    return cl

  win = claim(15.5, 16.0)
  assert 'below the mel-only-tuned 1-step generator' in win.claim
  assert win.holds and win.control.endswith('(fails)'), win
  assert 'mel-only - GAN +0.50 +- 0.00 dB, paired over 3 seeds' in (
      win.evidence)
  assert 'teacher untuned at 1 step(s) 17.70 dB' in win.evidence
  # The mel L1 alone does as well: the claim fails and its control, in the
  # GAN's place, passes.
  lose = claim(15.5, 15.3)
  assert not lose.holds and lose.control.endswith('(passes)'), lose
  tie = claim(15.5, 15.5)
  assert not tie.holds and tie.control.endswith('(fails)'), tie
  # Both tuned generators above the teacher: both fail the rule.
  worse = claim(17.0, 17.5)
  assert not worse.holds and worse.control.endswith('(fails)'), worse
  # A mean gain inside the seed noise (+0.11 +- 0.77 dB) decides nothing.
  noisy = claim(15.5, 15.58 + np.array([0.3, -0.3, 0.1]))
  assert not noisy.holds and noisy.control.endswith('(fails)'), noisy


def test_ratio_claims_need_a_bar_above_the_seed_spread():
  c = f2g_config.get_config()

  def claim(velocity_gap_rms):
    m = {'lsd/endpoint_2step': np.full(3, 17.0),
         'lsd/velocity_2step': np.full(3, 30.0),
         'gap_rms/endpoint_2step': np.full(3, 1e-3),
         'gap_rms/velocity_2step': np.asarray(velocity_gap_rms, float)}
    (cl,) = [x for x in f2g_exp.evaluate_claims(c, m)
             if x.claim.startswith('(i)')]
    return cl

  win = claim([7e-3, 8e-3, 9e-3])                 # 8x, seed spread 1.3x
  assert win.holds and win.control.endswith('(fails)'), win
  noisy = claim([2e-3, 8e-3, 14e-3])              # 8x, but spread 7x
  assert not noisy.holds and noisy.control.endswith('(passes)'), noisy


# -- the paper variant's LibriTTS path ----------------------------------------------------
def _tiny_paper_config(data_dir):
  """The paper variant (dataset='libritts') at toy sizes on 8 kHz files:
  one 32-point branch without ConvNeXt blocks, no GAN stage (its data path
  is checked by the jaxpr test below); the GAN's n_ffts only shrink to pass
  the clip-length check."""
  c = f2g_config.get_config('paper')
  c.update(dict(
      data_dir=str(data_dir), num_seeds=1, sample_rate=8000, clip_length=512,
      mel_n_fft=64, mel_hop=32, n_mels=8, n_ffts=(32,), hops=(16,),
      channels=(4,), num_layers=0, kernel=3, hidden_factor=1,
      cond_channels=4, cond_layers=0, time_dim=4, single_n_fft=64,
      single_hop=32, loss_n_fft=64, loss_hop=32, loss_n_filters=8,
      fm_variants=('endpoint',), gan_num_steps=(), eval_steps=(1,),
      headline_steps=1, teacher_steps=1, fm_steps=2, batch_size=2,
      warmup_steps=1, mr_n_ffts=(64,), mel_loss_n_ffts=(64,),
      mel_loss_n_mels=(8,), num_test=2, eval_batch=2, lsd_n_fft=64,
      steps_per_chunk=2, log_every=1))
  return c


def test_paper_variant_needs_a_wav_folder(tmp_path):
  from experiments.flow2gan import EXPERIMENT  # pylint: disable=g-import-not-at-top
  from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
  (tmp_path / 'empty' / 'train-clean-100').mkdir(parents=True)
  for d in ('', str(tmp_path / 'absent'), str(tmp_path / 'empty')):
    c = f2g_config.get_config('paper')
    c.data_dir = d
    EXPERIMENT.validate(c)                     # a valid config: data is absent
    with pytest.raises(launch.MissingDataError) as e:
      EXPERIMENT.execute(c, tmp_path / 'run')
    msg = str(e.value)
    assert '\n' not in msg and f'data_dir={d!r} has no .wav files' in msg
    assert '<data_dir>/<subset>/<speaker>/<chapter>/*.wav at 24000 Hz' in msg
    assert '--config.data_dir=' in msg
    assert not (tmp_path / 'run').exists()     # stopped before any work


def test_paper_variant_reads_a_libritts_folder(libritts_dir):
  c = _tiny_paper_config(libritts_dir)
  train, test = f2g_exp.load_data(c)
  # Four training files (one clip each, the 0.1 s one padded), two held out.
  assert train.shape == (4, 512) and test['audio'].shape == (2, 512)
  assert (train[3, 800:] == 0).all() and np.abs(train).max() <= 1.0
  # The pool is a whole number of batches (so it splits over the data axis
  # with the batch): the last clips are dropped, the others unchanged.
  c3 = _tiny_paper_config(libritts_dir)
  c3.batch_size = 3
  np.testing.assert_array_equal(f2g_exp.load_data(c3)[0], train[:3])
  paper = f2g_config.get_config('paper')
  assert f2g_exp.pool_size(f2g_exp.LIBRITTS_TRAIN_FILES, paper) == 354_752
  assert f2g_exp.pool_size(5, paper) == 5    # under one batch: all kept


@pytest.mark.slow   # a second smoke run at the paper variant's layout
                    # (~15 s); the folder reading above stays in the default
def test_paper_variant_trains_on_a_libritts_folder(libritts_dir, tmp_path):
  from experiments.flow2gan import EXPERIMENT  # pylint: disable=g-import-not-at-top
  c = _tiny_paper_config(libritts_dir)
  s = EXPERIMENT.execute(c, tmp_path / 'run', quiet=True)
  assert s['config']['dataset'] == 'libritts'
  for k in ('lsd', 'lsd_quiet', 'mrstft'):
    assert np.isfinite(s['metrics'][f'{k}/endpoint_1step']['mean']), k
  rows = [r for r in log_lib.read_metrics(tmp_path / 'run')
          if 'endpoint/loss' in r]
  assert len(rows) == 2 and all(np.isfinite(r['endpoint/loss']) for r in rows)


def _dependent_outputs(jaxpr, in_indices) -> set[int]:
  """The outputs of a (closed) jaxpr computed from any of its inputs
  `in_indices`, by forward propagation over its equations (an equation with
  a dependent input makes all its outputs dependent)."""
  jaxpr = jaxpr.jaxpr
  dep = {jaxpr.invars[i] for i in in_indices}
  for e in jaxpr.eqns:
    if any(isinstance(v, jex_core.Var) and v in dep for v in e.invars):
      dep.update(e.outvars)
  return {i for i, v in enumerate(jaxpr.outvars)
          if isinstance(v, jex_core.Var) and v in dep}


def _depends_on_last_input(jaxpr, out_index):
  return out_index in _dependent_outputs(jaxpr, [len(jaxpr.jaxpr.invars) - 1])


def test_data_steps_train_on_the_clips(smoke_cfg):
  """With from_data the FM loss is computed from the step's `data` argument
  (an input of the compiled loop, not a constant); the GAN's mel loss: the
  test below."""
  c = smoke_cfg
  model = f2g.make_generator(c)
  clips = jax.ShapeDtypeStruct((5, c.clip_length), jnp.float32)
  fm_init, fm_step = f2g.make_fm_trainer(model, c, pred_x1=True, spectral=True,
                                         from_data=True)
  fm_state = jax.eval_shape(fm_init, jax.random.key(0))
  args = (fm_state, jnp.int32(0), clips)
  jaxpr, shapes = jax.make_jaxpr(fm_step, return_shape=True)(*args)  # 1 trace
  (idx,) = _leaf_indices(shapes, "[1]['loss']")
  assert _depends_on_last_input(jaxpr, idx)


def _leaf_indices(tree, prefix):
  """Flat indices of the leaves of `tree` whose key path starts with prefix."""
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  return [i for i, (path, _) in enumerate(leaves)
          if jax.tree_util.keystr(path).startswith(prefix)]


@pytest.mark.parametrize('stage', ['gan', 'melonly'])
def test_gan_steps_run_the_discriminators_only_when_weighted(smoke_cfg, stage):
  """The experiment's stage-2 steps, traced: with the mel-only weights the
  generator's loss is not computed from the discriminators' parameters,
  and the new state holds the given discriminators and their optimiser
  state unchanged (the very inputs); with the GAN's, both are computed.
  Either way (from_data) the mel loss is computed from the step's clips.
  The mel-only step runs the recorded variants' per-leaf optimiser state,
  the GAN step the smoke's flat one (`flat_optimizer`)."""
  c = smoke_cfg.copy_and_resolve_references()
  c.flat_optimizer = stage == 'gan'
  model, disc = f2g.make_generator(c), f2g.make_discriminators(c)
  params = jax.eval_shape(lambda k: model.init(
      k, *f2g._example_inputs(c), method=f2g.Generator.init_all),  # pylint: disable=protected-access
                          jax.random.key(0))
  init, step = f2g.make_gan_trainer(model, disc, c, 1, from_data=True,
                                    weights=f2g_exp.stage_weights(c, stage))
  state = jax.eval_shape(init, jax.random.key(0), params)
  clips = jax.ShapeDtypeStruct((5, c.clip_length), jnp.float32)
  args = (state, jnp.int32(0), clips)
  jaxpr, out_shapes = jax.make_jaxpr(step, return_shape=True)(*args)
  ins = [i for p in ('[0].disc', '[0].disc_opt')
         for i in _leaf_indices(args, p)]
  (g_loss,) = _leaf_indices(out_shapes, "[1]['g_loss']")
  new_disc = [jaxpr.jaxpr.outvars[i]
              for p in ('[0].disc', '[0].disc_opt')
              for i in _leaf_indices(out_shapes, p)]
  dependent = _dependent_outputs(jaxpr, ins)
  (mel,) = _leaf_indices(out_shapes, "[1]['mel']")
  assert _depends_on_last_input(jaxpr, mel)
  metrics = set(out_shapes[1])
  if stage == 'melonly':
    assert metrics == {'g_loss', 'mel'}, metrics
    assert g_loss not in dependent
    assert new_disc == [jaxpr.jaxpr.invars[i] for i in ins]
  else:
    assert metrics == {'g_loss', 'mel', 'adv_mp', 'adv_mr', 'fm_mp', 'fm_mr',
                       'd_loss', 'd_mp', 'd_mr'}, metrics
    assert g_loss in dependent
    assert not set(new_disc) & {jaxpr.jaxpr.invars[i] for i in ins}


def _docstring_example(fn) -> str:
  """The ```python block of `fn`'s docstring, dedented."""
  block = fn.__doc__.split('```python', 1)[1].split('```', 1)[0]
  return textwrap.dedent(block)


def test_make_gan_trainer_docstring_example_traces(monkeypatch):
  """make_gan_trainer's docstring example up to its training loop, with
  jax.jit traced only (jax.eval_shape; its compile is ~20 s, the slow test
  below runs it): the GAN stage on a user's own generator and clips
  (GANSettings, no experiment config) builds, and one step gives the
  discriminators' and generator's losses."""
  code = _docstring_example(f2g.make_gan_trainer)
  head, loop_ = code.split('for t in range(3):')
  assert 'step(state, t, clips)' in loop_
  monkeypatch.setattr(jax, 'jit', lambda fn, **kw: functools.partial(
      jax.eval_shape, fn))
  ns = {}
  exec(head, ns)  # pylint: disable=exec-used
  state, m = ns['step'](ns['state'], 0, ns['clips'])
  assert {'d_loss', 'g_loss', 'mel'} <= set(m), m
  assert all(v.shape == () for v in m.values()), m
  assert jax.tree.structure(state) == jax.tree.structure(ns['state'])


@pytest.mark.slow   # compiles the GAN step (~20 s); traced above
def test_make_gan_trainer_docstring_example_runs(capsys):
  """The GAN stage on a user's own generator and clips (GANSettings, no
  experiment config), as make_gan_trainer's docstring shows."""
  exec(_docstring_example(f2g.make_gan_trainer), {})  # pylint: disable=exec-used
  rows = capsys.readouterr().out.strip().splitlines()
  assert [r.split()[0] for r in rows[:3]] == ['0', '1', '2'], rows
  vals = np.array([[float(v) for v in r.split()[1:]] for r in rows[:3]])
  assert vals.shape == (3, 3) and np.isfinite(vals).all() and (vals > 0).all()
  assert rows[3] == '(4, 512)', rows
