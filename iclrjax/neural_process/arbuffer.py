"""The causal autoregressive buffer for transformer neural processes.

Hassan, Loka et al., "Efficient Autoregressive Inference for Transformer
Probabilistic Models" (arXiv 2510.09477, ICLR 2026); the layout follows the
authors' AR-nanoTabPFN (`ar_tabpfn/model/{model,attention,inference}.py`).

A transformer neural process (TNP) predicts p(y_t | x_t, context) for a set
of targets. Joint prediction needs the targets' dependence: the usual way
samples them one by one and re-encodes the context grown by each sampled
point (every step a full set-attention pass over N_c + t tokens). The
buffer keeps the context's keys and values fixed and lets the sampled points
sit in a small causal buffer beside it:

  tokens   context c_i = e_x(x_i) + e_y(y_i) + m_ctx
           buffer  b_k = e_x(x_k) + e_y(y_k) + m_buf + a_{k mod K}
           target  t_j = e_x(x_j) + m_tgt                       (no y)
  mask     c_i -> every context token (a set: permutation invariant);
           b_k -> context and b_0 .. b_k;
           t_j -> context and (AR mode) b_0 .. b_{j mod K} in the first
           N_t // 2K chunks of K targets, or context only (set mode) in the
           rest; never another target, never itself (`training_mask`).

One training pass fits both modes with the mixture-density NLL of every
target. At inference the context is prefilled once into a KV cache (shared
by every sample of a task, `lm.model.repeat_cache`); step t runs the two
tokens [b_{t-1} = (x_{t-1}, sampled y_{t-1}), t_t] against the cache and
keeps only the buffer's keys (`lm.model.Model.extend(commit=1)`). The joint
density of given targets is one pass over [b_0 .. b_{N-1}, t_0 .. t_{N-1}]
with b_i -> b_{<=i} and t_i -> b_{<i} (`teacher_forcing_mask`):

  log p(y_1..N | ctx) = sum_i log p(y_i | x_i, ctx, (x, y)_{<i})    (chain rule)

which equals the sequential cached decode exactly (the same keys reach the
same queries), and which the re-encoding baseline computes with the grown
context instead (`reencode_logpdf`, `reencode_sample`: the same weights in
set mode, N_t passes).

The head is a mixture of M Gaussians per target (AR-nanoTabPFN's
`MixtureGaussianHead`): an MLP to (mu, s, w) per component, mu biased to
linspace(-1, 1), sigma = min(softplus(s + b), sigma_max) + sigma_min with b
= softplus^{-1}(1 / (M - 1)), log-weights log_softmax(w).

The backbone is the project's `iclrjax/lm` decoder (pre-LN, no biases,
tanh-GELU MLP) with no positions (`positions='none'`: roles come from the
marker embeddings) and `readout='none'`. The reference's TabPFN two-stage
layer (`model.py` L79-126) is post-LN with biases, and with one token per
row (it averages per-feature x embeddings) its feature attention is a
softmax over one key, a linear residual sublayer; one row-attention stack
stands in for it (weights are trained here, not loaded). x of several
features gets one Dense embedding here (the reference averages a shared
per-feature one).

Deliberate differences from the release (conorhassan/AR-nanoTabPFN at
359bfce; `tests/parity/test_arbuffer.py` asserts both):

* The sampler's buffer positions. AR-nanoTabPFN's `sample_sequence`
  (`ar_tabpfn/model/inference.py` L359-364, L304) embeds the sampled point
  t - 1 with `ar_tokens[t % K]`, while its teacher-forced joint density
  (L439-440) and training (`model.py` L349) give buffer point i
  `ar_tokens[i % K]`. Here the sampler uses position t - 1 too
  (`decode_tokens`), so `sample` draws from the joint that `joint_logpdf`
  scores (`decode_logpdf` == `joint_logpdf`).
* The head's GELU is the tanh approximation (flax's default; the
  reference's `nn.GELU()`, `model.py` L174, is exact erf): with the same
  weights the mixture moves by ~1e-4.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from iclrjax.core import distributed
from iclrjax.lm import model as lm_model

TARGET, CONTEXT, BUFFER = 0, 1, 2   # marker ids (the reference's order)


@dataclasses.dataclass(frozen=True)
class Config:
  """The model (a hashable dataclass: a jit static argument)."""
  x_dim: int = 1
  d_model: int = 64
  num_heads: int = 4
  num_layers: int = 4
  d_ff: int = 128
  buffer_size: int = 8          # K: learned buffer positions a_0 .. a_{K-1}
  num_components: int = 5       # M >= 2 Gaussians per target
  std_min: float = 1e-3
  std_max: float = 2.0
  dtype: str = 'float32'

  def __post_init__(self):
    if self.num_components < 2:
      raise ValueError(f'Config.num_components={self.num_components}: the '
                       'mixture head needs >= 2 (its means span [-1, 1])')
    if self.buffer_size < 1:
      raise ValueError(f'Config.buffer_size={self.buffer_size}: use >= 1')

  @property
  def backbone(self) -> lm_model.Config:
    return lm_model.Config(vocab_size=1, d_model=self.d_model,
                           num_heads=self.num_heads,
                           num_layers=self.num_layers, d_ff=self.d_ff,
                           max_len=1, positions='none', readout='none',
                           mlp='gelu', dtype=self.dtype)


class Mixture(NamedTuple):
  """A Gaussian mixture per target: [..., M] each."""
  mean: jax.Array
  std: jax.Array
  log_weight: jax.Array


class Embedder(nn.Module):
  """The three token kinds (module doc) from (x, y) and the marker."""
  cfg: Config

  def setup(self):
    D = self.cfg.d_model
    self.x_embed = nn.Dense(D, name='x_embed')
    self.y_embed = nn.Dense(D, name='y_embed')
    self.marker = nn.Embed(3, D, name='marker')
    self.ar_tokens = self.param('ar_tokens', nn.initializers.normal(0.02),
                                (self.cfg.buffer_size, D))

  def _mark(self, kind: int, like: jax.Array) -> jax.Array:
    return self.marker(jnp.full(like.shape[:-1], kind, jnp.int32))

  def context(self, x, y):
    e = self.x_embed(x) + self.y_embed(y[..., None])
    return e + self._mark(CONTEXT, e)

  def buffer(self, x, y, index):
    """index: buffer position of each token (wraps modulo K)."""
    e = self.x_embed(x) + self.y_embed(y[..., None])
    return (e + self._mark(BUFFER, e)
            + jnp.asarray(self.ar_tokens)[index % self.cfg.buffer_size])

  def target(self, x):
    e = self.x_embed(x)
    return e + self._mark(TARGET, e)

  def __call__(self, x, y):   # init: every parameter
    return (self.context(x, y) + self.target(x)
            + self.buffer(x, y, jnp.zeros(x.shape[:-1], jnp.int32)))


class MixtureHead(nn.Module):
  """MLP d_model -> d_ff -> 3M, with the reference's biases (module doc)."""
  cfg: Config

  @nn.compact
  def __call__(self, z) -> Mixture:
    c = self.cfg
    M = c.num_components
    h = nn.gelu(nn.Dense(c.d_ff, name='hidden')(z))
    raw = nn.Dense(3 * M, name='out')(h).reshape(z.shape[:-1] + (M, 3))
    mean_bias = self.param('mean_bias',
                           lambda _, s: jnp.linspace(-1.0, 1.0, s[0]), (M,))
    inv_sp = math.log(math.expm1(1.0 / (M - 1)))
    std_bias = self.param('std_bias', nn.initializers.constant(inv_sp), (M,))
    w_bias = self.param('weight_bias', nn.initializers.zeros, (M,))
    mean = raw[..., 0] + mean_bias
    std = jnp.minimum(jax.nn.softplus(raw[..., 1] + std_bias),
                      c.std_max) + c.std_min
    return Mixture(mean, std, jax.nn.log_softmax(raw[..., 2] + w_bias, -1))


def init(key: jax.Array, cfg: Config) -> dict:
  """Parameters {'embed', 'backbone', 'head'}."""
  k1, k2, k3 = jax.random.split(key, 3)
  x = jnp.zeros((1, 2, cfg.x_dim))
  return {
      'embed': Embedder(cfg).init(k1, x, jnp.zeros((1, 2)))['params'],
      'backbone': lm_model.Model(cfg.backbone).init(k2, 2),
      'head': MixtureHead(cfg).init(k3, jnp.zeros((1, cfg.d_model)))[
          'params'],
  }


# -- tokens, head, likelihood -------------------------------------------------


def embed_context(params, cfg: Config, x, y):
  return Embedder(cfg).apply({'params': params['embed']}, x, y,
                             method='context')


def embed_buffer(params, cfg: Config, x, y, index):
  return Embedder(cfg).apply({'params': params['embed']}, x, y, index,
                             method='buffer')


def embed_target(params, cfg: Config, x):
  return Embedder(cfg).apply({'params': params['embed']}, x, method='target')


def head(params, cfg: Config, z) -> Mixture:
  return MixtureHead(cfg).apply({'params': params['head']}, z)


def mixture_logpdf(mix: Mixture, y: jax.Array) -> jax.Array:
  """log sum_m w_m N(y; mu_m, sigma_m^2), elementwise over y's shape."""
  z = (y[..., None] - mix.mean) / mix.std
  lp = -0.5 * (math.log(2 * math.pi) + z**2) - jnp.log(mix.std)
  return jax.nn.logsumexp(lp + mix.log_weight, -1)


def mixture_sample(key: jax.Array, mix: Mixture) -> jax.Array:
  """One draw per target: a component by its weight, then its Gaussian."""
  kc, kn = jax.random.split(key)
  comp = jax.random.categorical(kc, mix.log_weight)
  pick = lambda a: jnp.take_along_axis(a, comp[..., None], -1)[..., 0]
  return pick(mix.mean) + pick(mix.std) * jax.random.normal(kn, comp.shape)


# -- masks --------------------------------------------------------------------


def training_mask(num_context: int, num_buffer: int, num_target: int,
                  num_ar_chunks: int | None = None) -> jax.Array:
  """[N, N] (True = may attend) over [context | buffer | targets].

  AR-nanoTabPFN's `create_row_mask`: every row sees the context; context
  and buffer rows are causal among the buffer; target j of the first
  `num_ar_chunks` (default N_t // 2K) chunks of K sees b_0 .. b_{j mod K};
  the other targets see the context only.
  """
  nc, nb, nt = num_context, num_buffer, num_target
  if num_ar_chunks is None:
    num_ar_chunks = nt // (2 * nb)
  n = nc + nb + nt
  q = jnp.arange(n)[:, None]
  k = jnp.arange(n)[None]
  prefix = k < nc
  local = (q < nc + nb) & (k < nc + nb) & (k <= q)
  t_off, b_off = q - nc - nb, k - nc
  chunked = ((t_off >= 0) & (b_off >= 0) & (b_off < nb)
             & (t_off < num_ar_chunks * nb) & (b_off <= t_off % nb))
  return prefix | local | chunked


def teacher_forcing_mask(num_target: int) -> jax.Array:
  """[2N, 2N] over [b_0 .. b_{N-1}, t_0 .. t_{N-1}] (the context keys sit in
  the cache): b_i -> b_{<=i}, t_i -> b_{<i}, no target keys."""
  n = num_target
  q = jnp.arange(2 * n)[:, None]
  k = jnp.arange(2 * n)[None]
  is_buf_key = k < n
  buf_row = (q < n) & is_buf_key & (k <= q)
  tgt_row = (q >= n) & is_buf_key & (k < q - n)
  return buf_row | tgt_row


def _with_context_keys(mask_NxN, num_context, context_valid):
  """mask [N, N] -> [B, N, N] with padded context keys hidden."""
  if context_valid is None:
    return mask_NxN
  n = mask_NxN.shape[-1]
  keep = jnp.pad(context_valid, ((0, 0), (0, n - num_context)),
                 constant_values=True)
  return mask_NxN[None] & keep[:, None, :]


# -- training pass ------------------------------------------------------------


class Batch(NamedTuple):
  """One meta-batch of tasks: context (padded; `context_valid` marks the
  real points), buffer points and targets of the same function."""
  xc: jax.Array      # [B, Nc, x_dim]
  yc: jax.Array      # [B, Nc]
  context_valid: jax.Array   # [B, Nc] bool
  xb: jax.Array      # [B, K, x_dim]
  yb: jax.Array      # [B, K]
  xt: jax.Array      # [B, Nt, x_dim]
  yt: jax.Array      # [B, Nt]


def forward(params, cfg: Config, batch: Batch,
            num_ar_chunks: int | None = None) -> Mixture:
  """The training pass: the targets' mixtures [B, Nt, M] under
  `training_mask` (both modes in one pass)."""
  nc, nb, nt = batch.yc.shape[1], batch.yb.shape[1], batch.yt.shape[1]
  e = jnp.concatenate([
      embed_context(params, cfg, batch.xc, batch.yc),
      embed_buffer(params, cfg, batch.xb, batch.yb, jnp.arange(nb)),
      embed_target(params, cfg, batch.xt)], 1)
  mask = _with_context_keys(training_mask(nc, nb, nt, num_ar_chunks), nc,
                            batch.context_valid)
  z = lm_model.Model(cfg.backbone).apply(params['backbone'], None, mask,
                                         embeds_BxLxD=e)
  return head(params, cfg, z[:, nc + nb:])


def loss(params, cfg: Config, batch: Batch) -> tuple[jax.Array, dict]:
  """Mean mixture NLL over all targets (both modes); metrics split by mode."""
  nt, nb = batch.yt.shape[1], batch.yb.shape[1]
  nll = -mixture_logpdf(forward(params, cfg, batch), batch.yt)   # [B, Nt]
  n_ar = (nt // (2 * nb)) * nb
  return nll.mean(), {'nll': nll.mean(), 'nll_ar': nll[:, :n_ar].mean(),
                      'nll_set': nll[:, n_ar:].mean()}


# -- inference with the cache -------------------------------------------------


def prefill(params, cfg: Config, xc, yc, context_valid=None,
            cache_len: int | None = None) -> lm_model.Cache:
  """The context once through the backbone (full set attention over the
  valid points), its keys and values cached for `cache_len` positions."""
  B, nc = yc.shape
  valid = (jnp.ones((B, nc), bool) if context_valid is None
           else context_valid)
  mask = jnp.broadcast_to(valid[:, None, :], (B, nc, nc))
  return lm_model.Model(cfg.backbone).prefill(
      params['backbone'], None, mask, cache_len or nc,
      embeds_BxLxD=embed_context(params, cfg, xc, yc), valid_BxL=valid)


def joint_mixture(params, cfg: Config, xc, yc, xt, yt, context_valid=None,
                  mask=None) -> Mixture:
  """p(y_i | x_i, ctx, (x, y)_{<i}) for every target [B, Nt, M] in one
  teacher-forced pass over [b_0 .. b_{N-1}, t_0 .. t_{N-1}] against the
  prefilled context (`teacher_forcing_mask`; `mask` replaces it for
  ablations)."""
  nc, nt = yc.shape[1], yt.shape[1]
  cache = prefill(params, cfg, xc, yc, context_valid, nc + 2 * nt)
  e = jnp.concatenate([embed_buffer(params, cfg, xt, yt, jnp.arange(nt)),
                       embed_target(params, cfg, xt)], 1)
  z, _ = lm_model.Model(cfg.backbone).extend(
      params['backbone'], cache, None,
      teacher_forcing_mask(nt) if mask is None else mask,
      embeds_BxLxD=e, commit=0)
  return head(params, cfg, z[:, nt:])


def joint_logpdf(params, cfg: Config, xc, yc, xt, yt, context_valid=None,
                 y_buffer=None) -> jax.Array:
  """log p(y_i | x_i, ctx, (x, y)_{<i}) per target [B, Nt] in one pass;
  sum over targets for the joint log-density (the chain rule). `y_buffer`
  (default yt) is what the buffer is given: other values score yt under a
  wrong conditioning (a control)."""
  yb = yt if y_buffer is None else y_buffer
  return mixture_logpdf(
      joint_mixture(params, cfg, xc, yc, xt, yb, context_valid), yt)


def marginal_logpdf(params, cfg: Config, xc, yc, xt, yt, context_valid=None
                    ) -> jax.Array:
  """log p(y_i | x_i, ctx) per target [B, Nt]: set mode, the independent
  (marginal) prediction of a plain TNP."""
  nc, nt = yc.shape[1], yt.shape[1]
  cache = prefill(params, cfg, xc, yc, context_valid, nc + nt)
  z, _ = lm_model.Model(cfg.backbone).extend(
      params['backbone'], cache, None, jnp.zeros((nt, nt), bool),
      embeds_BxLxD=embed_target(params, cfg, xt), commit=0)
  return mixture_logpdf(head(params, cfg, z), yt)


def decode_mask(num_new: int) -> jax.Array:
  """[n, n] over the new tokens of a cached decode step, [b_{t-1}, t_t]
  (n = 2) or [t_0] (n = 1); the cached keys (context, earlier buffer) are
  visible to all: a buffer token sees itself and the new buffer tokens
  before it, the target (last) every new buffer token, never itself
  (AR-nanoTabPFN's `_create_decode_mask`)."""
  q = jnp.arange(num_new)[:, None]
  k = jnp.arange(num_new)[None]
  return jnp.where(q == num_new - 1, k < q, k <= q)


def decode_tokens(params, cfg: Config, x_prev, y_prev, x_t, t) -> jax.Array:
  """The tokens `[b_{t-1}, t_t]` (`[B, 2, D]`) that decode step t >= 1 runs:
  b_{t-1} = (x_{t-1}, y_{t-1}) at buffer position t - 1 (mod K), the
  position training and the teacher-forced joint density give it
  (AR-nanoTabPFN's sampler gives it position t: module doc)."""
  return jnp.concatenate([
      embed_buffer(params, cfg, x_prev, y_prev, t - 1)[:, None],
      embed_target(params, cfg, x_t)[:, None]], 1)


def _decode(params, cfg: Config, cache, xt, y_fn, key):
  """Sequential cached decode over the targets: step 0 runs t_0 alone (no
  buffer yet); step t >= 1 runs [b_{t-1}, t_t] and keeps b_{t-1}.
  `y_fn(key, mixture, t) -> y_t` picks the value the buffer receives (a
  sample, or the given y under teacher forcing). Returns (y [B, Nt],
  log p(y_t | ...) [B, Nt])."""
  model = lm_model.Model(cfg.backbone)
  nt = xt.shape[1]
  keys = jax.random.split(key, nt)
  z, cache = model.extend(params['backbone'], cache, None, decode_mask(1),
                          embeds_BxLxD=embed_target(params, cfg, xt[:, :1]),
                          commit=0)
  mix = head(params, cfg, z[:, 0])
  y0 = y_fn(keys[0], mix, 0)
  pair = decode_mask(2)                              # t_t sees b_{t-1}

  def step(carry, t):
    cache, y_prev = carry
    e = decode_tokens(params, cfg, xt[:, t - 1], y_prev, xt[:, t], t)
    z, cache = model.extend(params['backbone'], cache, None, pair,
                            embeds_BxLxD=e, commit=1)
    mix = head(params, cfg, z[:, 1])
    y = y_fn(keys[t], mix, t)
    return (cache, y), (y, mixture_logpdf(mix, y))

  _, (ys, lps) = jax.lax.scan(step, (cache, y0), jnp.arange(1, nt))
  ys = jnp.concatenate([y0[None], ys], 0).T
  lps = jnp.concatenate([mixture_logpdf(mix, y0)[None], lps], 0).T
  return ys, lps


def decode_logpdf(params, cfg: Config, xc, yc, xt, yt, context_valid=None
                  ) -> jax.Array:
  """`joint_logpdf` the slow way: one cached decode step per target with
  the true y in the buffer (the exactness reference)."""
  nc, nt = yc.shape[1], yt.shape[1]
  cache = prefill(params, cfg, xc, yc, context_valid, nc + nt + 1)
  _, lps = _decode(params, cfg, cache, xt, lambda k, m, t: yt[:, t],
                   jax.random.key(0))
  return lps


def sample(params, cfg: Config, key: jax.Array, xc, yc, xt,
           num_samples: int, context_valid=None) -> jax.Array:
  """Joint samples [B, S, Nt]: each task's context prefilled once and its
  cache shared by its S samples; one two-token step per target."""
  B, nc = yc.shape
  nt = xt.shape[1]
  cache = lm_model.repeat_cache(
      prefill(params, cfg, xc, yc, context_valid, nc + nt + 1), num_samples)
  xt_s = jnp.repeat(xt, num_samples, 0)
  ys, _ = _decode(params, cfg, cache, xt_s,
                  lambda k, m, t: mixture_sample(k, m), key)
  return ys.reshape(B, num_samples, nt)


# -- the re-encoding baseline -------------------------------------------------


def _grown_mixture(params, cfg: Config, xc, yc, valid_c, xp, yp, t, xq,
                   as_buffer: bool) -> Mixture:
  """One full pass (no cache) predicting at xq [B, x_dim] from the context
  and the first t of the points (xp, yp) [B, P]: as more context tokens in
  set mode (re-encoding), or as buffer tokens under the buffer mask."""
  B, nc = yc.shape
  P = yp.shape[1]
  grown = jnp.arange(P) < t                                  # [P]
  if as_buffer:
    e_p = embed_buffer(params, cfg, xp, yp, jnp.arange(P))
  else:
    e_p = embed_context(params, cfg, xp, yp)
  e = jnp.concatenate([embed_context(params, cfg, xc, yc), e_p,
                       embed_target(params, cfg, xq[:, None])], 1)
  n = nc + P + 1
  keys = jnp.concatenate([valid_c, jnp.broadcast_to(grown, (B, P)),
                          jnp.zeros((B, 1), bool)], 1)        # [B, n]
  if as_buffer:   # context rows see the context; buffer rows b_{<=j}
    q = jnp.arange(n)[:, None]
    k = jnp.arange(n)[None]
    allowed = (k < nc) | ((k >= nc) & (q >= nc) & ((k <= q) | (q == n - 1)))
    mask = keys[:, None, :] & allowed[None]
  else:           # one set: every row sees every valid key
    mask = jnp.broadcast_to(keys[:, None, :], (B, n, n))
  z = lm_model.Model(cfg.backbone).apply(params['backbone'], None, mask,
                                         embeds_BxLxD=e)
  return head(params, cfg, z[:, -1])


def reencode_logpdf(params, cfg: Config, xc, yc, xt, yt, context_valid=None
                    ) -> jax.Array:
  """log p(y_t | x_t, ctx + (x, y)_{<t}) [B, Nt] with the same weights in
  set mode: the grown context re-encoded for every target (N_t passes)."""
  B, nc = yc.shape
  valid_c = (jnp.ones((B, nc), bool) if context_valid is None
             else context_valid)

  def one(t):
    mix = _grown_mixture(params, cfg, xc, yc, valid_c, xt, yt, t, xt[:, t],
                         as_buffer=False)
    return mixture_logpdf(mix, yt[:, t])

  return jax.lax.map(one, jnp.arange(yt.shape[1])).T


def grown_sample(params, cfg: Config, key: jax.Array, xc, yc, xt,
                 num_samples: int, context_valid=None, bucket: int = 8,
                 as_buffer: bool = False) -> jax.Array:
  """Joint samples [B, S, Nt] without a cache: step t samples y_t from one
  full pass over the context and the sampled (x, y)_{<t}, for every sample.

  as_buffer=False is the re-encoding baseline (the points join the
  context; set mode, the same weights); as_buffer=True is the buffer model
  re-run from scratch at every step (the ablation of the KV cache: the
  same samples as `sample`, the re-encoding cost). The sequence grows in
  buckets of `bucket` steps (one `lax.scan` per bucket, padded to its last
  step), so the cost tracks N_c + t within a bucket.
  """
  B, nc = yc.shape
  nt = xt.shape[1]
  S = num_samples
  rep = lambda a: jnp.repeat(a, S, 0)
  xc, yc, xt = rep(xc), rep(yc), rep(xt)
  valid_c = rep(jnp.ones((B, nc), bool) if context_valid is None
                else context_valid)
  y = jnp.zeros((B * S, nt))
  keys = jax.random.split(key, nt)
  for start in range(0, nt, bucket):
    stop = min(start + bucket, nt)
    P = max(stop - 1, 1)        # the most grown points any step here needs

    def step(y, t, P=P):
      mix = _grown_mixture(params, cfg, xc, yc, valid_c, xt[:, :P],
                           y[:, :P], t, xt[:, t], as_buffer)
      return y.at[:, t].set(mixture_sample(keys[t], mix)), None

    y, _ = jax.lax.scan(step, y, jnp.arange(start, stop))
  return y.reshape(B, S, nt)


def reencode_sample(params, cfg: Config, key: jax.Array, xc, yc, xt,
                    num_samples: int, context_valid=None,
                    bucket: int = 8) -> jax.Array:
  """The re-encoding baseline's joint samples [B, S, Nt] (`grown_sample`)."""
  return grown_sample(params, cfg, key, xc, yc, xt, num_samples,
                      context_valid, bucket, as_buffer=False)


# -- data: GP function draws --------------------------------------------------


class GPPrior(NamedTuple):
  """y = f(x) + eps, f ~ GP(0, RBF(l)), eps ~ N(0, s^2); x ~ U(lo, hi)^d,
  l ~ U(l_lo, l_hi), s ~ logU(s_lo, s_hi) per task."""
  x_lo: float = -2.0
  x_hi: float = 2.0
  lengthscale: tuple[float, float] = (0.2, 1.0)
  noise: tuple[float, float] = (0.05, 0.05)


def gp_tasks(key: jax.Array, prior: GPPrior, num_tasks: int, num_points: int,
             x_dim: int = 1):
  """Function draws: x [T, N, d], y [T, N], lengthscale [T], noise [T].

  The T tasks are the batch (`distributed.shard_batch`: split over 'data'
  inside a training step, the identity elsewhere)."""
  from iclrjax.kernels import base as kernels   # pylint: disable=g-import-not-at-top
  kx, kl, ks, kf = jax.random.split(key, 4)
  x = jax.random.uniform(kx, (num_tasks, num_points, x_dim),
                         minval=prior.x_lo, maxval=prior.x_hi)
  ls = jax.random.uniform(kl, (num_tasks,), minval=prior.lengthscale[0],
                          maxval=prior.lengthscale[1])
  lo, hi = jnp.log(prior.noise[0]), jnp.log(prior.noise[1])
  noise = jnp.exp(jax.random.uniform(ks, (num_tasks,), minval=lo, maxval=hi))
  x, ls, noise = distributed.shard_batch((x, ls, noise))

  def draw(k, xi, l, s):
    K = kernels.rbf(xi, xi, lengthscale=l) + s**2 * jnp.eye(num_points)
    return jnp.linalg.cholesky(K) @ jax.random.normal(k, (num_points,))

  y = jax.vmap(draw)(jax.random.split(kf, num_tasks), x, ls, noise)
  return x, y, ls, noise


def gp_logpdf(xc, yc, xt, yt, lengthscale, noise, context_valid=None,
              joint: bool = True) -> jax.Array:
  """The exact GP's log p(y_t | x_t, ctx, (x, y)_{<t}) [Nt] for one task
  (joint=True; their sum is the joint log-density) or log p(y_t | x_t, ctx)
  (joint=False), with the task's true kernel: the oracle. Padded context
  points become independent N(0, 1) draws observed at 0: they inform
  nothing, exactly."""
  from iclrjax.kernels import base as kernels   # pylint: disable=g-import-not-at-top
  nc, nt = yc.shape[0], yt.shape[0]
  valid = jnp.concatenate([
      jnp.ones(nc, bool) if context_valid is None else context_valid,
      jnp.ones(nt, bool)])
  x = jnp.concatenate([xc, xt])
  y = jnp.where(valid, jnp.concatenate([yc, yt]), 0.0)
  K = kernels.rbf(x, x, lengthscale=lengthscale)
  K = jnp.where(valid[:, None] & valid[None], K, 0.0)
  S = K + jnp.diag(jnp.where(valid, noise**2, 1.0))
  if joint:
    # Sequential conditionals of a Gaussian from its Cholesky factor:
    # y = L e, e_i ~ N(0, 1) -> y_i | y_<i ~ N(mu_i, L_ii^2).
    L = jnp.linalg.cholesky(S)
    e = jax.scipy.linalg.solve_triangular(L, y, lower=True)
    lp = -0.5 * (math.log(2 * math.pi) + e**2) - jnp.log(jnp.diag(L))
    return lp[nc:]
  Sc = S[:nc, :nc]
  cross = S[nc:, :nc]
  sol = jnp.linalg.solve(Sc, jnp.concatenate([y[:nc, None], cross.T], 1))
  mu = cross @ sol[:, 0]
  var = jnp.diag(S[nc:, nc:]) - jnp.sum(cross * sol[:, 1:].T, 1)
  return -0.5 * (jnp.log(2 * math.pi * var) + (yt - mu)**2 / var)
