"""LightCtrl: training-free controllable video relighting (ICLR 2026,
OpenReview 5ft8vd9rwc; code github.com/GVCLab/LightCtrl), in a Lambertian
toy world.

The reference pipeline (`src/vdm_pipe.py`, `src/ic_light.py`,
`utils/tools.py`) relights a video with a per-frame image relighter
(IC-Light) under a video diffusion prior (AnimateDiff), training-free:

1. SDEdit start: the source video's latent noised to `strength`
   (src/vdm_pipe.py:715, the Euler-ancestral z = x0 + sigma eps). The
   release's strength 0.5 is sigma 2.19, flow time t = sigma / (1 + sigma)
   = 0.69 here (`flow_time`, `SDEDIT_STRENGTH`); a flow strength of 0.5 is
   sigma 1, half the release's noise.
2. Light-map injection (paper Sec. 3.2): for frame i, t = i / (F - 1), a
   light centre on the trajectory (`BGSource`, `light_positions`), a
   Gaussian blob of sigma = R / 8 latent pixels, normalised to [0, 1] and
   thresholded at 0.2 into a mask M; on M, z <- omega eps + (1 - omega) z
   with fresh eps and omega = 0.8; off M, z is untouched (`inject_noise`,
   src/vdm_pipe.py:976-1072). The release applies it to its sigma-scaled
   latent, so on our flow latent it is `inject_flow` (`inject` draws its
   noise from a key): z = x_t / (1 - t), injected, mapped back.
3. Denoising with lbd = 1 - i / (N - 1) while lbd > 0.15 (paper Eq. 4-7;
   src/vdm_pipe.py:1139-1173): x0_hat = z - sigma eps_hat (here
   x0_hat = z - t v_hat, rectified flow); the detail residual
   d = source - x0_hat saved at step 0 (after the injection, so I_0 is the
   source) and added back as I_t = x0_hat + lbd d (`detail_residual` turns
   it off); geometry-aware relighting: the relighter's conditioning is
   freq_mix(normal, I_t, Butterworth(n = 4, d_s = d_t = lbd)) (`freq_mix`,
   `butterworth`); I'_t = relighter(cond, light map) per frame; the fused
   target (1 - lbd) I_t + lbd I'_t replaces x0_hat in an Euler step
   (`fused_step`, the reference's `eul_step`, src/animatediff_eul.py:19-81,
   without its ancestral noise).
4. Plain Euler steps of the prior once lbd <= 0.15.

Code versus paper: the paper says "3D FFT" with a temporal cutoff, but the
reference's latent is [f, c, h, w] and `freq_mix_3d` transforms dims
(-3, -2, -1) = (c, h, w), its Butterworth builder reading shape[-3] (= c)
as "T". `fft_axes='chw'` is the code, 'thw' the paper's reading.

Here the VAE is a fixed orthonormal 2x2-patch Haar transform (`encode`,
`decode`: [F, H, W, 3] on [-1, 1] <-> [F, H/2, W/2, 12]); it is linear and
invertible, so the reference's decode -> pixel-space arithmetic (detail
residual, fusion) -> encode round trips are done on latents directly. The
renderer is Lambertian with an inverse-square point light:
I = A (ambient + max(0, N.L) h^2 / |p_light - p|^2) (`render`). Normals
come from the renderer (the stand-in for StableNormal), so every trajectory
has a ground-truth relit video. The stand-ins are trained so that the
pipeline stays training-free: the relighter (`Relighter`) on plain frames
only (`relight_batch`; its target keeps a fraction beta of the source
light, as IC-Light copies its input's light per frame), the video prior
(`VideoPrior`) on clips lit by a static light (`video_batch`). The
relighter's img2img starts from the light map at IC-Light's noise level
(`RELIGHT_STRENGTH`, flow time 0.93 for its strength 0.9). The release's
prior is text-conditioned with classifier-free guidance (a prompt per
video, guidance 2 to 4 in configs/animatediff_relight); ours is
unconditional.

`lightctrl` takes any velocity and relight function, e.g. the analytic
surrogates `analytic_relighter` and `smoothing_prior`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import enum
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.diffusion import flow
from iclrjax.diffusion import nets

# Reference constants (src/vdm_pipe.py inject_light_map_noise; Relighter).
OMEGA = 0.8            # z <- 0.8 eps + 0.2 z on the mask
THRESHOLD = 0.2        # mask = normalised Gaussian > 0.2
STOP = 0.15            # fused steps while lbd > 0.15
BUTTERWORTH_ORDER = 4  # get_freq_filter(..., 'butterworth', n=4)
# The release's noise levels as flow times, t = sigma / (1 + sigma)
# (`flow_time`): the SDEdit start of strength 0.5 is sigma 2.19, IC-Light's
# img2img from the light map at lowres_denoise 0.9 starts at sigma 14.3.
SDEDIT_STRENGTH = 0.69
RELIGHT_STRENGTH = 0.93
FFT_AXES = ('chw', 'thw')


PATCH = 2              # the latent is 2x smaller than the frame
LATENT_CHANNELS = 12   # 3 colours x 4 Haar components

# The orthonormal 2x2 Haar basis: rows LL, LH, HL, HH over the patch
# (top-left, top-right, bottom-left, bottom-right).
_HAAR = 0.5 * np.array([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1],
                        [1, -1, -1, 1]], np.float32)


def encode(x: jax.Array) -> jax.Array:
  """The fixed linear "VAE": [..., H, W, 3] -> [..., H/2, W/2, 12], each
  2x2 patch of each colour to its 4 orthonormal Haar coefficients
  (component-major channels)."""
  *lead, hh, ww, c = x.shape
  p = x.reshape(*lead, hh // PATCH, PATCH, ww // PATCH, PATCH, c)
  p = jnp.moveaxis(p, -4, -3).reshape(*lead, hh // PATCH, ww // PATCH,
                                      PATCH * PATCH, c)
  return jnp.einsum('kp,...pc->...kc', jnp.asarray(_HAAR), p).reshape(
      *lead, hh // PATCH, ww // PATCH, PATCH * PATCH * c)


def decode(z: jax.Array) -> jax.Array:
  """The inverse of `encode` (its transpose)."""
  *lead, h2, w2, k = z.shape
  c = k // (PATCH * PATCH)
  p = jnp.einsum('kp,...kc->...pc', jnp.asarray(_HAAR),
                 z.reshape(*lead, h2, w2, PATCH * PATCH, c))
  p = p.reshape(*lead, h2, w2, PATCH, PATCH, c)
  return jnp.moveaxis(p, -3, -4).reshape(*lead, h2 * PATCH, w2 * PATCH, c)


class BGSource(enum.IntEnum):
  """The reference's light trajectories (src/ic_light.py BGSource)."""
  LEFT_TO_RIGHT = 0
  TOP_LEFT_TO_BOTTOM_RIGHT = 1
  BOTTOM_LEFT_TO_TOP_RIGHT = 2
  TOP_TO_BOTTOM = 3
  CIRCULAR = 4
  SMI_CIRCULAR = 5
  RADIUS_CHANGE = 6


# The trajectories whose light centre moves (RADIUS_CHANGE moves its radius).
MOVING = tuple(b for b in BGSource if b != BGSource.RADIUS_CHANGE)


def light_positions(source: BGSource | int, num_frames: int, height: int,
                    width: int, radius: float) -> tuple[np.ndarray,
                                                        np.ndarray]:
  """(centres [F, 2] as (x, y) latent pixels, sigma [F]) of the light map.

  The reference's integer positions, t = i / (F - 1) (inject_light_map_noise;
  int() truncates towards zero): e.g. LEFT_TO_RIGHT x = int(t (W - 1)),
  y = H // 4; CIRCULAR about the centre with radius min(H, W) // 2.
  sigma = radius / 8 (the light radius R of the full-size image in latent
  pixels), except RADIUS_CHANGE: centre (W, H // 4), sigma = 2.5 + int(25 t).
  """
  source = BGSource(source)
  pos = np.zeros((num_frames, 2), np.float32)
  sig = np.full((num_frames,), radius / 8.0, np.float32)
  for i in range(num_frames):
    t = i / (num_frames - 1)
    cx, cy, rad = width // 2, height // 2, min(width, height) // 2
    if source == BGSource.TOP_LEFT_TO_BOTTOM_RIGHT:
      x, y = int(t * (width - 1)), int(t * (height - 1))
    elif source == BGSource.BOTTOM_LEFT_TO_TOP_RIGHT:
      x, y = int(t * (width - 1)), int((1 - t) * (height - 1))
    elif source == BGSource.TOP_TO_BOTTOM:
      x, y = width // 4, int(t * (height - 1))
    elif source == BGSource.LEFT_TO_RIGHT:
      x, y = int(t * (width - 1)), height // 4
    elif source == BGSource.CIRCULAR:
      a = 2 * np.pi * t
      x, y = int(cx + rad * np.cos(a)), int(cy + rad * np.sin(a))
    elif source == BGSource.SMI_CIRCULAR:
      a = np.pi * t
      x, y = int(cx - rad * np.cos(a)), int(cy + rad * np.sin(-a))
    else:  # RADIUS_CHANGE
      x, y = width, height // 4
      sig[i] = 2.5 + int(25 * t)
    pos[i] = (x, y)
  return pos, sig


def gaussian_map(pos_2: jax.Array, sigma: jax.Array, height: int,
                 width: int) -> jax.Array:
  """exp(-|p - pos|^2 / (2 sigma^2)) on the pixel grid [H, W] (the
  reference's gradient / max_pix, in [0, 1])."""
  yy, xx = jnp.meshgrid(jnp.arange(height, dtype=jnp.float32),
                        jnp.arange(width, dtype=jnp.float32), indexing='ij')
  d2 = (xx - pos_2[0]) ** 2 + (yy - pos_2[1]) ** 2
  return jnp.exp(-d2 / (2.0 * sigma ** 2))


def light_masks(pos_Fx2: jax.Array, sigma_F: jax.Array, height: int,
                width: int, threshold: float = THRESHOLD) -> jax.Array:
  """Binary masks [F, H, W, 1]: normalised Gaussian blob > threshold."""
  g = jax.vmap(gaussian_map, (0, 0, None, None))(pos_Fx2, sigma_F, height,
                                                 width)
  return (g > threshold)[..., None]


def inject(x_FxHxWxC: jax.Array, key: jax.Array, mask_FxHxWx1: jax.Array,
           t: jax.Array | float, omega: float = OMEGA) -> jax.Array:
  """Light-map injection (paper Eq. 3) on a flow latent x_t at time t, with
  fresh eps ~ N(0, I) drawn from `key`: `inject_flow` (the release's
  z <- omega eps + (1 - omega) z in its Euler-ancestral coordinates
  z = x_t / (1 - t)); off the mask x_t is returned unchanged (bit for bit).
  On the release's own latent z = x0 + sigma eps use `inject_noise`."""
  eps = jax.random.normal(key, x_FxHxWxC.shape, x_FxHxWxC.dtype)
  return inject_flow(x_FxHxWxC, eps, mask_FxHxWx1, t, omega)


def inject_noise(z_FxHxWxC: jax.Array, eps_FxHxWxC: jax.Array,
                 mask_FxHxWx1: jax.Array, omega: float = OMEGA) -> jax.Array:
  """The release's injection with the noise given, on the release's latent
  as it is (its Euler-ancestral z = x0 + sigma eps): where(mask,
  omega eps + (1 - omega) z, z) (src/vdm_pipe.py:1046-1061
  inject_light_map_noise, one eps per frame). A flow latent goes through
  `inject_flow` (or `inject`, which draws the noise): applied to x_t it
  would add 1 / (1 - t) times the release's fresh noise."""
  return jnp.where(mask_FxHxWx1, omega * eps_FxHxWxC
                   + (1.0 - omega) * z_FxHxWxC, z_FxHxWxC)


def sigma_of(t: jax.Array | float) -> jax.Array | float:
  """The Euler-ancestral noise level of flow time t: x_t = (1 - t) x0 +
  t eps is (1 - t) (x0 + sigma eps) with sigma = t / (1 - t)."""
  return t / (1.0 - t)


def flow_time(sigma: jax.Array | float) -> jax.Array | float:
  """The flow time of an Euler-ancestral (or VP) noise level sigma, the
  inverse of `sigma_of`: t = sigma / (1 + sigma) (the same signal-to-noise
  ratio). The release's strength 0.5 (50 Euler-ancestral steps on linear
  betas, relight.py:42-46) starts at sigma 2.19, flow time 0.687
  (`SDEDIT_STRENGTH`); IC-Light's img2img strength 0.9 (17 Karras steps of
  DPM-Solver++ on linear betas, relight.py:107-114, src/ic_light.py:344-359)
  at sigma 14.3, flow time 0.935 (`RELIGHT_STRENGTH`)."""
  return sigma / (1.0 + sigma)


def inject_flow(x_FxHxWxC: jax.Array, eps_FxHxWxC: jax.Array,
                mask_FxHxWx1: jax.Array, t: jax.Array | float,
                omega: float = OMEGA) -> jax.Array:
  """The release's injection in the release's coordinates, on a flow latent
  x_t: the release re-noises the Euler-ancestral latent z = x0 + sigma eps
  (the SDEdit start of `prepare_latents`, src/vdm_pipe.py:714-715, injected
  at src/vdm_pipe.py:1072 before the first `scale_model_input`), so here
  z = x_t / (1 - t), z <- omega eps + (1 - omega) z on the mask
  (`inject_noise`), x_t = (1 - t) z: on the mask
  x_t <- omega (1 - t) eps + (1 - omega) x_t, off it x_t unchanged (bit for
  bit). Injecting in flow coordinates instead (omega eps + (1 - omega) x_t)
  would add 1 / (1 - t) times the release's fresh noise."""
  fresh = omega * (1.0 - t) * eps_FxHxWxC
  return jnp.where(mask_FxHxWx1, fresh + (1.0 - omega) * x_FxHxWxC,
                   x_FxHxWxC)


def butterworth(shape: Sequence[int], d_s: jax.Array | float,
                d_t: jax.Array | float | None = None,
                n: int = BUTTERWORTH_ORDER) -> jax.Array:
  """Butterworth low-pass filter on an fftshift-ed (T, H, W) grid.

  utils/tools.py butterworth_low_pass_filter: with the normalised
  coordinates u = 2k / K - 1 of each axis (0 at the shifted DC),
  d^2 = ((d_s / d_t) u_T)^2 + u_H^2 + u_W^2 and
  H = 1 / (1 + (d^2 / d_s^2)^n); all zeros when d_s or d_t is 0.
  So H = 1 at d = 0, H = 1/2 at d = d_s, decreasing in d.
  """
  d_t = d_s if d_t is None else d_t
  d_s = jnp.asarray(d_s, jnp.float32)
  d_t = jnp.asarray(d_t, jnp.float32)
  off = (d_s == 0) | (d_t == 0)
  safe_s = jnp.where(off, 1.0, d_s)
  safe_t = jnp.where(off, 1.0, d_t)
  u = [2.0 * jnp.arange(k, dtype=jnp.float32) / k - 1.0 for k in shape]
  ut, uh, uw = jnp.meshgrid(*u, indexing='ij')
  d2 = ((safe_s / safe_t) * ut) ** 2 + uh ** 2 + uw ** 2
  lpf = 1.0 / (1.0 + (d2 / safe_s ** 2) ** n)
  return jnp.where(off, 0.0, lpf)


def _axes(fft_axes: str, ndim: int) -> tuple[int, int, int]:
  """The (T, H, W) axes of a [F, H, W, C] latent: 'chw' (the code: the
  channel axis plays T) or 'thw' (the paper: time)."""
  if fft_axes not in FFT_AXES:
    raise ValueError(f'fft_axes must be one of {FFT_AXES}, got {fft_axes!r}')
  first = ndim - 1 if fft_axes == 'chw' else ndim - 4
  return first, ndim - 3, ndim - 2


def freq_filter(shape: Sequence[int], lbd: jax.Array | float,
                fft_axes: str = 'chw', n: int = BUTTERWORTH_ORDER
                ) -> jax.Array:
  """Butterworth(n, d_s = d_t = lbd) over `fft_axes` of a latent of
  `shape` ([..., F, H, W, C]), broadcastable against it."""
  axes = _axes(fft_axes, len(shape))
  lpf = butterworth([shape[a] for a in axes], lbd, lbd, n)
  # Put the filter's (T, H, W) on their axes, 1 elsewhere.
  order = sorted(range(3), key=lambda k: axes[k])
  lpf = jnp.transpose(lpf, order)
  out = [1] * len(shape)
  for a in axes:
    out[a] = shape[a]
  return lpf.reshape(out)


def freq_mix(low: jax.Array, high: jax.Array, lpf: jax.Array,
             fft_axes: str = 'chw') -> jax.Array:
  """IFFT(FFT(low) LPF + FFT(high) (1 - LPF)) over `fft_axes`, with the
  filter on fftshift-ed spectra (utils/tools.py freq_mix_3d; paper Eq. 6):
  the low frequencies of `low` (normals) with the high ones of `high`."""
  axes = _axes(fft_axes, low.ndim)
  f = lambda x: jnp.fft.fftshift(jnp.fft.fftn(x, axes=axes), axes=axes)
  mixed = f(low) * lpf + f(high) * (1.0 - lpf)
  return jnp.real(jnp.fft.ifftn(jnp.fft.ifftshift(mixed, axes=axes),
                                axes=axes)).astype(low.dtype)


def lbd_schedule(num_steps: int) -> np.ndarray:
  """lbd_i = 1 - i / (N - 1), i = 0..N-1 (the reference's relight weight)."""
  return 1.0 - np.arange(num_steps) / max(num_steps - 1, 1)


def num_fused_steps(num_steps: int, stop: float = STOP) -> int:
  """How many leading steps have lbd > stop (then plain steps)."""
  return int(np.sum(lbd_schedule(num_steps) > stop))


def _time_grid(num_steps: int, strength: jax.Array | float) -> jax.Array:
  """The N + 1 uniform times from `strength` (may be traced) to 0."""
  return strength * (1.0 - jnp.arange(num_steps + 1, dtype=jnp.float32)
                     / num_steps)


def fused_step(z: jax.Array, target: jax.Array, t: jax.Array,
               s: jax.Array) -> jax.Array:
  """The reference's eul_step with x0_hat replaced by `target`, in flow
  form: v = (z - target) / t (the velocity whose x0 prediction is target),
  z <- z + (s - t) v. The reference adds Euler-ancestral noise; this is its
  deterministic (ODE) version."""
  return flow.euler_update(z, (z - target) / t, t, s)


# ----------------------------------------------------------------------------
# The pipeline.


Velocity = flow.Velocity
# (cond [F, H, W, C], light map [F, H, W, 1], key) -> relit frames.
RelightFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def lightctrl(velocity: Velocity, relight: RelightFn, source: jax.Array,
              normals: jax.Array, mask: jax.Array, light_map: jax.Array,
              key: jax.Array, *, num_steps: int, strength: jax.Array | float,
              inject_light: jax.Array | bool = True,
              fusion: jax.Array | bool = True,
              detail_residual: jax.Array | bool = True,
              fft_axes: str = 'chw', omega: float = OMEGA,
              stop: float = STOP, order: int = BUTTERWORTH_ORDER
              ) -> jax.Array:
  """The LightCtrl sampler (src/vdm_pipe.py:1072-1176) on latents.

  Args:
    velocity: the video prior v(z [..., F, h, w, c], t scalar) (flow
      convention: data at t = 0).
    relight: the per-frame image relighter (cond, light map, key) -> I'
      (latents [..., F, h, w, c]).
    source: the source video's latent [..., F, h, w, c].
    normals: its normal video's latent (the normal map's RGB (n + 1) / 2
      on [-1, 1] is n itself, encoded).
    mask: the injection masks [..., F, h, w, 1] (`light_masks`).
    light_map: the relighter's light-map latent [..., F, h, w, c].
    key: SDEdit noise, injection noise and the relighter's noise.
    num_steps: N denoising steps from t = strength to 0.
    strength: the SDEdit strength as a flow time (the release's strength
      0.5 is `SDEDIT_STRENGTH` = 0.69).
    inject_light: light-map injection on (`inject_flow`: the release's
      Euler-ancestral coordinates at t = strength).
    fusion: geometry-aware normal fusion on (off: the relighter is
      conditioned on I_t alone).
    detail_residual: add lbd (source - x0_hat at step 0) to x0_hat
      (src/vdm_pipe.py:1151-1155; saved after the injection, so I_0 is the
      source itself); off: I_t = x0_hat.
    fft_axes: 'chw' (the code) or 'thw' (the paper).

  `strength`, `inject_light`, `fusion` and `detail_residual` may be traced
  (one compiled program serves every arm).

  Returns:
    the relit latent video.
  """
  k_noise, k_inj, k_rel = jax.random.split(key, 3)
  z = flow.interpolate(source, jax.random.normal(k_noise, source.shape),
                       strength)
  eps = jax.random.normal(k_inj, z.shape, z.dtype)
  z = jnp.where(inject_light, inject_flow(z, eps, mask, strength, omega), z)
  ts = _time_grid(num_steps, strength)
  lbds = jnp.asarray(lbd_schedule(num_steps), jnp.float32)
  n_fused = num_fused_steps(num_steps, stop)

  def fused(carry, i):
    z, detail = carry
    t, s, lbd = ts[i], ts[i + 1], lbds[i]
    x0 = z - t * velocity(z, t)
    detail = jnp.where(i == 0, source - x0, detail)  # saved at step 0
    img = x0 + jnp.where(detail_residual, lbd, 0.0) * detail
    mixed = freq_mix(normals, img,
                     freq_filter(img.shape, lbd, fft_axes, order), fft_axes)
    cond = jnp.where(fusion, mixed, img)
    relit = relight(cond, light_map, jax.random.fold_in(k_rel, i))
    return (fused_step(z, (1.0 - lbd) * img + lbd * relit, t, s), detail), None

  def plain(z, i):
    t, s = ts[i], ts[i + 1]
    return flow.euler_update(z, velocity(z, t), t, s), None

  (z, _), _ = jax.lax.scan(fused, (z, jnp.zeros_like(z)),
                           jnp.arange(n_fused))
  z, _ = jax.lax.scan(plain, z, jnp.arange(n_fused, num_steps))
  return z


# ----------------------------------------------------------------------------
# Networks: the image relighter and the video prior.


class Relighter(nn.Module):
  """IC-Light stand-in: the velocity of the relit frame's latent given
  (x_t, t, conditioning latent, light-map latent), all [.., h, w, c], and
  beta [..] (how much of its input's light it keeps; `relight_batch`), a
  U-Net on their channel concatenation (IC-Light's concat_conds; the light
  map is also where its img2img starts; beta a constant channel)."""

  channels: int = 16
  channel_mults: tuple[int, ...] = (1, 2)
  num_res_blocks: int = 1

  @nn.compact
  def __call__(self, x, t, cond, light, beta):
    b = jnp.broadcast_to(jnp.asarray(beta, x.dtype)[..., None, None, None],
                         x.shape[:-1] + (1,))
    h = jnp.concatenate([x, cond, light, b], axis=-1)
    return nets.UNet(x.shape[-1], self.channels, self.channel_mults,
                     self.num_res_blocks, emb_dim=32, name='unet')(h, t)


class VideoPrior(nn.Module):
  """AnimateDiff stand-in: an unconditional velocity model of clips
  [.., F, H, W, C], a U-Net over the frames stacked on channels (so every
  layer mixes time)."""

  channels: int = 32
  channel_mults: tuple[int, ...] = (1, 2)
  num_res_blocks: int = 1

  @nn.compact
  def __call__(self, x, t):
    *lead, f, hh, ww, c = x.shape
    h = jnp.moveaxis(x, -4, -2).reshape(*lead, hh, ww, f * c)
    v = nets.UNet(f * c, self.channels, self.channel_mults,
                  self.num_res_blocks, emb_dim=32, name='unet')(h, t)
    return jnp.moveaxis(v.reshape(*lead, hh, ww, f, c), -2, -4)


def relight_sampler(model: Relighter, params: Any, num_steps: int,
                    strength: float = RELIGHT_STRENGTH,
                    beta: jax.Array | float = 0.0) -> RelightFn:
  """IC-Light's img2img call (src/ic_light.py Relighter.__call__): start
  from the light-map latent noised to flow time `strength` (the default is
  IC-Light's strength 0.9 in flow time, `RELIGHT_STRENGTH`), integrate the
  relighter's flow to t = 0 in `num_steps` Euler steps conditioned on
  (cond, light map, beta). Fresh noise per frame."""

  def relight(cond, light_map, key):
    x = flow.interpolate(light_map, jax.random.normal(key, cond.shape),
                         strength)
    lead = cond.shape[:-3]
    v = lambda x, t: model.apply(params, x, jnp.full(lead, t), cond,
                                 light_map, jnp.full(lead, beta))
    return flow.euler_sample(v, x, num_steps, strength, 0.0)

  return relight


def prior_velocity(model: VideoPrior, params: Any) -> Velocity:
  return lambda z, t: model.apply(params, z, t)


# ----------------------------------------------------------------------------
# The Lambertian toy world.


def _object(kind, xx, yy, cx, cy, r, tilt):
  """(inside [H, W], normal [H, W, 3], height [H, W]) of one object:
  0 sphere, 1 cube (top face + four bevelled sides, seen from above),
  2 plane (a tilted rectangle)."""
  dx, dy = xx - cx, yy - cy
  d2 = dx ** 2 + dy ** 2
  sphere_in = d2 < r ** 2
  hz = jnp.sqrt(jnp.maximum(r ** 2 - d2, 0.0))
  n_sph = jnp.stack([dx, dy, hz], -1) / r
  box_in = (jnp.abs(dx) < r) & (jnp.abs(dy) < r)
  top = (jnp.abs(dx) < 0.55 * r) & (jnp.abs(dy) < 0.55 * r)
  side_x = jnp.abs(dx) >= jnp.abs(dy)
  sx, sy = jnp.sign(dx), jnp.sign(dy)
  n_side = jnp.where(side_x[..., None],
                     jnp.stack([sx, 0 * sx, jnp.ones_like(sx)], -1),
                     jnp.stack([0 * sy, sy, jnp.ones_like(sy)], -1))
  n_box = jnp.where(top[..., None], jnp.array([0.0, 0.0, 1.0]), n_side)
  h_box = jnp.where(top, r, r * (1.0 - jnp.maximum(jnp.abs(dx), jnp.abs(dy))
                                 / r) / 0.45)
  plane_in = (jnp.abs(dx) < r) & (jnp.abs(dy) < 0.6 * r)
  n_pl = jnp.broadcast_to(jnp.array([tilt[0], tilt[1], 1.0]), n_sph.shape)
  h_pl = 0.3 * r + 0 * dx
  inside = jnp.select([kind == 0, kind == 1], [sphere_in, box_in], plane_in)
  normal = jnp.select([kind == 0, kind == 1], [n_sph, n_box], n_pl)
  height = jnp.select([kind == 0, kind == 1], [hz, h_box], h_pl)
  normal = normal / jnp.linalg.norm(normal, axis=-1, keepdims=True)
  return inside, normal, height


def scene(key: jax.Array, num_frames: int, size: int, num_objects: int = 3,
          motion: float = 1.0) -> dict[str, jax.Array]:
  """A random scene video: albedo [F, H, W, 3] in [0.25, 1], unit normals
  [F, H, W, 3], height [F, H, W]. A ground plane (normal +z) and
  `num_objects` spheres, cubes or planes of random size, colour and
  position, each translating by up to `motion` pixels per frame."""
  ks = jax.random.split(key, 7)
  kind = jax.random.randint(ks[0], (num_objects,), 0, 3)
  r = jax.random.uniform(ks[1], (num_objects,), minval=0.12 * size,
                         maxval=0.25 * size)
  c0 = jax.random.uniform(ks[2], (num_objects, 2), minval=0.2 * size,
                          maxval=0.8 * size)
  vel = jax.random.uniform(ks[3], (num_objects, 2), minval=-motion,
                           maxval=motion)
  col = jax.random.uniform(ks[4], (num_objects, 3), minval=0.25, maxval=1.0)
  bg = jax.random.uniform(ks[5], (3,), minval=0.4, maxval=0.9)
  tilt = jax.random.uniform(ks[6], (num_objects, 2), minval=-0.8,
                            maxval=0.8)
  yy, xx = jnp.meshgrid(jnp.arange(size, dtype=jnp.float32) + 0.5,
                        jnp.arange(size, dtype=jnp.float32) + 0.5,
                        indexing='ij')

  def frame(f):
    alb = jnp.broadcast_to(bg, (size, size, 3))
    nrm = jnp.broadcast_to(jnp.array([0.0, 0.0, 1.0]), (size, size, 3))
    hgt = jnp.zeros((size, size))
    for o in range(num_objects):
      cx, cy = c0[o] + f * vel[o]
      inside, n, h = _object(kind[o], xx, yy, cx, cy, r[o], tilt[o])
      alb = jnp.where(inside[..., None], col[o], alb)
      nrm = jnp.where(inside[..., None], n, nrm)
      hgt = jnp.where(inside, h, hgt)
    return alb, nrm, hgt

  alb, nrm, hgt = jax.vmap(frame)(jnp.arange(num_frames, dtype=jnp.float32))
  return {'albedo': alb, 'normals': nrm, 'height': hgt}


def irradiance(normals: jax.Array, height: jax.Array, light_xy: jax.Array,
               light_height: float) -> jax.Array:
  """max(0, N.L) h^2 / |p_light - p|^2 [..., H, W] for a point light at
  (x, y, light_height) over pixel centres p = (x + 1/2, y + 1/2, height)
  (light positions on the reference's integer grid; 1 right under it)."""
  size_h, size_w = normals.shape[-3:-1]
  yy, xx = jnp.meshgrid(jnp.arange(size_h, dtype=jnp.float32) + 0.5,
                        jnp.arange(size_w, dtype=jnp.float32) + 0.5,
                        indexing='ij')
  lx = light_xy[..., 0, None, None] + 0.5
  ly = light_xy[..., 1, None, None] + 0.5
  d = jnp.stack(jnp.broadcast_arrays(lx - xx, ly - yy, light_height - height),
                -1)
  d2 = jnp.sum(d ** 2, -1)
  cos = jnp.sum(normals * d, -1) / jnp.sqrt(d2)
  return jnp.maximum(cos, 0.0) * light_height ** 2 / d2


def render(sc: dict[str, jax.Array], light_xy: jax.Array,
           light_height: float, ambient: float) -> jax.Array:
  """Lambertian frames on [-1, 1]: 2 A (ambient + E) - 1, E = `irradiance`
  for a light at light_xy [F, 2] (or [2]: static); A (ambient + E) clips
  at 1."""
  light_xy = jnp.broadcast_to(light_xy, sc['height'].shape[:-2] + (2,))
  e = irradiance(sc['normals'], sc['height'], light_xy, light_height)
  return to_signed(sc['albedo'] * (ambient + e[..., None]))


def to_signed(intensity: jax.Array) -> jax.Array:
  return 2.0 * jnp.clip(intensity, 0.0, 1.0) - 1.0


def to_intensity(x: jax.Array) -> jax.Array:
  return (x + 1.0) / 2.0


def light_map_latent(pos_Fx2: jax.Array, sigma_F: jax.Array, height: int,
                     width: int) -> jax.Array:
  """IC-Light's background light map, a grey Gaussian blob on [-1, 1] at
  frame size [F, H, W, 3] (centres and sigmas in frame pixels), encoded."""
  g = jax.vmap(gaussian_map, (0, 0, None, None))(pos_Fx2, sigma_F, height,
                                                 width)
  return encode(jnp.broadcast_to((2.0 * g - 1.0)[..., None],
                                 g.shape + (3,)))


# ----------------------------------------------------------------------------
# Scores against the ground truth.


def light_centroid_error(video: jax.Array, albedo: jax.Array,
                         pos_Fx2: jax.Array, ambient: float) -> jax.Array:
  """Mean over frames of |centroid - pos| (pixels): the brightness-weighted
  centroid of max(0, intensity - albedo-only render A ambient), averaged
  over channels."""
  w = jnp.maximum(to_intensity(video) - albedo * ambient, 0.0).mean(-1)
  size_h, size_w = w.shape[-2:]
  yy, xx = jnp.meshgrid(jnp.arange(size_h, dtype=jnp.float32),
                        jnp.arange(size_w, dtype=jnp.float32), indexing='ij')
  tot = jnp.sum(w, (-2, -1)) + 1e-8
  cx = jnp.sum(w * xx, (-2, -1)) / tot
  cy = jnp.sum(w * yy, (-2, -1)) / tot
  return jnp.mean(jnp.hypot(cx - pos_Fx2[..., 0], cy - pos_Fx2[..., 1]), -1)


def psnr(video: jax.Array, ref: jax.Array) -> jax.Array:
  """PSNR per video (data range 2 on [-1, 1]) over [..., F, H, W, C]."""
  mse = jnp.mean((video - ref) ** 2, (-4, -3, -2, -1))
  return 10.0 * jnp.log10(4.0 / mse)


def source_leakage(video: jax.Array, target: jax.Array,
                   source_shading: jax.Array) -> jax.Array:
  """How much of the source light is left: the coefficient c of the source
  shading in the least-squares fit video ~ a + b target + c source_shading
  over every pixel of a video (0 for the ground truth; ~1 for a video still
  lit by the source light besides the target)."""
  def one(v, tg, sh):
    x = jnp.stack([jnp.ones(v.size), tg.reshape(-1), sh.reshape(-1)], -1)
    coef = jnp.linalg.lstsq(x, v.reshape(-1))[0]
    return coef[2]
  lead = video.shape[:-4]
  flat = lambda a: a.reshape((-1,) + a.shape[-4:])
  return jax.vmap(one)(flat(video), flat(target),
                       flat(source_shading)).reshape(lead)


def frame_change(video: jax.Array) -> jax.Array:
  """Mean |x_{f+1} - x_f| over a video [..., F, H, W, C]."""
  return jnp.mean(jnp.abs(jnp.diff(video, axis=-4)), (-4, -3, -2, -1))


def change_error(video: jax.Array, ref: jax.Array) -> jax.Array:
  """Two-sided temporal error against a reference video [..., F, H, W, C]:
  the mean over frames and pixels of |delta_f(video) - delta_f(ref)|, i.e.
  the frame change of video - ref. A video that changes as the reference
  does scores 0; a static one scores `frame_change(ref)`; flicker adds
  to it."""
  return frame_change(video - ref)


# ----------------------------------------------------------------------------
# Analytic surrogates (a seconds-level pipeline without trained nets).


def analytic_relighter(sc: dict[str, jax.Array], pos_Fx2: jax.Array,
                       light_height: float, ambient: float,
                       beta: float = 0.0) -> RelightFn:
  """The relighter replaced by the renderer given the true normals and
  albedo at the trajectory's light, encoded, keeping a fraction `beta` of
  its input: (1 - beta) render + beta cond (what a relighter trained by
  `relight_batch` with that beta learns on plain frames; the light map and
  the key are unused)."""
  frames = encode(render(sc, pos_Fx2, light_height, ambient))
  return lambda cond, light_map, key: (1.0 - beta) * frames + beta * cond


def smoothing_prior(sigma_frames: float = 1.0) -> Velocity:
  """The prior replaced by temporal Gaussian smoothing over the frame axis
  of [..., F, h, w, c]: x0_hat = the smoothed z rescaled by 1 / (1 - t),
  v = (z - x0_hat) / t."""
  radius = max(1, math.ceil(3 * sigma_frames))
  k = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma_frames) ** 2)
  k = k / k.sum()

  def velocity(z, t):
    ax = z.ndim - 4
    pad = jnp.pad(z, [(0, 0)] * ax + [(radius, radius)] + [(0, 0)] * 3,
                  mode='edge')
    f = z.shape[ax]
    sm = sum(float(w) * jax.lax.slice_in_dim(pad, j, j + f, axis=ax)
             for j, w in enumerate(k))
    x0 = sm / (1.0 - t)
    return (z - x0) / t

  return velocity


# ----------------------------------------------------------------------------
# Training batches (generated from a key inside the compiled step).


def relight_batch(key: jax.Array, batch: int, size: int, *,
                  light_height: float, ambient: float, radius: float,
                  num_objects: int = 3, beta: jax.Array | float = 0.0
                  ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Latents (target, cond, light map), each [B, h, w, c], for the
  relighter, from plain rendered frames only (no normal fusion: the
  pipeline stays training-free): the conditioning is a random frame lit by
  a random source light; the light map's centre is a random target light
  (sigma = PATCH * radius / 8 frame pixels); the target is the frame under
  the target light keeping a fraction `beta` of the source light,
  (1 - beta) render(target) + beta render(source) (a relighter that copies
  beta of its input's light, as IC-Light does per frame; beta = 0: none;
  beta a scalar or one per example [B])."""
  ks = jax.random.split(key, 3)
  sc = jax.vmap(lambda k: scene(k, 1, size, num_objects))(
      jax.random.split(ks[0], batch))
  sc = jax.tree.map(lambda a: a[:, 0], sc)
  src_xy = jax.random.uniform(ks[1], (batch, 2), maxval=size)
  tgt_xy = jax.random.uniform(ks[2], (batch, 2), maxval=size)
  src = encode(render(sc, src_xy, light_height, ambient))
  tgt = encode(render(sc, tgt_xy, light_height, ambient))
  light = jax.vmap(lambda p: light_map_latent(
      p[None], jnp.full((1,), PATCH * radius / 8.0), size, size)[0])(tgt_xy)
  b = jnp.reshape(jnp.asarray(beta, tgt.dtype), (-1, 1, 1, 1))
  return (1.0 - b) * tgt + b * src, src, light


def video_batch(key: jax.Array, batch: int, num_frames: int, size: int, *,
                light_height: float, ambient: float, num_objects: int = 3,
                motion: float = 1.0) -> jax.Array:
  """Clip latents [B, F, h, w, c] for the video prior: random scenes (objects
  moving) lit by a static point light at a random point (so the prior knows
  no light trajectory)."""
  ks = jax.random.split(key, 2)
  sc = jax.vmap(lambda k: scene(k, num_frames, size, num_objects, motion))(
      jax.random.split(ks[0], batch))
  a = jax.random.uniform(ks[1], (batch, 1, 2), minval=-0.1 * size,
                         maxval=1.1 * size)
  return encode(render(sc, jnp.broadcast_to(a, (batch, num_frames, 2)),
                       light_height, ambient))


__all__: Sequence[str] = [
    'BGSource', 'BUTTERWORTH_ORDER', 'FFT_AXES', 'LATENT_CHANNELS', 'MOVING',
    'OMEGA', 'PATCH', 'RELIGHT_STRENGTH', 'Relighter', 'SDEDIT_STRENGTH',
    'STOP', 'THRESHOLD', 'VideoPrior', 'analytic_relighter', 'butterworth',
    'change_error', 'decode', 'encode', 'flow_time', 'frame_change',
    'freq_filter', 'freq_mix', 'fused_step', 'gaussian_map',
    'inject', 'inject_flow', 'inject_noise', 'irradiance', 'lbd_schedule',
    'light_centroid_error', 'light_map_latent', 'light_masks',
    'light_positions', 'lightctrl', 'num_fused_steps', 'prior_velocity',
    'psnr', 'relight_batch', 'relight_sampler', 'render', 'scene',
    'sigma_of', 'smoothing_prior', 'source_leakage', 'to_intensity',
    'to_signed', 'video_batch']
