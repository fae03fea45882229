"""Hopper on slopes and a gap (FGE, arXiv 2602.15817, Sec. 5, MuJoCo task).

A planar hopper (torso, thigh, leg, foot; three hinge motors; root slide x/z
plus hinge y) stands on a terrain made of a left slope falling into a gap, a
right slope rising out of it and a flat plateau. theta is the initial x of
the foot (its ankle joint) in [-1.5, 2.5]; theta fixes only the initial
state (dynamics and failure set are the same for all theta). The hopper fails
when the torso or thigh touches the terrain or when it falls to the bottom of
the pit (into the gap or off either end of the terrain). There is no goal:
staying out of the failure set for `horizon` steps is safe.

Terrain (x, z in metres; the top surfaces, all boxes 0.2 m thick):

  left slope   (-1.3, 0.8) -> (-0.3, 0.0)   rotated box, slope 0.8
  gap          (-0.3, 0.3)                  no floor; pit bottom at z = -1
  right slope  ( 0.3, 0.0) -> ( 1.3, 0.8)   rotated box, slope 0.8
  right flat   ( 1.3, 0.8) -> ( 2.3, 0.8)   box
  x < -1.3, x > 2.3                         no floor (same pit)

This follows the official code's layout (capsule "floors" of radius 0.1 with
centre lines (-0.28, 0) -> (-1.28, 0.8), (0.28, 0) -> (1.28, 0.8) ->
(2.28, 0.8)) with boxes instead of capsules, and its region boundaries
`(-1.5, -1.2, -0.1, 0.1, 1.25, 2.3, 2.5)` for the six evaluation regions
(left edge, left slope, gap, right slope, right flat, right edge).

Differences from the official task, by design:

* The hopper is the standard Gym/Brax 2-D hopper (dimensions, gear 200 on
  thigh, leg and foot, armature and damping 1), not the official
  4-actuator planar hopper with a waist joint; so `num_actions = 3`. Its
  timestep is the official 5 ms (Gym: 2 ms with RK4), semi-implicit Euler.
* The pit is not simulated: touching its level (z = PIT_Z) is the failure,
  so the episode ends there (the official code ends it when the torso drops
  below z = 0.1, with no floor at all under the gap).
* The start: the official code places the foot at the plateau height
  (z = 0.8) for every theta, so the hopper drops onto the slopes;
  by default the foot here rests on the terrain under it
  (`start_on_surface=False` gives the official start). Over the gap and off
  the ends, "the terrain under it" is the filled-in profile (the gap at the
  level of its rims, the ends at plateau level), so the hopper starts at the
  rim and falls.
* Observation: the official policy sees qpos and qvel (x included); here
  qpos, clipped qvel and the terrain heights around the torso (see
  `HopperTerrain`).

The simulation is MuJoCo MJX (pure JAX, so `step` jits, vmaps and scans).
Only foot and leg collide, with the three terrain boxes (6 capsule-box pairs;
MJX's `max_geom_pairs` broad phase keeps the 3 closest, so 6 contacts per
step); torso and thigh have no contacts: their touching the terrain is the
failure, checked geometrically after every env step (exact planar
capsule-vs-box distance on the post-step pose; like the official check, a
touch that starts and ends within one env step's `frame_skip` substeps is
missed). The task state is not the full `mjx.Data` but
`HopperState(qpos, qvel, qacc_warmstart)`: all that `mjx.step` reads from
its input besides ctrl for this model (no activations, mocap or applied
forces; time does not enter the dynamics; every other `Data` field is
recomputed by the forward pass at the start of each substep), so resets,
`jnp.where` merges and rollout buffers handle 18 floats per env instead of
the whole `Data` pytree. `data(state)` rebuilds the full `mjx.Data` (with
`mjx.forward`) for inspection or rendering.

On GPUs with TF32 matmuls (A100/H100/H200), MJX needs
`jax.config.update('jax_default_matmul_precision', 'highest')` (the official
code refuses to run without it: NaNs otherwise); CPUs are unaffected.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx
import numpy as np

from iclrjax.rl.reach import base

# -- Terrain -----------------------------------------------------------------
TOP_Z = 0.8     # plateau height
PIT_Z = -1.0    # pit bottom: reaching it is the failure
TERRAIN_THICKNESS = 0.2
# Top surface of each terrain box: (x0, z0, x1, z1), x0 < x1.
TERRAIN_SEGMENTS = (
    (-1.3, TOP_Z, -0.3, 0.0),  # left slope
    (0.3, 0.0, 1.3, TOP_Z),    # right slope
    (1.3, TOP_Z, 2.3, TOP_Z),  # right flat
)
THETA_LOW, THETA_HIGH = -1.5, 2.5
REGION_BOUNDS = (-1.5, -1.2, -0.1, 0.1, 1.25, 2.3, 2.5)  # official code
REGION_NAMES = ('left_edge', 'left_slope', 'gap', 'right_slope',
                'right_flat', 'right_edge')

# -- Hopper (Gym/Brax hopper dimensions) -------------------------------------
TORSO_Z0 = 1.25   # torso centre height at qpos = 0
TORSO_HALF, TORSO_R = 0.2, 0.05
THIGH_LEN, THIGH_R = 0.45, 0.05
LEG_LEN, LEG_R = 0.5, 0.04
FOOT_HEEL, FOOT_TOE, FOOT_R = -0.13, 0.26, 0.06   # along the foot, from ankle
GEAR = 200.0
START_CLEARANCE = 0.002   # gap between foot and terrain at the start

# -- Observation -------------------------------------------------------------
QVEL_CLIP = 10.0
HEIGHT_OFFSETS = (-0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 0.6, 0.8)

NQ = 6  # rootx, rootz, rooty, thigh, leg, foot


def terrain_xml(timestep: float = 0.005, iterations: int = 4,
                ls_iterations: int = 8, max_geom_pairs: int | None = 3
                ) -> str:
  """The MJCF of the hopper on the terrain.

  Args:
    timestep: physics timestep (s).
    iterations: constraint-solver iterations.
    ls_iterations: line-search iterations.
    max_geom_pairs: MJX broad phase: collide only this many closest
      (by bounding sphere) of the 6 foot/leg-terrain pairs; None: all.

  Returns:
    The model as an XML string.
  """
  boxes = []
  ht = 0.5 * TERRAIN_THICKNESS
  for i, (x0, z0, x1, z1) in enumerate(TERRAIN_SEGMENTS):
    dx, dz = x1 - x0, z1 - z0
    length = float(np.hypot(dx, dz))
    ux, uz = dx / length, dz / length
    nx, nz = -uz, ux  # upward normal (z axis of the box)
    cx = 0.5 * (x0 + x1) - nx * ht
    cz = 0.5 * (z0 + z1) - nz * ht
    boxes.append(
        f'<geom name="terrain{i}" type="box" pos="{cx:.6f} 0 {cz:.6f}" '
        f'size="{0.5 * length:.6f} 0.5 {ht:.6f}" '
        f'xyaxes="{ux:.6f} 0 {uz:.6f} 0 1 0" conaffinity="1" '
        'rgba="0.55 0.5 0.45 1"/>')
  terrain = '\n    '.join(boxes)
  leg_bottom = -LEG_LEN
  custom = ('' if max_geom_pairs is None else
            '<custom><numeric name="max_geom_pairs" '
            f'data="{int(max_geom_pairs)}"/></custom>')
  return f"""
<mujoco model="hopper_terrain">
  <compiler angle="radian" autolimits="true" inertiafromgeom="true"/>
  <option timestep="{timestep}" iterations="{iterations}"
          ls_iterations="{ls_iterations}">
    <flag eulerdamp="disable"/>
  </option>
  {custom}
  <default>
    <joint armature="1" damping="1"/>
    <geom contype="0" conaffinity="0" condim="3" friction="0.9 0.005 0.0001"
          solimp="0.8 0.8 0.01" margin="0.001" rgba="0.8 0.6 0.4 1"/>
    <motor ctrlrange="-1 1" ctrllimited="true" gear="{GEAR}"/>
  </default>
  <worldbody>
    {terrain}
    <geom name="pit" type="box" pos="0.5 0 {PIT_Z - 0.01}" size="3 0.5 0.01"
          rgba="0.9 0.3 0.3 0.3"/>
    <body name="torso" pos="0 0 {TORSO_Z0}">
      <joint name="rootx" type="slide" axis="1 0 0" armature="0" damping="0"/>
      <joint name="rootz" type="slide" axis="0 0 1" armature="0" damping="0"/>
      <joint name="rooty" type="hinge" axis="0 1 0" armature="0" damping="0"/>
      <geom name="torso" type="capsule" size="{TORSO_R}"
            fromto="0 0 {TORSO_HALF} 0 0 {-TORSO_HALF}"/>
      <body name="thigh" pos="0 0 {-TORSO_HALF}">
        <joint name="thigh_joint" type="hinge" axis="0 -1 0"
               range="-2.61799 0"/>
        <geom name="thigh" type="capsule" size="{THIGH_R}"
              fromto="0 0 0 0 0 {-THIGH_LEN}"/>
        <body name="leg" pos="0 0 {-THIGH_LEN}">
          <joint name="leg_joint" type="hinge" axis="0 -1 0"
                 range="-2.61799 0"/>
          <geom name="leg" type="capsule" size="{LEG_R}" contype="1"
                fromto="0 0 0 0 0 {leg_bottom}"/>
          <body name="foot" pos="0 0 {leg_bottom}">
            <joint name="foot_joint" type="hinge" axis="0 -1 0"
                   range="-0.785398 0.785398"/>
            <geom name="foot" type="capsule" size="{FOOT_R}" contype="1"
                  fromto="{FOOT_HEEL} 0 0 {FOOT_TOE} 0 0"
                  friction="2 0.005 0.0001"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="thigh" joint="thigh_joint"/>
    <motor name="leg" joint="leg_joint"/>
    <motor name="foot" joint="foot_joint"/>
  </actuator>
</mujoco>
"""


# -- Planar geometry (pure JAX) ------------------------------------------------
def _rot(a: jax.Array, v: tuple[float, float]) -> jax.Array:
  """(x, z) vector v rotated by angle a about +y (MuJoCo's convention)."""
  c, s = jnp.cos(a), jnp.sin(a)
  return jnp.stack([c * v[0] + s * v[1], -s * v[0] + c * v[1]])


def capsules(qpos: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Planar forward kinematics.

  Args:
    qpos: [6] (rootx, rootz, rooty, thigh, leg, foot).

  Returns:
    (ends [4, 2, 2], radii [4]): the (x, z) end points of the torso, thigh,
    leg and foot capsules, and their radii.
  """
  a0 = qpos[2]
  a1 = a0 - qpos[3]  # child hinges have axis -y
  a2 = a1 - qpos[4]
  a3 = a2 - qpos[5]
  centre = jnp.stack([qpos[0], TORSO_Z0 + qpos[1]])
  top = centre + _rot(a0, (0.0, TORSO_HALF))
  hip = centre + _rot(a0, (0.0, -TORSO_HALF))
  knee = hip + _rot(a1, (0.0, -THIGH_LEN))
  ankle = knee + _rot(a2, (0.0, -LEG_LEN))
  heel = ankle + _rot(a3, (FOOT_HEEL, 0.0))
  toe = ankle + _rot(a3, (FOOT_TOE, 0.0))
  ends = jnp.stack([jnp.stack([top, hip]), jnp.stack([hip, knee]),
                    jnp.stack([knee, ankle]), jnp.stack([heel, toe])])
  radii = jnp.asarray([TORSO_R, THIGH_R, LEG_R, FOOT_R])
  return ends, radii


def _terrain_boxes() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """(centre [B, 2], along-axis [B, 2], normal [B, 2], half sizes [B, 2])."""
  ht = 0.5 * TERRAIN_THICKNESS
  c, u, n, h = [], [], [], []
  for x0, z0, x1, z1 in TERRAIN_SEGMENTS:
    d = np.array([x1 - x0, z1 - z0])
    length = float(np.linalg.norm(d))
    ud = d / length
    nd = np.array([-ud[1], ud[0]])
    c.append(0.5 * np.array([x0 + x1, z0 + z1]) - ht * nd)
    u.append(ud)
    n.append(nd)
    h.append([0.5 * length, ht])
  return tuple(np.asarray(a, np.float32) for a in (c, u, n, h))


def _point_segment_dist(p: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
  ab = b - a
  t = jnp.clip(jnp.dot(p - a, ab) / jnp.maximum(jnp.dot(ab, ab), 1e-12),
               0.0, 1.0)
  return jnp.linalg.norm(p - (a + t * ab))


def _segment_rect_dist(p0: jax.Array, p1: jax.Array, half: jax.Array
                       ) -> jax.Array:
  """Distance between segment p0-p1 and the rectangle |x| <= half[0],
  |z| <= half[1] (0 where they intersect)."""
  # Separating-axis test on the rectangle's axes and the segment's normal.
  lo, hi = jnp.minimum(p0, p1), jnp.maximum(p0, p1)
  overlap_axes = jnp.all((lo <= half) & (hi >= -half))
  d = p1 - p0
  m = jnp.stack([-d[1], d[0]])
  corners = jnp.asarray([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]]
                        ) * half
  proj = corners @ m
  s = jnp.dot(p0, m)
  overlap_normal = (proj.min() <= s) & (proj.max() >= s)
  intersect = overlap_axes & overlap_normal

  def point_rect(p):
    q = jnp.abs(p) - half
    return jnp.linalg.norm(jnp.maximum(q, 0.0)) + jnp.minimum(q.max(), 0.0)

  dist = jnp.minimum(point_rect(p0), point_rect(p1))
  dist = jnp.minimum(dist, jax.vmap(
      lambda c: _point_segment_dist(c, p0, p1))(corners).min())
  return jnp.where(intersect, 0.0, jnp.maximum(dist, 0.0))


def _profile(x: jax.Array, filled: bool) -> jax.Array:
  """Terrain top height at x. filled=False: the real surface (PIT_Z where
  there is no floor); filled=True: the gap at the height of its rims and the
  ends continued at plateau height (the start height)."""
  h = jnp.full(jnp.shape(x), TOP_Z if filled else PIT_Z, jnp.float32)
  if filled:
    rim_l, rim_r = TERRAIN_SEGMENTS[0][2:], TERRAIN_SEGMENTS[1][:2]
    h = jnp.where((x > rim_l[0]) & (x < rim_r[0]),
                  rim_l[1] + (x - rim_l[0]) * (rim_r[1] - rim_l[1])
                  / (rim_r[0] - rim_l[0]), h)
  for x0, z0, x1, z1 in TERRAIN_SEGMENTS:
    on = (x >= x0) & (x <= x1)
    h = jnp.where(on, z0 + (x - x0) * (z1 - z0) / (x1 - x0), h)
  return h


def _max_filled(a: jax.Array, b: jax.Array) -> jax.Array:
  """max of the filled profile over [a, b] (it is piecewise linear)."""
  kinks = jnp.asarray(sorted({s[0] for s in TERRAIN_SEGMENTS} |
                             {s[2] for s in TERRAIN_SEGMENTS}), jnp.float32)
  pts = jnp.concatenate([jnp.stack([a, b]), jnp.clip(kinks, a, b)])
  return _profile(pts, filled=True).max()


class HopperState(NamedTuple):
  """What carries over between MJX steps."""
  qpos: jax.Array            # [6]
  qvel: jax.Array            # [6]
  qacc_warmstart: jax.Array  # [6] solver warm start


class HopperTerrain(base.ReachTask):
  """Hopper on slopes and a gap; theta = initial foot x in [-1.5, 2.5].

  Actions in [-1, 1]^3 are the motor controls of thigh, leg and foot (torque
  = 200 * action). One env step is `frame_skip` MJX steps of `timestep` s
  (default 4 x 5 ms = 20 ms, as the official code, so the default horizon of
  1000 steps is 20 s). Failure: torso or thigh touches the terrain, any part
  of the hopper reaches the pit level, or the state is not finite.

  The observation (`obs_dim = 20`) is
    [x, qpos[1:] (rootz, rooty, thigh, leg, foot), clip(qvel, +-10) (6),
     terrain top height at torso x + HEIGHT_OFFSETS (8; PIT_Z = no floor)].
  x is included because the terrain is fixed (the official observation also
  contains it); the heights make gap and slopes visible directly.

  The nominal distribution is uniform over [-1.5, 2.5] (the official
  `HopperJax.reset`); `eval_thetas(n)` is `linspace(-1.5, 2.5, n)` (its
  `reset_papereval`).
  """

  name = 'hopper_terrain'
  discrete = False
  num_actions = 3
  action_low = -1.0
  action_high = 1.0
  region_names = REGION_NAMES
  obs_dim = 1 + (NQ - 1) + NQ + len(HEIGHT_OFFSETS)

  def __init__(self, horizon: int = 1000, frame_skip: int = 4,
               timestep: float = 0.005, solver_iterations: int = 4,
               ls_iterations: int = 8, max_geom_pairs: int | None = 3,
               start_on_surface: bool = True):
    """Builds the model.

    Args:
      horizon: env steps without failure that count as safe.
      frame_skip: MJX steps per env step.
      timestep: MJX timestep (s).
      solver_iterations: constraint-solver iterations per MJX step.
      ls_iterations: line-search iterations per solver iteration.
      max_geom_pairs: foot/leg-terrain pairs collided per MJX step (the
        closest by bounding sphere, of 6); None: all 6 (about 1.5x slower
        on CPU, same behaviour in the tests).
      start_on_surface: True: the foot starts resting on the terrain under
        it; False: at plateau height for every theta (the official start).
    """
    if horizon < 1 or frame_skip < 1:
      raise ValueError(f'horizon and frame_skip must be >= 1, got {horizon}, '
                       f'{frame_skip}.')
    self.horizon = int(horizon)
    self.frame_skip = int(frame_skip)
    self.start_on_surface = bool(start_on_surface)
    self.theta_low = np.array([THETA_LOW], np.float32)
    self.theta_high = np.array([THETA_HIGH], np.float32)
    self.xml = terrain_xml(timestep, solver_iterations, ls_iterations,
                           max_geom_pairs)
    self.mj_model = mujoco.MjModel.from_xml_string(self.xml)
    self.mjx_model = mjx.put_model(self.mj_model)
    self.dt = float(timestep) * self.frame_skip
    self._boxes = _terrain_boxes()

  # -- physics ----------------------------------------------------------------
  def _data(self, state: HopperState, ctrl: jax.Array | None = None
            ) -> mjx.Data:
    d = mjx.make_data(self.mjx_model)
    d = d.replace(qpos=state.qpos, qvel=state.qvel,
                  qacc_warmstart=state.qacc_warmstart)
    if ctrl is not None:
      d = d.replace(ctrl=ctrl)
    return d

  def data(self, state: HopperState) -> mjx.Data:
    """The full `mjx.Data` of a state (after `mjx.forward`)."""
    return mjx.forward(self.mjx_model, self._data(state))

  def init_state(self, theta: jax.Array) -> HopperState:
    """Upright, joints at 0, at rest, ankle at x = theta, the foot's lowest
    point START_CLEARANCE above the highest (filled-in) terrain under the
    foot, or above the plateau (`start_on_surface=False`)."""
    x = jnp.asarray(theta, jnp.float32).reshape(-1)[0]
    if self.start_on_surface:
      ground = _max_filled(x + FOOT_HEEL - FOOT_R, x + FOOT_TOE + FOOT_R)
    else:
      ground = jnp.asarray(TOP_Z, jnp.float32)
    # Foot bottom at qpos = 0 is TORSO_Z0 - TORSO_HALF - THIGH_LEN - LEG_LEN
    # - FOOT_R above z = 0.
    foot_bottom0 = TORSO_Z0 - TORSO_HALF - THIGH_LEN - LEG_LEN - FOOT_R
    rootz = ground + START_CLEARANCE - foot_bottom0
    zero = jnp.zeros((), jnp.float32)
    qpos = jnp.stack([x, rootz, zero, zero, zero, zero])
    return HopperState(qpos, jnp.zeros(NQ, jnp.float32),
                       jnp.zeros(NQ, jnp.float32))

  def step(self, state: HopperState, action: jax.Array
           ) -> tuple[HopperState, jax.Array, jax.Array]:
    """`frame_skip` MJX steps with ctrl = action; (s', failed(s'), False)."""
    ctrl = jnp.clip(jnp.asarray(action, jnp.float32).reshape(3), -1.0, 1.0)
    d = self._data(state, ctrl)

    def substep(d, _):
      return mjx.step(self.mjx_model, d), None

    d, _ = jax.lax.scan(substep, d, None, length=self.frame_skip)
    new = HopperState(d.qpos, d.qvel, d.qacc_warmstart)
    return new, self.failed(new), jnp.asarray(False)

  # -- failure ---------------------------------------------------------------
  def body_terrain_dist(self, qpos: jax.Array) -> jax.Array:
    """Clearance [2] of torso and thigh from the terrain (<= 0: touching)."""
    ends, radii = capsules(qpos)
    c, u, n, h = (jnp.asarray(a) for a in self._boxes)

    def one(seg, r):
      def box(ci, ui, ni, hi):
        rot = jnp.stack([ui, ni])  # world -> box frame
        return _segment_rect_dist(rot @ (seg[0] - ci), rot @ (seg[1] - ci), hi)
      return jax.vmap(box)(c, u, n, h).min() - r

    return jax.vmap(one)(ends[:2], radii[:2])

  def lowest_point(self, qpos: jax.Array) -> jax.Array:
    """Lowest z of the hopper's surface."""
    ends, radii = capsules(qpos)
    return (ends[:, :, 1].min(axis=1) - radii).min()

  def failed(self, state: HopperState) -> jax.Array:
    """Whether `state` is in the failure set."""
    finite = jnp.all(jnp.isfinite(state.qpos)) & jnp.all(
        jnp.isfinite(state.qvel))
    qpos = jnp.where(finite, state.qpos, 0.0)
    touch = jnp.any(self.body_terrain_dist(qpos) <= 0.0)
    fell = self.lowest_point(qpos) <= PIT_Z
    return touch | fell | ~finite

  def failed_at_start(self, theta: jax.Array) -> jax.Array:
    return self.failed(self.init_state(theta))

  # -- observation -----------------------------------------------------------
  def observe(self, state: HopperState) -> jax.Array:
    """[20]: qpos, clipped qvel, terrain heights (see the class doc)."""
    qpos, qvel = state.qpos, state.qvel
    heights = _profile(qpos[0] + jnp.asarray(HEIGHT_OFFSETS, jnp.float32),
                       filled=False)
    return jnp.concatenate([
        qpos, jnp.clip(qvel, -QVEL_CLIP, QVEL_CLIP), heights]).astype(
            jnp.float32)

  # -- parameter space -------------------------------------------------------
  def sample_nominal(self, key: jax.Array) -> jax.Array:
    return jax.random.uniform(key, (1,), jnp.float32, THETA_LOW, THETA_HIGH)

  def region_of(self, theta: jax.Array) -> jax.Array:
    x = jnp.asarray(theta).reshape(-1)[0]
    inner = jnp.asarray(REGION_BOUNDS[1:-1], jnp.float32)
    return jnp.sum(x >= inner).astype(jnp.int32)

  def eval_thetas(self, n: int) -> np.ndarray:
    return np.linspace(THETA_LOW, THETA_HIGH, n, dtype=np.float32)[:, None]
