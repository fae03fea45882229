"""Dubins Circle: the FGE paper's circular-track task (arXiv 2602.15817,
Sec. 5; the official repository's `dub_circ` task, rewritten from its
semantics).

An ego Dubins car drives on a two-lane annulus (inner radius 5, outer 8,
lane centres 5.75 and 7.25) among two other cars that circle at constant
angular speed. theta = (omega_1, omega_2, l_1, l_2): the other cars'
angular speeds in [pi/32, 11 pi/40] rad/s and lengths in [0.6, 2.0]. The
nominal rho is uniform on that box (the release's `fix_other_vel='normal'`).

  ego start  (5.75, 0), heading pi/2 (counter-clockwise), speed 2.5;
  car i      at angle pi + i pi/8 on lane i mod 2, heading tangent;
  action     (steer, acc) in [-1, 1]^2: turn rate steer * 2 v / 6.5,
             v' = clip(v + acc dt, 1, 4), dt = 0.1; heading first, then
             position (explicit Euler, as the release);
  failure    the ego disc (r = 0.5) leaves the track (|p| < 5.5 or > 7.5)
             or touches a car, a 1-wide rectangle of length l_i;
  horizon    1000 steps.

The release rotates each car's rectangle by the car's *angular speed*
(state slot 3) rather than its heading; `release_rectangles=True` (the
default) keeps that, `False` aligns the rectangles with the cars' headings.

Observation (14-D, as the release): the ego's heading relative to the track
tangent (cos, sin), its radial position in the track in [0, 1] and its
speed normalised by the mid-track radius; per car: (cos, sin) of its angle
relative to the ego, radial offset, relative normalised speed, length.

There is no ground-truth feasible set (`feasible` returns None): coverage
is the fraction of an evaluation grid the trained policy keeps safe.

Regions (for the contest of configs/fge.py:dubins_skewed): 'easy', both
cars at omega in [0.2, 0.6] (the ego, whose angular speed is v / r in
[0.17, 0.70] on the inner lane and [0.14, 0.55] on the outer, can match
either); 'hard', car 1 (on the ego's starting lane) at omega >= 0.7 with
car 2 as in 'easy': car 1 is faster than the ego can drive and catches it
from behind, so the ego has to move out of its way into the outer lane,
past car 2; 'rest', the rest of the box. `nominal='skewed'` samples the
easy box with probability 0.9, the hard box with 1e-3 and the whole box
with 0.099 (`skew_probs`), so domain randomisation rarely sees the hard
region.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.rl.reach.base import ReachTask

R_IN, LANE_W, NUM_LANES = 5.0, 1.5, 2
R_OUT = R_IN + LANE_W * NUM_LANES
LANES = (R_IN + 0.5 * LANE_W, R_IN + 1.5 * LANE_W)
R_MID = 0.5 * (R_IN + R_OUT)
EGO_R = 0.5            # ego disc radius; cars are 2 EGO_R wide
V_MIN, V_MAX = 1.0, 4.0
W_MIN, W_MAX = math.pi / 32, 11 * math.pi / 40
L_MIN, L_MAX = 0.6, 2.0
NUM_CARS = 2
TWO_PI = 2.0 * math.pi
EASY_W = (0.2, 0.6)   # both cars' omega in the easy region
HARD_W1 = 0.7         # car 1's omega from which it laps the ego
NOMINALS = ('uniform', 'skewed')
REGION_NAMES = ('easy', 'hard', 'rest')


class DubinsState(NamedTuple):
  ego: jax.Array   # [4] x, y, heading, speed
  cars: jax.Array  # [NUM_CARS, 5] x, y, heading, angular speed, length


def rectangle_hit(point: jax.Array, centre: jax.Array, length: jax.Array,
                  angle: jax.Array, r: float) -> jax.Array:
  """Whether a disc of radius r at `point` touches the rectangle of size
  length x (2 EGO_R) centred at `centre`, its long side along `angle`
  (the Minkowski sum of the rectangle and the disc, rounded corners)."""
  d = point - centre
  c, s = jnp.cos(angle), jnp.sin(angle)
  u = jnp.abs(d[0] * c + d[1] * s) - 0.5 * length
  w = jnp.abs(d[0] * s - d[1] * c) - EGO_R
  side = ((u < r) & (w < 0)) | ((u < 0) & (w < r))
  corner = (u > 0) & (w > 0) & (jnp.sqrt(u**2 + w**2) < r)
  return side | corner


class DubinsCircle(ReachTask):
  """The circular track with two other cars (see the module docstring)."""

  name = 'dubins'
  theta_low = np.array([W_MIN, W_MIN, L_MIN, L_MIN], np.float32)
  theta_high = np.array([W_MAX, W_MAX, L_MAX, L_MAX], np.float32)
  obs_dim = 4 + 5 * NUM_CARS
  discrete = False
  num_actions = 2
  action_low, action_high = -1.0, 1.0
  region_names = REGION_NAMES
  exact_ground_truth = False

  def __init__(self, horizon: int = 1000, dt: float = 0.1,
               release_rectangles: bool = True, nominal: str = 'uniform',
               skew_probs: tuple[float, float, float] = (0.9, 1e-3, 0.099)):
    if nominal not in NOMINALS:
      raise ValueError(f'nominal must be one of {NOMINALS}, got {nominal!r}')
    if len(skew_probs) != 3 or abs(sum(skew_probs) - 1.0) > 1e-6:
      raise ValueError('skew_probs must be 3 probabilities summing to 1 '
                       f'(easy, hard, whole box), got {skew_probs}')
    self.horizon = int(horizon)
    self.dt = float(dt)
    self.release_rectangles = bool(release_rectangles)
    self.nominal = nominal
    self.skew_probs = tuple(float(p) for p in skew_probs)

  def sample_nominal(self, key: jax.Array) -> jax.Array:
    """theta ~ rho: uniform on the box, or the skewed mixture of the easy
    box, the hard box and the whole box (module docstring)."""
    lo, hi = jnp.asarray(self.theta_low), jnp.asarray(self.theta_high)
    if self.nominal == 'uniform':
      return jax.random.uniform(key, (4,), minval=lo, maxval=hi)
    k_c, k_u = jax.random.split(key)
    u = jax.random.uniform(k_u, (4,))
    lengths = lo[2:] + u[2:] * (hi[2:] - lo[2:])
    w = lambda a, b, x: a + x * (b - a)
    easy = jnp.concatenate([w(*EASY_W, u[:2]), lengths])
    hard = jnp.concatenate([jnp.stack([w(HARD_W1, W_MAX, u[0]),
                                       w(*EASY_W, u[1])]), lengths])
    box = lo + u * (hi - lo)
    c = jax.random.choice(k_c, 3, p=jnp.asarray(self.skew_probs))
    return jnp.stack([easy, hard, box])[c].astype(jnp.float32)

  def region_of(self, theta: jax.Array) -> jax.Array:
    inside = lambda x: (x >= EASY_W[0]) & (x <= EASY_W[1])
    easy = inside(theta[0]) & inside(theta[1])
    hard = (theta[0] >= HARD_W1) & inside(theta[1])
    return jnp.where(easy, 0, jnp.where(hard, 1, 2)).astype(jnp.int32)

  def init_state(self, theta: jax.Array) -> DubinsState:
    ego = jnp.array([LANES[0], 0.0, math.pi / 2, 0.5 * (V_MIN + V_MAX)])
    rows = []
    for i in range(NUM_CARS):
      ang = math.pi + i * math.pi / 8
      rad = LANES[i % NUM_LANES]
      rows.append(jnp.stack([
          jnp.asarray(rad * math.cos(ang)), jnp.asarray(rad * math.sin(ang)),
          jnp.asarray((ang + math.pi / 2) % TWO_PI), theta[i],
          theta[NUM_CARS + i]]))
    return DubinsState(ego, jnp.stack(rows).astype(jnp.float32))

  def _failed(self, s: DubinsState) -> jax.Array:
    p = s.ego[:2]
    r = jnp.linalg.norm(p)
    off_track = (r < R_IN + EGO_R) | (r > R_OUT - EGO_R)
    angle = s.cars[:, 3] if self.release_rectangles else s.cars[:, 2]
    hit = jax.vmap(rectangle_hit, in_axes=(None, 0, 0, 0, None))(
        p, s.cars[:, :2], s.cars[:, 4], angle, EGO_R)
    return off_track | jnp.any(hit)

  def step(self, s: DubinsState, action: jax.Array):
    x, y, heading, v = s.ego
    steer, acc = action[0], action[1]
    omega = steer * 2.0 * v / R_MID  # the release's turn-rate bound x 2
    v = jnp.clip(v + acc * self.dt, V_MIN, V_MAX)
    heading = (heading + omega * self.dt) % TWO_PI
    x = x + v * jnp.cos(heading) * self.dt
    y = y + v * jnp.sin(heading) * self.dt
    cx, cy, w = s.cars[:, 0], s.cars[:, 1], s.cars[:, 3]
    rad = jnp.sqrt(cx**2 + cy**2)
    ang = (jnp.arctan2(cy, cx) + w * self.dt) % TWO_PI
    cars = jnp.stack([rad * jnp.cos(ang), rad * jnp.sin(ang),
                      (ang + math.pi / 2) % TWO_PI, w, s.cars[:, 4]], -1)
    new = DubinsState(jnp.stack([x, y, heading, v]), cars)
    return new, self._failed(new), jnp.asarray(False)

  def observe(self, s: DubinsState) -> jax.Array:
    x, y, heading, v = s.ego
    r = jnp.sqrt(x**2 + y**2)
    norm_r = (r - R_IN) / (R_OUT - R_IN)
    angle = jnp.arctan2(y, x)
    tangent = angle + math.pi / 2
    norm_v = (v - V_MIN) / (V_MAX - V_MIN)  # (v/R_MID) over its range
    cx, cy = s.cars[:, 0], s.cars[:, 1]
    rel = jnp.arctan2(cy, cx) - angle
    norm_r_o = (jnp.sqrt(cx**2 + cy**2) - R_IN) / (R_OUT - R_IN)
    norm_w = (s.cars[:, 3] - W_MIN) / (W_MAX - W_MIN)
    per_car = jnp.stack([jnp.cos(rel), jnp.sin(rel), norm_r_o - norm_r,
                         norm_w - norm_v, s.cars[:, 4]], -1)
    ego = jnp.stack([jnp.cos(tangent - heading), jnp.sin(tangent - heading),
                     norm_r, norm_v])
    return jnp.concatenate([ego, per_car.reshape(-1)]).astype(jnp.float32)
