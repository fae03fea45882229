"""Kinetix Lander: the FGE paper's pixel task (arXiv 2602.15817, Sec. 5).

A two-thruster lander in a 5 m x 5 m Kinetix world (Matthews et al., ICLR
2025; Jax2D physics, JaxGL rendering), seen only through pixels. The level
is Kinetix's own `l/hard_lunar_lander` (shipped in the `kinetix-env` wheel):
a red floor (its death surface), walls and a ceiling, a blue landing pad
and the green lander (a body with two jointed legs and two angled
thrusters). theta = the lander's initial position (x, y), 2-D as in the
paper's Lander.

This is not the release's level: the FGE release loads its own level file,
`src/fge/core/envs/kinetix/lander_env.json` (oswinso/fge at feebe5b,
`lander.py:97-102`), which is not on PyPI and which we do not copy. Its
frame stack (3), frame skip (2) and fuel (40) are the release's; the
geometry of walls, pad and lander is Kinetix's `hard_lunar_lander`, so
coverage numbers on this task do not compare with the paper's Lander
(deliberate).

  actions   9 discrete: each thruster at 0, 1/2 or full power (the paper's
            3 x 3 grid); each step is `frame_skip` = 2 physics sub-steps;
  fuel      `max_fuel` = 40, each step burns the sum of the two powers; an
            empty tank cuts the thrusters;
  failure   any lander part touches the floor, the lander body leaves the
            screen, or the tank is empty (the paper's Lander: out of
            bounds, out of fuel, collision);
  finished  a lander part touches the pad (a safe end of the episode); the
            first sub-step with a contact decides between the two, since
            the pad sits in the floor;
  horizon   150 steps.

Full power on both thrusters burns 2 units a step, so the tank hovers for
20 steps at most: from theta far from the pad and low the lander falls
before it gets there, so part of Theta is infeasible, and no ground truth
is known (`feasible` returns None).

Observation: the last `frame_stack` = 3 frames of Kinetix's pixel renderer
(125 x 125 RGB at the level's downscale 4), 2 x 2 average-pooled to
62 x 62 and stacked on the channel axis, in [0, 1], flattened, then the
fuel fraction (`image_shape` = (62, 62, 9) tells the policy network how to
read it). The classifiers and the novelty density of FGE read theta's box
coordinates instead of the first frame (`initial_features`), as the paper's
code does for this task.

`kinetix-env` pins jax <= 0.9.0: install it without its pins,
`pip install -e '.[kinetix]' && pip install --no-deps kinetix-env==3.0.2`.
"""

from __future__ import annotations

import functools
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.rl.reach.base import ReachTask

LEVEL = 'l/hard_lunar_lander'
INSTALL = ("pip install -e '.[kinetix]' && pip install --no-deps "
           'kinetix-env==3.0.2')
POOL = 2


def _kinetix():
  """The Kinetix and Jax2D modules, or a one-line error saying how to get
  them."""
  try:
    # pylint: disable=g-import-not-at-top
    import jax2d.engine as jax2d_engine
    import kinetix
    from kinetix.environment import ContinuousActions
    from kinetix.render.renderer_pixels import make_render_pixels
    from kinetix.util.saving import load_from_json_file
  except ImportError as e:
    raise ImportError(
        f'The Kinetix lander needs kinetix-env ({e}); install it with: '
        f'{INSTALL}') from None
  return (kinetix, jax2d_engine, ContinuousActions, make_render_pixels,
          load_from_json_file)


class LanderState(NamedTuple):
  sim: Any            # Kinetix EnvState (Jax2D SimState + roles, bindings)
  fuel: jax.Array     # [] fuel left
  frames: jax.Array   # [frame_stack, H, W, 3] uint8, oldest first


class KinetixLander(ReachTask):
  """The lander (see the module docstring)."""

  name = 'lander'
  discrete = True
  num_actions = 9
  region_names = ('all',)
  exact_ground_truth = False

  def __init__(self, horizon: int = 150, max_fuel: float = 40.0,
               frame_stack: int = 3,
               x_range: tuple[float, float] = (0.25, 4.75),
               y_range: tuple[float, float] = (1.0, 4.6)):
    (kinetix, jax2d_engine, continuous_actions, make_render_pixels,
     load) = _kinetix()
    self.horizon = int(horizon)
    self.max_fuel = float(max_fuel)
    self.frame_stack = int(frame_stack)
    path = os.path.join(os.path.dirname(kinetix.__file__), 'levels',
                        LEVEL + '.json')
    self.level, self.static_params, self.env_params = load(path)
    sp, lv = self.static_params, self.level
    self.world = float(sp.screen_dim[0] / self.env_params.pixels_per_unit)
    self.theta_low = np.array([x_range[0], y_range[0]], np.float32)
    self.theta_high = np.array([x_range[1], y_range[1]], np.float32)

    roles = np.asarray(lv.polygon_shape_roles) * np.asarray(lv.polygon.active)
    (self.body,) = np.flatnonzero(roles == 1)
    (self.floor,) = np.flatnonzero(roles == 3)
    (self.pad,) = np.flatnonzero(roles == 2)
    # The legs: polygons jointed to the body (Kinetix joint indices count
    # polygons first).
    ja, jb = (np.asarray(lv.joint.a_index), np.asarray(lv.joint.b_index))
    act = np.asarray(lv.joint.active)
    legs = sorted({int(b) for a, b in zip(ja[act], jb[act]) if a == self.body}
                  | {int(a) for a, b in zip(ja[act], jb[act])
                     if b == self.body})
    self.parts = np.array([self.body, *legs])
    assert len(legs) == 2, legs
    assert int(np.asarray(lv.thruster.active).sum()) == 2

    self._engine = jax2d_engine.PhysicsEngine(sp)
    self._recompute = functools.partial(
        jax2d_engine.recompute_global_joint_positions, static_params=sp)
    self._actions = continuous_actions(self.env_params, sp)
    self._render = make_render_pixels(self.env_params, sp)
    side = sp.screen_dim[0] // sp.downscale // POOL
    self.image_shape = (side, side, 3 * self.frame_stack)
    self.obs_dim = int(np.prod(self.image_shape)) + 1
    levels = np.linspace(0.0, 1.0, 3, dtype=np.float32)
    self._thrust = np.stack(np.meshgrid(levels, levels), -1).reshape(-1, 2)
    pairs = np.asarray(self._engine.poly_poly_pairs)
    first, second = np.isin(pairs, self.parts).T  # which side is the lander
    touching = lambda shape: ((first & (pairs[:, 1] == shape))
                              | (second & (pairs[:, 0] == shape)))
    self._floor_pairs = touching(self.floor)
    self._pad_pairs = touching(self.pad)

  # -- theta and the initial state --------------------------------------------
  def sample_nominal(self, key: jax.Array) -> jax.Array:
    return jax.random.uniform(key, (2,), minval=self.theta_low,
                              maxval=self.theta_high)

  def place(self, theta: jax.Array) -> Any:
    """The level with the lander (body and legs) moved rigidly so that its
    body is at theta, at rest."""
    poly = self.level.polygon
    offset = theta - poly.position[self.body]
    pos = poly.position.at[self.parts].add(offset)
    sim = self.level.replace(polygon=poly.replace(position=pos))
    return self._recompute(sim)

  def frame(self, sim: Any) -> jax.Array:
    """One observation frame [H, W, 3] uint8: the Kinetix pixel render,
    2 x 2 average-pooled."""
    img = self._render(sim)
    h = (img.shape[0] // POOL) * POOL
    img = img[:h, :h].reshape(h // POOL, POOL, h // POOL, POOL, 3)
    return jnp.round(img.mean((1, 3))).astype(jnp.uint8)

  def init_state(self, theta: jax.Array) -> LanderState:
    sim = self.place(theta)
    frames = jnp.broadcast_to(self.frame(sim)[None],
                              (self.frame_stack,) + self.image_shape[:2] + (3,))
    return LanderState(sim, jnp.float32(self.max_fuel), frames)

  @property
  def feature_dim(self) -> int:
    return 2

  def initial_features(self, theta: jax.Array) -> jax.Array:
    return self.to_box(theta)

  # -- dynamics ---------------------------------------------------------------
  def thrust(self, action: jax.Array) -> jax.Array:
    """Action index -> (left, right) thruster powers in {0, 1/2, 1}."""
    return jnp.asarray(self._thrust)[action]

  def step(self, s: LanderState, action: jax.Array):
    powers = jnp.where(s.fuel > 0.0, self.thrust(action), 0.0)
    sp = self.static_params
    full = jnp.concatenate([jnp.zeros((sp.num_motor_bindings,)), powers])
    todo = self._actions.process_action(full, s.sim, sp)

    def sub(sim, _):
      sim, manifolds = self._engine.step(sim, self.env_params, todo)
      active = manifolds[0].active
      return sim, (jnp.any(active & self._floor_pairs),
                   jnp.any(active & self._pad_pairs))

    sim, (floor, pad) = jax.lax.scan(sub, s.sim, None,
                                     length=int(sp.frame_skip))
    # The first sub-step with a contact decides: the pad sits in the floor,
    # so legs that land on it may touch the floor's surface at its edge.
    first = jnp.argmax(floor | pad)
    landed = jnp.any(pad) & pad[first]
    fuel = jnp.maximum(s.fuel - powers.sum(), 0.0)
    p = sim.polygon.position[self.body]
    out = jnp.any((p < 0.0) | (p > self.world))
    failed = (jnp.any(floor) & ~landed) | out | (fuel <= 0.0)
    frames = jnp.concatenate([s.frames[1:], self.frame(sim)[None]])
    return LanderState(sim, fuel, frames), failed, landed & ~failed

  def observe(self, s: LanderState) -> jax.Array:
    img = jnp.moveaxis(s.frames, 0, 2).reshape(self.image_shape)
    return jnp.concatenate([
        img.reshape(-1).astype(jnp.float32) / 255.0,
        (s.fuel / self.max_fuel)[None]]).astype(jnp.float32)
