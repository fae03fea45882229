"""ToyLevels: the FGE paper's motivating 1-D avoid problem (arXiv 2602.15817).

Written from the paper's description and the task's published constants.
An agent (a disc of radius 0.25) starts at x = theta, y = 49.5 in a
[0, 50]^2 room and falls 0.25 per step; each step it moves left, right (by
0.175) or not at all. The room has three levels separated by walls at
x = 35 and x = 45:

* easy, x in [0, 35]: nothing to avoid; "do nothing" lands safely. Reset
  region [3.5, 31.5], nominal mass 0.90.
* hard, x in [35, 45]: a disturbance band (x in [34, 46], y in [5, 15))
  pushes the agent right by 0.35 per step for 40 steps, so it must first
  move to x < ~37.75 and then push left all the way through, or it hits the
  wall at 45. Feasible from every reset x in [36, 44], but the nominal mass
  is 1e-4: domain randomisation almost never trains there.
* impossible, x in [45, 50]: an obstacle spans the whole level at
  y in [1, 2.5); nothing is safe. Reset region [45.5, 49.5], mass 0.0999.

Failure (the set F_theta): leaving the room, touching a wall (|x - wall| <=
radius), touching the obstacle, or leaving the level the agent started in.
The episode finishes safely when the agent reaches the floor (y <= 0): 198
steps. Observation: centred position, 16 fixed random Fourier features of
the position, and the one-hot level.

theta (the initial x) lives on the union of the three reset regions; the
box coordinates used for novelty map each region to a third of [-1, 1], as
the paper's code does, so the hard region is not a sliver of the box.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.rl.reach import base

# Level walls and reset regions (inner 80% of each level).
WALLS = (35.0, 45.0)
LEVELS = ((0.0, 35.0), (35.0, 45.0), (45.0, 50.0))
RESET = tuple((lo + 0.1 * (hi - lo), hi - 0.1 * (hi - lo)) for lo, hi in LEVELS)
REGION_NAMES = ('easy', 'hard', 'impossible')
NOMINAL_PROBS = (0.90, 1e-4, 0.0999)
RADIUS, DROP = 0.25, 0.25
STEP = (45.0 - 38.0) * DROP / (15.0 - 5.0)  # 0.175: the avoid slope
DISTURB = (34.0, 46.0, 5.0, 15.0)           # x_lo, x_hi, y_lo, y_hi
OBSTACLE = (45.0, 50.0, 1.0, 2.5)
Y0 = 50.0 - 2 * RADIUS                      # 49.5
NUM_FOURIER = 16


class ToyState(NamedTuple):
  pos: jax.Array     # [2] (x, y)
  level: jax.Array   # int32 level the episode started in


def _level_of(x: jax.Array) -> jax.Array:
  return jnp.where(x <= LEVELS[0][1], 0,
                   jnp.where(x <= LEVELS[1][1], 1,
                             jnp.where(x <= LEVELS[2][1], 2, -1)))


class ToyLevels(base.ReachTask):
  """The three-level avoid task (discrete actions: none, left, right)."""

  name = 'ToyLevels'
  discrete = True
  num_actions = 3
  region_names = REGION_NAMES

  def __init__(self, horizon: int = 300,
               nominal_probs: tuple[float, float, float] = NOMINAL_PROBS):
    if abs(sum(nominal_probs) - 1.0) > 1e-6:
      raise ValueError(f'nominal_probs must sum to 1, got {nominal_probs}')
    self.horizon = int(horizon)
    self.nominal_probs = tuple(float(p) for p in nominal_probs)
    self.theta_low = np.array([RESET[0][0]], np.float32)
    self.theta_high = np.array([RESET[2][1]], np.float32)
    rng = np.random.default_rng(12345)
    self._ff_w = jnp.asarray(rng.uniform(-0.5, 0.5, (NUM_FOURIER, 2)),
                             jnp.float32)
    self._ff_b = jnp.asarray(rng.uniform(0.0, 2 * np.pi, (NUM_FOURIER,)),
                             jnp.float32)
    self.obs_dim = 2 + 2 * NUM_FOURIER + 3

  # -- theta ------------------------------------------------------------------
  def sample_nominal(self, key: jax.Array) -> jax.Array:
    k_level, k_x = jax.random.split(key)
    level = jax.random.choice(k_level, 3, p=jnp.asarray(self.nominal_probs))
    lo, hi = jnp.asarray(RESET)[level].T
    return jax.random.uniform(k_x, (1,), minval=lo, maxval=hi)

  def region_of(self, theta: jax.Array) -> jax.Array:
    return _level_of(theta[0]).astype(jnp.int32)

  def to_box(self, theta: jax.Array) -> jax.Array:
    x = theta[0]
    r = jnp.clip(_level_of(x), 0, 2)
    lo, hi = jnp.asarray(RESET)[r].T
    frac = jnp.clip((x - lo) / (hi - lo), 0.0, 1.0)
    return jnp.reshape(2.0 * (r + frac) / 3.0 - 1.0, (1,))

  def from_box(self, u: jax.Array) -> jax.Array:
    v = (jnp.clip(u[0], -1.0, 1.0) + 1.0) * 1.5  # [0, 3]
    r = jnp.clip(jnp.floor(v), 0, 2).astype(jnp.int32)
    lo, hi = jnp.asarray(RESET)[r].T
    return jnp.reshape(lo + (v - r) * (hi - lo), (1,))

  def eval_thetas(self, n: int) -> np.ndarray:
    """n points spread over the reset regions in proportion to their widths
    (the paper's ToyLevels evaluation grid)."""
    widths = np.array([hi - lo for lo, hi in RESET])
    counts = np.round(n * widths / widths.sum()).astype(int)
    counts[-1] = n - counts[:-1].sum()
    xs = [np.linspace(lo, hi, c) for (lo, hi), c in zip(RESET, counts)]
    return np.concatenate(xs).astype(np.float32)[:, None]

  def feasible(self, thetas: np.ndarray) -> np.ndarray:
    """Ground truth: the easy and hard reset regions are feasible, the
    impossible one is not (tests/rl/test_reach_toylevels.py checks both with
    a scripted controller)."""
    x = np.asarray(thetas)[:, 0]
    return x < LEVELS[2][0]

  # -- dynamics ---------------------------------------------------------------
  def init_state(self, theta: jax.Array) -> ToyState:
    x = jnp.asarray(theta, jnp.float32).reshape(())
    return ToyState(jnp.stack([x, jnp.float32(Y0)]),
                    _level_of(x).astype(jnp.int32))

  def observe(self, state: ToyState) -> jax.Array:
    pos = state.pos
    proj = self._ff_w @ pos + self._ff_b
    return jnp.concatenate([(pos - 25.0) / 25.0, jnp.cos(proj), jnp.sin(proj),
                            jax.nn.one_hot(state.level, 3)])

  def step(self, state: ToyState, action: jax.Array):
    x, y = state.pos[0], state.pos[1]
    dx = jnp.asarray([0.0, -STEP, STEP])[action]
    in_disturb = ((DISTURB[0] <= x) & (x <= DISTURB[1]) & (DISTURB[2] <= y)
                  & (y < DISTURB[3]))
    x = x + dx + jnp.where(in_disturb, 2 * STEP, 0.0)
    y = y - DROP
    failed = self.violates(x, y, state.level)
    finished = y <= 0.0
    return ToyState(jnp.stack([x, y]), state.level), failed, finished

  @staticmethod
  def violates(x: jax.Array, y: jax.Array, level: jax.Array) -> jax.Array:
    out = (x < 0.0) | (x > 50.0)
    for w in WALLS:
      out |= jnp.abs(x - w) <= RADIUS
    out |= ((OBSTACLE[0] <= x) & (x <= OBSTACLE[1]) & (OBSTACLE[2] <= y)
            & (y < OBSTACLE[3]))
    return out | (_level_of(x) != level)
