"""Flow2GAN: flow matching with endpoint estimation, then GAN fine-tuning.

Yao et al., "Flow2GAN: Hybrid Flow Matching and GAN with Multi-Resolution
Network for Few-step High-Fidelity Audio Generation", arXiv 2512.23278 (ICLR
2026). The losses follow the official code (k2-fsa/Flow2GAN,
`flow2gan/models/{generator,modules,gan}.py`); equation labels below are
the paper's Sec. 3 quantities.

Stage 1, flow matching (time t = 0 noise -> t = 1 data, as in the code):

  x0 = sigma0 N(0, I) (sigma0 = 0.1, small initial noise), x1 the waveform,
  t ~ U(0, 1), x_t = (1 - t) x0 + t x1.                               (FM-1)
  Endpoint estimation (pred_x1): the network predicts x1 directly; the
  velocity variant predicts x1 - x0.                                    (FM-2)
  Euler inference on t_k = k / n: v = (xhat1 - x) / (1 - t) for the
  endpoint model (the velocity implied by xhat1 on the straight path
  through x), v = the network output for the velocity model;
  x <- x + v / n.                                                       (FM-3)

  In silent regions x1 = 0, so the velocity target is -x0 (pure noise to
  reproduce) while the endpoint target is 0 -- the rationale for (FM-2).

  Loss: plain MSE of err = pred - ref, or spectral-energy scaling
    S(.) = |STFT(.)|^2 @ linear filterbank (centered STFT),
    scale = clamp((S(x1) + 1e-7)^(-1/2), 1e-2, 1e2),
    loss = sum(S(err) * scale) / (#frames * #filters)          (SPEC-1)
  (err is the time-domain error of whichever target is predicted; the scale
  always comes from the clean waveform x1). It up-weights quiet regions of
  the spectrum.

Generator: B branches, each an STFT (n_fft_b, hop_b) of x_t, real and
imaginary parts concatenated -> Dense -> BiasNorm -> ConvNeXt blocks ->
Dense -> complex coefficients -> iSTFT; the branch waveforms are averaged.
Each ConvNeXt block: depthwise conv (kernel 7) -> BiasNorm -> + Dense(cond)
-> * (1 + Dense(time embedding)) -> Dense(3 C) -> PReLU -> Dense(C) ->
+ ChannelScale(residual). The condition (log-mel) goes through a shared
ConvNeXt encoder, is repeated to each branch's frame rate and mapped by a
per-branch MLP; the time embedding is sinusoidal (scale 1000) + MLP per
branch. Branch dropout in FM training: with probability p per example one
branch is dropped and the others rescaled by B / (B - 1).

Stage 2, GAN fine-tuning of the unrolled N-step generator (N = 1, 2):
multi-period (HiFi-GAN; periods 2, 3, 5 in the default config, the
reference's 2, 3, 5, 7, 11 in the `paper` variant; plain convolutions where
the reference wraps each in weight_norm) and multi-resolution (Vocos/DAC: complex STFT of the
mean-removed, peak-normalised clip in 5 frequency bands) discriminators with
hinge losses,

  L_D = 1.0 L_D^MP + 0.1 L_D^MR,  L_D^k = sum_j mean(relu(1 - D_j(y)))
                                          + mean(relu(1 + D_j(yhat)))   (GAN-1)
  L_G = 1.0 adv_MP + 0.1 adv_MR + 1.0 FM_MP + 0.1 FM_MR + 45 mel,
  adv = sum_j mean(relu(1 - D_j(yhat))),
  FM = sum_j sum_l mean|f_jl(y) - f_jl(yhat)| (l: every conv output but
       the first, of each band for MR, and the output conv's),
  mel = sum_s mean|log mel_s(y) - log mel_s(yhat)| (n_fft_s, hop n_fft_s / 4).
                                                                         (GAN-2)
The generator is updated only after `disc_warmup` discriminator steps, and
the mel condition gets 0.2 u N(0, 1) noise (u ~ U(0, 1) per example).
`discriminator_loss` (GAN-1) and `generator_loss` (GAN-2) take the weights
as a `GANWeights`; `make_gan_trainer` builds the stage from them and a
`GANSettings` (19 fields with defaults; the experiment's config has them
too). `GANWeights.mel_only()` zeroes the adversarial and feature-matching
weights: the same stage then regresses the mel L1 alone without running
the discriminators (the control of the experiment's claim (iii)).

Sizes here are scaled down (8 kHz, 0.5 s clips, ~0.1-0.3 M parameters);
the algorithm is unchanged. Data: synthetic clips drawn inside the step
(`audio.synth_clip`), or, with `from_data`, minibatches of a clip array
[num_clips, N] passed to the step as `data` (e.g. LibriTTS segments,
`audio.wav_clips`). The experiment (variants, runner, claims, plots) is
`experiments/flow2gan.py`.

Deliberate differences from the reference (k2-fsa/Flow2GAN at ec5b85d;
tests/parity/test_flow2gan.py compares the losses, discriminators, sampler
and spectrograms):
* A branch's iSTFT returns all N samples (torch.istft with length=N); the
  reference's iSTFT stops at hop (F - 1) samples and zero-fills the last
  N mod hop (models/modules.py:105-116, 716-720).
* Each GAN step updates D, then G on the same batch and the same yhat; the
  reference alternates D-only and G-only batches, sampling yhat afresh in
  each (bin/finetune.py:604-626, models/gan.py:109-143).
* The mel-condition noise (0.2 here) follows models/generator.py:342-345,
  whose released configs set it to 0 (models/config.py:61, 94).
* BiasNorm adds 1e-8 under the root, and neither its log-scale nor the
  residual ChannelScale is range-limited (the reference's gradient-sign
  `limit_param_value`, models/modules.py:236-283); AdamW instead of
  ScaledAdam.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import functools
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import distributed
from iclrjax.diffusion import audio
from iclrjax.diffusion import flow
from iclrjax.diffusion import nets
from iclrjax.diffusion import train as train_lib

PyTree = Any
_INIT = nn.initializers.truncated_normal(0.015)  # the official _init_weights


# -- generator network ---------------------------------------------------------------------
class BiasNorm(nn.Module):
  """x * mean((x - b)^2)^(-1/2) * exp(log_scale) over the channel axis (-1)."""

  @nn.compact
  def __call__(self, x):
    b = self.param('bias', nn.initializers.normal(1e-2), (x.shape[-1],))
    log_scale = self.param('log_scale', nn.initializers.constant(1.0), ())
    scale = jax.lax.rsqrt(jnp.mean((x - b) ** 2, -1, keepdims=True) + 1e-8)
    return x * scale * jnp.exp(log_scale)


class PReLU(nn.Module):
  """Per-channel PReLU (torch.nn.PReLU(C): slopes initialised to 0.25)."""

  @nn.compact
  def __call__(self, x):
    a = self.param('slope', nn.initializers.constant(0.25), (x.shape[-1],))
    return jnp.where(x >= 0, x, a * x)


def _dense(features, name=None):
  return nn.Dense(features, kernel_init=_INIT, name=name)


class DepthwiseConv(nn.Module):
  """Depthwise 'same' conv over frames of [..., F, C] (kernel [k, C] + bias),
  written as k shifted multiply-adds: XLA's grouped convolution and its
  gradients are slow on CPU."""

  kernel: int

  @nn.compact
  def __call__(self, x):
    c, f, k = x.shape[-1], x.shape[-2], self.kernel
    w = self.param('kernel', _INIT, (k, c))
    b = self.param('bias', nn.initializers.zeros, (c,))
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(k // 2, k - 1 - k // 2),
                                               (0, 0)])
    return sum(xp[..., j:j + f, :] * w[j] for j in range(k)) + b


class ConvNeXtBlock(nn.Module):
  """Flow2GAN's 1-D ConvNeXt block on [..., frames, C] (see module doc)."""

  hidden_factor: int = 3
  kernel: int = 7

  @nn.compact
  def __call__(self, x, cond=None, temb=None):
    c = x.shape[-1]
    h = DepthwiseConv(self.kernel, name='dwconv')(x)
    h = BiasNorm(name='norm')(h)
    if cond is not None:
      h = h + _dense(c, 'cond_proj')(cond)
    if temb is not None:
      h = h * (1.0 + _dense(c, 'time_proj')(temb)[..., None, :])
    h = _dense(self.hidden_factor * c, 'pw1')(h)
    h = PReLU(name='act')(h)
    h = _dense(c, 'pw2')(h)
    scale = self.param('residual_scale', nn.initializers.ones, (c,))
    return h + x * scale


class CondEncoder(nn.Module):
  """Conv(k=3) -> BiasNorm -> ConvNeXt blocks on log-mel [..., frames, n_mels]."""

  channels: int
  num_layers: int
  hidden_factor: int = 3
  kernel: int = 7

  @nn.compact
  def __call__(self, mel):
    h = nn.Conv(self.channels, (3,), padding='SAME', kernel_init=_INIT,
                name='in_proj')(mel)
    h = BiasNorm(name='in_norm')(h)
    for i in range(self.num_layers):
      h = ConvNeXtBlock(self.hidden_factor, self.kernel, name=f'block{i}')(h)
    return h


def upsample_cond(cond: jax.Array, factor: int, frames: int) -> jax.Array:
  """Repeat each condition frame `factor` times; pad (zeros) / cut to `frames`."""
  c = jnp.repeat(cond, factor, axis=-2)
  n = c.shape[-2]
  if n >= frames:
    return c[..., :frames, :]
  return jnp.pad(c, [(0, 0)] * (c.ndim - 2) + [(0, frames - n), (0, 0)])


class Branch(nn.Module):
  """One STFT ConvNeXt branch: x_t [B, N] -> waveform estimate [B, N]."""

  n_fft: int
  hop: int
  cond_hop: int
  channels: int
  num_layers: int
  time_dim: int
  hidden_factor: int = 3
  kernel: int = 7

  @nn.compact
  def __call__(self, x, cond, t):
    n = x.shape[-1]
    spec = audio.stft(x, self.n_fft, self.hop)  # [B, F, K]
    h = jnp.concatenate([jnp.real(spec), jnp.imag(spec)], -1)
    h = BiasNorm(name='in_norm')(_dense(self.channels, 'in_proj')(h))
    if self.cond_hop % self.hop:
      raise ValueError(f'cond_hop {self.cond_hop} must be a multiple of hop '
                       f'{self.hop}')
    cond = upsample_cond(cond, self.cond_hop // self.hop, h.shape[-2])
    cc = cond.shape[-1]
    cond = _dense(cc, 'cond_mlp2')(PReLU(name='cond_act')(
        _dense(self.hidden_factor * cc, 'cond_mlp1')(cond)))
    temb = nets.timestep_embedding(t, self.time_dim, scale=1000.0)
    temb = _dense(self.time_dim, 'time_mlp2')(nn.silu(
        _dense(self.hidden_factor * self.time_dim, 'time_mlp1')(temb)))
    for i in range(self.num_layers):
      h = ConvNeXtBlock(self.hidden_factor, self.kernel, name=f'block{i}')(
          h, cond, temb)
    h = _dense(2 * spec.shape[-1], 'out_proj')(h)
    k = spec.shape[-1]
    out = jax.lax.complex(h[..., :k], h[..., k:])
    return audio.istft(out, self.n_fft, self.hop, n)


class Generator(nn.Module):
  """Multi-branch (or, with one branch, Vocos-like) STFT ConvNeXt generator.

  `encode(mel)` runs the shared condition encoder once; `__call__(x, t,
  cond, weights)` maps (x_t, t, encoded cond) to the averaged branch
  outputs, each branch weighted by `weights` [B, num_branches] (branch
  dropout; None = all ones).
  """

  n_ffts: Sequence[int]
  hops: Sequence[int]
  channels: Sequence[int]
  num_layers: int
  cond_hop: int
  cond_channels: int
  cond_layers: int
  time_dim: int
  hidden_factor: int = 3
  kernel: int = 7

  def setup(self):
    self.encoder = CondEncoder(self.cond_channels, self.cond_layers,
                               self.hidden_factor, self.kernel)
    self.branches = [
        Branch(nf, hp, self.cond_hop, ch, self.num_layers, self.time_dim,
               self.hidden_factor, self.kernel)
        for nf, hp, ch in zip(self.n_ffts, self.hops, self.channels)]

  @property
  def num_branches(self) -> int:
    return len(self.n_ffts)

  def encode(self, mel):
    return self.encoder(mel)

  def __call__(self, x, t, cond, weights=None):
    outs = jnp.stack([b(x, cond, t) for b in self.branches], 1)  # [B, nb, N]
    if weights is not None:
      outs = outs * weights[..., None]
    return jnp.mean(outs, 1)

  def init_all(self, mel, x, t):
    return self(x, t, self.encode(mel))


def make_generator(c, branches: str = 'multi') -> Generator:
  """The multi-branch generator, or the single-branch one ('single')."""
  common = dict(num_layers=c.num_layers, cond_hop=c.mel_hop,
                cond_channels=c.cond_channels, cond_layers=c.cond_layers,
                time_dim=c.time_dim, hidden_factor=c.hidden_factor,
                kernel=c.kernel)
  if branches == 'multi':
    return Generator(n_ffts=tuple(c.n_ffts), hops=tuple(c.hops),
                     channels=tuple(c.channels), **common)
  if branches == 'single':
    ch = c.single_channels or match_channels(c)
    return Generator(n_ffts=(c.single_n_fft,), hops=(c.single_hop,),
                     channels=(ch,), **common)
  raise ValueError(f'branches must be multi or single, got {branches!r}')


def _example_inputs(c, batch: int = 1):
  frames = audio.num_frames(c.clip_length, c.mel_hop)
  return (jnp.zeros((batch, frames, c.n_mels)), jnp.zeros((batch, c.clip_length)),
          jnp.zeros((batch,)))


def param_count(model: nn.Module, c) -> int:
  shapes = jax.eval_shape(
      lambda: model.init(jax.random.key(0), *_example_inputs(c),
                         method=Generator.init_all))
  return int(sum(np.prod(s.shape) for s in jax.tree.leaves(shapes)))


_MAX_WIDTH = 8192   # match_channels' search range is [4, _MAX_WIDTH]


@functools.lru_cache(maxsize=16)
def _match(key: tuple) -> int:
  c = dict(key)
  import ml_collections  # pylint: disable=g-import-not-at-top
  c = ml_collections.ConfigDict(c)
  target = param_count(make_generator(c, 'multi'), c)
  lo, hi = 4, _MAX_WIDTH
  count = lambda ch: param_count(Generator(
      n_ffts=(c.single_n_fft,), hops=(c.single_hop,), channels=(ch,),
      num_layers=c.num_layers, cond_hop=c.mel_hop,
      cond_channels=c.cond_channels, cond_layers=c.cond_layers,
      time_dim=c.time_dim, hidden_factor=c.hidden_factor,
      kernel=c.kernel), c)
  # The count grows with the width, as a quadratic (every weight is width x
  # width, width x fixed or a width vector): fit it on three widths, take
  # its smallest positive root at the target, and keep the two widths
  # around it when their true counts bracket the target; else bisect.
  w3 = np.array([8.0, 16.0, 32.0])
  coef = np.polyfit(w3, [count(int(w)) for w in w3], 2) - [0, 0, target]
  roots = [r.real for r in np.roots(coef) if abs(r.imag) < 1e-9 < r.real]
  w = int(np.clip(np.floor(min(roots, default=lo)), lo, hi - 1))
  cand = {w: count(w), w + 1: count(w + 1)}
  if cand[w] <= target <= cand[w + 1]:
    lo, hi = w, w + 1
  else:
    while hi - lo > 1:
      mid = (lo + hi) // 2
      if count(mid) <= target:
        lo = mid
      else:
        hi = mid
    cand = {lo: count(lo), hi: count(hi)}
  if not cand[lo] <= target <= cand[hi]:
    raise ValueError(f'no single-branch width in [4, {_MAX_WIDTH}] matches '
                     f'the multi-branch count {target} (counts {cand}): '
                     'check the config')
  return lo if abs(cand[lo] - target) <= abs(cand[hi] - target) else hi


_MATCH_FIELDS = ('n_ffts', 'hops', 'channels', 'num_layers', 'mel_hop',
                 'cond_channels', 'cond_layers', 'time_dim', 'hidden_factor',
                 'kernel', 'single_n_fft', 'single_hop', 'clip_length',
                 'n_mels')


def match_channels(c) -> int:
  """Single-branch width whose parameter count is closest to the multi-branch
  generator's (eval_shape counts: the root of their quadratic in the width,
  checked on the true counts; bisection where the check fails). Raises if
  no width in [4, 8192] brackets the multi-branch count."""
  key = tuple((f, tuple(c[f]) if isinstance(c[f], (list, tuple)) else c[f])
              for f in _MATCH_FIELDS)
  return _match(key)


# -- flow matching -----------------------------------------------------------------------
def endpoint_velocity(xhat1: jax.Array, x: jax.Array, t: jax.Array
                      ) -> jax.Array:
  """(FM-3): v = (xhat1 - x) / (1 - t), t broadcast over the sample axis."""
  t = jnp.reshape(t, jnp.shape(t) + (1,) * (x.ndim - jnp.ndim(t)))
  return (xhat1 - x) / (1.0 - t)


def spectral_scaled_loss(err: jax.Array, x1: jax.Array, *, sample_rate: int,
                         n_fft: int, hop: int, n_filters: int,
                         power: float = 0.5, eps: float = 1e-7,
                         scale_min: float = 1e-2, scale_max: float = 1e2
                         ) -> jax.Array:
  """(SPEC-1): mean over (batch, frames, filters) of S(err) * scale(S(x1))."""
  fb = audio.linear_filterbank(sample_rate, n_fft, n_filters)
  s_err = audio.power_spectrogram(err, n_fft, hop) @ fb
  s_ref = audio.power_spectrogram(x1, n_fft, hop) @ fb
  scale = jnp.clip((s_ref + eps) ** (-power), scale_min, scale_max)
  return jnp.mean(s_err * jax.lax.stop_gradient(scale))


def fm_loss(apply_fn: Callable, x1: jax.Array, key: jax.Array, *,
            pred_x1: bool, spectral: bool, noise_scale: float,
            spec_kwargs: dict[str, Any]) -> jax.Array:
  """(FM-1, FM-2) with plain MSE or (SPEC-1); apply_fn(x_t, t) -> prediction."""
  k0, kt = jax.random.split(key)
  x0 = noise_scale * jax.random.normal(k0, x1.shape)
  t = jax.random.uniform(kt, (x1.shape[0],))
  xt = (1.0 - t[:, None]) * x0 + t[:, None] * x1
  ref = x1 if pred_x1 else x1 - x0
  err = apply_fn(xt, t) - ref
  if spectral:
    return spectral_scaled_loss(err, x1, **spec_kwargs)
  return jnp.mean(err ** 2)


def branch_dropout_weights(key: jax.Array, batch: int, num_branches: int,
                           p: float) -> jax.Array:
  """[batch, nb]: with probability p drop one uniformly chosen branch and
  rescale the rest by nb / (nb - 1); otherwise all ones."""
  if num_branches < 2 or p <= 0:
    return jnp.ones((batch, num_branches))
  kb, kp = jax.random.split(key)
  idx = jax.random.randint(kb, (batch,), 0, num_branches)
  drop = (1.0 - jax.nn.one_hot(idx, num_branches)) * (
      num_branches / (num_branches - 1))
  use = jax.random.uniform(kp, (batch, 1)) < p
  return jnp.where(use, drop, 1.0)


def euler_sample(predict: Callable, x0: jax.Array, num_steps: int, *,
                 pred_x1: bool) -> jax.Array:
  """(FM-3): Euler from t = 0 (x0) to t = 1; predict(x, t [B]) -> output:
  `flow.sample` in its convention (s = 1 - t). Under `lax.scan`, so it
  backpropagates for stage 2.
  """

  def velocity(x, t):
    out = predict(x, t)
    return endpoint_velocity(out, x, t) if pred_x1 else out

  return flow.sample(flow.reverse_time(flow.batch_time(velocity)), x0,
                     num_steps)


# -- discriminators (stage 2) ----------------------------------------------------------------
def _lrelu(x):
  return nn.leaky_relu(x, 0.1)


class PeriodDiscriminator(nn.Module):
  """HiFi-GAN DiscriminatorP: [B, N] -> reflect-padded to a multiple of p,
  reshaped [B, N/p, p, 1] -> Conv2d stack (kernel (5, 1), stride (3, 1), the
  last stride 1) -> post conv (3, 1). Feature maps: every conv output but the
  first, and the post conv's (the reference's discriminators.py:92-103)."""

  period: int
  channels: Sequence[int] = (8, 16, 32, 32)

  @nn.compact
  def __call__(self, y):
    b, n = y.shape
    p = self.period
    if n % p:
      y = jnp.pad(y, ((0, 0), (0, p - n % p)), mode='reflect')
    h = y.reshape(b, -1, p, 1)
    fmaps = []
    for i, ch in enumerate(self.channels):
      stride = (3, 1) if i < len(self.channels) - 1 else (1, 1)
      h = _lrelu(nn.Conv(ch, (5, 1), strides=stride, padding=((2, 2), (0, 0)),
                         name=f'conv{i}')(h))
      if i > 0:
        fmaps.append(h)
    h = nn.Conv(1, (3, 1), padding=((1, 1), (0, 0)), name='post')(h)
    fmaps.append(h)
    return h.reshape(b, -1), fmaps


MRD_BANDS = ((0.0, 0.1), (0.1, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0))


def mrd_input(y: jax.Array, n_fft: int,
              bands: Sequence[tuple[float, float]] = MRD_BANDS
              ) -> list[jax.Array]:
  """The multi-resolution discriminator's input (Vocos' DAC-style
  DiscriminatorR, the reference's discriminators.py:186-196): y [B, N] with
  its mean removed and peak-normalised to 0.8 (by max|y| + 1e-9), its
  complex STFT (hop n_fft / 4) as [B, frames, bins, 2] (real, imaginary),
  cut into the bins [int(lo K), int(hi K)) of each band, K = n_fft // 2 + 1."""
  y = y - jnp.mean(y, -1, keepdims=True)
  y = 0.8 * y / (jnp.max(jnp.abs(y), -1, keepdims=True) + 1e-9)
  s = audio.stft(y, n_fft, n_fft // 4)
  x = jnp.stack([jnp.real(s), jnp.imag(s)], -1)
  k = n_fft // 2 + 1
  return [x[..., int(lo * k):int(hi * k), :] for lo, hi in bands]


class ResolutionDiscriminator(nn.Module):
  """Vocos/DAC DiscriminatorR: per band of `mrd_input`, Conv2d (3, 9) ->
  `num_strided` Conv2d (3, 9) with frequency stride 2 -> Conv2d (3, 3)
  (leaky ReLU 0.1 after each); the bands' outputs concatenated along
  frequency -> post Conv2d (3, 3). Feature maps: every conv output of each
  band but its first, then the post conv's (discriminators.py:198-219)."""

  n_fft: int
  channels: int = 8
  num_strided: int = 3
  bands: Sequence[tuple[float, float]] = MRD_BANDS

  @nn.compact
  def __call__(self, y):
    def conv(name, kernel, stride=(1, 1), features=self.channels):
      pad = tuple((k // 2, k // 2) for k in kernel)  # torch's padding (1, 4)
      return nn.Conv(features, kernel, strides=stride, padding=pad, name=name)

    fmaps, outs = [], []
    for j, h in enumerate(mrd_input(y, self.n_fft, self.bands)):
      h = _lrelu(conv(f'band{j}_conv0', (3, 9))(h))
      for i in range(self.num_strided):
        h = _lrelu(conv(f'band{j}_conv{i + 1}', (3, 9), (1, 2))(h))
        fmaps.append(h)
      h = _lrelu(conv(f'band{j}_conv_last', (3, 3))(h))
      fmaps.append(h)
      outs.append(h)
    h = conv('post', (3, 3), features=1)(jnp.concatenate(outs, -2))
    fmaps.append(h)
    return h.reshape(h.shape[0], -1), fmaps


class Discriminators(nn.Module):
  """MultiPeriod + MultiResolution: y -> {'mp': [(score, fmaps)], 'mr': ...}."""

  periods: Sequence[int] = (2, 3, 5)
  mp_channels: Sequence[int] = (8, 16, 32, 32)
  resolutions: Sequence[int] = (128, 256, 512)
  mr_channels: int = 8

  @nn.compact
  def __call__(self, y):
    mp = [PeriodDiscriminator(p, tuple(self.mp_channels), name=f'mp{p}')(y)
          for p in self.periods]
    mr = [ResolutionDiscriminator(n, self.mr_channels, name=f'mr{n}')(y)
          for n in self.resolutions]
    return {'mp': mp, 'mr': mr}


def hinge_d_loss(real_scores: Sequence[jax.Array],
                 fake_scores: Sequence[jax.Array]) -> jax.Array:
  """(GAN-1): sum_j mean(relu(1 - D_j(y))) + mean(relu(1 + D_j(yhat)))."""
  return sum(jnp.mean(jax.nn.relu(1.0 - r)) + jnp.mean(jax.nn.relu(1.0 + f))
             for r, f in zip(real_scores, fake_scores))


def hinge_g_loss(fake_scores: Sequence[jax.Array]) -> jax.Array:
  """(GAN-2): sum_j mean(relu(1 - D_j(yhat)))."""
  return sum(jnp.mean(jax.nn.relu(1.0 - f)) for f in fake_scores)


def feature_matching_loss(real_fmaps: Sequence[Sequence[jax.Array]],
                          fake_fmaps: Sequence[Sequence[jax.Array]]
                          ) -> jax.Array:
  """(GAN-2): sum_j sum_l mean|f_jl(y) - f_jl(yhat)| (real side not trained)."""
  return sum(jnp.mean(jnp.abs(jax.lax.stop_gradient(r) - f))
             for rs, fs in zip(real_fmaps, fake_fmaps)
             for r, f in zip(rs, fs))


def multiscale_mel_loss(y: jax.Array, yhat: jax.Array, sample_rate: int,
                        n_ffts: Sequence[int], n_mels: Sequence[int]
                        ) -> jax.Array:
  """(GAN-2): sum over scales of mean|log mel(y) - log mel(yhat)|
  (magnitude mel, hop n_fft / 4, log floor 1e-7)."""
  total = 0.0
  for nf, nm in zip(n_ffts, n_mels):
    lm = lambda z, nf=nf, nm=nm: audio.log_mel(z, sample_rate, nf, nf // 4, nm)
    total = total + jnp.mean(jnp.abs(lm(y) - lm(yhat)))
  return total


# -- trainers ----------------------------------------------------------------------------
def clip_spec(c) -> audio.ClipSpec:
  return audio.ClipSpec(sample_rate=c.sample_rate, length=c.clip_length)


def condition(c, x1: jax.Array) -> jax.Array:
  """The log-mel condition [B, frames, n_mels] of waveforms x1 [B, N]."""
  return audio.log_mel(x1, c.sample_rate, c.mel_n_fft, c.mel_hop, c.n_mels)


def spec_kwargs(c) -> dict[str, Any]:
  return dict(sample_rate=c.sample_rate, n_fft=c.loss_n_fft,
              hop=c.loss_hop, n_filters=c.loss_n_filters,
              power=c.loss_power)


def _cosine_adamw(lr: float, c, warmup: int, total: int):
  """Clipped AdamW (no decay) on a warm-up + cosine schedule to 0.1 lr
  (on one raveled vector with c.flat_optimizer, `train.optimizer`)."""
  return train_lib.optimizer(lr, warmup_steps=warmup, cosine_steps=total,
                             end_factor=0.1, grad_clip=c.grad_clip, b1=c.b1,
                             b2=c.b2, weight_decay=0.0,
                             flatten=c.flat_optimizer)


def generate(model: Generator, params: PyTree, mel: jax.Array,
             x0: jax.Array, num_steps: int, *, pred_x1: bool) -> jax.Array:
  """N-step Euler generation from x0 given the log-mel (cond encoded once)."""
  cond = model.apply(params, mel, method=Generator.encode)
  return euler_sample(lambda x, t: model.apply(params, x, t, cond), x0,
                      num_steps, pred_x1=pred_x1)


FMState = train_lib.TrainState


def make_fm_trainer(model: Generator, c, *, pred_x1: bool, spectral: bool,
                    from_data: bool = False):
  """(init, step) of stage 1.

  Synthetic (default): step(state, t) -> (state, {'loss', 'grad_norm', ...})
  on fresh clips synth_batch(fold_in(key, t)) (the step is the whole data
  position). from_data: step(state, t, data) on minibatch t of the clips
  `data` [num_clips, clip_length] (`train.minibatch`: epochs without
  replacement, split over the mesh's 'data' axis like the synthetic batch).
  """
  tx = _cosine_adamw(c.learning_rate, c, c.warmup_steps, c.fm_steps)
  spec = clip_spec(c)
  kw = spec_kwargs(c)
  nb = len(model.n_ffts)

  def init_params(key):
    return model.init(key, *_example_inputs(c), method=Generator.init_all)

  def loss_fn(p, batch, key, frozen):
    del frozen
    kd, kn, kb = jax.random.split(key, 3)
    if from_data:
      x1 = batch
    else:                  # the clips are drawn here, from the step's key
      x1 = distributed.shard_batch(audio.synth_batch(kd, c.batch_size,
                                                     spec)['audio'])
    mel = condition(c, x1)
    w = branch_dropout_weights(kb, c.batch_size, nb, c.branch_dropout)
    cond = model.apply(p, mel, method=Generator.encode)
    return fm_loss(lambda xt, tt: model.apply(p, xt, tt, cond, w), x1, kn,
                   pred_x1=pred_x1, spectral=spectral,
                   noise_scale=c.noise_scale, spec_kwargs=kw)

  batch_fn = train_lib.minibatch(None, c.batch_size) if from_data else None
  return train_lib.make_trainer(init_params, loss_fn, tx,
                                ema_decay=c.ema_decay, batch_fn=batch_fn)


class GANState(NamedTuple):
  gen: PyTree
  gen_opt: PyTree
  disc: PyTree
  disc_opt: PyTree
  ema: PyTree
  key: jax.Array


class GANWeights(NamedTuple):
  """The loss weights of (GAN-1) and (GAN-2), defaults the release's
  (bin/finetune.py: the defaults of --{disc,gen,feat-map}-loss-{mp,mr}-scale
  and --mel-recon-loss-scale, combined in compute_loss; `gan_weights` of
  configs/flow2gan.py): the generator's hinge adversarial (adv_*) and
  feature-matching (fm_*) terms and the discriminators' hinge losses
  (disc_*) weigh the multi-period (mp) discriminator 1.0 and the
  multi-resolution (mr) one 0.1; the multi-scale log-mel L1 weighs 45."""

  adv_mp: float = 1.0
  adv_mr: float = 0.1
  fm_mp: float = 1.0
  fm_mr: float = 0.1
  mel: float = 45.0
  disc_mp: float = 1.0
  disc_mr: float = 0.1

  def mel_only(self) -> GANWeights:
    """These weights with the adversarial and feature-matching terms at 0:
    fine-tuning on the mel L1 alone (the discriminators are not run)."""
    return self._replace(adv_mp=0.0, adv_mr=0.0, fm_mp=0.0, fm_mr=0.0)

  @property
  def uses_discriminator(self) -> bool:
    """False when every adversarial and feature-matching weight is a
    concrete 0 (a traced weight counts as used)."""
    return not all(_concrete_zero(getattr(self, k))
                   for k in ('adv_mp', 'adv_mr', 'fm_mp', 'fm_mr'))


def _concrete_zero(w) -> bool:
  return not isinstance(w, jax.core.Tracer) and float(w) == 0.0


def _scores(outs):
  return [s for s, _ in outs]


def _fmaps(outs):
  return [f for _, f in outs]


def discriminator_loss(disc: Discriminators, disc_params: PyTree,
                       real: jax.Array, fake: jax.Array,
                       weights: GANWeights = GANWeights()
                       ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """(GAN-1): disc_mp L_D^MP + disc_mr L_D^MR, the hinge losses of the
  multi-period and multi-resolution discriminators (the release's
  models/gan.py:57-66, weighted as in bin/finetune.py compute_loss) on real waveforms `real` [B, N] and generated ones
  `fake` [B, N]; `fake` is held constant (this is the discriminators' loss).
  Returns (loss, {'d_mp': L_D^MP, 'd_mr': L_D^MR})."""
  r = disc.apply(disc_params, real)
  f = disc.apply(disc_params, jax.lax.stop_gradient(fake))
  mp = hinge_d_loss(_scores(r['mp']), _scores(f['mp']))
  mr = hinge_d_loss(_scores(r['mr']), _scores(f['mr']))
  return weights.disc_mp * mp + weights.disc_mr * mr, {'d_mp': mp, 'd_mr': mr}


def generator_loss(disc: Discriminators | None, disc_params: PyTree,
                   real: jax.Array, fake: jax.Array,
                   weights: GANWeights = GANWeights(), *, sample_rate: int,
                   mel_n_ffts: Sequence[int], mel_n_mels: Sequence[int]
                   ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """(GAN-2): adv_mp adv_MP + adv_mr adv_MR + fm_mp FM_MP + fm_mr FM_MR +
  mel L_mel for generated waveforms `fake` [B, N] against `real` [B, N]:
  hinge adversarial terms, feature matching against the real clips' maps
  (constants) and the multi-scale log-mel L1 at (mel_n_ffts, mel_n_mels)
  (the release's models/gan.py:68-99, weighted as in bin/finetune.py
  compute_loss). Differentiate it with respect to
  `fake`. Returns (loss, parts), parts the unweighted terms by weight name.

  With `weights.uses_discriminator` False (e.g. `GANWeights().mel_only()`)
  the discriminators are not run: the loss is mel L_mel alone, parts is
  {'mel': L_mel}, and `disc`, `disc_params` may be None.
  """
  parts = {}
  if weights.uses_discriminator:
    r = disc.apply(disc_params, real)
    f = disc.apply(disc_params, fake)
    parts = {'adv_mp': hinge_g_loss(_scores(f['mp'])),
             'adv_mr': hinge_g_loss(_scores(f['mr'])),
             'fm_mp': feature_matching_loss(_fmaps(r['mp']), _fmaps(f['mp'])),
             'fm_mr': feature_matching_loss(_fmaps(r['mr']), _fmaps(f['mr']))}
  parts['mel'] = multiscale_mel_loss(real, fake, sample_rate, mel_n_ffts,
                                     mel_n_mels)
  return sum(getattr(weights, k) * v for k, v in parts.items()), parts


class GANSettings(NamedTuple):
  """What the GAN stage reads besides its weights, defaults the default
  variant of configs/flow2gan.py (whose config can stand in for it: the
  names are its fields).

  sample_rate, clip_length: the clips (clip_length sizes the
  discriminators' init and the synthetic clips); batch_size; mel_n_fft,
  mel_hop, n_mels: the generator's log-mel condition (`condition`);
  noise_scale: sigma0 of x0; mel_noise: the condition's noise 0.2 u N(0, 1);
  gan_steps: the length of the cosine learning-rate schedules (each opens
  with `train.optimizer`'s one-step warm-up from 0: the discriminators'
  first update, and the generator's at t = disc_warmup, have learning
  rate 0); gen_lr, disc_lr, grad_clip, b1, b2: the two clipped Adam
  optimisers; disc_warmup: discriminator-only steps before the generator's
  updates (it first moves at t = disc_warmup + 1); gan_ema_decay: the
  generator's (bias-corrected) EMA; mel_loss_n_ffts, mel_loss_n_mels: the
  scales of the (GAN-2) mel L1; flat_optimizer: each optimiser on its
  parameters raveled into one vector (`train.optimizer`'s flatten: the
  same updates, a ~2x faster compile of the step).
  """

  sample_rate: int = 8000
  clip_length: int = 4000
  batch_size: int = 8
  mel_n_fft: int = 256
  mel_hop: int = 64
  n_mels: int = 32
  noise_scale: float = 0.1
  mel_noise: float = 0.2
  gan_steps: int = 100
  gen_lr: float = 2e-4
  disc_lr: float = 1e-3
  grad_clip: float = 1.0
  b1: float = 0.9
  b2: float = 0.99
  disc_warmup: int = 20
  gan_ema_decay: float = 0.97
  mel_loss_n_ffts: tuple[int, ...] = (32, 64, 128, 256, 512)
  mel_loss_n_mels: tuple[int, ...] = (5, 10, 20, 40, 80)
  flat_optimizer: bool = False


def gan_weights(c) -> GANWeights:
  """`c.gan_weights` (a config's mapping) as GANWeights; GANWeights() when
  c has none (e.g. a GANSettings)."""
  w = getattr(c, 'gan_weights', None)
  return GANWeights() if w is None else GANWeights(**dict(w))


def make_discriminators(c) -> Discriminators:
  """The MP + MR discriminators of a config (periods, mp_channels,
  mr_n_ffts, mr_channels)."""
  return Discriminators(periods=tuple(c.periods),
                        mp_channels=tuple(c.mp_channels),
                        resolutions=tuple(c.mr_n_ffts),
                        mr_channels=c.mr_channels)


def make_gan_trainer(model: Generator, disc: Discriminators,
                     c: Any = GANSettings(), num_steps: int = 1,
                     from_data: bool = False, *,
                     weights: GANWeights | None = None):
  """(init(key, teacher_params), step) of stage 2 for the N-step generator.

  c: a `GANSettings` (or the experiment's config, which has its fields);
  weights: the (GAN-1, GAN-2) weights, None: `gan_weights(c)`. Each step:
  generate yhat with the unrolled N-step (num_steps) Euler sampler from
  x0 = sigma0 N(0, I) and the (noised) log-mel; one discriminator update on
  `discriminator_loss`; then, once t >= disc_warmup, one generator update on
  `generator_loss` against the updated discriminators (the same yhat,
  back-propagated through the sampler by its VJP). Branch dropout is off.
  With mel-only weights (`GANWeights.uses_discriminator` False) the
  discriminators are initialised but neither run nor updated, and the
  generator moves on the same steps, data and noise as with the full
  weights. The clips are synthetic, or with `from_data` minibatches of
  `data` as in `make_fm_trainer` (step(state, t, data); the batch key is
  split off the state's key, the rest of the step's randomness folds the
  other half); either way the clips and x0 are split over the mesh's 'data'
  axis. Metrics: 'g_loss' and its parts, and 'd_loss', 'd_mp', 'd_mr' when
  the discriminators train.

  Example (a user's own generator and clips, no experiment config):
    ```python
    import functools
    import jax
    import jax.numpy as jnp
    from iclrjax.diffusion import flow2gan as f2g

    s = f2g.GANSettings(clip_length=512, batch_size=2, mel_n_fft=64,
                        mel_hop=32, n_mels=8, gan_steps=3, disc_warmup=1,
                        mel_loss_n_ffts=(64,), mel_loss_n_mels=(10,))
    gen = f2g.Generator(n_ffts=(32,), hops=(16,), channels=(8,),
                        num_layers=1, cond_hop=32, cond_channels=8,
                        cond_layers=0, time_dim=8)
    clips = 0.3 * jnp.sin(0.05 * jnp.arange(4 * 512.0)).reshape(4, 512)
    mel = f2g.condition(s, clips)               # [4, frames, 8]
    params = jax.jit(functools.partial(         # e.g. from stage 1
        gen.init, method=f2g.Generator.init_all))(
            jax.random.key(0), mel[:1], clips[:1], jnp.zeros(1))
    disc = f2g.Discriminators(periods=(2,), mp_channels=(4, 4),
                              resolutions=(64,), mr_channels=4)
    init, step = f2g.make_gan_trainer(gen, disc, s, num_steps=1,
                                      from_data=True,
                                      weights=f2g.GANWeights(mel=45.0))
    state, step = jax.jit(init)(jax.random.key(1), params), jax.jit(step)
    for t in range(3):
      state, m = step(state, t, clips)
      print(t, float(m['d_loss']), float(m['g_loss']), float(m['mel']))
    x0 = s.noise_scale * jax.random.normal(jax.random.key(2), clips.shape)
    audio = jax.jit(lambda p: f2g.generate(gen, p, mel, x0, 1,
                                           pred_x1=True))(state.ema)
    print(audio.shape)                          # (4, 512)
    ```
  """
  weights = gan_weights(c) if weights is None else weights
  adversarial = weights.uses_discriminator
  gtx = _cosine_adamw(c.gen_lr, c, 0, c.gan_steps)
  dtx = _cosine_adamw(c.disc_lr, c, 0, c.gan_steps)
  spec = clip_spec(c)
  batch_fn = train_lib.minibatch(None, c.batch_size)
  gen_kw = dict(sample_rate=c.sample_rate,
                mel_n_ffts=tuple(c.mel_loss_n_ffts),
                mel_n_mels=tuple(c.mel_loss_n_mels))

  def init(key, teacher):
    k_d, k_run = jax.random.split(key)
    dparams = disc.init(k_d, jnp.zeros((1, c.clip_length)))
    return GANState(teacher, gtx.init(teacher), dparams, dtx.init(dparams),
                    teacher, k_run)

  def step(state, t, data=None):
    key = state.key
    if from_data:
      k_batch, key = jax.random.split(key)
    kd, kn, km, ku = jax.random.split(jax.random.fold_in(key, t), 4)
    x1 = (batch_fn(k_batch, t, data) if from_data else  # split over 'data'
          distributed.shard_batch(audio.synth_batch(kd, c.batch_size,
                                                    spec)['audio']))
    mel = condition(c, x1)
    u = jax.random.uniform(ku, (c.batch_size, 1, 1))
    mel = mel + c.mel_noise * u * jax.random.normal(km, mel.shape)
    x0 = distributed.shard_batch(
        c.noise_scale * jax.random.normal(kn, x1.shape))
    fake, vjp = jax.vjp(lambda p: generate(model, p, mel, x0, num_steps,
                                           pred_x1=True), state.gen)
    metrics = {}
    dparams, disc_opt = state.disc, state.disc_opt
    if adversarial:
      (d_loss, d_parts), dg = jax.value_and_grad(
          lambda dp: discriminator_loss(disc, dp, x1, fake, weights),
          has_aux=True)(state.disc)
      dupd, disc_opt = dtx.update(dg, state.disc_opt, state.disc)
      dparams = optax.apply_updates(state.disc, dupd)
      metrics = {'d_loss': d_loss, **d_parts}
    (g_loss, parts), gy = jax.value_and_grad(
        lambda y: generator_loss(disc, dparams, x1, y, weights, **gen_kw),
        has_aux=True)(fake)
    (gg,) = vjp(gy)
    gupd, gen_opt = gtx.update(gg, state.gen_opt, state.gen)
    gen = optax.apply_updates(state.gen, gupd)
    on = t >= c.disc_warmup
    gen = jax.tree.map(lambda a, b: jnp.where(on, a, b), gen, state.gen)
    gen_opt = jax.tree.map(lambda a, b: jnp.where(on, a, b), gen_opt,
                           state.gen_opt)
    decay = nets.ema_decay_debiased(t - c.disc_warmup, c.gan_ema_decay)
    ema = nets.ema_update(state.ema, gen, jnp.where(on, decay, 1.0))
    metrics.update(g_loss=g_loss, **parts)
    return GANState(gen, gen_opt, dparams, disc_opt, ema, state.key), metrics

  return init, step


# -- evaluation ----------------------------------------------------------------------------
def test_set(c, clips: np.ndarray | None = None) -> dict[str, jax.Array]:
  """The fixed evaluation clips and their initial noise (same for every
  variant and seed): `num_test` synthetic clips, or the given `clips`
  [num_test, clip_length] (real audio) whose 'gap_mask' is then
  `audio.silence_mask` (blocks of mel_hop samples `quiet_db` below the
  clip's loudest)."""
  if clips is None:
    data = audio.synth_batch(jax.random.key(c.test_seed), c.num_test,
                             clip_spec(c))
  else:
    data = {'audio': jnp.asarray(clips, jnp.float32),
            'gap_mask': jnp.asarray(audio.silence_mask(
                np.asarray(clips), c.mel_hop, c.quiet_db))}
  x0 = c.noise_scale * jax.random.normal(jax.random.key(c.test_seed + 1),
                                         data['audio'].shape)
  return dict(data, mel=condition(c, data['audio']), x0=x0)


def clip_metrics(c, pred: jax.Array, data: dict[str, jax.Array]
                 ) -> dict[str, jax.Array]:
  """Per-clip LSD (overall, quiet bins), gap RMS and MR-STFT loss, averaged."""
  d = audio.lsd(pred, data['audio'], c.lsd_n_fft, c.lsd_n_fft // 4,
                quiet_db=c.quiet_db)
  return {'lsd': jnp.mean(d['lsd']), 'lsd_quiet': jnp.mean(d['lsd_quiet']),
          'gap_rms': jnp.mean(audio.gap_rms(pred, data['gap_mask'])),
          'mrstft': jnp.mean(audio.mrstft_loss(pred, data['audio']))}


def test_set_shapes(c, from_data: bool = False) -> dict[str, Any]:
  """`test_set`'s shapes, computing nothing: the synthetic set, or
  (`from_data`) num_test real clips with their silence masks."""
  if not from_data:
    return jax.eval_shape(lambda: test_set(c))
  clips = jax.ShapeDtypeStruct((c.num_test, c.clip_length), jnp.float32)
  return jax.eval_shape(lambda x: dict(
      audio=x, gap_mask=jnp.zeros(x.shape, bool), mel=condition(c, x),
      x0=x), clips)


def evaluator_fn(model: Generator, c, num_steps: int, pred_x1: bool):
  """vmap over seeds of (params, data) -> ({metric: [seeds]}, samples
  [seeds, k, N]) on a `test_set`, generated `eval_batch` clips at a time."""
  k = min(4, c.num_test)

  def one(params, data):
    def chunk(i):
      sl = lambda a: jax.lax.dynamic_slice_in_dim(a, i * c.eval_batch,
                                                  c.eval_batch)
      return generate(model, params, sl(data['mel']), sl(data['x0']),
                      num_steps, pred_x1=pred_x1)
    n_chunks = c.num_test // c.eval_batch
    pred = jax.lax.map(chunk, jnp.arange(n_chunks)).reshape(
        n_chunks * c.eval_batch, -1)
    return clip_metrics(c, pred, data), pred[:k]

  return jax.vmap(one, in_axes=(0, None))


def make_evaluator(model: Generator, c, num_steps: int, pred_x1: bool,
                   data: dict[str, jax.Array] | None = None):
  """jit(vmap over seeds)(params) -> ({metric: [seeds]}, samples [seeds, k, N])
  on `data` (a `test_set`; None: test_set(c))."""
  data = test_set(c) if data is None else data
  fn = evaluator_fn(model, c, num_steps, pred_x1)
  return jax.jit(lambda params: fn(params, data))


__all__: Sequence[str] = [
    'BiasNorm', 'Branch', 'CondEncoder', 'ConvNeXtBlock', 'Discriminators',
    'FMState', 'GANSettings', 'GANState', 'GANWeights', 'Generator',
    'MRD_BANDS', 'PeriodDiscriminator', 'ResolutionDiscriminator',
    'branch_dropout_weights', 'clip_metrics', 'condition',
    'discriminator_loss', 'endpoint_velocity', 'euler_sample',
    'evaluator_fn', 'feature_matching_loss', 'fm_loss', 'gan_weights',
    'generate', 'generator_loss', 'hinge_d_loss', 'hinge_g_loss',
    'make_discriminators', 'make_evaluator', 'make_fm_trainer',
    'make_gan_trainer', 'make_generator', 'match_channels', 'mrd_input',
    'multiscale_mel_loss', 'param_count', 'spectral_scaled_loss', 'test_set',
    'test_set_shapes', 'upsample_cond']
