"""QDPM (quantization-aware diffusion, ICLR 2026) and its baselines.

Every model function takes the denoiser as a callable
`net(params, x_in [D], c) -> [D]` for one example with a scalar
conditioning value c, so any network plugs in (it is vmapped over the
batch here). Data are grid *values* x0 [B, D] on a 1-D grid `levels` [K]
(increasing; e.g. `images.grid(17, 'integer')`), shared by every pixel.
Paper: OpenReview 5ekhMkawuT (no official code). Equation numbers are the
paper's as a secondary summary reports them (unchecked against its PDF); the
derivations below were redone here.

QDPM (VE forward process x_t = x_0 + t eps, t in [0, inf)):

* softround (Eq. 17): softround(x, t)_i = sum_k softmax_k(-(g_k - x_i)^2 /
  (2t^2)) g_k, the posterior mean of x_0,i under a uniform prior over the
  grid (and exactly that: p(g_k | x) ∝ N(x; g_k, t^2)).
* xhat (Eq. 17): xhat(x_t, t) = softround(x_t, t) + u deltahat, with
  u = exp(-1/t^2) and deltahat = net(params, x_t / sqrt(1 + t^2), u) (the
  network sees u, not t). As t -> 0, xhat -> round(x_t) (Prop. 2); as
  t -> inf, softround -> the grid mean.
* Bound (Eq. 19): -log p(x_0) <= E_eps int_0^inf t^-3 ||x_0 - xhat||^2 dt.
  Derivation of the factor: for s < t, q(x_s | x_t, x_0) = N((s^2/t^2) x_t +
  (1 - s^2/t^2) x_0, s^2 (1 - s^2/t^2) I); the model step replaces x_0 by
  xhat, so the per-step KL is (1 - s^2/t^2)^2 ||x_0 - xhat||^2 /
  (2 s^2 (1 - s^2/t^2)) = (1 - s^2/t^2) ||.||^2 / (2 s^2) ->
  (2 dt / t) ||.||^2 / (2 t^2) = t^-3 dt ||.||^2 as s -> t: weight t^-3 with
  factor 1, i.e. VDM's -SNR'(t)/2 with SNR = t^-2 (not 1/2 t^-3). The
  decoder term at t_min -> 0 vanishes because xhat(x, 0) = round(x) is
  exact, and the prior KL at t_max, ||x_0 - mu||^2 / (2 t_max^2), -> 0.
* Loss (Eq. 22): with u = exp(-1/t^2), du = 2u t^-3 dt, so the bound is
  E_{u ~ U(0,1)} ||x_0 - xhat||^2 / (2u), and with delta = x_0 -
  softround(x_t, t), x_0 - xhat = delta - u deltahat:
    ||delta - u deltahat||^2 / (2u)
      = deltahat . ((u/2) deltahat - delta)  +  ||delta||^2 / (2u).
  The first term is the training loss; the second, c = E ||delta||^2 / (2u),
  does not depend on theta but IS part of the NLL. c is the bound of the
  softround-only model (deltahat = 0), whose xhat is the exact posterior
  mean of the uniform distribution over the grid. With an exact posterior
  mean the continuous-time ELBO is tight: on average by I-MMSE
  (int t^-3 mmse(t) dt = int 1/2 mmse dsnr = I(x_0; x_{t=0}) -
  I(x_0; x_{t=inf}) = H(x_0)), and per example because the model's reverse
  process is then the exact time reversal (zero path-space gap; tested per
  state to ~1% on a 5-level law). So c = D ln K for every x_0 (tested:
  log2 K bits/dim at every data scale), and reporting the first term alone
  under-reports the NLL by exactly log2 K bits/dim.
* Sampler (QDPM-Solver-1, t < s): x_t ~ N((t^2/s^2) x_s + (1 - t^2/s^2)
  xhat(x_s, s), t^2 (1 - t^2/s^2) I): the exact solution of the reverse SDE
  dx = (x - xhat)/rho drho + dW_rho (rho = t^2) with xhat frozen at s.
  Solver-2 (ours, `solver_step`): trapezoidal rule in SNR for the xhat
  integral of that transition (stochastic Heun). Time grid uniform in u
  (paper) or in log t; the last step lands on the grid by Prop. 2
  (`ve_sample`). With the exact denoiser of a 5-level 1-D law, 32 log-t
  steps give total variation 0.045 (Solver-1) vs 0.008 (Solver-2).

Estimators of the bound (nats per example; `likelihood.bpd` converts):
(a) `bound_u_mc`, the paper's u ~ U(0,1) Monte Carlo; (b)
`bound_quadrature`, stratified quadrature in log t over [t_lo, t_hi] plus
the exact upper tail (`likelihood.ve_upper_tail`) -- the FULL bound but for
the lower tail int_0^t_lo, which is below float32 resolution with the
default t_lo = min(s/100, 0.1) (s = grid spacing): there the softround
error needs |eps| > s / (2 t_lo) = 50 and u <= exp(-100).

Units of the gate (a deviation of ours): the paper writes u = exp(-1/t^2)
and feeds the net x_t / sqrt(1 + t^2), which suggests unit-scale data; on
such data the literal gate (unit 1) is the faithful reading. Every function
here takes `unit` (u = exp(-(unit/t)^2), `gate_unit`). unit = the grid
spacing ('grid', the library default, `unit=None`) makes QDPM on any data
scale the integer-data model in other units (tested; on integer data the two
gates coincide); unit 1 ('absolute', the paper as written) on [-1, 1] data
keeps the correction off below t ~ 3 grid steps. The experiment reports
both.

Training in u (paper) almost never visits t < 0.25 unit (u < exp(-16) ~
1e-7; in float32 u is also a multiple of 2^-23); the alternative
`time_sampling='log_t'` draws log t uniformly over [t_lo, t_hi] (stratified over the batch) with weight (log t_hi - log t_lo)
t^-2 on ||x_0 - xhat||^2 (since t^-3 dt = t^-2 dlog t).

Baselines with the same `net` interface and estimators:
* VDM (`vdm_*`): VP, learnable scalar gamma, eps-prediction, categorical
  decoder, continuous-time loss (google-research/vdm `model_vdm.py`).
* Plain VE x-prediction (`plain_*`): xhat = net(params, x_t/sqrt(1+t^2),
  log t) directly, the same Eq. 19 integrand from t_min, plus VDM's
  categorical decoder at t_min (xhat is not exact as t -> 0, so the t_min
  -> 0 limit of the decoder term is not available; the bound is
  -log p(x_0) <= E[-log p(x_0 | x_{t_min})] + int_{t_min}^inf t^-3 E||.||^2 dt).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from iclrjax.diffusion import likelihood as lik
from iclrjax.diffusion import schedules

Net = Callable[[Any, jax.Array, jax.Array], jax.Array]
# xhat_fn(x_t [B, D], t [B]) -> [B, D].
XhatFn = Callable[[jax.Array, jax.Array], jax.Array]


# -- grid -------------------------------------------------------------------------
def grid_spacing(levels: Any) -> float:
  """The smallest gap of a concrete grid (levels must not be traced)."""
  g = np.asarray(levels, np.float64)
  return float(np.min(np.diff(g)))


GATES = ('grid', 'absolute')


def gate_unit(levels: Any, gate: str = 'grid') -> float:
  """The length unit of QDPM's time gate u = exp(-(unit/t)^2).

  The paper writes u = exp(-1/t^2) for integer-valued data (grid spacing 1):
  the correction deltahat is switched on once the noise t is about one grid
  step. 'grid' keeps that in grid units on any data scale (unit = the grid
  spacing, so [-1, 1] data get the integer-data model); 'absolute' takes the
  formula literally (unit 1), which at spacing s << 1 leaves u < exp(-1/(3
  s)^2) for t < 3 s, i.e. no correction where the bits are decided (an
  ideal QDPM of a 17-level law then scores ~3.05 bits instead of its 2.05).
  """
  if gate == 'grid':
    return grid_spacing(levels)
  if gate == 'absolute':
    return 1.0
  raise ValueError(f"gate must be one of {GATES}, got {gate!r}.")


def resolve_unit(unit: float | None, levels: Any) -> float:
  """The gate's unit: `unit` if given, else the library default, the grid
  gate (`gate_unit(levels, 'grid')`, our deviation; unit=1.0 is the paper's
  exp(-1/t^2) as written). The default needs concrete levels."""
  if unit is not None:
    return unit
  try:
    return gate_unit(levels, 'grid')
  except (jax.errors.ConcretizationTypeError,
          jax.errors.TracerArrayConversionError) as e:
    raise ValueError('unit=None (the grid gate) needs concrete levels: '
                     'close over the levels instead of passing them traced '
                     'into jit (the default time range needs them too), or '
                     'pass unit= (qdpm.gate_unit(levels)) and t_range=') from e


def default_t_range(levels: Any) -> tuple[float, float]:
  """(t_lo, t_hi) = (min(s/100, 0.1), 1000 s K) for grid spacing s, K levels.

  t_lo: the integrand of Eq. 19 is below float32 resolution under it for
  QDPM (module docstring). t_hi: the bound's pilot range; the tail above it
  is added exactly anyway.
  """
  s, k = grid_spacing(levels), len(np.asarray(levels))
  return min(1e-2 * s, 0.1), 1e3 * s * k


def grid_index(x: jax.Array, levels: jax.Array) -> jax.Array:
  """Index of the nearest grid value, int32 [...]."""
  x = jnp.asarray(x)
  levels = jnp.reshape(jnp.asarray(levels), (1,) * x.ndim + (-1,))
  return jnp.argmin(jnp.abs(x[..., None] - levels), axis=-1).astype(jnp.int32)


def round_to_grid(x: jax.Array, levels: jax.Array) -> jax.Array:
  """round(x) := argmin_{y in grid} |x - y| per pixel (Prop. 2's xhat(x, 0))."""
  return jnp.asarray(levels)[grid_index(x, levels)]


def softround_bound_below(t: float, num_levels: int,
                          num_nodes: int = 80) -> np.ndarray:
  """The softround-only model's bound (Eq. 19 with deltahat = 0) below t,
  per pixel at each grid level: nats [K], t in grid steps.

  That model's xhat is the exact posterior mean under a uniform prior on
  the grid, so by I-MMSE its bound from 0 to t is, per pixel at level j,
  H(x_0 | x_t, x_0 = j) = E_eps[-log p(j | j + t eps)] (p the posterior of
  Eq. 17's softmax), here by Gauss-Hermite quadrature over eps. At t =
  `likelihood.u_mc_floor(1.0)` (0.2505 steps) it is what float32 u ~ U(0,1)
  draws cannot reach for ANY QDPM with the grid gate: below that floor
  u < 2^-23 gates the network off. 0.1758 bits at an interior level.
  """
  z, w = np.polynomial.hermite_e.hermegauss(num_nodes)
  w = w / w.sum()
  k = np.arange(num_levels, dtype=np.float64)
  x = k[:, None] + t * z[None, :]                       # [K, n]
  logits = -np.square(x[..., None] - k) / (2.0 * t * t)  # [K, n, K]
  log_z = scipy.special.logsumexp(logits, -1)            # [K, n]
  j = np.arange(num_levels)
  log_p = logits[j, :, j]                                 # [K, n]
  return -((log_p - log_z) * w).sum(-1)


def softround(x: jax.Array, t: jax.Array, levels: jax.Array,
              log_prior: jax.Array | None = None) -> jax.Array:
  """Posterior mean of x_0 given x = x_0 + t eps, x_0 on the grid (Eq. 17).

  sum_k softmax_k(log_prior_k - (g_k - x)^2 / (2 t^2)) g_k per pixel; with
  log_prior None (uniform) this is QDPM's softround. Stable for t in
  [0, inf] and |x| up to ~1e38: the logits are shifted by the nearest level
  g_j's, -((g_k - x)^2 - (g_j - x)^2) / (2t^2), and evaluated as
  -((g_k - g_j) / t) (((g_k + g_j) / 2 - x) / t), which neither overflows
  for huge x ~ t nor forms inf - inf; t is floored at 1e-18, so t = 0 gives
  round(x) and t = inf the (prior-weighted) grid mean.

  Args:
    x: [..., D].
    t: broadcastable to x (a scalar, or t[:, None] for a batch).
    levels: [K] grid values.
    log_prior: optional [K] log prior weights over the grid.

  Returns:
    [..., D].
  """
  x = jnp.asarray(x)
  g = jnp.asarray(levels, x.dtype)
  t = jnp.broadcast_to(jnp.asarray(t, x.dtype), x.shape)[..., None]
  t = jnp.maximum(t, 1e-18)
  g_j = g[grid_index(x, g)][..., None]
  g = jnp.reshape(g, (1,) * x.ndim + (-1,))
  logits = -((g - g_j) / t) * ((0.5 * (g + g_j) - x[..., None]) / t)
  if log_prior is not None:
    logits = logits + jnp.reshape(log_prior, g.shape)
  return jnp.sum(jax.nn.softmax(logits, axis=-1) * g, axis=-1)


def input_scale(t: jax.Array) -> jax.Array:
  """1 / sqrt(1 + t^2), without overflow for huge t."""
  t = jnp.asarray(t, jnp.float32)
  big = t > 1.0
  t_safe = jnp.where(big, t, 1.0)
  return jnp.where(big, jax.lax.rsqrt(1.0 + t_safe ** -2) / t_safe,
                   jax.lax.rsqrt(1.0 + jnp.square(jnp.where(big, 0.0, t))))


# -- QDPM ---------------------------------------------------------------------------
def xhat(net: Net, params: Any, x_t: jax.Array, t: jax.Array,
         levels: jax.Array, unit: float | None = None) -> jax.Array:
  """softround(x_t, t) + u net(params, x_t / sqrt(1+t^2), u) (Eq. 17), with
  u = exp(-(unit/t)^2) (`gate_unit`; the paper's exp(-1/t^2) is unit 1;
  None: the grid gate, `resolve_unit`).

  One example: x_t [D], t a scalar (vmap for batches; see `xhat_batch`).
  t = 0 gives round(x_t) exactly (u = 0); large t stays finite.
  """
  u = lik.u_of_t(t, resolve_unit(unit, levels))
  dh = net(params, x_t * input_scale(t), u)
  return softround(x_t, t, levels) + u * dh


def xhat_batch(net: Net, params: Any, levels: jax.Array,
               unit: float | None = None) -> XhatFn:
  """(x_t [B, D], t [B]) -> QDPM xhat [B, D]."""
  unit = resolve_unit(unit, levels)
  return jax.vmap(lambda x, t: xhat(net, params, x, t, levels, unit))


def _terms(net: Net, params: Any, x0: jax.Array, eps: jax.Array,
           t: jax.Array, u: jax.Array, levels: jax.Array):
  """(x_t, deltahat, delta) [B, D] at x_t = x0 + t eps, u = exp(-1/t^2)."""
  x_t = x0 + t[:, None] * eps
  dh = jax.vmap(net, in_axes=(None, 0, 0))(
      params, x_t * input_scale(t)[:, None], u)
  delta = x0 - softround(x_t, t[:, None], levels)
  return x_t, dh, delta


def _uniform_batch(key: jax.Array, batch: int, antithetic: bool) -> jax.Array:
  """U[0,1) per example; antithetic: (u0 + i/B) mod 1 (VDM's time sampling)."""
  if antithetic:
    u0 = jax.random.uniform(key, (), jnp.float32)
    return jnp.mod(u0 + jnp.arange(batch, dtype=jnp.float32) / batch, 1.0)
  return jax.random.uniform(key, (batch,), jnp.float32)


def loss(net: Net, params: Any, x0: jax.Array, key: jax.Array,
         levels: jax.Array, time_sampling: str = 'log_t',
         t_range: tuple[float, float] | None = None,
         antithetic: bool = True, unit: float | None = None
         ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """QDPM training loss (Eq. 22) per example: its theta part, and the rest.

  With the gate u = exp(-(a/t)^2), a = `unit` (the paper: a = 1):
  time_sampling='u' (paper): u ~ U(0,1), t = a/sqrt(-log u), t^-3 dt =
    du / (2 a^2 u), loss = deltahat . ((u/2) deltahat - delta) / a^2,
    const = ||delta||^2 / (2 a^2 u) (0 where u = 0, the limit); loss + const
    = ||x0 - xhat||^2 / (2 a^2 u) is an unbiased one-draw estimate of the
    bound (Eq. 19).
  time_sampling='log_t': log t ~ U(log t_lo, log t_hi), W = (log t_hi -
    log t_lo) / t^2, loss = W (u^2 ||deltahat||^2 - 2u deltahat . delta),
    const = W ||delta||^2; loss + const = W ||x0 - xhat||^2 is unbiased for
    the bound truncated to [t_lo, t_hi].
  Either way the theta-gradient of `loss` equals that of loss + const.

  Args:
    net, params: the denoiser deltahat.
    x0: [B, D] grid values.
    key: PRNG key.
    levels: [K] grid.
    time_sampling: 'u' or 'log_t'.
    t_range: (t_lo, t_hi) for 'log_t'; default `default_t_range(levels)`.
    antithetic: stratify the B time draws over the batch ((u0 + i/B) mod 1
      in u or in the log-t band); each draw stays marginally uniform.
    unit: the gate's length unit (`gate_unit`; None: the grid gate).

  Returns:
    (loss [B], aux) with aux = {'const': [B], 'bound_term': loss + const,
    't': [B], 'x_t': [B, D]} (nats; x_t the noisy input used).
  """
  unit = resolve_unit(unit, levels)
  batch = x0.shape[0]
  k_t, k_eps = jax.random.split(key)
  v = _uniform_batch(k_t, batch, antithetic)
  eps = jax.random.normal(k_eps, x0.shape)
  if time_sampling == 'u':
    u = v
    t = lik.t_of_u(u, unit)
    x_t, dh, delta = _terms(net, params, x0, eps, t, u, levels)
    theta = jnp.sum(dh * (0.5 * u[:, None] * dh - delta), axis=-1) / unit**2
    pos = u > 0
    const = jnp.where(pos, jnp.sum(jnp.square(delta), -1)
                      / (2.0 * unit**2 * jnp.where(pos, u, 1.0)), 0.0)
  elif time_sampling == 'log_t':
    t_lo, t_hi = t_range or default_t_range(levels)
    a, b = jnp.log(t_lo), jnp.log(t_hi)
    t = jnp.exp(a + (b - a) * v)
    u = lik.u_of_t(t, unit)
    x_t, dh, delta = _terms(net, params, x0, eps, t, u, levels)
    w = (b - a) / jnp.square(t)
    udh = u[:, None] * dh
    theta = w * jnp.sum(udh * (udh - 2.0 * delta), axis=-1)
    const = w * jnp.sum(jnp.square(delta), axis=-1)
  else:
    raise ValueError(f"time_sampling must be 'u' or 'log_t', got "
                     f'{time_sampling!r}.')
  return theta, {'const': const, 'bound_term': theta + const, 't': t,
                 'x_t': x_t}


def sq_err_fn(xhat_fn: XhatFn, x0: jax.Array) -> lik.Integrand:
  """(key, t [B]) -> ||x0 - xhat(x0 + t eps, t)||^2 [B] with fresh eps."""
  def e(key, t):
    eps = jax.random.normal(key, x0.shape)
    x_t = x0 + t[:, None] * eps
    return jnp.sum(jnp.square(x0 - xhat_fn(x_t, t)), axis=-1)
  return e


def ve_bound_quadrature(xhat_fn: XhatFn, x0: jax.Array, key: jax.Array,
                        t_lo: float, t_hi: float, num_strata: int = 256,
                        num_tail: int = 16, strata_per_call: int | None = None
                        ) -> lik.Estimate:
  """int_{t_lo}^inf t^-3 E||x0 - xhat(x0 + t eps, t)||^2 dt per example.

  Stratified in log t on [t_lo, t_hi] (integrand e(t) t^-2 per dlog t) plus
  the exact tail above t_hi (`likelihood.ve_upper_tail`, num_tail draws).
  For any denoiser; the part below t_lo is the caller's (QDPM: negligible,
  plain VE: a decoder). t_lo and t_hi may be traced.
  """
  e = sq_err_fn(xhat_fn, x0)
  batch = x0.shape[0]

  def g(k, tau):
    return e(k, jnp.exp(tau)) * jnp.exp(-2.0 * tau)

  k_q, k_tail = jax.random.split(key)
  body = lik.stratified(g, k_q, jnp.log(t_lo), jnp.log(t_hi), num_strata,
                        batch, strata_per_call)
  return body + lik.ve_upper_tail(e, k_tail, t_hi, num_tail, batch)


def bound_quadrature(net: Net, params: Any, x0: jax.Array, key: jax.Array,
                     levels: jax.Array, num_strata: int = 256,
                     t_range: tuple[float, float] | None = None,
                     num_tail: int = 16, strata_per_call: int | None = None,
                     unit: float | None = None) -> lik.Estimate:
  """The full QDPM bound (Eq. 19), estimator (b): nats per example [B]."""
  t_lo, t_hi = t_range or default_t_range(levels)
  return ve_bound_quadrature(xhat_batch(net, params, levels, unit), x0, key,
                             t_lo, t_hi, num_strata, num_tail,
                             strata_per_call)


def bound_u_mc(net: Net, params: Any, x0: jax.Array, key: jax.Array,
               levels: jax.Array, num_draws: int = 256,
               draws_per_call: int | None = None, unit: float | None = None,
               dtype: Any = jnp.float32) -> lik.Estimate:
  """The QDPM bound (Eq. 19) by the paper's u ~ U(0,1) MC, estimator (a)
  (u drawn in `dtype`, see `likelihood.u_uniform_mc`). In float32 the
  smallest non-zero u is 2^-23, so it estimates the bound above
  t = unit / sqrt(23 ln 2) ~ 0.2505 unit only (`u_mc_floor`): the mass
  below is lost, not rare."""
  unit = resolve_unit(unit, levels)
  e = sq_err_fn(xhat_batch(net, params, levels, unit), x0)
  return lik.u_uniform_mc(e, key, num_draws, x0.shape[0], draws_per_call,
                          unit, dtype)


# -- samplers (VE) ---------------------------------------------------------------------
def time_grid(num_steps: int, t_max: float, kind: str = 'u',
              t_min: float | None = None, unit: float | None = None
              ) -> np.ndarray:
  """Decreasing times t_0 = t_max > ... > t_{N-1} > t_N = 0, float32 [N+1].

  kind 'u' (paper): u_i = u_max (N - i) / N with u_max = exp(-(a/t_max)^2),
  t_i = a/sqrt(-log u_i) (a = `unit`, the gate's: required, e.g.
  `gate_unit(levels)`), computed in float64 (t_0 is set to t_max exactly).
  kind 'log_t': t_0..t_{N-1} geometric from t_max to t_min, then 0.
  """
  if num_steps < 1:
    raise ValueError(f'num_steps must be >= 1, got {num_steps}.')
  i = np.arange(num_steps + 1, dtype=np.float64)
  if kind == 'u':
    if unit is None:
      raise ValueError("time_grid(kind='u') needs the gate's unit (e.g. "
                       'unit=qdpm.gate_unit(levels))')
    u = np.exp(-(unit / t_max) ** 2) * (num_steps - i) / num_steps
    with np.errstate(divide='ignore'):
      t = np.where(u > 0, unit / np.sqrt(-np.log(np.where(u > 0, u, 0.5))),
                   0.0)
    t[0] = t_max
  elif kind == 'log_t':
    if t_min is None or not 0 < t_min < t_max:
      raise ValueError('log_t grid needs 0 < t_min < t_max.')
    if num_steps == 1:
      t = np.array([t_max, 0.0])
    else:
      t = np.append(np.geomspace(t_max, t_min, num_steps), 0.0)
  else:
    raise ValueError(f"kind must be 'u' or 'log_t', got {kind!r}.")
  return t.astype(np.float32)


def solver_step(xhat_fn: XhatFn, x_s: jax.Array, s: jax.Array, t: jax.Array,
                key: jax.Array, order: int = 1) -> jax.Array:
  """One reverse step s -> t (0 < t < s) of QDPM-Solver-1 or -2, [B, D].

  Solver-1: x_t = r x_s + (1 - r) xhat(x_s, s) + t sqrt(1 - r) z, r = t^2/s^2.
  Solver-2 (ours; the paper's is only described as RK-style): by variation
  of constants in rho = t^2, the exact transition is
  x_t = r x_s + (1/lambda_t) int_{lambda_s}^{lambda_t} xhat dlambda + noise
  with lambda = t^-2 (the SNR): xhat is averaged uniformly in SNR. Solver-1
  freezes xhat at s; Solver-2 uses the trapezoidal rule,
  (xhat(x_s, s) + xhat(x~_t, t)) / 2, with x~_t the Solver-1 predictor
  (stochastic Heun; the predictor and corrector share the noise z). 2 NFE.
  """
  r = jnp.square(t / s)
  z = jax.random.normal(key, x_s.shape)
  bt = jnp.full((x_s.shape[0],), 1.0, jnp.float32)
  m1 = xhat_fn(x_s, s * bt)
  noise = t * jnp.sqrt(1.0 - r) * z
  x_t = r * x_s + (1.0 - r) * m1 + noise
  if order == 1:
    return x_t
  if order != 2:
    raise ValueError(f'order must be 1 or 2, got {order}.')
  m2 = xhat_fn(x_t, t * bt)
  return r * x_s + (1.0 - r) * 0.5 * (m1 + m2) + noise


def ve_sample(xhat_fn: XhatFn, key: jax.Array, num_samples: int, dim: int,
              levels: jax.Array, ts: np.ndarray, order: int = 1,
              return_last: bool = False) -> Any:
  """Reverse VE sampling on the time grid ts (t_0 > ... > t_N = 0), [B, D].

  x_{t_0} ~ N(grid mean, t_0^2 I) (the VE prior; its KL to q(x_{t_0} | x_0)
  is ||x_0 - mean||^2 / (2 t_0^2) -> 0). Steps t_i -> t_{i+1} > 0 use
  `solver_step`; the last step to t = 0 is Solver-1's with zero variance,
  x_0' = xhat(x_s, s), followed by the model's t -> 0 limit xhat(., 0+) =
  round (Prop. 2): the samples lie exactly on the grid. With
  `return_last`, returns (samples, x_0') with x_0' the prediction before
  that rounding: its distance to the grid is what the model achieved (the
  samples are on the grid by construction).
  """
  levels = jnp.asarray(levels, jnp.float32)
  ts = np.asarray(ts, np.float32)
  k0, k_steps = jax.random.split(key)
  x = levels.mean() + ts[0] * jax.random.normal(k0, (num_samples, dim))
  pairs = jnp.stack([ts[:-2], ts[1:-1]], axis=-1)  # steps to t > 0

  def body(x, args):
    (s, t), i = args
    return solver_step(xhat_fn, x, s, t, jax.random.fold_in(k_steps, i),
                       order), None

  x, _ = jax.lax.scan(body, x, (pairs, jnp.arange(pairs.shape[0])))
  s_last = jnp.full((num_samples,), ts[-2], jnp.float32)
  x0 = xhat_fn(x, s_last)
  out = round_to_grid(x0, levels)
  return (out, x0) if return_last else out


def sample(net: Net, params: Any, key: jax.Array, num_samples: int, dim: int,
           levels: jax.Array, num_steps: int = 64, order: int = 1,
           t_max: float | None = None, kind: str = 'u',
           t_min: float | None = None, unit: float | None = None,
           return_last: bool = False) -> Any:
  """QDPM-Solver-1/2 samples [num_samples, dim], exactly on the grid.

  NFE: num_steps (order 1), 2 num_steps - 1 (order 2). t_max default:
  100 x the grid range. kind 'u' is the paper's grid; its last non-zero time
  is unit/sqrt(log N) (0.49 unit at N = 64): with unit 1 ('absolute' gate)
  the final rounding of the posterior mean is coarse when the grid spacing
  is below ~1 (measured with the exact denoiser of a 5-level D = 1
  distribution, N = 128: total variation 0.012 at spacing 1 but 0.14 at
  spacing 0.5); unit = spacing ('grid' gate) makes it scale-free.
  kind 'log_t' (geometric down to t_min, default 0.05 x spacing) is
  scale-free: TV 0.045 (Solver-1) / 0.008 (Solver-2) at N = 32.
  """
  g = np.asarray(levels, np.float64)
  if t_max is None:
    t_max = 100.0 * float(g.max() - g.min())
  if kind == 'log_t' and t_min is None:
    t_min = 0.05 * grid_spacing(levels)
  unit = resolve_unit(unit, levels)
  ts = time_grid(num_steps, t_max, kind, t_min, unit)
  return ve_sample(xhat_batch(net, params, levels, unit), key, num_samples,
                   dim, levels, ts, order, return_last)


# -- baseline: plain VE x-prediction ------------------------------------------------
def plain_t_min(levels: Any) -> float:
  """Default decoder time of the plain VE model: 0.2 x grid spacing.

  Then a pixel is mis-decoded only if |eps| > 2.5 (~1.2%); VDM's CIFAR-10
  gamma_min = -13.3 gives sigma_0 / spacing ~ 0.17 at 256 levels.
  """
  return 0.2 * grid_spacing(levels)


def plain_xhat_batch(net: Net, params: Any) -> XhatFn:
  """(x_t [B, D], t [B]) -> net(params, x_t / sqrt(1 + t^2), log t)."""
  return jax.vmap(lambda x, t: net(params, x * input_scale(t), jnp.log(t)))


def plain_loss(net: Net, params: Any, x0: jax.Array, key: jax.Array,
               levels: jax.Array, t_min: float | None = None,
               t_hi: float | None = None, antithetic: bool = True
               ) -> jax.Array:
  """W ||x0 - xhat||^2 with log t ~ U(log t_min, log t_hi), W = (log t_hi -
  log t_min) t^-2: unbiased for int_{t_min}^{t_hi} t^-3 E||.||^2 dt, [B].

  The decoder term at t_min has no parameters, so this is the whole
  theta-dependent part of the plain model's NLL bound.
  """
  t_min = t_min or plain_t_min(levels)
  t_hi = t_hi or default_t_range(levels)[1]
  k_t, k_eps = jax.random.split(key)
  a, b = jnp.log(t_min), jnp.log(t_hi)
  t = jnp.exp(a + (b - a) * _uniform_batch(k_t, x0.shape[0], antithetic))
  e = sq_err_fn(plain_xhat_batch(net, params), x0)(k_eps, t)
  return (b - a) * e / jnp.square(t)


def decoder_term(x0: jax.Array, key: jax.Array, levels: jax.Array,
                 t_min: float, num_draws: int = 4) -> lik.Estimate:
  """E_eps[-log p(x0 | x0 + t_min eps)] with VDM's categorical decoder."""
  idx = grid_index(x0, levels)
  levels = jnp.asarray(levels, jnp.float32)
  log_var = 2.0 * jnp.log(t_min)

  def one(k):
    z = x0 + t_min * jax.random.normal(k, x0.shape)
    return lik.decoder_nll(idx, z, log_var, levels)
  return lik.mc_mean(one, key, num_draws)


def plain_nll(net: Net, params: Any, x0: jax.Array, key: jax.Array,
              levels: jax.Array, t_min: float | None = None,
              num_strata: int = 256, t_hi: float | None = None,
              num_tail: int = 16, num_recon: int = 4,
              strata_per_call: int | None = None
              ) -> tuple[lik.Estimate, dict[str, lik.Estimate]]:
  """NLL bound of the plain VE x-prediction model, nats per example.

  decoder at t_min + int_{t_min}^{t_hi} (stratified in log t) + exact tail.

  Returns:
    (total, {'recon', 'diffusion'}).
  """
  t_min = t_min or plain_t_min(levels)
  t_hi = t_hi or default_t_range(levels)[1]
  k_r, k_d = jax.random.split(key)
  recon = decoder_term(x0, k_r, levels, t_min, num_recon)
  diff = ve_bound_quadrature(plain_xhat_batch(net, params), x0, k_d, t_min,
                             t_hi, num_strata, num_tail, strata_per_call)
  return recon + diff, {'recon': recon, 'diffusion': diff}


def plain_sample(net: Net, params: Any, key: jax.Array, num_samples: int,
                 dim: int, levels: jax.Array, num_steps: int = 64,
                 order: int = 1, t_max: float | None = None,
                 t_min: float | None = None) -> jax.Array:
  """Samples of the plain model: the same solver on a log-t grid down to
  t_min, then the argmax of the decoder at t_min applied to xhat (= round)."""
  g = np.asarray(levels, np.float64)
  t_max = t_max or 100.0 * float(g.max() - g.min())
  ts = time_grid(num_steps, t_max, 'log_t', t_min or plain_t_min(levels))
  return ve_sample(plain_xhat_batch(net, params), key, num_samples, dim,
                   levels, ts, order)


# -- baseline: VDM (VP, learnable scalar gamma) ---------------------------------------
def vdm_init(net_params: Any, gamma_min: float = schedules.GAMMA_MIN_INIT,
             gamma_max: float = schedules.GAMMA_MAX_INIT) -> dict[str, Any]:
  """VDM parameters {'net': net_params, 'gamma': {'b', 'w'}}."""
  return {'net': net_params,
          'gamma': schedules.vp_init(gamma_min, gamma_max)}


def vdm_cond(gamma: jax.Array) -> jax.Array:
  """The network's conditioning: gamma mapped to [0, 1] by the *initial*
  endpoints, as VDM's ScoreUNet does with config.gamma_min/max."""
  lo, hi = schedules.GAMMA_MIN_INIT, schedules.GAMMA_MAX_INIT
  return (gamma - lo) / (hi - lo)


def vdm_eps_hat(net: Net, net_params: Any, z: jax.Array, gamma: jax.Array,
                skip: bool = True) -> jax.Array:
  """epshat [B, D] = net(z_t, cond(gamma_t)) (+ z_t if skip: VDM's ScoreUNet
  adds its input, `eps_pred += z`)."""
  out = jax.vmap(net, in_axes=(None, 0, 0))(net_params, z, vdm_cond(gamma))
  return out + z if skip else out


def _gamma_fn(params: dict[str, Any]) -> schedules.GammaFn:
  return lambda t: schedules.vp_gamma(params['gamma'], t)


def _vdm_recon(params, x0, idx, key, levels):
  g0 = _gamma_fn(params)(0.0)
  z0 = x0 + jnp.exp(0.5 * g0) * jax.random.normal(key, x0.shape)  # z_0/alpha_0
  return lik.decoder_nll(idx, z0, g0, levels)


def _vdm_diff(net, params, x0, key, t, skip):
  gamma_fn = _gamma_fn(params)
  g_t = gamma_fn(t)
  eps = jax.random.normal(key, x0.shape)
  z_t = schedules.vp_diffuse(x0, eps, g_t[:, None])
  eps_hat = vdm_eps_hat(net, params['net'], z_t, g_t, skip)
  return lik.vp_diffusion_loss(gamma_fn, t, eps, eps_hat)


def vdm_loss(net: Net, params: dict[str, Any], x0: jax.Array, key: jax.Array,
             levels: jax.Array, antithetic: bool = True, skip: bool = True
             ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """VDM's continuous-time VLB per example (nats): recon + prior KL + diffusion.

  recon = -log p(x | z_0) with the categorical decoder, prior KL at t = 1,
  diffusion 0.5 gamma'(t) ||eps - epshat||^2 with t ~ U(0, 1) (antithetic
  over the batch by default, as VDM's config). Gradients reach both the
  network and gamma's endpoints.

  Returns:
    (total [B], {'recon', 'klz', 'diff'} each [B]).
  """
  idx = grid_index(x0, levels)
  levels = jnp.asarray(levels, jnp.float32)
  k_r, k_t, k_d = jax.random.split(key, 3)
  recon = _vdm_recon(params, x0, idx, k_r, levels)
  klz = lik.vp_prior_kl(x0, _gamma_fn(params)(1.0))
  t = _uniform_batch(k_t, x0.shape[0], antithetic)
  diff = _vdm_diff(net, params, x0, k_d, t, skip)
  return recon + klz + diff, {'recon': recon, 'klz': klz, 'diff': diff}


def vdm_nll(net: Net, params: dict[str, Any], x0: jax.Array, key: jax.Array,
            levels: jax.Array, num_strata: int = 256, num_recon: int = 4,
            skip: bool = True, strata_per_call: int | None = None
            ) -> tuple[lik.Estimate, dict[str, lik.Estimate]]:
  """VDM NLL bound per example (nats): recon (num_recon draws) + exact prior
  KL + diffusion stratified over t in [0, 1] (uniform in t = uniform in
  log-SNR for the linear gamma; the counterpart of QDPM's log-t quadrature).

  Returns:
    (total, {'recon', 'klz', 'diffusion'}).
  """
  idx = grid_index(x0, levels)
  levels = jnp.asarray(levels, jnp.float32)
  k_r, k_d = jax.random.split(key)
  recon = lik.mc_mean(lambda k: _vdm_recon(params, x0, idx, k, levels), k_r,
                      num_recon)
  kl = lik.vp_prior_kl(x0, _gamma_fn(params)(1.0))
  klz = lik.Estimate(kl, jnp.zeros_like(kl))
  diff = lik.stratified(
      lambda k, t: _vdm_diff(net, params, x0, k, t, skip), k_d, 0.0, 1.0,
      num_strata, x0.shape[0], strata_per_call)
  return recon + klz + diff, {'recon': recon, 'klz': klz, 'diffusion': diff}


def vdm_sample(net: Net, params: dict[str, Any], key: jax.Array,
               num_samples: int, dim: int, levels: jax.Array,
               num_steps: int = 256, skip: bool = True
               ) -> tuple[jax.Array, jax.Array]:
  """Ancestral sampling with T steps (VDM `sample`), then decoding.

  z_1 ~ N(0, I); for t = i/T -> s = (i-1)/T:
  z_s = (alpha_s/alpha_t)(z_t - sigma_t c epshat) + sqrt(sigma_s^2 c) z with
  c = 1 - SNR_t/SNR_s = -expm1(gamma_s - gamma_t), the mean and variance of
  q(z_s | z_t, x = (z_t - sigma_t epshat)/alpha_t).

  Returns:
    (x [B, D] = argmax of the categorical decoder at z_0 (grid values),
     z_0 / alpha_0 [B, D], the continuous output before decoding).
  """
  levels = jnp.asarray(levels, jnp.float32)
  gamma_fn = _gamma_fn(params)
  k0, k_steps = jax.random.split(key)
  z = jax.random.normal(k0, (num_samples, dim))

  def body(z, i):
    t = (num_steps - i) / num_steps
    s = (num_steps - i - 1) / num_steps
    g_t, g_s = gamma_fn(t), gamma_fn(s)
    eps_hat = vdm_eps_hat(net, params['net'], z,
                          jnp.full((num_samples,), g_t), skip)
    c = -jnp.expm1(g_s - g_t)
    alpha_s, sigma_s = schedules.vp_alpha_sigma(g_s)
    alpha_t, sigma_t = schedules.vp_alpha_sigma(g_t)
    noise = jax.random.normal(jax.random.fold_in(k_steps, i), z.shape)
    z = (alpha_s / alpha_t) * (z - sigma_t * c * eps_hat) + jnp.sqrt(
        jnp.square(sigma_s) * c) * noise
    return z, None

  z, _ = jax.lax.scan(body, z, jnp.arange(num_steps))
  g0 = gamma_fn(0.0)
  z0 = z / schedules.vp_alpha_sigma(g0)[0]
  logp = lik.grid_decoder_logprobs(z0, g0, levels)
  return levels[jnp.argmax(logp, axis=-1)], z0
