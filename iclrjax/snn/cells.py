"""Spiking neuron cells as pure step functions for `jax.lax.scan`.

Every cell sees a presynaptic spike vector s^t (the layer's input, with the
layer's own previous spikes appended in a recurrent layer) and keeps the
synaptic trace of the Dynamic Gated Neuron paper (arXiv 2509.03281, eq. for
D): a current-based synapse with time constant tau_s,

  D^t = exp(-dt / tau_s) D^{t-1} + s^t,      I^t = dt * D^t W,

so that all cells receive the same input current and differ only in their
membrane dynamics (tau_s = 0 gives D^t = s^t, unfiltered input). With
beta = 1 - g_l dt, theta the threshold, xi^t optional Gaussian current noise
(evaluation-time perturbation) and z = H(V - threshold) the spike (exact
Heaviside forward, surrogate gradient backward, `snn.surrogate.spike`):

  LIF   V^t = beta V^{t-1} + I^t + xi^t - theta z^{t-1}
  PLIF  as LIF with a learnable decay per neuron, beta_j = sigmoid(a_j)
        (Fang et al. 2021), initialised at 1 - g_l dt
  ALIF  adaptive threshold (Bellec et al. 2018, LSNN):
        b^t = gamma b^{t-1} + (1 - gamma) z^{t-1},  A^t = theta + beta_a b^t,
        V^t = beta V^{t-1} + I^t + xi^t - A^{t-1} z^{t-1},  z^t = H(V^t - A^t)
  DGN   the paper's dynamic gated neuron (its discrete update, Sec. 3):
        rho^t = phi(1 - g_l dt - dt * D^t C)
        V^t = rho^t V^{t-1} + dt * D^t W + xi^t - theta z^{t-1}
        z^t = H(V^t - theta)
        with C (N_in x N_out) the conductance couplings and phi keeping the
        decay a valid forget gate.

The DGN's C is a conductance coupling: in the paper's continuous model
dg_i/dt = -g_i / tau_s + C_i sum_j delta(t - t_i^j), the synaptic conductance
g_i = C_i D_i is nonnegative, so C >= 0. We train an unconstrained c_raw
with C = softplus(k c_raw) / k (`conductance`), whose gradient never
vanishes.
With C >= 0 and spike inputs (D >= 0) the argument of phi is at most
beta <= 1, so only the lower end of the gate needs a bound; a hard clip at 0
would give zero gradient to every C below it. phi (`gate`) is the identity
on [rho_floor, inf) and the rational floor rho_floor^2 / (2 rho_floor - x)
below it: C^1, positive, strictly increasing with a slope that decays only
as 1 / x^2 (an exponential floor's gradient underflows under strong drive),
and equal to the paper's update wherever that is a valid decay in
[rho_floor, 1].

All resets are soft (subtract the threshold), one step delayed, as in the
paper's DGN update. With C = 0 (c_raw = -inf), DGN is LIF exactly
(rho = beta).

A cell is a frozen dataclass of static hyperparameters with
`init_params(key, n_in, n_out)`, `init_state(n_out)` and
`step(params, state, s, xi) -> (state, (z, v))`; `run_layer` scans a layer
over time.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from iclrjax.snn import surrogate

CELLS = ('lif', 'plif', 'alif', 'dgn')
# Parameters with one row per presynaptic line (split in a recurrent layer).
_SYNAPSES = ('w', 'c_raw')
Params = dict[str, jax.Array]


def conductance(c_raw: jax.Array, sharpness: float = 1.0) -> jax.Array:
  """C = softplus(k c_raw) / k >= 0 (k = sharpness), the DGN's couplings.

  dC / dc_raw = sigmoid(k c_raw) is never 0; for k c_raw >> 1, C = c_raw, so
  a large k makes C move with c_raw at the scale of typical couplings
  (~c_init / N_in) instead of in log space.
  """
  return jax.nn.softplus(sharpness * c_raw) / sharpness


def inverse_conductance(c: jax.Array, sharpness: float = 1.0) -> jax.Array:
  """c_raw with conductance(c_raw, sharpness) = c (c >= 0; 0 gives -inf)."""
  kc = sharpness * jnp.asarray(c, jnp.float32)
  return (kc + jnp.log(-jnp.expm1(-kc))) / sharpness


def gate(x: jax.Array, floor: float) -> jax.Array:
  """phi(x): x for x >= floor, floor^2 / (2 floor - x) below.

  Continuous with a continuous, strictly positive derivative (1 at the
  floor from both sides, (phi / floor)^2 below), so d rho / d C never
  vanishes, unlike clip(x, 0, 1) (zero below 0).
  """
  below = floor**2 / (2.0 * floor - jnp.minimum(x, floor))
  return jnp.where(x >= floor, x, below)


class State(NamedTuple):
  """Per-layer recurrent state (one example; vmap for batches).

  The trace D [N_in] enters the dynamics only through D W and D C, and the
  trace is linear in the spikes, so a cell carries the traces of the
  projected inputs (N_out each): dw^t = D^t W and dc^t = D^t C exactly.
  """
  dw: jax.Array  # [N_out] D^t W
  dc: jax.Array  # [N_out] D^t C (DGN; zeros otherwise)
  v: jax.Array   # [N_out] membrane potential V
  z: jax.Array   # [N_out] spikes of the previous step
  b: jax.Array   # [N_out] threshold adaptation (ALIF; zeros otherwise)


@dataclasses.dataclass(frozen=True)
class Cell:
  """A neuron type with its static hyperparameters.

  Attributes:
    kind: 'lif', 'plif', 'alif' or 'dgn'.
    dt: time step.
    g_l: leak conductance; beta = 1 - g_l dt.
    tau_syn: synaptic trace time constant tau_s (0: no filtering).
    theta: firing threshold.
    surrogate: surrogate-gradient kind (`surrogate.SURROGATES`).
    surrogate_scale: its slope parameter.
    w_gain: W ~ N(0, w_gain^2 / N_in).
    c_init: DGN: C ~ U(0, 2 c_init / N_in) (mean total coupling c_init).
    c_sharpness: DGN: k of C = softplus(k c_raw) / k (`conductance`);
      None (default): N_in / c_init per layer (`sharpness`), the kink at
      the initial coupling scale, where Adam moves C in its own units (k = 1
      learns C in log space and barely moves it: `configs/dgn_snn.py`).
    rho_floor: DGN: the gate phi is the identity above it (`gate`).
    tau_adapt: ALIF: adaptation time constant; gamma = exp(-dt / tau_adapt).
    beta_adapt: ALIF: threshold increment per unit of adaptation.
  """
  kind: str = 'lif'
  dt: float = 1.0
  g_l: float = 0.1
  tau_syn: float = 5.0
  theta: float = 1.0
  surrogate: str = 'fast_sigmoid'
  surrogate_scale: float = 10.0
  w_gain: float = 1.0
  c_init: float = 0.1
  c_sharpness: float | None = None
  rho_floor: float = 0.05
  tau_adapt: float = 20.0
  beta_adapt: float = 1.0

  def __post_init__(self):
    if self.kind not in CELLS:
      raise ValueError(f'cell kind must be one of {CELLS}, got {self.kind!r}')
    if self.surrogate not in surrogate.SURROGATES:
      raise ValueError(f'surrogate must be one of {surrogate.SURROGATES}, '
                       f'got {self.surrogate!r}')
    if not 0.0 <= 1.0 - self.g_l * self.dt <= 1.0:
      raise ValueError(f'need 0 <= 1 - g_l*dt <= 1, got g_l={self.g_l}, '
                       f'dt={self.dt}')
    if (self.kind == 'dgn' and self.c_sharpness is None
        and not self.c_init > 0.0):
      raise ValueError(f'c_sharpness=None (N_in / c_init) needs c_init > 0, '
                       f'got {self.c_init}: set c_sharpness')
    if self.c_sharpness is not None and not self.c_sharpness > 0.0:
      raise ValueError(f'need c_sharpness > 0 (or None: N_in / c_init), '
                       f'got {self.c_sharpness}')
    if not 0.0 < self.rho_floor < 1.0:
      raise ValueError(f'need 0 < rho_floor < 1, got {self.rho_floor}')

  def sharpness(self, n_in: int) -> float:
    """DGN's k for a layer with n_in presynaptic lines (rows of c_raw):
    c_sharpness, or N_in / c_init when it is None."""
    if self.c_sharpness is not None:
      return self.c_sharpness
    return n_in / self.c_init

  @property
  def beta(self) -> float:
    return 1.0 - self.g_l * self.dt

  @property
  def alpha_syn(self) -> float:
    return math.exp(-self.dt / self.tau_syn) if self.tau_syn > 0 else 0.0

  @property
  def gamma(self) -> float:
    return math.exp(-self.dt / self.tau_adapt)

  def init_params(self, key: jax.Array, n_in: int, n_out: int) -> Params:
    kw, kc = jax.random.split(key)
    p = {'w': self.w_gain / math.sqrt(n_in)
              * jax.random.normal(kw, (n_in, n_out))}
    if self.kind == 'dgn':
      # C in (0, 2 c_init / N_in]: 1 - U[0, 1) is never 0, so c_raw is finite.
      c = (2.0 * self.c_init / n_in) * (
          1.0 - jax.random.uniform(kc, (n_in, n_out)))
      p['c_raw'] = inverse_conductance(c, self.sharpness(n_in))
    if self.kind == 'plif':
      b = min(max(self.beta, 1e-4), 1 - 1e-4)
      p['a'] = jnp.full((n_out,), math.log(b / (1.0 - b)))
    return p

  def decay(self, dc: jax.Array) -> jax.Array:
    """DGN's gate rho^t = phi(1 - g_l dt - dt D^t C) from dc = D^t C."""
    return gate(1.0 - self.g_l * self.dt - self.dt * dc, self.rho_floor)

  def membrane_decay(self, params: Params, dc: jax.Array
                     ) -> jax.Array | float:
    """The decay of V at this step: DGN rho^t (`decay`), PLIF
    sigmoid(a), LIF / ALIF beta."""
    if self.kind == 'dgn':
      return self.decay(dc)
    if self.kind == 'plif':
      return jax.nn.sigmoid(params['a'])
    return self.beta

  def init_state(self, n_out: int, dtype: Any = jnp.float32) -> State:
    zero = jnp.zeros((n_out,), dtype)
    return State(zero, zero, zero, zero, zero)

  def project(self, params: Params, s: jax.Array, n_pre: int | None = None
              ) -> tuple[jax.Array, jax.Array]:
    """Presynaptic spikes s [..., N_in] -> (s W, s C) [..., N_out].

    n_pre: the layer's presynaptic lines, which set DGN's default
    sharpness (`sharpness`); None: the rows of params['c_raw'] (pass the
    whole layer's when params are a slice, as `run_layer` does).
    """
    if self.kind == 'dgn':
      k = self.sharpness(params['c_raw'].shape[0] if n_pre is None else n_pre)
      sc = s @ conductance(params['c_raw'], k)
    else:
      sc = jnp.zeros(s.shape[:-1] + params['w'].shape[1:], s.dtype)
    return s @ params['w'], sc

  def step_projected(self, params: Params, state: State, iw: jax.Array,
                     ic: jax.Array, xi: jax.Array | float = 0.0
                     ) -> tuple[State, tuple[jax.Array, jax.Array]]:
    """One time step from the projected input spikes (iw, ic) = (s W, s C).

    Returns the new state and (z^t, V^t).
    """
    dw = self.alpha_syn * state.dw + iw
    dc = self.alpha_syn * state.dc + ic
    current = self.dt * dw
    rho = self.membrane_decay(params, dc)
    if self.kind == 'alif':
      a_prev = self.theta + self.beta_adapt * state.b
      v = rho * state.v + current + xi - a_prev * state.z
      b = self.gamma * state.b + (1.0 - self.gamma) * state.z
      threshold = self.theta + self.beta_adapt * b
    else:
      v = rho * state.v + current + xi - self.theta * state.z
      b = state.b
      threshold = self.theta
    z = surrogate.spike(v - threshold, self.surrogate, self.surrogate_scale)
    return State(dw, dc, v, z, b), (z, v)

  def step(self, params: Params, state: State, s: jax.Array,
           xi: jax.Array | float = 0.0
           ) -> tuple[State, tuple[jax.Array, jax.Array]]:
    """One time step from presynaptic spikes s [N_in]; xi current noise."""
    iw, ic = self.project(params, s)
    return self.step_projected(params, state, iw, ic, xi)


def run_layer(cell: Cell, params: Params, spikes: jax.Array,
              noise: jax.Array | None = None, recurrent: bool = False,
              state: State | None = None, with_decay: bool = False
              ) -> tuple[jax.Array, ...]:
  """Scans one layer over time: spikes [T, N_in] -> (z, v), each [T, N_out].

  The input projections of all T steps are one matmul outside the scan. In
  a recurrent layer the presynaptic vector is [s^t, z^{t-1}]: `params['w']`
  (and 'c_raw') have N_in + N_out rows, the last N_out recurrent. With
  `with_decay` it also returns the membrane decay of every step [T, N_out]
  (DGN: rho^t; PLIF: sigmoid(a); LIF / ALIF: beta).
  """
  n_in = spikes.shape[-1]
  n_out = params['w'].shape[1]
  if noise is None:
    noise = jnp.zeros((spikes.shape[0], n_out), spikes.dtype)
  if state is None:
    state = cell.init_state(n_out, spikes.dtype)
  p_in = {k: (v[:n_in] if k in _SYNAPSES else v) for k, v in params.items()}
  p_rec = {k: v[n_in:] for k, v in params.items() if k in _SYNAPSES}
  n_pre = params['w'].shape[0]   # the layer's lines: DGN's default k
  iw, ic = cell.project(p_in, spikes, n_pre)

  def body(st, inp):
    iw_t, ic_t, xi = inp
    if recurrent:
      rw, rc = cell.project(p_rec, st.z, n_pre)
      iw_t, ic_t = iw_t + rw, ic_t + rc
    st, (z, v) = cell.step_projected(params, st, iw_t, ic_t, xi)
    if not with_decay:
      return st, (z, v)
    return st, (z, v, jnp.broadcast_to(cell.membrane_decay(params, st.dc),
                                       v.shape))

  return jax.lax.scan(body, state, (iw, ic, noise))[1]
