"""LightCtrl against GVCLab/LightCtrl on the same latents: the Butterworth
filter (utils/tools.py butterworth_low_pass_filter), the conditioning the
relighter hands IC-Light (src/ic_light.py Relighter.__call__: filter over
[f, c, h, w] + freq_mix_3d of the normal and image latents) and the
light-map injection (src/vdm_pipe.py inject_light_map_noise) with the
reference's own noise, for every light trajectory."""

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.diffusion import lightctrl as lc
from tests.parity import common

PAPER = ('LightCtrl: Training-free Controllable Video Relighting '
         '(OpenReview 5ft8vd9rwc)')
FIXTURE = 'lightctrl'

# float32 rounding: the filter is a [0, 1] float32 in both (theirs computed
# in float64 and stored); the mix is a complex64 FFT round trip of O(1)
# latents (~1e-6), the injection one multiply-add per element.
TOL_FILTER = 1e-6
TOL_FFT = 1e-5
TOL_INJECT = 1e-6


def _fhwc(x_fchw):
  return np.moveaxis(x_fchw, -3, -1)


def _ours(a):
  """Our filters, mixes and injections on the fixture's inputs, in one
  compiled program (eager dispatch of many tiny ops is slower)."""
  z = np.moveaxis(a['inj_z'][0], 0, -1)                 # [f, h, w, c]
  f, h, w, _ = z.shape
  traj = [lc.light_positions(lc.BGSource[str(name)], f, h, w,
                             float(a['inj_radius']))
          for name in a['inj_sources']]
  bw_shapes = [a[f'bw_{j}'].shape[1:] for j in range(2)]
  params = [(int(n), float(ds), float(dt)) for n, ds, dt in a['bw_params']]

  @jax.jit
  def run(normal, image, lbds, z, eps):
    bw = [jnp.stack([lc.butterworth(shape, ds, dt, n)
                     for n, ds, dt in params]) for shape in bw_shapes]
    mix = jax.vmap(lambda lbd: lc.freq_mix(
        normal, image, lc.freq_filter(image.shape, lbd, 'chw'), 'chw'))(lbds)
    masks = jnp.stack([lc.light_masks(pos, sig, h, w) for pos, sig in traj])
    inj = jax.vmap(lambda e, m: lc.inject_noise(z, e, m))(eps, masks)
    return bw, mix, masks[..., 0], inj

  return jax.device_get(run(
      _fhwc(a['mix_normal']), _fhwc(a['mix_image']),
      a['mix_lbd'].astype(np.float32), z, _fhwc(a['inj_eps'])))


def checks() -> list[common.Check]:
  a, _ = common.load(FIXTURE)
  bw, mix, masks, inj = _ours(a)
  out = []
  # Butterworth on (T, H, W) grids, every (n, d_s, d_t).
  out.append(common.Check(
      'Butterworth low-pass filter (n, d_s, d_t incl. d = 0, d_s != d_t)',
      max(common.max_diff(bw[j], a[f'bw_{j}']) for j in range(2)),
      TOL_FILTER))
  # The relighter's conditioning: low frequencies of the normal latent,
  # high ones of the image latent, filter over (c, h, w) ('chw').
  theirs = _fhwc(a['mix_out'])
  out.append(common.Check(
      'relighter conditioning freq_mix(normal, I_t, Butterworth(lbd)) / '
      'max|ref|', common.max_diff(mix, theirs) / np.abs(theirs).max(),
      TOL_FFT))
  # The injection: our trajectory + mask + mix with their noise. Their mask
  # is where their output differs from the input.
  z = np.moveaxis(a['inj_z'][0], 0, -1)
  theirs = np.moveaxis(a['inj_out'][:, 0], 1, -1)       # [k, f, h, w, c]
  out.append(common.Check(
      'injection mask (pixels that differ, every trajectory)',
      float(np.sum(masks != np.any(theirs != z, -1))), 0.0))
  out.append(common.Check(
      'light-map injection z <- where(M, 0.8 eps + 0.2 z, z), every '
      'trajectory', common.max_diff(inj, theirs), TOL_INJECT))
  return out


def test_matches_reference():
  common.assert_checks(checks())


def test_fixture_is_not_trivial():
  a, _ = common.load(FIXTURE)
  # Every trajectory injects into some but not all pixels.
  z = a['inj_z'][0]
  changed = np.any(a['inj_out'][:, 0] != z, axis=1)      # [k, f, h, w]
  frac = changed.mean(axis=(1, 2, 3))
  assert np.all(frac > 0) and np.all(frac < 1)
  # The mix is neither of its inputs.
  for x in (a['mix_normal'], a['mix_image']):
    assert np.abs(a['mix_out'] - x).max() > 0.1
