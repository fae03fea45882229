"""A small decoder-only transformer with an explicit attention mask and a KV cache.

The shape follows nanodo's `TransformerDo` (pre-LN, no biases, embeddings
tied through `Embed.attend`), with what the language-model papers of this
project need on top of it:

  * attention takes an explicit boolean mask `mask_BxQxK` (True = may attend;
    causal when none is given): Uni-CoT's macro/micro masks and the causal
    AR-buffer neural process pass their own;
  * `return_hidden=True` returns every layer's residual stream
    `[num_layers + 1, B, L, D]` (index 0 the embeddings, -1 the last block's
    output before the final norm; Token-Guard reads index -2);
  * `embeds_BxLxD` may replace the token lookup (soft or multimodal tokens);
  * `prefill(params, tokens, mask) -> cache` runs a prompt once and
    `decode_step(params, cache, token) -> (logits, cache)` extends it one token
    at a time; `repeat_cache(cache, n)` hands one prefilled prompt to n
    samples (prefill once, sample many).

Attention is softmax(q k^T / sqrt(d_head) + where(mask, 0, -inf)) v per head
(Vaswani et al. 2017, eq. 1); rotary positions rotate q and k by angles
pos * base^(-2i/d_head) (Su et al. 2021, eq. 34); the SwiGLU MLP is
(swish(x W1) * x W3) W2 (Shazeer 2020, eq. 6).

Shapes are in the names where they matter (nanodo's convention): B batch,
L / Q / K sequence, queries, keys, H heads, D model width, F MLP width,
V vocabulary, C cache length.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

POSITIONS = ('rope', 'learned', 'none')
READOUTS = ('tied', 'none')
MLPS = ('swiglu', 'gelu')


@dataclasses.dataclass(frozen=True)
class Config:
  """Architecture hyperparameters (a hashable dataclass: a jit static arg)."""
  vocab_size: int
  d_model: int = 64
  num_heads: int = 4
  num_layers: int = 2
  d_ff: int = 256
  max_len: int = 64            # learned positions and the default cache length
  positions: str = 'rope'      # 'rope' | 'learned' | 'none' (set models:
                               # permutation-equivariant over unmasked keys)
  readout: str = 'tied'        # 'tied' logits [.., V] | 'none': the final
                               # normed features [.., D] for a custom head
  mlp: str = 'gelu'            # 'gelu' | 'swiglu'
  rope_base: float = 10_000.0
  dtype: str = 'float32'       # activation dtype; parameters stay float32

  def __post_init__(self):
    if self.positions not in POSITIONS:
      raise ValueError(f'Config.positions={self.positions!r}: use one of '
                       f'{POSITIONS}')
    if self.readout not in READOUTS:
      raise ValueError(f'Config.readout={self.readout!r}: use one of '
                       f'{READOUTS}')
    if self.mlp not in MLPS:
      raise ValueError(f'Config.mlp={self.mlp!r}: use one of {MLPS}')
    if self.d_model % self.num_heads:
      raise ValueError(f'Config.d_model={self.d_model} is not divisible by '
                       f'num_heads={self.num_heads}: change either')
    if self.positions == 'rope' and (self.d_model // self.num_heads) % 2:
      raise ValueError(f'Config: rope needs an even head width, got '
                       f'd_model / num_heads = '
                       f'{self.d_model // self.num_heads}')

  @property
  def d_head(self) -> int:
    return self.d_model // self.num_heads

  @property
  def jdtype(self):
    return jnp.dtype(self.dtype)

  @property
  def out_dim(self) -> int:
    """Width of the output: vocab_size logits, or d_model features."""
    return self.vocab_size if self.readout == 'tied' else self.d_model


class Cache(NamedTuple):
  """Keys and values of every layer for C positions, and what is written.

  k, v: [num_layers, B, C, H, d_head]; valid_BxC: which cached keys later
  tokens may attend to; index: the number of positions written (shared by
  the batch); logits_BxV: the logits at the last written position.
  """
  k: jax.Array
  v: jax.Array
  valid_BxC: jax.Array
  index: jax.Array
  logits_BxV: jax.Array


def causal_mask(length: int) -> jax.Array:
  """[L, L] lower-triangular boolean mask (True = may attend)."""
  return jnp.tril(jnp.ones((length, length), bool))


def rope(x_BxLxHxK: jax.Array, pos_BxL: jax.Array, base: float) -> jax.Array:
  """Rotates feature pairs (i, i + d/2) by pos * base^(-2i/d) (RoFormer eq. 34,
  the half-split layout)."""
  half = x_BxLxHxK.shape[-1] // 2
  freq = base ** (-jnp.arange(half, dtype=jnp.float32) / half)
  ang = pos_BxL[..., None].astype(jnp.float32) * freq        # [B, L, half]
  cos, sin = jnp.cos(ang)[:, :, None], jnp.sin(ang)[:, :, None]
  x1, x2 = x_BxLxHxK[..., :half], x_BxLxHxK[..., half:]
  out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
  return out.astype(x_BxLxHxK.dtype)


def attend(q_BxQxHxK: jax.Array, k_BxCxHxK: jax.Array, v_BxCxHxK: jax.Array,
           mask_BxQxC: jax.Array) -> jax.Array:
  """Masked softmax attention per head (eq. 1 of Vaswani et al.), [B, Q, H, K].

  A query whose mask row is all False gets zeros (not a uniform average).
  """
  scale = q_BxQxHxK.shape[-1] ** -0.5
  s = jnp.einsum('bqhk,bchk->bhqc', q_BxQxHxK, k_BxCxHxK).astype(jnp.float32)
  m = mask_BxQxC[:, None]
  s = jnp.where(m, s * scale, -1e30)   # finite: no NaN in all-False rows
  p = jnp.where(m, jax.nn.softmax(s, axis=-1), 0.0).astype(v_BxCxHxK.dtype)
  return jnp.einsum('bhqc,bchk->bqhk', p, v_BxCxHxK)


class Attention(nn.Module):
  cfg: Config

  @nn.compact
  def __call__(self, x_BxQxD, mask_BxQxC, pos_BxQ, kv=None):
    c = self.cfg
    dense = lambda name: nn.DenseGeneral((c.num_heads, c.d_head),
                                         use_bias=False, name=name,
                                         dtype=c.jdtype)
    q, k, v = (dense(n)(x_BxQxD) for n in ('query', 'key', 'value'))
    if c.positions == 'rope':
      q, k = rope(q, pos_BxQ, c.rope_base), rope(k, pos_BxQ, c.rope_base)
    if kv is not None:   # write this step's keys into the cache, read all
      k_buf, v_buf, index = kv
      start = (0, index, 0, 0)
      k = jax.lax.dynamic_update_slice(k_buf, k.astype(k_buf.dtype), start)
      v = jax.lax.dynamic_update_slice(v_buf, v.astype(v_buf.dtype), start)
    out = attend(q, k.astype(q.dtype), v.astype(q.dtype), mask_BxQxC)
    out = nn.DenseGeneral(c.d_model, axis=(-2, -1), use_bias=False,
                          name='out', dtype=c.jdtype)(out)
    return out, (k, v)


class Mlp(nn.Module):
  cfg: Config

  @nn.compact
  def __call__(self, x_BxLxD):
    c = self.cfg
    dense = lambda f, name: nn.Dense(f, use_bias=False, name=name,
                                     dtype=c.jdtype)
    if c.mlp == 'swiglu':
      h = nn.silu(dense(c.d_ff, 'gate')(x_BxLxD)) * dense(c.d_ff, 'up')(x_BxLxD)
    else:
      h = nn.gelu(dense(c.d_ff, 'up')(x_BxLxD))
    return dense(c.d_model, 'down')(h)


class Block(nn.Module):
  """Pre-LN residual block: x + attn(LN x), then + mlp(LN x)."""
  cfg: Config

  @nn.compact
  def __call__(self, x, mask, pos, kv=None):
    norm = lambda name: nn.LayerNorm(use_bias=False, name=name,
                                     dtype=self.cfg.jdtype)
    a, new_kv = Attention(self.cfg, name='attn')(norm('ln1')(x), mask, pos, kv)
    x = x + a
    return x + Mlp(self.cfg, name='mlp')(norm('ln2')(x)), new_kv


class Decoder(nn.Module):
  """Token (or embedding) sequence -> logits [B, L, V]; see the module doc.

  With `cache=(k, v, index)` (per-layer stacked buffers [num_layers, B, C,
  H, d_head]) the L inputs are written at positions index .. index + L - 1
  and `mask` is [B, L, C]; it then also returns the updated (k, v).
  """
  cfg: Config

  @nn.compact
  def __call__(self, tokens_BxL=None, mask_BxQxK=None, pos_BxL=None, *,
               embeds_BxLxD=None, cache=None, return_hidden=False):
    c = self.cfg
    # std d^-1/2: the tied readout starts with unit-scale logits.
    embed = nn.Embed(c.vocab_size, c.d_model, name='embed',
                     embedding_init=nn.initializers.normal(c.d_model ** -0.5))
    x = embed(tokens_BxL) if embeds_BxLxD is None else embeds_BxLxD
    x = x.astype(c.jdtype)
    B, L = x.shape[:2]
    if pos_BxL is None:
      start = 0 if cache is None else cache[2]
      pos_BxL = jnp.broadcast_to(start + jnp.arange(L), (B, L))
    if mask_BxQxK is None:
      if cache is not None:
        raise ValueError('Decoder: pass the [B, L, C] mask with a cache')
      mask_BxQxK = causal_mask(L)
    mask_BxQxK = jnp.broadcast_to(mask_BxQxK, (B,) + mask_BxQxK.shape[-2:])
    if c.positions == 'learned':
      x = x + nn.Embed(c.max_len, c.d_model, name='pos_embed',
                       embedding_init=nn.initializers.normal(0.02))(pos_BxL)
    hidden, ks, vs = [x], [], []
    for i in range(c.num_layers):
      kv = None if cache is None else (cache[0][i], cache[1][i], cache[2])
      x, (k, v) = Block(c, name=f'block_{i}')(x, mask_BxQxK, pos_BxL, kv)
      hidden.append(x)
      ks.append(k)
      vs.append(v)
    x = nn.LayerNorm(use_bias=False, name='ln_f', dtype=c.jdtype)(x)
    if c.readout == 'none':
      logits = x.astype(jnp.float32)
    else:
      logits = embed.attend(x.astype(jnp.float32))
    out = (logits,)
    if cache is not None:
      out += ((jnp.stack(ks), jnp.stack(vs)),)
    if return_hidden:
      out += (jnp.stack(hidden),)
    return out[0] if len(out) == 1 else out


@dataclasses.dataclass(frozen=True)
class Model:
  """The decoder with pure init / apply / prefill / decode_step functions."""
  cfg: Config

  @property
  def module(self) -> Decoder:
    return Decoder(self.cfg)

  def init(self, key: jax.Array, length: int | None = None):
    """Parameters (one compiled initialiser per config and length); with
    `readout='none'` the model reads embeddings, and no token table is made."""
    return _init(self.cfg, key, length or min(8, self.cfg.max_len))

  def apply(self, params, tokens_BxL, mask_BxQxK=None, *, embeds_BxLxD=None,
            return_hidden=False):
    """Full forward pass: logits [B, L, V] (and hidden [layers+1, B, L, D])."""
    return self.module.apply({'params': params}, tokens_BxL, mask_BxQxK,
                             embeds_BxLxD=embeds_BxLxD,
                             return_hidden=return_hidden)

  def empty_cache(self, batch: int, length: int | None = None) -> Cache:
    c = self.cfg
    C = length or c.max_len
    shape = (c.num_layers, batch, C, c.num_heads, c.d_head)
    return Cache(k=jnp.zeros(shape, c.dtype), v=jnp.zeros(shape, c.dtype),
                 valid_BxC=jnp.zeros((batch, C), bool),
                 index=jnp.zeros((), jnp.int32),
                 logits_BxV=jnp.zeros((batch, c.out_dim), jnp.float32))

  def prefill(self, params, tokens_BxL=None, mask_BxLxL=None,
              cache_len: int | None = None, *, embeds_BxLxD=None,
              valid_BxL=None) -> Cache:
    """Runs the prompt once into a cache of `cache_len` (default max_len).

    mask_BxLxL is the prompt's own mask (default causal). Later tokens may
    attend to the prompt keys its last position attends to, and to
    themselves: left padding hidden from the last row stays hidden.
    `valid_BxL` overrides which prompt keys later tokens see (a set prompt
    with padding, whose last row may itself be padding). `embeds_BxLxD`
    replaces the tokens as in `apply`.
    """
    x = tokens_BxL if embeds_BxLxD is None else embeds_BxLxD
    B, L = x.shape[:2]
    cache = self.empty_cache(B, cache_len)
    C = cache.valid_BxC.shape[1]
    if L > C:
      raise ValueError(f'prefill: prompt length {L} exceeds cache_len {C}')
    m = causal_mask(L) if mask_BxLxL is None else mask_BxLxL
    m = jnp.broadcast_to(m, (B, L, L))
    mask_BxLxC = jnp.pad(m, ((0, 0), (0, 0), (0, C - L)))
    logits, (k, v) = self.module.apply(
        {'params': params}, tokens_BxL, mask_BxLxC,
        embeds_BxLxD=embeds_BxLxD, cache=(cache.k, cache.v, cache.index))
    if valid_BxL is None:
      valid_BxL = m[:, -1].at[:, L - 1].set(True)
    valid = jnp.pad(jnp.broadcast_to(valid_BxL, (B, L)), ((0, 0), (0, C - L)))
    return Cache(k=k, v=v, valid_BxC=valid,
                 index=jnp.asarray(L, jnp.int32), logits_BxV=logits[:, -1])

  def extend(self, params, cache: Cache, tokens_BxL=None, mask_LxL=None, *,
             embeds_BxLxD=None, commit: int | None = None):
    """Runs L new tokens against the cache; returns (outputs [B, L, .],
    cache).

    The new tokens sit at positions index .. index + L - 1. Each attends to
    every valid cached key and to the new keys its row of `mask_LxL` allows
    (default causal). Only the first `commit` of them (default all) become
    valid keys for later calls and advance `index`; the rest are scratch
    that the next call overwrites (the AR buffer's target token: computed
    every step, never attended to).
    """
    x = tokens_BxL if embeds_BxLxD is None else embeds_BxLxD
    B, L = x.shape[:2]
    C = cache.valid_BxC.shape[1]
    commit = L if commit is None else commit
    m = causal_mask(L) if mask_LxL is None else mask_LxL
    m = jnp.broadcast_to(m, (B, L, L))
    new = jax.lax.dynamic_update_slice(jnp.zeros((B, L, C), bool), m,
                                       (0, 0, cache.index))
    mask_BxLxC = cache.valid_BxC[:, None, :] | new
    out, (k, v) = self.module.apply(
        {'params': params}, tokens_BxL, mask_BxLxC,
        embeds_BxLxD=embeds_BxLxD, cache=(cache.k, cache.v, cache.index))
    pos = jnp.arange(C)
    valid = cache.valid_BxC | ((pos >= cache.index)
                               & (pos < cache.index + commit))[None]
    return out, Cache(k=k, v=v, valid_BxC=valid, index=cache.index + commit,
                      logits_BxV=out[:, commit - 1] if commit else
                      cache.logits_BxV)

  def decode_step(self, params, cache: Cache, token_B, *,
                  return_hidden=False):
    """Appends one token per sequence: (logits [B, V], cache) (and hidden
    [layers+1, B, D] with return_hidden). Writes past the cache's length are
    dropped by XLA's clamping: size the cache for prompt + new tokens."""
    valid = cache.valid_BxC.at[:, cache.index].set(True)
    out = self.module.apply(
        {'params': params}, token_B[:, None], valid[:, None],
        cache=(cache.k, cache.v, cache.index), return_hidden=return_hidden)
    logits, (k, v) = out[:2]
    new = Cache(k=k, v=v, valid_BxC=valid, index=cache.index + 1,
                logits_BxV=logits[:, 0])
    if return_hidden:
      return logits[:, 0], new, out[2][:, :, 0]
    return logits[:, 0], new


@functools.partial(jax.jit, static_argnums=(0, 2))
def _init(cfg: Config, key: jax.Array, length: int):
  if cfg.readout == 'none':
    x = jnp.zeros((1, length, cfg.d_model), cfg.jdtype)
    return Decoder(cfg).init(key, None, embeds_BxLxD=x)['params']
  return Decoder(cfg).init(key, jnp.zeros((1, length), jnp.int32))['params']


def repeat_cache(cache: Cache, n: int) -> Cache:
  """Each prompt's cache n times along the batch (prompt b -> rows b*n ..
  b*n + n - 1): prefill once, sample n completions."""
  rep = lambda x, axis: jnp.repeat(x, n, axis=axis)
  return Cache(k=rep(cache.k, 1), v=rep(cache.v, 1),
               valid_BxC=rep(cache.valid_BxC, 0), index=cache.index,
               logits_BxV=rep(cache.logits_BxV, 0))
