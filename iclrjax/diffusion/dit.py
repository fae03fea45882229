"""AdaLN-zero Diffusion Transformer (DiT; Peebles & Xie, ICCV 2023).

A patchify transformer conditioned on a scalar time t in [0, 1]:

  embed:  x [..., H, W, C] -> patches [..., N, p*p*C] -> Dense -> + fixed 2D
          sin-cos position embedding = h [..., N, width];
          t -> sinusoidal(emb_scale * t) -> Dense -> SiLU -> Dense = cond
          [..., width]
  block i (adaLN-zero):
          (shift1, scale1, gate1, shift2, scale2, gate2) = Dense_6w(SiLU(cond))
          h = h + gate1 * Attn(LN(h) * (1 + scale1) + shift1)
          h = h + gate2 * MLP(LN(h) * (1 + scale2) + shift2)
  final:  (shift, scale) = Dense_2w(SiLU(cond));
          out = unpatchify(Dense(LN(h) * (1 + scale) + shift)) [..., H, W, Co]

The modulation Dense layers and the final projection are zero-initialised
(adaLN-zero), so at init every block is the identity and the output is
exactly zero. LayerNorms have no affine parameters (the modulation replaces
them), as in the reference implementation (facebookresearch/DiT models.py).

Leading axes are free: x is one example [H, W, C] (t a scalar) or a batch
[B, H, W, C] (t a scalar, broadcast, or [B]).

BWCache (`diffusion.bwcache`) needs the network as separately callable
pieces, so besides `__call__` the module exposes, via linen's `method=`:

  h, cond = model.apply(params, x, t, method=DiT.embed)
  h = model.apply(params, h, cond, i, method=DiT.block)     # i: static int
  out = model.apply(params, h, cond, x.shape[-3:], method=DiT.final)

and `__call__(x, t)` is exactly embed -> blocks 0..depth-1 -> final.
`final` takes the static input shape (H, W, C_in) because the tokens alone
do not determine the image grid or (when out_channels is None) the channel
count.

Class conditioning (`num_classes` > 0, as DiT's LabelEmbedder): cond gets
a learned class embedding added, cond = t_embed(t) + y_embed(y), with an
extra "null" class y = num_classes (the unconditional model of
classifier-free guidance; y=None means null). Training drops labels to
null with some probability (`flow.make_trainer`'s `label_dropout`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.diffusion import nets

# Reference DiT initialisers: xavier-uniform weights and zero biases for the
# transformer, N(0, 0.02) for the time MLP, zeros for all modulation layers
# and the output projection.
_xavier = nn.initializers.xavier_uniform()
_zeros = nn.initializers.zeros
_normal002 = nn.initializers.normal(0.02)


def _sincos_1d(dim: int, pos: np.ndarray) -> np.ndarray:
  omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2.0))
  out = np.einsum('m,d->md', pos.reshape(-1), omega)
  return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def sincos_2d_pos_embed(dim: int, grid_h: int, grid_w: int) -> np.ndarray:
  """Fixed 2D sin-cos position embedding [grid_h * grid_w, dim] (row-major).

  As in MAE/DiT: half the channels encode the row, half the column.
  """
  if dim % 4:
    raise ValueError(f'width must be a multiple of 4 for the 2D sin-cos '
                     f'position embedding, got {dim}.')
  gh, gw = np.meshgrid(np.arange(grid_h, dtype=np.float64),
                       np.arange(grid_w, dtype=np.float64), indexing='ij')
  emb = np.concatenate([_sincos_1d(dim // 2, gh), _sincos_1d(dim // 2, gw)],
                       axis=1)
  return emb.astype(np.float32)


def patchify(x: jax.Array, p: int) -> jax.Array:
  """[..., H, W, C] -> [..., (H/p)(W/p), p*p*C], patches in row-major order."""
  *lead, H, W, C = x.shape
  if H % p or W % p:
    raise ValueError(f'Image {H}x{W} is not divisible by patch {p}.')
  x = x.reshape(*lead, H // p, p, W // p, p, C)
  x = jnp.moveaxis(x, -4, -3)  # [..., H/p, W/p, p, p, C]
  return x.reshape(*lead, (H // p) * (W // p), p * p * C)


def unpatchify(tokens: jax.Array, p: int, H: int, W: int) -> jax.Array:
  """Inverse of `patchify`: [..., N, p*p*C] -> [..., H, W, C]."""
  *lead, N, D = tokens.shape
  C = D // (p * p)
  if N != (H // p) * (W // p) or D != p * p * C:
    raise ValueError(f'Tokens {tokens.shape} do not tile a {H}x{W} image '
                     f'with patch {p}.')
  x = tokens.reshape(*lead, H // p, W // p, p, p, C)
  x = jnp.moveaxis(x, -3, -4)  # [..., H/p, p, W/p, p, C]
  return x.reshape(*lead, H, W, C)


def modulate(x: jax.Array, shift: jax.Array, scale: jax.Array) -> jax.Array:
  """x [..., N, D] * (1 + scale[..., None, :]) + shift[..., None, :]."""
  return x * (1 + scale[..., None, :]) + shift[..., None, :]


def _layer_norm() -> nn.LayerNorm:
  return nn.LayerNorm(epsilon=1e-6, use_bias=False, use_scale=False)


class Attention(nn.Module):
  """Multi-head self-attention over the token axis (no mask)."""

  width: int
  heads: int

  @nn.compact
  def __call__(self, h: jax.Array) -> jax.Array:  # [..., N, D]
    if self.width % self.heads:
      raise ValueError(f'width {self.width} not divisible by heads '
                       f'{self.heads}.')
    dh = self.width // self.heads
    qkv = nn.Dense(3 * self.width, kernel_init=_xavier, bias_init=_zeros,
                   name='qkv')(h)
    q, k, v = jnp.split(qkv.reshape(*h.shape[:-1], 3 * self.heads, dh), 3,
                        axis=-2)  # each [..., N, heads, dh]
    logits = jnp.einsum('...qhd,...khd->...hqk', q, k) / math.sqrt(dh)
    att = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum('...hqk,...khd->...qhd', att, v)
    out = out.reshape(*h.shape[:-1], self.width)
    return nn.Dense(self.width, kernel_init=_xavier, bias_init=_zeros,
                    name='proj')(out)


class Mlp(nn.Module):
  width: int
  hidden: int

  @nn.compact
  def __call__(self, h: jax.Array) -> jax.Array:
    h = nn.Dense(self.hidden, kernel_init=_xavier, bias_init=_zeros,
                 name='fc1')(h)
    h = nn.gelu(h, approximate=True)
    return nn.Dense(self.width, kernel_init=_xavier, bias_init=_zeros,
                    name='fc2')(h)


class DiTBlock(nn.Module):
  """One adaLN-zero DiT block: h, cond -> h."""

  width: int
  heads: int
  mlp_ratio: float = 4.0

  @nn.compact
  def __call__(self, h: jax.Array, cond: jax.Array) -> jax.Array:
    mod = nn.Dense(6 * self.width, kernel_init=_zeros, bias_init=_zeros,
                   name='adaLN_modulation')(nn.silu(cond))
    shift1, scale1, gate1, shift2, scale2, gate2 = jnp.split(mod, 6, -1)
    a = Attention(self.width, self.heads, name='attn')(
        modulate(_layer_norm()(h), shift1, scale1))
    h = h + gate1[..., None, :] * a
    m = Mlp(self.width, int(self.width * self.mlp_ratio), name='mlp')(
        modulate(_layer_norm()(h), shift2, scale2))
    return h + gate2[..., None, :] * m


class FinalLayer(nn.Module):
  """AdaLN final layer: h [..., N, D], cond -> tokens [..., N, out_dim]."""

  width: int

  @nn.compact
  def __call__(self, h: jax.Array, cond: jax.Array, out_dim: int
               ) -> jax.Array:
    mod = nn.Dense(2 * self.width, kernel_init=_zeros, bias_init=_zeros,
                   name='adaLN_modulation')(nn.silu(cond))
    shift, scale = jnp.split(mod, 2, -1)
    h = modulate(_layer_norm()(h), shift, scale)
    return nn.Dense(out_dim, kernel_init=_zeros, bias_init=_zeros,
                    name='linear')(h)


class TimestepEmbedder(nn.Module):
  """t -> sinusoidal(emb_scale * t) [freq_dim] -> Dense -> SiLU -> Dense."""

  width: int
  freq_dim: int = 256
  emb_scale: float = 1000.0

  @nn.compact
  def __call__(self, t: jax.Array) -> jax.Array:
    # DiT/ADM's embedding [cos, sin], w_k = 10000^(-k / (freq_dim // 2)).
    e = nets.timestep_embedding(
        jnp.asarray(self.emb_scale * t, jnp.float32), self.freq_dim,
        scale=1.0, freq_shift=0, flip_sin_to_cos=True)
    e = nn.Dense(self.width, kernel_init=_normal002, bias_init=_zeros,
                 name='fc1')(e)
    return nn.Dense(self.width, kernel_init=_normal002, bias_init=_zeros,
                    name='fc2')(nn.silu(e))


class DiT(nn.Module):
  """AdaLN-zero DiT on images [..., H, W, C] conditioned on time t in [0, 1].

  Attributes:
    patch: patch size p (H and W must be multiples of p).
    width: token width D (a multiple of 4 and of `heads`).
    depth: number of DiT blocks.
    heads: attention heads.
    mlp_ratio: MLP hidden width / D.
    out_channels: output channels (None: same as the input's).
    emb_scale: t is multiplied by this before the sinusoidal embedding (t in
      [0, 1] -> [0, 1000], the range of the usual integer timesteps).
    freq_dim: size of the sinusoidal time features.
    num_classes: 0 (unconditional) or the number of classes; labels y in
      [0, num_classes), num_classes = the null label.
  """

  patch: int = 2
  width: int = 96
  depth: int = 6
  heads: int = 4
  mlp_ratio: float = 4.0
  out_channels: int | None = None
  emb_scale: float = 1000.0
  freq_dim: int = 256
  num_classes: int = 0

  def setup(self):
    self.x_embed = nn.Dense(self.width, kernel_init=_xavier, bias_init=_zeros)
    self.t_embed = TimestepEmbedder(self.width, self.freq_dim, self.emb_scale)
    self.blocks = [DiTBlock(self.width, self.heads, self.mlp_ratio)
                   for _ in range(self.depth)]
    self.final_layer = FinalLayer(self.width)
    if self.num_classes:
      self.y_embed = nn.Embed(self.num_classes + 1, self.width,
                              embedding_init=_normal002)

  @property
  def null_label(self) -> int:
    return self.num_classes

  def embed(self, x: jax.Array, t: jax.Array, y: jax.Array | None = None
            ) -> tuple[jax.Array, jax.Array]:
    """x [..., H, W, C], t, y -> (h [..., N, width], cond [..., width]).

    t (and y, int labels) is a scalar or has shape x.shape[:-3]. N =
    (H / patch) (W / patch) tokens in row-major order. y is only read when
    num_classes > 0 (None: the null label).
    """
    *_, H, W, _ = x.shape
    p = self.patch
    pos_ND = sincos_2d_pos_embed(self.width, H // p, W // p)
    h = self.x_embed(patchify(x, p)) + pos_ND
    t = jnp.broadcast_to(jnp.asarray(t, jnp.float32), x.shape[:-3])
    cond = self.t_embed(t)
    if self.num_classes:
      y = self.null_label if y is None else y
      y = jnp.broadcast_to(jnp.asarray(y, jnp.int32), x.shape[:-3])
      cond = cond + self.y_embed(y)
    elif y is not None:
      raise ValueError('labels y given to an unconditional DiT '
                       '(num_classes=0)')
    return h, cond

  def block(self, h: jax.Array, cond: jax.Array, i: int) -> jax.Array:
    """Applies block i (a static Python int) to h [..., N, width]."""
    return self.blocks[i](h, cond)

  def final(self, h: jax.Array, cond: jax.Array,
            hwc: Sequence[int]) -> jax.Array:
    """Final AdaLN layer + unpatchify; hwc = (H, W, C_in) of the input x."""
    H, W, C = (int(s) for s in hwc)
    c_out = self.out_channels or C
    tokens = self.final_layer(h, cond, self.patch * self.patch * c_out)
    return unpatchify(tokens, self.patch, H, W)

  def __call__(self, x: jax.Array, t: jax.Array,
               y: jax.Array | None = None) -> jax.Array:
    h, cond = self.embed(x, t, y)
    for i in range(self.depth):
      h = self.block(h, cond, i)
    return self.final(h, cond, x.shape[-3:])


def pieces(model: DiT, params):
  """(embed, block, final) closures over params, for the caching samplers.

  embed(x, t, y=None) -> (h, cond); block(h, cond, i) -> h with i static;
  final(h, cond, hwc) -> out.
  """

  def embed(x, t, y=None):
    return model.apply(params, x, t, y, method=DiT.embed)

  def block(h, cond, i):
    return model.apply(params, h, cond, i, method=DiT.block)

  def final(h, cond, hwc):
    return model.apply(params, h, cond, tuple(hwc), method=DiT.final)

  return embed, block, final


__all__: Sequence[str] = ['DiT', 'DiTBlock', 'FinalLayer', 'TimestepEmbedder',
                          'modulate', 'patchify', 'pieces',
                          'sincos_2d_pos_embed', 'unpatchify']
