"""LightCtrl: filter shape and limits, the injection (and its release
coordinates on a flow latent), trajectories, the sampler against plain
Euler, the relighter's and the prior's training batches, the scores, the
pipeline with analytic surrogates (filter, mix and injection against the
release: tests/parity/test_lightctrl.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.diffusion import flow
from iclrjax.diffusion import lightctrl as lc


def test_butterworth_at_zero_at_cutoff_and_monotone():
  # u = 2k / K - 1 on each axis: 0 at k = K / 2 (on a 2 x 2 x K grid the
  # row [1, 1, :] runs along w through the centre; a size-1 axis has u = -1).
  k = 64
  for d in (0.25, 0.5, 0.75):
    row = np.asarray(lc.butterworth((2, 2, k), d))[1, 1]
    u = 2 * np.arange(k) / k - 1
    assert row[k // 2] == 1.0                              # H(0) = 1
    # u = d exactly at k = K (1 + d) / 2: H = 1/2.
    np.testing.assert_allclose(row[int(k * (1 + d) / 2)], 0.5, atol=1e-6)
    right = row[k // 2:]
    assert np.all(np.diff(right) <= 0)                     # monotone in d
    np.testing.assert_allclose(row, 1 / (1 + (u ** 2 / d ** 2) ** 4),
                               rtol=1e-5)
  assert not np.any(np.asarray(lc.butterworth((2, 4, 4), 0.0)))  # d_s = 0


@pytest.mark.parametrize('axes', ['chw', 'thw'])
def test_freq_mix_limits_and_filter_placement(axes):
  # Against the release: tests/parity/test_lightctrl.py (fixture).
  rng = np.random.default_rng(0)
  x = rng.normal(size=(4, 8, 8, 3)).astype(np.float32)
  y = rng.normal(size=(4, 8, 8, 3)).astype(np.float32)
  one = jnp.ones((1, 1, 1, 1))
  np.testing.assert_allclose(lc.freq_mix(x, y, one, axes), x, atol=1e-5)
  np.testing.assert_allclose(lc.freq_mix(x, y, 0 * one, axes), y, atol=1e-5)
  # The filter's (T, H, W) sit on (C, H, W) ('chw') or (F, H, W) ('thw').
  lpf = lc.freq_filter(x.shape, 0.6, axes)
  t_len = 3 if axes == 'chw' else 4
  bw = lc.butterworth((t_len, 8, 8), 0.6, 0.6)
  want = (jnp.transpose(bw, (1, 2, 0))[None] if axes == 'chw'
          else bw[..., None])
  np.testing.assert_array_equal(lpf, want)
  with pytest.raises(ValueError, match='fft_axes'):
    lc.freq_filter(x.shape, 0.5, 'hwc')


def test_injection_mask_bit_identical_outside_and_variance_inside():
  f, s = 4, 32
  pos, sig = lc.light_positions(lc.BGSource.LEFT_TO_RIGHT, f, s, s, 37.5)
  mask = lc.light_masks(jnp.asarray(pos), jnp.asarray(sig), s, s)
  z = jax.random.normal(jax.random.key(0), (f, s, s, 64))
  # The release's latent z = x0 + sigma eps, injected as it is.
  out = lc.inject_noise(z, jax.random.normal(jax.random.key(1), z.shape),
                        mask)
  m = np.broadcast_to(np.asarray(mask), z.shape)
  assert 0 < m.mean() < 0.5
  assert np.array_equal(np.asarray(out)[~m], np.asarray(z)[~m])
  inside = np.asarray(out)[m]
  assert inside.size > 10_000
  np.testing.assert_allclose(inside.var(), 0.8 ** 2 + 0.2 ** 2, rtol=0.05)
  # The blob: normalised Gaussian > 0.2 <=> distance < sigma sqrt(2 ln 5).
  g = lc.gaussian_map(jnp.array([10.0, 8.0]), 37.5 / 8, s, s)
  assert float(g[8, 10]) == 1.0
  yy, xx = np.mgrid[:s, :s]
  inside_disc = np.hypot(xx - 10, yy - 8) < 37.5 / 8 * np.sqrt(2 * np.log(5))
  np.testing.assert_array_equal(np.asarray(g) > 0.2, inside_disc)


def test_injection_in_release_coordinates():
  """On a flow latent x_t = (1 - t) (x0 + sigma eps), the release's
  z <- 0.8 eps' + 0.2 z acts on z = x0 + sigma eps: x_t <- (1 - t) 0.8 eps'
  + 0.2 x_t on the mask, untouched off it."""
  f, s, t = 4, 16, 0.6
  pos, sig = lc.light_positions(lc.BGSource.CIRCULAR, f, s, s, 37.5)
  mask = lc.light_masks(jnp.asarray(pos), jnp.asarray(sig), s, s)
  k0, k1, k2 = jax.random.split(jax.random.key(0), 3)
  x0 = jax.random.normal(k0, (f, s, s, 64))
  eps = jax.random.normal(k1, x0.shape)
  fresh = jax.random.normal(k2, x0.shape)
  x_t = flow.interpolate(x0, eps, t)
  out = np.asarray(lc.inject_flow(x_t, fresh, mask, t))
  m = np.broadcast_to(np.asarray(mask), x0.shape)
  assert np.array_equal(out[~m], np.asarray(x_t)[~m])
  z = x0 + lc.sigma_of(t) * eps          # the release's latent
  want = (1 - t) * lc.inject_noise(z, fresh, mask)
  np.testing.assert_allclose(out[m], np.asarray(want)[m], atol=1e-5)
  # Not the flow-coordinate injection (0.8 eps' + 0.2 x_t): the fresh noise
  # is (1 - t) times smaller.
  wrong = np.asarray(lc.inject_noise(x_t, fresh, mask))
  np.testing.assert_allclose(
      np.std(out[m] - 0.2 * np.asarray(x_t)[m]),
      (1 - t) * np.std(wrong[m] - 0.2 * np.asarray(x_t)[m]), rtol=1e-4)
  assert lc.sigma_of(0.5) == 1.0
  # `inject` is the same on a flow latent, its noise drawn from a key (no
  # flow-unaware entry point: the time is required).
  np.testing.assert_array_equal(
      lc.inject(x_t, k2, mask, t), lc.inject_flow(x_t, fresh, mask, t))
  with pytest.raises(TypeError):
    lc.inject(x_t, k2, mask)  # pylint: disable=no-value-for-parameter


def test_release_noise_levels_in_flow_time():
  """The release's strength 0.5 (sigma 2.19) and IC-Light's 0.9 (sigma
  14.3) as flow times, the inverse of sigma_of."""
  assert lc.flow_time(lc.sigma_of(0.3)) == pytest.approx(0.3)
  assert lc.flow_time(2.19) == pytest.approx(lc.SDEDIT_STRENGTH, abs=5e-3)
  assert lc.flow_time(14.3) == pytest.approx(lc.RELIGHT_STRENGTH, abs=5e-3)
  # The release's sigma: Euler-ancestral on linear betas (relight.py:42-46),
  # 50 linspace steps, strength 0.5 starts at the 26th.
  betas = np.linspace(0.00085, 0.012, 1000)
  ac = np.cumprod(1 - betas)
  t0 = np.linspace(0, 999, 50)[::-1][25]
  sigma = np.interp(t0, np.arange(1000), np.sqrt((1 - ac) / ac))
  assert sigma == pytest.approx(2.19, abs=0.01)


def test_light_positions_follow_the_reference():
  pos, sig = lc.light_positions(lc.BGSource.LEFT_TO_RIGHT, 8, 32, 32, 40.0)
  np.testing.assert_array_equal(pos[:, 0], [0, 4, 8, 13, 17, 22, 26, 31])
  np.testing.assert_array_equal(pos[:, 1], 8)
  np.testing.assert_array_equal(sig, 5.0)
  pos, _ = lc.light_positions(lc.BGSource.CIRCULAR, 5, 32, 32, 40.0)
  # int() truncates: 16 + 16 cos(3 pi / 2) = 16 - 3e-15 -> 15, as in the code.
  np.testing.assert_array_equal(pos, [[32, 16], [16, 32], [0, 16], [15, 0],
                                      [32, 15]])
  pos, _ = lc.light_positions(lc.BGSource.SMI_CIRCULAR, 3, 32, 32, 40.0)
  np.testing.assert_array_equal(pos, [[0, 16], [15, 0], [32, 15]])
  pos, sig = lc.light_positions(lc.BGSource.RADIUS_CHANGE, 3, 32, 32, 40.0)
  np.testing.assert_array_equal(sig, [2.5, 14.5, 27.5])


def test_schedule_and_fused_step():
  np.testing.assert_allclose(lc.lbd_schedule(5), [1, 0.75, 0.5, 0.25, 0])
  assert lc.num_fused_steps(5) == 4 and lc.num_fused_steps(25) == 21
  assert lc.num_fused_steps(10) == 8
  # A step towards the true x0 from a point on the straight path stays on it.
  x0, eps = jnp.ones((3,)), jnp.array([0.5, -1.0, 2.0])
  z = flow.interpolate(x0, eps, 0.6)
  np.testing.assert_allclose(lc.fused_step(z, x0, 0.6, 0.2),
                             flow.interpolate(x0, eps, 0.2), atol=1e-6)


@pytest.fixture(scope='module')
def world():
  f, s, h, amb = 4, 16, 6.0, 0.3
  sc = jax.jit(lc.scene, static_argnums=(1, 2, 3))(jax.random.key(3), f, s,
                                                   2, 0.5)
  pos, sig = lc.light_positions(lc.BGSource.LEFT_TO_RIGHT, f, s, s, 18.75)
  pos, sig = jnp.asarray(pos), jnp.asarray(sig)
  pos_l, sig_l = lc.light_positions(lc.BGSource.LEFT_TO_RIGHT, f, s // 2,
                                    s // 2, 18.75)
  source = lc.render(sc, jnp.array([12.0, 12.0]), h, amb)
  target = lc.render(sc, pos, h, amb)
  latents = dict(
      source=lc.encode(source), normals=lc.encode(sc['normals']),
      mask=lc.light_masks(jnp.asarray(pos_l), jnp.asarray(sig_l), s // 2,
                          s // 2),
      light_map=lc.light_map_latent(pos, 2 * sig, s, s))
  return dict(sc=sc, pos=pos, sig=sig, source=source, target=target, h=h,
              amb=amb, s=s, f=f, latents=latents)


def test_vae_is_orthonormal_and_invertible():
  x = jax.random.normal(jax.random.key(0), (2, 3, 8, 6, 3))
  z = lc.encode(x)
  assert z.shape == (2, 3, 4, 3, lc.LATENT_CHANNELS)
  np.testing.assert_allclose(lc.decode(z), x, atol=1e-5)
  np.testing.assert_allclose(jnp.sum(z ** 2), jnp.sum(x ** 2), rtol=1e-5)
  # The LL channel of a constant patch is twice its value (orthonormal).
  one = lc.encode(jnp.ones((2, 2, 3)))
  np.testing.assert_allclose(one[0, 0, :3], 2.0, atol=1e-6)
  np.testing.assert_allclose(one[0, 0, 3:], 0.0, atol=1e-6)


def test_renderer_and_scores(world):
  w = world
  sc = w['sc']
  np.testing.assert_allclose(np.linalg.norm(sc['normals'], axis=-1), 1,
                             rtol=1e-5)
  # Right under the light the ground is lit fully: E = 1.
  e = lc.irradiance(jnp.array([[[0.0, 0.0, 1.0]]]), jnp.zeros((1, 1)),
                    jnp.array([0.0, 0.0]), 4.0)
  np.testing.assert_allclose(e, 1.0, rtol=1e-6)
  err_gt = lc.light_centroid_error(w['target'], sc['albedo'], w['pos'],
                                   w['amb'])
  err_src = lc.light_centroid_error(w['source'], sc['albedo'], w['pos'],
                                    w['amb'])
  assert err_gt < err_src
  shading = lambda x: lc.to_intensity(x) - sc['albedo'] * w['amb']
  e_src = lc.irradiance(sc['normals'], sc['height'],
                        jnp.array([12.0, 12.0]), w['h'])
  src_sh = sc['albedo'] * e_src[..., None]
  tgt_sh = shading(w['target'])
  assert abs(float(lc.source_leakage(tgt_sh, tgt_sh, src_sh))) < 1e-4
  mix = tgt_sh + 0.5 * src_sh
  np.testing.assert_allclose(lc.source_leakage(mix, tgt_sh, src_sh), 0.5,
                             atol=1e-4)
  assert float(lc.psnr(w['target'] + 0.02, w['target'])) == pytest.approx(
      10 * np.log10(4 / 0.02 ** 2), rel=1e-4)
  x = jnp.zeros((3, 2, 2, 1)).at[1].set(1.0)
  assert float(lc.frame_change(x)) == 1.0
  # Two-sided: a video changing as the reference scores 0, a static one the
  # reference's own change, one changing twice as much as well.
  assert float(lc.change_error(x + 0.5, x)) == 0.0
  assert float(lc.change_error(0 * x, x)) == 1.0
  assert float(lc.change_error(2 * x, x)) == 1.0


def _run(world, relight, prior=None, **kw):
  lat = world['latents']
  kw.setdefault('strength', 0.5)
  return lc.lightctrl(prior or lc.smoothing_prior(1.0), relight, lat['source'],
                      lat['normals'], lat['mask'], lat['light_map'],
                      jax.random.key(5), **kw)


def test_pipeline_without_fused_steps_is_plain_euler(world):
  vel = lc.smoothing_prior(1.0)
  out = _run(world, lambda c, l, k: c, num_steps=6, inject_light=False,
             stop=1.0)
  src = world['latents']['source']
  k_noise = jax.random.split(jax.random.key(5), 3)[0]
  z = flow.interpolate(src, jax.random.normal(k_noise, src.shape), 0.5)
  np.testing.assert_allclose(out, flow.euler_sample(vel, z, 6, 0.5, 0.0),
                             atol=1e-5)
  # Injection changes the start only inside the masks (a zero velocity
  # returns the start).
  zero = lambda z, t: 0 * z
  ident = lambda c, l, k: c
  inj = _run(world, ident, zero, num_steps=2, inject_light=True, stop=1.0)
  plain = _run(world, ident, zero, num_steps=2, inject_light=False,
               stop=1.0)
  m = np.broadcast_to(np.asarray(world['latents']['mask']), inj.shape)
  assert np.array_equal(np.asarray(inj)[~m], np.asarray(plain)[~m])
  assert not np.allclose(np.asarray(inj)[m], np.asarray(plain)[m])


def test_injection_acts_through_the_fused_steps(world):
  """Injection on vs off with everything else equal (the fused steps, the
  relighter, the same noise): the output changes, and only on latent
  pixels that some frame's mask covers (the relighter, the detail residual
  and the prior (temporal smoothing) are per pixel with fusion off; fusion
  mixes over (c, h, w) and spreads it), at both noise levels."""
  w = world
  relight = lc.analytic_relighter(w['sc'], w['pos'], w['h'], w['amb'], 0.6)
  run = jax.jit(lambda inj, fus, strength: _run(
      w, relight, num_steps=6, inject_light=inj, fusion=fus,
      strength=strength))
  covered = np.asarray(w['latents']['mask']).any(0)[..., 0]   # [h, w]
  for strength in (0.5, lc.SDEDIT_STRENGTH):
    d = np.abs(np.asarray(run(True, False, strength)
                          - run(False, False, strength)))
    assert d[:, covered].max() > 1e-2
    assert d[:, ~covered].max() == 0.0
    d = np.abs(np.asarray(run(True, True, strength)
                          - run(False, True, strength)))
    assert d[:, ~covered].max() > 0.0


def test_pipeline_with_analytic_surrogates_follows_the_light(world):
  """Relighter = the renderer at the trajectory's light, prior = temporal
  smoothing: LightCtrl moves the output towards the ground truth, and
  without any fused step (SDEdit alone) it stays with the source light."""
  w = world
  relight = lc.analytic_relighter(w['sc'], w['pos'], w['h'], w['amb'])
  full = lc.decode(_run(w, relight, num_steps=8))
  sdedit = lc.decode(_run(w, relight, num_steps=8, inject_light=False,
                          stop=1.0))
  assert float(lc.psnr(full, w['target'])) > float(
      lc.psnr(sdedit, w['target'])) + 3
  err = lambda v: float(lc.light_centroid_error(v, w['sc']['albedo'],
                                                w['pos'], w['amb']))
  assert err(full) < err(sdedit)
  thw = _run(w, relight, num_steps=8, fft_axes='thw')
  assert np.all(np.isfinite(np.asarray(thw)))


def test_training_batches_are_plain_frames_and_static_light():
  """The relighter sees plain frames (never normal-fused) and its target
  keeps beta of the source light; the prior's clips have a static light."""
  batch = jax.jit(lambda key, beta: lc.relight_batch(
      key, 4, 16, light_height=6.0, ambient=0.3, radius=9.375,
      num_objects=2, beta=beta))
  key = jax.random.key(0)
  tgt0, cond0, light0 = batch(key, 0.0)
  tgt, cond, light = batch(key, 0.6)
  np.testing.assert_array_equal(cond, cond0)
  np.testing.assert_array_equal(light, light0)
  np.testing.assert_allclose(tgt, 0.4 * tgt0 + 0.6 * cond, atol=1e-5)
  assert float(jnp.mean(jnp.abs(tgt0 - cond))) > 0.05  # another light
  frames = lc.decode(cond)                              # a render in range
  assert float(frames.min()) >= -1 - 1e-5 and float(frames.max()) <= 1 + 1e-5
  clips = jax.jit(lambda k: lc.video_batch(
      k, 2, 4, 16, light_height=6.0, ambient=0.3, num_objects=2,
      motion=0.0))(jax.random.key(1))
  assert clips.shape == (2, 4, 8, 8, 12)
  np.testing.assert_allclose(clips, clips[:, :1] + 0 * clips, atol=1e-6)


def test_fusion_removes_copied_source_light_only_when_copied(world):
  """An analytic relighter that keeps beta of its input: at beta = 0.6
  normal fusion lowers the source-light leakage; at beta = 0 (it ignores
  its input) fusion changes nothing. The detail residual and the strength
  change the output."""
  w = world
  shading = lambda x: lc.to_intensity(x) - w['sc']['albedo'] * w['amb']
  e_src = lc.irradiance(w['sc']['normals'], w['sc']['height'],
                        jnp.array([12.0, 12.0]), w['h'])
  src_sh = w['sc']['albedo'] * e_src[..., None]
  leak = lambda z: float(lc.source_leakage(shading(lc.decode(z)),
                                           shading(w['target']), src_sh))
  run = jax.jit(lambda beta, fus, det, strength: _run(
      w, lc.analytic_relighter(w['sc'], w['pos'], w['h'], w['amb'], beta),
      num_steps=8, fusion=fus, detail_residual=det, strength=strength),
      static_argnums=0)
  on, off = run(0.6, True, True, 0.5), run(0.6, False, True, 0.5)
  assert leak(on) < 0.8 * leak(off)
  np.testing.assert_allclose(run(0.0, True, True, 0.5),
                             run(0.0, False, True, 0.5), atol=1e-6)
  assert not np.allclose(run(0.6, True, False, 0.5), on, atol=1e-3)
  assert not np.allclose(run(0.6, True, True, 0.7), on, atol=1e-3)
