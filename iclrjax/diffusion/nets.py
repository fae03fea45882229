"""Denoiser networks for diffusion models on small images (flax.linen).

Two time-conditioned backbones and their input features:

* `ResMLP`: a residual MLP on flattened data [..., D] (8x8 digits: D = 64).
  The conditioning enters every block by FiLM on the normalised block input.
* `UNet`: a small DDPM/VDM-style U-Net on images [..., H, W, C] (8x8x1
  digits, 32x32x3 CIFAR-10). The conditioning enters every ResBlock as a
  scale and shift of its second GroupNorm's output (FiLM).

Both take one real-valued conditioning scalar `c` per example (a time t in
[0, 1], a log-SNR, QDPM's u = exp(-1/t^2), ...), embed it with
`timestep_embedding(c * emb_scale)` and an MLP, and accept unbatched inputs
(x [D] or [H, W, C] with scalar c) as well as batched ones, so they compose
with `jax.vmap` over examples. With `zero_init_out=True` (the default) the
last layer is zero-initialised and the network output is exactly 0 at init.

Input Fourier features (`fourier_features`) follow VDM's
`Base2FourierFeatures` (Kingma et al. 2021, google-research/vdm
`model_vdm.py`): they make the network sensitive to the fine-scale offset of
the input from the data grid in the high-SNR regime, which is where a
likelihood model of quantised data spends most of its bits.

Parameter EMA: `ema_update` and `ema_decay_debiased`; `in_chunks` applies a
per-example function to a large batch a chunk at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp


def timestep_embedding(c: jax.Array, dim: int, max_period: float = 10_000.0,
                       scale: float = 1000.0, *, freq_shift: int = 1,
                       flip_sin_to_cos: bool = False) -> jax.Array:
  """Sinusoidal embedding of a real conditioning scalar per example.

  With a = c * scale and half = dim // 2 frequencies
  f_i = max_period^(-i / (half - freq_shift)), i = 0..half-1, returns
  concat([sin(a f), cos(a f)]) (concat([cos(a f), sin(a f)]) with
  flip_sin_to_cos), zero-padded by one column when dim is odd. The defaults
  (freq_shift = 1: geometric from 1 down to exactly 1 / max_period) are the
  tensor2tensor/VDM `get_timestep_embedding` convention; freq_shift = 0 with
  flip_sin_to_cos = True and scale = 1 is DiT/ADM's `timestep_embedding`
  (`dit.TimestepEmbedder`). The names are diffusers' (`downscale_freq_shift`,
  `flip_sin_to_cos`).

  Scaling. The default scale = 1000 is DDPM/VDM's for t in [0, 1] (and QDPM's
  u in [0, 1]): the scaled values then span ~1000 rad at the highest
  frequency and ~0.1 rad at the lowest. The lowest-frequency (sin, cos) pair
  alone makes the map injective for |c * scale| < pi * max_period, so the
  default also separates every log-SNR in [-15, 15] (|c| < 31.4); for a
  smoother embedding of a quantity with range R, pass scale ~ 1000 / R
  (e.g. 1000 / 30 for log-SNR in [-15, 15]; VDM instead maps gamma to [0, 1]
  before embedding).

  Args:
    c: conditioning values, shape [...] (ints and half precision are cast to
      float32: c * scale needs more than bfloat16's 8 bits of mantissa).
    dim: embedding width (>= 2).
    max_period: ratio of the highest to the lowest frequency.
    scale: multiplier applied to `c` before embedding.
    freq_shift: the exponent's denominator is half - freq_shift (1: VDM, the
      lowest frequency is 1 / max_period; 0: DiT/ADM).
    flip_sin_to_cos: cos features first (DiT/ADM) instead of sin first.

  Returns:
    [..., dim] embedding, float32 (float64 for float64 c).
  """
  if dim < 2:
    raise ValueError(f'dim must be >= 2, got {dim}')
  c = jnp.asarray(c)
  c = c.astype(jnp.promote_types(c.dtype, jnp.float32))
  half = dim // 2
  exponent = jnp.arange(half, dtype=c.dtype) / max(half - freq_shift, 1)
  freqs = jnp.exp(-math.log(max_period) * exponent)
  args = (c * scale)[..., None] * freqs.reshape((1,) * c.ndim + (half,))
  pair = (jnp.cos(args), jnp.sin(args)) if flip_sin_to_cos else (
      jnp.sin(args), jnp.cos(args))
  emb = jnp.concatenate(pair, axis=-1)
  if dim % 2:
    emb = jnp.pad(emb, [(0, 0)] * (emb.ndim - 1) + [(0, 1)])
  return emb


def fourier_features(x: jax.Array, start: int, stop: int) -> jax.Array:
  """VDM's Base2FourierFeatures of x [..., D] -> [..., D * 2 * (stop - start)].

  Follows google-research/vdm `model_vdm.py` `Base2FourierFeatures` exactly,
  frequency convention and layout included: the angular frequencies are
  w_k = 2^k * 2 * pi for k in range(start, stop) (i.e. 2^k full periods per
  unit of x; note the factor 2 * pi, not pi), and the output is

    [sin(x_d w_k) for d in range(D) for k in range(start, stop)]
    ++ [cos(x_d w_k) for d ... for k ...]

  (all sines first; within each half, input dimension major, frequency
  minor), matching VDM's `jnp.repeat` of the input and `jnp.tile` of w.

  Choosing the band: VDM uses (start, stop) = (6, 8) for 256-level data
  scaled to [-1, 1] (grid spacing 2^-7): periods of 2 and 1 grid steps. For
  a grid spacing s, periods near s mean 2^k ~ 1 / s, e.g. k ~ 3 for 17-level
  digits on [-1, 1] (s = 2/16 or 2/17), k ~ 0 for an integer grid.

  Args:
    x: input [..., D] (floating).
    start: first exponent (inclusive).
    stop: last exponent (exclusive); stop > start.

  Returns:
    [..., D * 2 * (stop - start)] features in x's dtype.
  """
  if stop <= start:
    raise ValueError(f'need stop > start, got start={start}, stop={stop}')
  x = jnp.asarray(x)
  w = 2.0 ** jnp.arange(start, stop, dtype=x.dtype) * (2 * jnp.pi)
  w = w.reshape((1,) * x.ndim + (-1,))
  h = (x[..., None] * w).reshape(*x.shape[:-1], -1)  # [..., D * F]
  return jnp.concatenate([jnp.sin(h), jnp.cos(h)], axis=-1)


class TimeEmbed(nn.Module):
  """c [...] -> conditioning vector [..., out_dim].

  timestep_embedding(c, emb_dim, scale=scale) -> Dense(4 emb_dim) -> SiLU ->
  Dense(out_dim) -> SiLU (the trailing SiLU as in VDM's ScoreUNet `cond`).
  """

  emb_dim: int
  out_dim: int
  scale: float = 1000.0

  @nn.compact
  def __call__(self, c: jax.Array) -> jax.Array:
    h = timestep_embedding(c, self.emb_dim, scale=self.scale)
    h = nn.silu(nn.Dense(4 * self.emb_dim, name='dense0')(h))
    return nn.silu(nn.Dense(self.out_dim, name='dense1')(h))


class ResMLPBlock(nn.Module):
  """h + Dense(SiLU(Dense(FiLM(LayerNorm(h), cond)))).

  FiLM: [gamma, beta] = Dense(2 width)(cond) and the normalised input becomes
  LayerNorm(h) * (1 + gamma) + beta (the LayerNorm itself has no affine; FiLM
  supplies it). The FiLM projection has the default (non-zero) init so the
  block depends on c from the start.
  """

  width: int
  hidden: int

  @nn.compact
  def __call__(self, h: jax.Array, cond: jax.Array) -> jax.Array:
    gamma, beta = jnp.split(nn.Dense(2 * self.width, name='film')(cond), 2,
                            axis=-1)
    y = nn.LayerNorm(use_scale=False, use_bias=False, name='norm')(h)
    y = y * (1 + gamma) + beta
    y = nn.silu(nn.Dense(self.hidden, name='dense0')(y))
    return h + nn.Dense(self.width, name='dense1')(y)


class ResMLP(nn.Module):
  """Residual MLP denoiser on flat data: x [..., D], c [...] -> [..., out].

  in: Dense(width) of concat(x, fourier_features(x, *fourier)) (features only
  when `fourier` is set); `blocks` x `ResMLPBlock` (pre-LayerNorm, FiLM
  conditioning on c, MLP width -> hidden_mult * width -> width, residual);
  out: LayerNorm -> Dense(out_dim) (zero-initialised if `zero_init_out`).
  The conditioning vector is `TimeEmbed(emb_dim, emb_dim, emb_scale)(c)`.

  x may be unbatched [D] with scalar c, or batched [..., D] with c of shape
  x.shape[:-1] (or broadcastable to it, e.g. a scalar).

  Attributes:
    out_dim: output width (D for eps/x/delta prediction).
    width: residual-stream width.
    blocks: number of residual blocks.
    emb_dim: width of the sinusoidal embedding and of the conditioning vector.
    fourier: (start, stop) of VDM Fourier features of the input, or None.
    emb_scale: `scale` passed to `timestep_embedding` (1000 suits c in [0, 1];
      see there for log-SNR).
    zero_init_out: zero-initialise the output layer (output 0 at init).
    hidden_mult: hidden width of each block's MLP, in units of `width` (1
      keeps the width-512 MLP cheap on CPU; 2-4 for larger budgets).
  """

  out_dim: int
  width: int = 512
  blocks: int = 3
  emb_dim: int = 128
  fourier: tuple[int, int] | None = None
  emb_scale: float = 1000.0
  zero_init_out: bool = True
  hidden_mult: int = 1

  @nn.compact
  def __call__(self, x: jax.Array, c: jax.Array) -> jax.Array:
    x = jnp.asarray(x)
    c = jnp.broadcast_to(jnp.asarray(c, jnp.float32), x.shape[:-1])
    cond = TimeEmbed(self.emb_dim, self.emb_dim, self.emb_scale,
                     name='time_embed')(c)
    h = x
    if self.fourier is not None:
      h = jnp.concatenate([h, fourier_features(x, *self.fourier)], axis=-1)
    h = nn.Dense(self.width, name='in_proj')(h)
    for i in range(self.blocks):
      h = ResMLPBlock(self.width, self.hidden_mult * self.width,
                      name=f'block{i}')(h, cond)
    h = nn.LayerNorm(name='out_norm')(h)
    init = nn.initializers.zeros if self.zero_init_out else (
        nn.initializers.lecun_normal())
    return nn.Dense(self.out_dim, kernel_init=init, name='out')(h)


def _num_groups(channels: int, max_groups: int = 8,
                min_group_size: int = 4) -> int:
  """GroupNorm groups: the largest divisor g <= max_groups of `channels`
  with channels / g >= min_group_size (1 if none).

  Groups of at least 4 channels keep GroupNorm from acting as a per-channel
  instance norm at the small widths used on CPU (8 channels -> 2 groups);
  64 channels -> 8 groups of 8.
  """
  cands = [g for g in range(1, max_groups + 1)
           if channels % g == 0 and channels // g >= min_group_size]
  return max(cands, default=1)


class UNetResBlock(nn.Module):
  """x + Conv3x3(Dropout(SiLU(FiLM(GN(Conv3x3(SiLU(GN(x)))), cond)))).

  The input is 1x1-projected when the channel count changes. Conditioning is
  the scale-shift form (guided-diffusion's `use_scale_shift_norm`):
  [gamma, beta] = Dense(2 out_ch)(cond), h -> GN(h) * (1 + gamma) + beta.
  (The DDPM/VDM form, a per-channel constant added *before* the second
  GroupNorm, is removed by that norm's mean subtraction when a group holds a
  single channel, and otherwise acts only through within-group
  differences.) x [N, H, W, C], cond [N, E].
  """

  out_ch: int
  dropout: float = 0.0

  @nn.compact
  def __call__(self, x: jax.Array, cond: jax.Array,
               deterministic: bool = True) -> jax.Array:
    in_ch = x.shape[-1]
    h = nn.silu(nn.GroupNorm(_num_groups(in_ch), name='norm1')(x))
    h = nn.Conv(self.out_ch, (3, 3), name='conv1')(h)
    gamma, beta = jnp.split(nn.Dense(2 * self.out_ch, name='film')(cond), 2,
                            axis=-1)
    h = nn.GroupNorm(_num_groups(self.out_ch), name='norm2')(h)
    h = nn.silu(h * (1 + gamma[:, None, None, :]) + beta[:, None, None, :])
    h = nn.Dropout(self.dropout)(h, deterministic=deterministic)
    h = nn.Conv(self.out_ch, (3, 3), name='conv2')(h)
    if in_ch != self.out_ch:
      x = nn.Dense(self.out_ch, name='skip')(x)
    return x + h


class UNetAttnBlock(nn.Module):
  """Single-head self-attention over the H*W positions, residual.

  The output projection is zero-initialised (identity at init), as in VDM's
  `AttnBlock`.
  """

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    n, hh, ww, ch = x.shape
    h = nn.GroupNorm(_num_groups(ch), name='norm')(x).reshape(n, hh * ww, ch)
    q = nn.Dense(ch, name='q')(h)
    k = nn.Dense(ch, name='k')(h)
    v = nn.Dense(ch, name='v')(h)
    w = jax.nn.softmax(jnp.einsum('nqc,nkc->nqk', q, k) / math.sqrt(ch),
                       axis=-1)
    h = jnp.einsum('nqk,nkc->nqc', w, v)
    h = nn.Dense(ch, kernel_init=nn.initializers.zeros, name='proj_out')(h)
    return x + h.reshape(n, hh, ww, ch)


class UNet(nn.Module):
  """Small time-conditioned U-Net: x [..., H, W, C], c [...] -> [..., H, W, O].

  Levels l = 0..L-1 with L = len(channel_mults) and channels
  `channels * channel_mults[l]` at resolution (H, W) / 2^l (so H and W must
  be divisible by 2^(L-1)); 8x8 digits with the default (1, 2): 8 -> 4.

  in: Conv3x3(channels) of concat(x, fourier_features(x, *fourier)) (the
  features act on the channel axis, as in VDM's ScoreUNet).
  down: per level `num_res_blocks` ResBlocks (+ self-attention when
  l in `attention_levels`), each output kept as a skip; between levels a
  stride-2 Conv3x3 (also kept as a skip).
  middle: ResBlock, [self-attention if L-1 in attention_levels], ResBlock.
  up: per level (coarse to fine) `num_res_blocks + 1` ResBlocks on
  concat(h, skip) (+ attention), then nearest-neighbour x2 + Conv3x3.
  out: GroupNorm -> SiLU -> Conv3x3(out_channels), zero-initialised if
  `zero_init_out`.
  The conditioning vector `TimeEmbed(emb_dim, 4 emb_dim, emb_scale)(c)`
  scales and shifts (FiLM) the second GroupNorm of every ResBlock; GroupNorm
  uses at most 8 groups of at least 4 channels (`_num_groups`).

  Leading batch dimensions may be any shape (including none: [H, W, C] with
  scalar c); c must broadcast to x.shape[:-3]. Dropout (rate `dropout`) is
  active when `deterministic=False` and then needs a 'dropout' rng (under
  `jax.vmap` over examples, map the rng too, or all examples share a mask).

  Attributes:
    out_channels: output channels.
    channels: base channel count.
    channel_mults: channel multiplier per resolution level.
    num_res_blocks: ResBlocks per level on the way down.
    emb_dim: sinusoidal embedding width (conditioning vector: 4 emb_dim).
    emb_scale: `scale` passed to `timestep_embedding`.
    attention_levels: levels with self-attention after each ResBlock.
    fourier: (start, stop) of VDM Fourier features of the input, or None.
    dropout: dropout rate inside the ResBlocks.
    zero_init_out: zero-initialise the output conv (output 0 at init).
  """

  out_channels: int
  channels: int = 64
  channel_mults: tuple[int, ...] = (1, 2)
  num_res_blocks: int = 2
  emb_dim: int = 128
  emb_scale: float = 1000.0
  attention_levels: tuple[int, ...] = ()
  fourier: tuple[int, int] | None = None
  dropout: float = 0.0
  zero_init_out: bool = True

  @nn.compact
  def __call__(self, x: jax.Array, c: jax.Array,
               deterministic: bool = True) -> jax.Array:
    x = jnp.asarray(x)
    if x.ndim < 3:
      raise ValueError(f'x must be [..., H, W, C], got shape {x.shape}')
    lead, (hh, ww, ch) = x.shape[:-3], x.shape[-3:]
    levels = len(self.channel_mults)
    factor = 2 ** (levels - 1)
    if hh % factor or ww % factor:
      raise ValueError(f'H, W = {hh}, {ww} must be divisible by {factor} '
                       f'for {levels} levels')
    c = jnp.broadcast_to(jnp.asarray(c, jnp.float32), lead).reshape(-1)
    x4 = x.reshape(-1, hh, ww, ch)
    cond = TimeEmbed(self.emb_dim, 4 * self.emb_dim, self.emb_scale,
                     name='time_embed')(c)

    def res(h, out_ch, name):
      return UNetResBlock(out_ch, self.dropout, name=name)(h, cond,
                                                           deterministic)

    h = x4
    if self.fourier is not None:
      h = jnp.concatenate([h, fourier_features(x4, *self.fourier)], axis=-1)
    h = nn.Conv(self.channels, (3, 3), name='conv_in')(h)
    skips = [h]
    for lvl, mult in enumerate(self.channel_mults):
      for i in range(self.num_res_blocks):
        h = res(h, self.channels * mult, f'down{lvl}_block{i}')
        if lvl in self.attention_levels:
          h = UNetAttnBlock(name=f'down{lvl}_attn{i}')(h)
        skips.append(h)
      if lvl != levels - 1:
        h = nn.Conv(h.shape[-1], (3, 3), strides=(2, 2),
                    padding=((1, 1), (1, 1)), name=f'down{lvl}_downsample')(h)
        skips.append(h)
    mid_ch = h.shape[-1]
    h = res(h, mid_ch, 'mid_block0')
    if levels - 1 in self.attention_levels:
      h = UNetAttnBlock(name='mid_attn')(h)
    h = res(h, mid_ch, 'mid_block1')
    for lvl in reversed(range(levels)):
      mult = self.channel_mults[lvl]
      for i in range(self.num_res_blocks + 1):
        h = jnp.concatenate([h, skips.pop()], axis=-1)
        h = res(h, self.channels * mult, f'up{lvl}_block{i}')
        if lvl in self.attention_levels:
          h = UNetAttnBlock(name=f'up{lvl}_attn{i}')(h)
      if lvl != 0:
        h = jnp.repeat(jnp.repeat(h, 2, axis=1), 2, axis=2)
        h = nn.Conv(h.shape[-1], (3, 3), name=f'up{lvl}_upsample')(h)
    assert not skips
    h = nn.silu(nn.GroupNorm(_num_groups(h.shape[-1]), name='out_norm')(h))
    init = nn.initializers.zeros if self.zero_init_out else (
        nn.initializers.lecun_normal())
    h = nn.Conv(self.out_channels, (3, 3), kernel_init=init,
                name='conv_out')(h)
    return h.reshape(*lead, hh, ww, self.out_channels)


def ema_update(ema_params: Any, params: Any,
               decay: float | jax.Array) -> Any:
  """ema <- decay * ema + (1 - decay) * params, leaf by leaf.

  Each new leaf keeps the dtype of its `ema_params` leaf (so the EMA can be a
  `lax.scan` carry even when `decay` is a float32 array).
  """
  return jax.tree.map(
      lambda e, p: (decay * e + (1 - decay) * p).astype(jnp.result_type(e)),
      ema_params, params)


def ema_decay_debiased(step: int | jax.Array,
                       decay: float | jax.Array) -> jax.Array:
  """d (1 - d^k) / (1 - d^(k+1)) at update index k = `step` (0, 1, ...).

  The per-step factor that turns the recursion ema <- d_k ema + (1 - d_k) p
  into the bias-corrected EMA of `optax.ema(decay, debias=True)`:
  after updates p_0..p_k the EMA is sum_i d^(k-i) (1 - d) p_i / (1 - d^(k+1)),
  so every iterate is weighted by the configured decay d and the initial
  value gets weight 0 (d_0 = 0). The factor tends to d for k >> 1 / (1 - d).
  (A min(d, (1 + k) / (10 + k)) warm-up would instead hold the decay below
  d for ~10 / (1 - d) steps: 9000 at d = 0.999, longer than our runs.)
  """
  k = jnp.asarray(step, jnp.float32)
  decay = jnp.asarray(decay, jnp.float32)
  log_d = jnp.log(decay)
  # 1 - d^n = -expm1(n log d): exact for d near 1 in float32.
  return decay * (-jnp.expm1(k * log_d)) / (-jnp.expm1((k + 1) * log_d))


def in_chunks(fn: Any, chunk: int | None = None) -> Any:
  """fn(*xs) over the leading (example) axis of its arrays in chunks of
  `chunk` examples, one `lax.map` step each, outputs concatenated.

  For an fn that acts on every example on its own (a decoder, a per-image
  metric) the result is fn(*xs) up to float rounding, in the memory of one
  chunk. `chunk` None, 0 or >= the number of examples: fn(*xs) itself.
  The chunk must divide the number of examples (ValueError otherwise).
  """
  def chunked(*xs):
    n = jax.tree.leaves(xs)[0].shape[0]
    if not chunk or chunk >= n:
      return fn(*xs)
    if n % chunk:
      raise ValueError(f'chunk={chunk} does not divide the {n} examples')
    split = lambda a: a.reshape(n // chunk, chunk, *a.shape[1:])
    out = jax.lax.map(lambda a: fn(*a), jax.tree.map(split, xs))
    return jax.tree.map(lambda a: a.reshape(n, *a.shape[2:]), out)
  return chunked


__all__: Sequence[str] = ['ResMLP', 'ResMLPBlock', 'TimeEmbed', 'UNet',
                          'UNetAttnBlock', 'UNetResBlock', 'ema_decay_debiased',
                          'ema_update', 'fourier_features', 'in_chunks',
                          'timestep_embedding']
