"""The design knobs of a patch-transformer forecaster ("Understanding the
Implicit Biases of Design Choices for Time Series Foundation Models", Yu et
al., arXiv 2510.19236, ICLR 2026).

The paper is a controlled study, not a new model: one forecaster in which
exactly one design choice changes at a time, and three biases those choices
induce. This module holds that forecaster and its parts as pure functions
and flax modules:

  * data: sums of sinusoids with log-uniform periods, trends, noise and level
    shifts (`synthetic_series`), pure sinusoids (`sinusoids`), and series
    whose future jumps to +a or -a with probability 1/2 (`jump_series`);
  * instance normalisation (`normalise`): z-score, (x - mean) / std, as in
    TimesFM / PatchTST's RevIN, or mean scaling, x / mean|x|, as in Chronos
    (Ansari et al. 2024, Sec. 3.1);
  * the Chronos tokeniser (`tokenise` / `bin_centres`): mean-scaled values
    cut into uniform bins on [-r, r] (Chronos Sec. 3.1: 4094 bins on
    [-15, 15]; here `num_bins` on `bin_range`);
  * the residual-MLP patch embedding (`ResidualMLP`): phi(x) = W2 ReLU(W1 x)
    + b2 + W_s x (TimesFM's residual block; the paper's Thm 1 analyses
    phi(x) = W2 ReLU(W1 x) + b, the same map without the linear skip);
  * the forecaster (`PatchForecaster`): patches of the normalised context,
    embedded continuously or as quantised tokens, through the project's
    decoder (`iclrjax/lm/model.py`, `readout='none'`), and a direct
    multi-step head on the last patch's features that emits every step of
    the horizon at once;
  * objectives: MSE, pinball over quantile levels (Koenker & Bassett 1978:
    rho_tau(u) = u (tau - 1[u < 0])), cross-entropy over bins (`loss_fn`);
  * scores: MASE (Hyndman & Koehler 2006: MAE over the in-sample naive
    MAE at lag m), CRPS from quantiles (CRPS(F, y) = 2 int_0^1 rho_tau(y -
    F^-1(tau)) dtau, Gneiting & Raftery 2007, Eq. 4.4 with the quantile
    decomposition of Laio & Tamea 2007) and from samples (CRPS = E|X - y| -
    1/2 E|X - X'|, Gneiting & Raftery 2007, Eq. 21), and the band geometry
    of patch embeddings (`band_cosines`: mean |cos| within and across
    frequency bands, the paper's Thm 1 geometry).

The biases the paper names (from its abstract and secondary summaries; the
theorem statements are not checked against the PDF here): patch size ->
frequency bias (Thm 1: a patch embedding maps one frequency band of
bandwidth omega into a subspace of stable rank O(omega), disjoint bands
into nearly orthogonal subspaces); embedding -> geometric bias; objective
-> regression to the mean.
"""

from __future__ import annotations

import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from iclrjax.core import distributed
from iclrjax.lm import model as lm_model

NORMS = ('zscore', 'meanabs')
EMBEDS = ('continuous', 'quantised')
LOSSES = ('mse', 'pinball', 'ce')
POSITIONS = ('learned', 'rope')
EPS = 1e-5


@dataclasses.dataclass(frozen=True)
class ForecasterConfig:
  """One forecaster; the knobs are `patch`, `norm`, `embed` and `loss`."""
  context: int = 128
  horizon: int = 32
  patch: int = 16                 # knob A: patch size k
  norm: str = 'zscore'            # instance normalisation
  embed: str = 'continuous'       # knob B: continuous patches | tokens
  loss: str = 'mse'               # knob C: mse | pinball | ce
  d_model: int = 64
  num_heads: int = 4
  num_layers: int = 2
  d_ff: int = 128
  mlp_hidden: int = 64            # the residual MLP's hidden width
  positions: str = 'learned'
  quantiles: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8,
                                  0.9)
  num_bins: int = 256             # CE head's bins (on the normalised scale)
  bin_range: float = 10.0         # CE bins cover [-bin_range, bin_range]
  token_bins: int = 256           # the tokeniser's bins (quantised inputs)
  token_range: float = 15.0       # Chronos: [-15, 15]
  token_dim: int = 8              # width of one token's embedding

  def __post_init__(self):
    for name, value, allowed in (('norm', self.norm, NORMS),
                                 ('embed', self.embed, EMBEDS),
                                 ('loss', self.loss, LOSSES),
                                 ('positions', self.positions, POSITIONS)):
      if value not in allowed:
        raise ValueError(f'ForecasterConfig.{name}={value!r}: use one of '
                         f'{allowed}')
    if self.context % self.patch:
      raise ValueError(f'ForecasterConfig.patch={self.patch} does not divide '
                       f'context={self.context}')
    if 0.5 not in self.quantiles:
      raise ValueError('ForecasterConfig.quantiles must hold 0.5 (the median '
                       'point forecast)')

  @property
  def num_patches(self) -> int:
    return self.context // self.patch

  @property
  def out_per_step(self) -> int:
    return {'mse': 1, 'pinball': len(self.quantiles),
            'ce': self.num_bins}[self.loss]

  def lm_config(self) -> lm_model.Config:
    return lm_model.Config(
        vocab_size=1, d_model=self.d_model, num_heads=self.num_heads,
        num_layers=self.num_layers, d_ff=self.d_ff, max_len=self.num_patches,
        positions=self.positions, readout='none')


# -- data ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SeriesConfig:
  """The pre-training distribution (sums of sinusoids, trend, noise,
  level shifts) and the jump series mixed into it."""
  period_min: float = 4.0
  period_max: float = 128.0
  max_components: int = 3
  amp_min: float = 0.5
  amp_max: float = 2.0
  trend_scale: float = 1.0        # slope ~ N(0, trend_scale) per series length
  level_scale: float = 1.0
  noise_max: float = 0.3          # noise std ~ U(0, noise_max)
  shift_prob: float = 0.3
  shift_scale: float = 1.0
  jump_prob: float = 0.2          # fraction of jump series in a batch
  jump_size: float = 1.0          # a: the future sits at +a or -a
  jump_noise: float = 0.25


def log_uniform(key: jax.Array, shape, low: float, high: float) -> jax.Array:
  return jnp.exp(jax.random.uniform(key, shape, minval=math.log(low),
                                    maxval=math.log(high)))


def sinusoids(key: jax.Array, periods_N: jax.Array, length: int,
              noise: float = 0.0) -> jax.Array:
  """sin(2 pi t / p + phase) with uniform phases (+ N(0, noise^2)), [N, T]."""
  k_ph, k_n = jax.random.split(key)
  n = periods_N.shape[0]
  phase = jax.random.uniform(k_ph, (n, 1), maxval=2 * jnp.pi)
  t = jnp.arange(length, dtype=jnp.float32)
  x = jnp.sin(2 * jnp.pi * t[None] / periods_N[:, None] + phase)
  return x + noise * jax.random.normal(k_n, x.shape)


def synthetic_series(key: jax.Array, length: int, c: SeriesConfig,
                     shift_end: int | None = None) -> jax.Array:
  """One pre-training series [T]: level + trend + sum of 1..max_components
  sinusoids (periods log-uniform in [period_min, period_max]) + Gaussian
  noise + (with prob shift_prob) one level shift at a uniform time in
  [0, shift_end) (default: anywhere; the experiment keeps shifts inside the
  context, where they can be seen)."""
  ks = jax.random.split(key, 9)
  m = c.max_components
  n_comp = jax.random.randint(ks[0], (), 1, m + 1)
  on = jnp.arange(m) < n_comp
  periods = log_uniform(ks[1], (m,), c.period_min, c.period_max)
  amps = jax.random.uniform(ks[2], (m,), minval=c.amp_min, maxval=c.amp_max)
  phases = jax.random.uniform(ks[3], (m,), maxval=2 * jnp.pi)
  t = jnp.arange(length, dtype=jnp.float32)
  waves = amps[:, None] * jnp.sin(2 * jnp.pi * t[None] / periods[:, None]
                                  + phases[:, None])
  seasonal = jnp.sum(jnp.where(on[:, None], waves, 0.0), 0)
  trend = c.trend_scale * jax.random.normal(ks[4]) * t / length
  level = c.level_scale * jax.random.normal(ks[5])
  sigma = jax.random.uniform(ks[6], maxval=c.noise_max)
  noise = sigma * jax.random.normal(ks[7], (length,))
  k_s1, k_s2, k_s3 = jax.random.split(ks[8], 3)
  shift_at = jax.random.randint(k_s1, (), 0, shift_end or length)
  shift = jnp.where(jax.random.bernoulli(k_s2, c.shift_prob),
                    c.shift_scale * jax.random.normal(k_s3), 0.0)
  return level + trend + seasonal + noise + shift * (t >= shift_at)


def jump_series(key: jax.Array, context: int, horizon: int, size: float,
                noise: float) -> tuple[jax.Array, jax.Array]:
  """(series [T], sign): N(0, noise^2) around 0 in the context, then a
  future at sign * size (+ the same noise), sign = +-1 with prob 1/2. The
  context says nothing about the sign: the future is bimodal."""
  k_s, k_n = jax.random.split(key)
  sign = jnp.where(jax.random.bernoulli(k_s), 1.0, -1.0)
  t = jnp.arange(context + horizon)
  x = noise * jax.random.normal(k_n, (context + horizon,))
  return x + sign * size * (t >= context), sign


def training_batch(key: jax.Array, batch: int, length: int, horizon: int,
                   c: SeriesConfig) -> jax.Array:
  """[batch, length]: synthetic series (level shifts in the context
  only), each replaced by a jump series (context length - horizon) with
  probability jump_prob."""
  k_s, k_j, k_m = jax.random.split(key, 3)
  # the series' keys carry the batch (split over 'data' in a training step)
  ks_s, ks_j, is_jump = distributed.shard_batch((
      jax.random.split(k_s, batch), jax.random.split(k_j, batch),
      jax.random.bernoulli(k_m, c.jump_prob, (batch, 1))))
  synth = jax.vmap(lambda k: synthetic_series(k, length, c,
                                              length - horizon))(ks_s)
  jumps, _ = jax.vmap(lambda k: jump_series(
      k, length - horizon, horizon, c.jump_size, c.jump_noise))(ks_j)
  return jnp.where(is_jump, jumps, synth)


# -- normalisation and tokens ---------------------------------------------------


def normalise(x_BxT: jax.Array, norm: str) -> tuple[jax.Array, jax.Array]:
  """(loc [B, 1], scale [B, 1]) of each context: z-score (mean, std) or
  Chronos mean scaling (0, mean |x|); the model sees (x - loc) / scale."""
  if norm == 'zscore':
    loc = jnp.mean(x_BxT, -1, keepdims=True)
    scale = jnp.std(x_BxT, -1, keepdims=True)
  elif norm == 'meanabs':
    loc = jnp.zeros(x_BxT.shape[:-1] + (1,), x_BxT.dtype)
    scale = jnp.mean(jnp.abs(x_BxT), -1, keepdims=True)
  else:
    raise ValueError(f'normalise: norm={norm!r}, use one of {NORMS}')
  return loc, scale + EPS


def bin_centres(num_bins: int, bin_range: float) -> jax.Array:
  """Centres of `num_bins` uniform bins on [-bin_range, bin_range]."""
  width = 2 * bin_range / num_bins
  return -bin_range + width * (jnp.arange(num_bins) + 0.5)


def tokenise(z: jax.Array, num_bins: int, bin_range: float) -> jax.Array:
  """The bin of each (scaled) value, int32; values outside the range go to
  the end bins (Chronos Sec. 3.1)."""
  idx = jnp.floor((z + bin_range) / (2 * bin_range) * num_bins)
  return jnp.clip(idx, 0, num_bins - 1).astype(jnp.int32)


# -- the forecaster ----------------------------------------------------------------


class ResidualMLP(nn.Module):
  """phi(x) = W2 ReLU(W1 x + b1) + b2 + W_s x: TimesFM's residual block
  (the paper's Thm 1 map plus a linear skip)."""
  hidden: int
  out: int

  @nn.compact
  def __call__(self, x):
    h = nn.relu(nn.Dense(self.hidden, name='hidden')(x))
    return (nn.Dense(self.out, name='output')(h)
            + nn.Dense(self.out, use_bias=False, name='skip')(x))


class PatchForecaster(nn.Module):
  """Context [B, context] -> head outputs [B, horizon, out_per_step] on the
  normalised scale, and the context's (loc, scale)."""
  cfg: ForecasterConfig

  def setup(self):
    c = self.cfg
    self.embedder = ResidualMLP(c.mlp_hidden, c.d_model)
    if c.embed == 'quantised':
      self.token_embed = nn.Embed(c.token_bins, c.token_dim)
    self.decoder = lm_model.Decoder(c.lm_config())
    self.head = nn.Dense(c.horizon * c.out_per_step)

  def embed_patches(self, z_BxNxK: jax.Array) -> jax.Array:
    """Patch embeddings [B, N, D] of normalised patches (quantised first
    when `embed='quantised'`)."""
    c = self.cfg
    if c.embed == 'quantised':
      tok = tokenise(z_BxNxK, c.token_bins, c.token_range)
      e = self.token_embed(tok)
      z_BxNxK = e.reshape(e.shape[:-2] + (-1,))
    return self.embedder(z_BxNxK)

  def __call__(self, x_BxT: jax.Array):
    c = self.cfg
    loc, scale = normalise(x_BxT, c.norm)
    z = (x_BxT - loc) / scale
    B = z.shape[0]
    emb = self.embed_patches(z.reshape(B, c.num_patches, c.patch))
    feats = self.decoder(None, None, None, embeds_BxLxD=emb)
    out = self.head(feats[:, -1]).reshape(B, c.horizon, c.out_per_step)
    return out, (loc, scale)


def loss_fn(cfg: ForecasterConfig, out_BxHxO: jax.Array, y_n_BxH: jax.Array
            ) -> jax.Array:
  """Mean loss on the normalised future y_n: squared error, pinball summed
  over quantile levels (rho_tau(u) = u (tau - 1[u < 0])), or cross-entropy
  of y_n's bin."""
  if cfg.loss == 'mse':
    return jnp.mean((out_BxHxO[..., 0] - y_n_BxH)**2)
  if cfg.loss == 'pinball':
    taus = jnp.asarray(cfg.quantiles)
    return jnp.mean(jnp.sum(pinball(y_n_BxH[..., None] - out_BxHxO, taus),
                            -1))
  tgt = tokenise(y_n_BxH, cfg.num_bins, cfg.bin_range)
  logp = jax.nn.log_softmax(out_BxHxO, -1)
  return -jnp.mean(jnp.take_along_axis(logp, tgt[..., None], -1))


def pinball(u: jax.Array, tau: jax.Array) -> jax.Array:
  """rho_tau(u) = u (tau - 1[u < 0]) (Koenker & Bassett 1978)."""
  tau = jnp.broadcast_to(tau, u.shape)
  return u * (tau - (u < 0))


def point_forecast(cfg: ForecasterConfig, out_BxHxO: jax.Array) -> jax.Array:
  """[B, H] on the normalised scale: the MSE head's value, the pinball
  head's median, the CE head's mean over bin centres."""
  if cfg.loss == 'mse':
    return out_BxHxO[..., 0]
  if cfg.loss == 'pinball':
    return out_BxHxO[..., cfg.quantiles.index(0.5)]
  probs = jax.nn.softmax(out_BxHxO, -1)
  return probs @ bin_centres(cfg.num_bins, cfg.bin_range)


def forecast_quantiles(cfg: ForecasterConfig, out_BxHxO: jax.Array
                       ) -> jax.Array:
  """[B, H, Q] at cfg.quantiles on the normalised scale: the pinball head's
  (sorted), the CE head's by inverting its CDF over bins (the centre of the
  first bin whose CDF reaches tau), the MSE head's point at every level."""
  taus = jnp.asarray(cfg.quantiles)
  if cfg.loss == 'mse':
    return jnp.broadcast_to(out_BxHxO, out_BxHxO.shape[:-1] + taus.shape)
  if cfg.loss == 'pinball':
    return jnp.sort(out_BxHxO, -1)
  cdf = jnp.cumsum(jax.nn.softmax(out_BxHxO, -1), -1)
  taus_QxV = jnp.broadcast_to(taus[:, None], cdf.shape[:-1]
                              + (taus.shape[0], cfg.num_bins))
  idx = jnp.sum(cdf[..., None, :] < taus_QxV, -1)
  return bin_centres(cfg.num_bins, cfg.bin_range)[
      jnp.clip(idx, 0, cfg.num_bins - 1)]


def sample_forecasts(cfg: ForecasterConfig, key: jax.Array,
                     out_BxHxO: jax.Array, num: int) -> jax.Array:
  """[num, B, H] samples on the normalised scale from the CE head (each step
  its own categorical draw, dequantised to the bin centre, as Chronos
  samples); other heads have no distribution to sample and return their
  point forecast `num` times."""
  if cfg.loss != 'ce':
    return jnp.broadcast_to(point_forecast(cfg, out_BxHxO),
                            (num,) + out_BxHxO.shape[:-1])
  idx = jax.random.categorical(key, out_BxHxO,
                               shape=(num,) + out_BxHxO.shape[:-1])
  return bin_centres(cfg.num_bins, cfg.bin_range)[idx]


# -- scores -----------------------------------------------------------------------


def naive_scale(context_BxT: jax.Array, lag: int = 1) -> jax.Array:
  """In-sample MAE of the lag-m naive forecast, [B] (MASE's denominator)."""
  return jnp.mean(jnp.abs(context_BxT[:, lag:] - context_BxT[:, :-lag]), -1)


def mase(y_BxH: jax.Array, yhat_BxH: jax.Array, context_BxT: jax.Array,
         lag: int = 1) -> jax.Array:
  """MAE over the in-sample lag-m naive MAE, per series [B] (Hyndman &
  Koehler 2006, Eq. for q_t)."""
  return (jnp.mean(jnp.abs(y_BxH - yhat_BxH), -1)
          / (naive_scale(context_BxT, lag) + EPS))


def crps_quantiles(q_BxHxQ: jax.Array, taus_Q: jax.Array, y_BxH: jax.Array
                   ) -> jax.Array:
  """CRPS ~ (2 / Q) sum_tau rho_tau(y - q_tau) over evenly spread levels,
  [B, H] (the quantile form of CRPS, 2 int_0^1 rho_tau dtau, by the
  midpoint rule when taus = (i - 1/2) / Q)."""
  return 2.0 * jnp.mean(pinball(y_BxH[..., None] - q_BxHxQ, taus_Q), -1)


def crps_samples(x_SxBxH: jax.Array, y_BxH: jax.Array) -> jax.Array:
  """CRPS = E|X - y| - 1/2 E|X - X'| from S samples, [B, H] (Gneiting &
  Raftery 2007, Eq. 21; the V-statistic, with the i = j pairs)."""
  first = jnp.mean(jnp.abs(x_SxBxH - y_BxH[None]), 0)
  second = jnp.mean(jnp.abs(x_SxBxH[:, None] - x_SxBxH[None]), (0, 1))
  return first - 0.5 * second


def gaussian_crps(mu: jax.Array, sigma: jax.Array, y: jax.Array
                  ) -> jax.Array:
  """Closed form for N(mu, sigma^2): sigma [z (2 Phi(z) - 1) + 2 phi(z) -
  1/sqrt(pi)], z = (y - mu) / sigma (Gneiting & Raftery 2007, Eq. 5)."""
  z = (y - mu) / sigma
  pdf = jnp.exp(-0.5 * z**2) / jnp.sqrt(2 * jnp.pi)
  cdf = 0.5 * (1 + jax.scipy.special.erf(z / jnp.sqrt(2.0)))
  return sigma * (z * (2 * cdf - 1) + 2 * pdf - 1 / jnp.sqrt(jnp.pi))


def band_cosines(emb_NxD: jax.Array, band_N: jax.Array, num_bands: int
                 ) -> tuple[jax.Array, jax.Array]:
  """(same-band, cross-band) mean |cos| between centred embeddings.

  Embeddings are centred on their mean first (the shared bias b of phi
  would otherwise align every pair); pairs i = j are left out.
  """
  e = emb_NxD - jnp.mean(emb_NxD, 0, keepdims=True)
  e = e / (jnp.linalg.norm(e, axis=-1, keepdims=True) + EPS)
  cos = jnp.abs(e @ e.T)
  onehot = jax.nn.one_hot(band_N, num_bands)
  same = (onehot @ onehot.T) * (1 - jnp.eye(e.shape[0]))
  cross = 1 - onehot @ onehot.T
  return (jnp.sum(cos * same) / jnp.sum(same),
          jnp.sum(cos * cross) / jnp.sum(cross))


def stable_rank(emb_NxD: jax.Array) -> jax.Array:
  """||E||_F^2 / ||E||_2^2 of the centred embeddings (Thm 1's stab-rank)."""
  e = emb_NxD - jnp.mean(emb_NxD, 0, keepdims=True)
  s = jnp.linalg.svd(e, compute_uv=False)
  return jnp.sum(s**2) / (s[0]**2 + EPS)
