"""Pendulum-avoid: an inverted pendulum with a computable feasible set.

A stand-in task for the FGE reproduction (arXiv 2602.15817) whose ground
truth Theta* is known: keep an inverted pendulum within `phi_max` of upright
for `horizon` steps, from an initial angle, angular velocity and torque limit
that theta fixes. The box of theta deliberately contains unrecoverable
states (falling too fast for the available torque), and how much of it is
recoverable depends on the torque limit.

Dynamics (gymnax `Pendulum-v1` with g = 10, m = 1, l = 1, dt = 0.05; phi = 0
is upright, so gravity pushes away from it)::

  omega' = clip(omega + (3g/(2l) sin(phi) + 3/(m l^2) u) dt, -8, 8)
  phi'   = phi + omega' dt,      u = u_max * a,  a in [-1, 1].

theta = (phi0, omega0, u_max) in [-phi_max, phi_max] x [-omega_box,
omega_box] x [u_lo, u_hi]; failure F_theta = {|phi| > phi_max}.

Why these defaults (phi_max = 0.9, omega_box = 4, u_max in [1, 4]):

* Holding still at phi needs 3 u >= 15 sin(phi), i.e. u >= 5 sin(phi). At
  the failure boundary that is 5 sin(0.9) = 3.92, so the strongest
  pendulums can hold any admissible angle while the weakest (u_max = 1) can
  only hold |phi| <= asin(0.2) = 0.20 rad: the torque limit changes the
  answer qualitatively, not just by a margin.
* Linearised, the unstable mode z = omega + sqrt(15) phi grows at
  sqrt(15) = 3.9/s and can be held iff |z| < 3 u_max / sqrt(15) = 0.77
  u_max, so the kernel is a diagonal band in (phi, omega) whose width grows
  linearly in u_max; its centre line omega = -sqrt(15) phi reaches +-3.5 at
  the angle limits, and omega_box = 4 keeps the whole band plus clearly
  infeasible corners inside the box at every u_max.
* The feasible fraction of the box (from the kernel at the default
  resolution) is 0.22 at u_max = 1, 0.40 at 2, 0.56 at 3 and 0.72 at 4:
  per torque region 0.31 (weak, u_max in [1, 2)), 0.48 (medium, [2, 3))
  and 0.64 (strong, [3, 4]); 0.48 over the whole box. So it is documented
  to lie in [0.35, 0.60] overall and to grow with u_max
  (tests/rl/test_reach_pendulum.py checks both).
* horizon = 100 steps (5 s) is ~19 e-folding times of the unstable mode:
  the 100-step kernel is practically the infinite-horizon one.

Ground truth (`viability_kernel`): the finite-horizon Hamilton-Jacobi
viability value on a (u_max, phi, omega) grid,

  W_0(x) = l(x),  W_k(x) = min(l(x), max_u W_{k-1}(f(x, u))),
  l(x) = phi_max - |phi|,

with u over a few fractions of u_max (bang-bang plus intermediate values)
and W_{k-1} interpolated bilinearly at f(x, u) (semi-Lagrangian). W_H(x0) is
the best achievable min-over-time angle margin, so theta is feasible iff
W_H(s0(theta)) >= 0, looked up by trilinear interpolation. `oracle_action`
is the greedy one-step lookahead on that value: a near-optimal reference
policy (its coverage matches the feasible fraction).

Accuracy: the default grid (25 x 101 x 201: cells of 0.125 in u_max, 0.018
rad in phi, 0.08 rad/s in omega, omega over the whole [-8, 8]) takes a few
seconds on CPU (1.5-5 s measured on 2 busy cores). Its labels disagree with
"the PD controller or the oracle is safe" on ~0.4% of the box, half each
way, all within one phi/omega cell of the kernel boundary. W is
*discontinuous* there whenever u_max < 5 sin(phi_max): just inside, the
best trajectory creeps up to the balance angle asin(u_max / 5) and keeps a
positive margin; just outside, it falls. So |W| is not a distance to the
boundary, and interpolating across u_max (where the boundary moves by ~0.1
rad/s per cell) is the main error; refine `kernel_shape[0]` first if more
accuracy is needed.
"""

from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.rl.reach import base

# gymnax Pendulum-v1 physics.
GRAVITY, MASS, LENGTH, DT, MAX_SPEED = 10.0, 1.0, 1.0, 0.05, 8.0
GRAV_COEF = 3.0 * GRAVITY / (2.0 * LENGTH)   # 15: d omega/dt per sin(phi)
TORQUE_COEF = 3.0 / (MASS * LENGTH ** 2)     # 3: d omega/dt per unit torque
REGION_NAMES = ('weak', 'medium', 'strong')
NOMINALS = ('uniform', 'skewed')
SKEW_PROBS = (0.9, 1e-3, 0.099)
# Controls the value iteration maximises over, as fractions of u_max.
CONTROL_FRACS = (-1.0, -0.5, 0.0, 0.5, 1.0)
# Candidate actions of the greedy oracle.
ORACLE_ACTIONS = tuple(np.linspace(-1.0, 1.0, 9).tolist())


class PendulumState(NamedTuple):
  phi: jax.Array     # float32 angle from upright (rad)
  omega: jax.Array   # float32 angular velocity (rad/s)
  u_max: jax.Array   # float32 torque limit of this episode


class ViabilityKernel(NamedTuple):
  """W_H on a regular (u_max, phi, omega) grid; feasible iff value >= 0."""
  value: np.ndarray        # [n_u, n_phi, n_omega] float32
  u_grid: np.ndarray       # [n_u] float32
  phi_grid: np.ndarray     # [n_phi] float32
  omega_grid: np.ndarray   # [n_omega] float32
  seconds: float           # wall time of the value iteration


def pendulum_step(phi, omega, torque, xp=jnp):
  """One Euler step of the gymnax pendulum (xp = jnp or np, elementwise)."""
  f32 = xp.float32
  omega = xp.clip(omega + (f32(GRAV_COEF) * xp.sin(phi)
                           + f32(TORQUE_COEF) * torque) * f32(DT),
                  f32(-MAX_SPEED), f32(MAX_SPEED))
  return phi + omega * f32(DT), omega


def _cell(x, lo, step, n, xp):
  """Lower cell index and fraction of x on a regular grid (clamped)."""
  f = xp.clip((x - lo) / step, 0.0, n - 1.0)
  i = xp.minimum(xp.floor(f), n - 2.0)
  return i.astype(xp.int32), (f - i).astype(xp.float32)


def viability_kernel(phi_max: float, u_grid: np.ndarray, n_phi: int,
                     n_omega: int, horizon: int,
                     control_fracs: tuple[float, ...] = CONTROL_FRACS,
                     omega_max: float = MAX_SPEED) -> ViabilityKernel:
  """Finite-horizon viability value W_horizon by grid value iteration.

  Safe to call inside a JAX trace: the iteration is evaluated eagerly
  (`jax.ensure_compile_time_eval`) and the table comes back as NumPy.

  Args:
    phi_max: failure threshold on |phi|; the phi grid spans [-phi_max,
      phi_max] (beyond it the margin l < 0 decides, so nothing is lost).
    u_grid: [n_u] torque limits, one value iteration each.
    n_phi: phi grid points.
    n_omega: omega grid points over [-omega_max, omega_max] (the speed clip
      keeps every successor inside).
    horizon: number of backward steps.
    control_fracs: controls u = frac * u_max maximised over.
    omega_max: half-width of the omega grid.

  Returns:
    The table W_horizon(u_max, phi, omega) = max over control sequences of
    min_{t <= horizon} (phi_max - |phi_t|), float32.
  """
  t0 = time.perf_counter()
  u_grid = np.asarray(u_grid, np.float32)
  phis = np.linspace(-phi_max, phi_max, n_phi).astype(np.float32)
  omegas = np.linspace(-omega_max, omega_max, n_omega).astype(np.float32)
  with jax.ensure_compile_time_eval():
    value = _value_iteration(
        jnp.asarray(u_grid), jnp.asarray(phis), jnp.asarray(omegas),
        jnp.asarray(control_fracs, jnp.float32), float(phi_max),
        int(horizon))
    value = np.asarray(jax.block_until_ready(value))
  return ViabilityKernel(value, u_grid, phis, omegas,
                         time.perf_counter() - t0)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _value_iteration(u_grid, phis, omegas, fracs, phi_max, horizon):
  """W_horizon [n_u, n_phi, n_omega] (see `viability_kernel`)."""
  n_u, n_phi, n_omega = u_grid.shape[0], phis.shape[0], omegas.shape[0]
  phi, omega = jnp.meshgrid(phis, omegas, indexing='ij')
  margin = phi_max - jnp.abs(phi)
  # Successors are fixed across iterations: per (u_max, control), the flat
  # index of the lower-left interpolation corner, its weights, and the
  # successor's own margin (which decides when it leaves the phi grid).
  torque = u_grid[:, None, None, None] * fracs[:, None, None]
  phi2, omega2 = pendulum_step(phi, omega, torque)     # [n_u, n_c, ...]
  i, wi = _cell(phi2, phis[0], phis[1] - phis[0], n_phi, jnp)
  j, wj = _cell(omega2, omegas[0], omegas[1] - omegas[0], n_omega, jnp)
  k = jnp.arange(n_u, dtype=jnp.int32)[:, None, None, None]
  corner = (k * n_phi + i) * n_omega + j
  margin2 = phi_max - jnp.abs(phi2)

  def backup(_, value):
    flat = value.reshape(-1)
    at = lambda offset: flat[corner + offset]
    interp = ((1 - wi) * ((1 - wj) * at(0) + wj * at(1))
              + wi * ((1 - wj) * at(n_omega) + wj * at(n_omega + 1)))
    return jnp.minimum(margin, jnp.minimum(interp, margin2).max(axis=1))

  value0 = jnp.broadcast_to(margin, (n_u, n_phi, n_omega))
  return jax.lax.fori_loop(0, horizon, backup, value0)


def _interp3(kernel: ViabilityKernel, u_max, phi, omega):
  """Trilinear interpolation of the kernel value (jnp, any batch shape)."""
  value = jnp.asarray(kernel.value)
  n_u, n_phi, n_omega = kernel.value.shape
  idx = []
  for x, grid, n in ((u_max, kernel.u_grid, n_u), (phi, kernel.phi_grid,
                                                   n_phi),
                     (omega, kernel.omega_grid, n_omega)):
    if n == 1:  # a single torque limit: no interpolation along u_max
      idx.append((jnp.zeros(jnp.shape(x), jnp.int32),
                  jnp.zeros(jnp.shape(x), jnp.float32), 0))
      continue
    step = np.float32(grid[1] - grid[0])
    i, w = _cell(jnp.asarray(x, jnp.float32), np.float32(grid[0]), step, n,
                 jnp)
    idx.append((i, w, 1))
  (iu, wu, su), (ip, wp, _), (io, wo, _) = idx
  out = jnp.zeros(jnp.broadcast_shapes(iu.shape, ip.shape, io.shape),
                  jnp.float32)
  for du in (0, 1):
    for dp in (0, 1):
      for do in (0, 1):
        w = ((wu if du else 1 - wu) * (wp if dp else 1 - wp)
             * (wo if do else 1 - wo))
        out = out + w * value[iu + du * su, ip + dp, io + do]
  return out


class PendulumAvoid(base.ReachTask):
  """Keep an inverted pendulum within `phi_max` of upright (continuous).

  theta = (phi0, omega0, u_max) is uniform over the box under the nominal
  distribution; regions are thirds of [u_lo, u_hi] ('weak', 'medium',
  'strong'). Observation: (cos phi, sin phi, omega / 8, u_max scaled to
  [-1, 1]). Action a in [-1, 1] (shape (1,) or ()), torque u_max * a.
  """

  name = 'pendulum-avoid'
  exact_ground_truth = False  # `feasible` is a grid kernel (~0.4% error)
  discrete = False
  num_actions = 1
  action_low = -1.0
  action_high = 1.0
  obs_dim = 4
  region_names = REGION_NAMES

  def __init__(self, phi_max: float = 0.9, omega_box: float = 4.0,
               u_lo: float = 1.0, u_hi: float = 4.0, horizon: int = 100,
               kernel_shape: tuple[int, int, int] = (25, 101, 201),
               nominal: str = 'uniform',
               skew_probs: tuple[float, float, float] = SKEW_PROBS):
    """Builds the task.

    Args:
      phi_max: failure threshold on |phi| (rad); also the phi0 range.
      omega_box: omega0 in [-omega_box, omega_box].
      u_lo: smallest torque limit.
      u_hi: largest torque limit.
      horizon: steps the pendulum must stay up.
      kernel_shape: (n_u, n_phi, n_omega) grid of the ground-truth kernel
        (computed lazily on the first `feasible`/`kernel_value` call).
      nominal: rho, 'uniform' over the box or 'skewed' (`sample_nominal`).
      skew_probs: the skewed rho's weights of (near-upright strong-torque
        box, weak-torque band, infeasible corners).
    """
    if nominal not in NOMINALS:
      raise ValueError(f'nominal must be one of {NOMINALS}, got {nominal!r}')
    if abs(sum(skew_probs) - 1.0) > 1e-6 or min(skew_probs) < 0:
      raise ValueError(f'skew_probs must be >= 0 and sum to 1, got '
                       f'{skew_probs}')
    if not 0.0 < phi_max < np.pi:
      raise ValueError(f'phi_max must be in (0, pi), got {phi_max}')
    if not 0.0 < u_lo <= u_hi:
      raise ValueError(f'need 0 < u_lo <= u_hi, got {u_lo}, {u_hi}')
    self.phi_max = float(phi_max)
    self.omega_box = float(omega_box)
    self.u_lo, self.u_hi = float(u_lo), float(u_hi)
    self.horizon = int(horizon)
    self.kernel_shape = tuple(int(n) for n in kernel_shape)
    self.theta_low = np.array([-phi_max, -omega_box, u_lo], np.float32)
    self.theta_high = np.array([phi_max, omega_box, u_hi], np.float32)
    self._kernel: ViabilityKernel | None = None
    self.nominal = nominal
    self.skew_probs = tuple(float(p) for p in skew_probs)

  # -- theta ------------------------------------------------------------------
  def sample_nominal(self, key: jax.Array) -> jax.Array:
    """theta ~ rho. 'uniform': over the whole box (feasible and infeasible
    theta alike). 'skewed', a mixture with weights `skew_probs` of

    * a near-upright box at strong torque (|phi0| <= 0.3, |omega0| <= 1,
      u_max in the top third): feasible, what domain randomisation sees;
    * the weak-torque band (u_max in the bottom third, phi0 and omega0 over
      the whole box): its feasible part is the thin diagonal band of the
      kernel, the challenging set;
    * infeasible corners (|phi0| >= 0.5 and |omega0| >= 2 with the same
      sign, any u_max): the unstable mode omega + sqrt(15) phi exceeds
      0.77 u_max there even at u_max = 4.
    """
    if self.nominal == 'uniform':
      return jax.random.uniform(key, (3,), jnp.float32,
                                jnp.asarray(self.theta_low),
                                jnp.asarray(self.theta_high))
    k_c, k_u, k_s = jax.random.split(key, 3)
    u = jax.random.uniform(k_u, (3,), jnp.float32)
    third = (self.u_hi - self.u_lo) / 3.0
    pm, om = self.phi_max, self.omega_box
    near = jnp.stack([(2 * u[0] - 1) * 0.3, (2 * u[1] - 1) * 1.0,
                      self.u_hi - third * u[2]])
    band = jnp.stack([(2 * u[0] - 1) * pm, (2 * u[1] - 1) * om,
                      self.u_lo + third * u[2]])
    sign = jnp.where(jax.random.bernoulli(k_s), 1.0, -1.0)
    corner = jnp.stack([sign * (0.5 + (pm - 0.5) * u[0]),
                        sign * (2.0 + (om - 2.0) * u[1]),
                        self.u_lo + (self.u_hi - self.u_lo) * u[2]])
    c = jax.random.choice(k_c, 3, p=jnp.asarray(self.skew_probs))
    return jnp.stack([near, band, corner])[c].astype(jnp.float32)

  def failed_at_start(self, theta: jax.Array) -> jax.Array:
    return jnp.abs(theta[0]) > self.phi_max

  def region_of(self, theta: jax.Array) -> jax.Array:
    frac = (theta[2] - self.u_lo) / max(self.u_hi - self.u_lo, 1e-12)
    n = len(REGION_NAMES)
    return jnp.clip(jnp.floor(frac * n), 0, n - 1).astype(jnp.int32)

  # -- dynamics ---------------------------------------------------------------
  def init_state(self, theta: jax.Array) -> PendulumState:
    theta = jnp.asarray(theta, jnp.float32)
    return PendulumState(theta[0], theta[1], theta[2])

  def observe(self, state: PendulumState) -> jax.Array:
    u_scaled = (2.0 * (state.u_max - self.u_lo)
                / max(self.u_hi - self.u_lo, 1e-12) - 1.0)
    return jnp.stack([jnp.cos(state.phi), jnp.sin(state.phi),
                      state.omega / MAX_SPEED, u_scaled]).astype(jnp.float32)

  def step(self, state: PendulumState, action: jax.Array
           ) -> tuple[PendulumState, jax.Array, jax.Array]:
    a = jnp.clip(jnp.reshape(jnp.asarray(action, jnp.float32), ()), -1.0, 1.0)
    phi, omega = pendulum_step(state.phi, state.omega, state.u_max * a)
    failed = jnp.abs(phi) > self.phi_max
    return PendulumState(phi, omega, state.u_max), failed, jnp.asarray(False)

  # -- ground truth -----------------------------------------------------------
  @property
  def kernel(self) -> ViabilityKernel:
    """The viability table (computed on first use, then cached)."""
    if self._kernel is None:
      n_u, n_phi, n_omega = self.kernel_shape
      if self.u_hi == self.u_lo:  # a single torque limit
        n_u = 1
      u_grid = np.linspace(self.u_lo, self.u_hi, n_u)
      self._kernel = viability_kernel(self.phi_max, u_grid, n_phi, n_omega,
                                      self.horizon)
    return self._kernel

  def kernel_value(self, thetas: np.ndarray) -> np.ndarray:
    """W_H(s0(theta)) [N]: the best achievable min-over-time margin
    phi_max - |phi_t| (negative = infeasible)."""
    th = jnp.asarray(np.asarray(thetas, np.float32))
    return np.asarray(_interp3(self.kernel, th[..., 2], th[..., 0],
                               th[..., 1]))

  def feasible(self, thetas: np.ndarray) -> np.ndarray:
    """Ground truth: whether some policy keeps |phi| <= phi_max for the
    horizon, from the viability kernel (exact up to its grid)."""
    return self.kernel_value(thetas) >= 0.0

  def oracle_action(self, obs: jax.Array) -> jax.Array:
    """Greedy one-step lookahead on the kernel value for one observation
    [obs_dim] -> action [1]. Pure JAX (the table is a constant)."""
    kernel = self.kernel
    phi = jnp.arctan2(obs[1], obs[0])
    omega = obs[2] * MAX_SPEED
    u_max = self.u_lo + (obs[3] + 1.0) * 0.5 * (self.u_hi - self.u_lo)
    acts = jnp.asarray(ORACLE_ACTIONS, jnp.float32)
    phi2, omega2 = pendulum_step(phi, omega, u_max * acts)
    q = jnp.minimum(self.phi_max - jnp.abs(phi2),
                    _interp3(kernel, jnp.broadcast_to(u_max, acts.shape),
                             phi2, omega2))
    return acts[jnp.argmax(q)][None]
