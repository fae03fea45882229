"""Tests for the MJX hopper on slopes and a gap (`rl.reach.hopper`).

The default test checks the spec, the regions, the planar kinematics
against MuJoCo's and the body-terrain clearance against brute force. The
slow tests check the adapter's bookkeeping on MJX states (one compile of the
vmapped `ReachEnv` step: reward -1 exactly at the failure, `info`, resets to
`next_theta`) and that the terrain is where it should be (from above the gap
a passive hopper falls in, on the plateau it stands); they run the coverage evaluation with `rollout_safe` for a
random policy and for a joint-space PD controller that holds the standing
pose, which is safe for the whole 1000-step horizon exactly where the foot
starts on the flat plateau; and they check that the compact task state steps
exactly like the full `mjx.Data` and that the broad-phase culling is
harmless.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx
import numpy as np
import pytest

from iclrjax.rl.reach import base
from iclrjax.rl.reach import hopper

SMOKE_HORIZON = 60
SMOKE_STEPS = 70
GAP, FLAT, SLOPE = 0.0, 1.8, 0.7
ZERO, RANDOM, PD = 0, 1, 2


def _pd(obs: jax.Array) -> jax.Array:
  """Holds the joints (thigh, leg, foot) at 0: the standing pose."""
  return jnp.clip(-2.0 * obs[..., 3:6] - 0.2 * obs[..., 9:12], -1.0, 1.0)


def _brute_body_dist(qpos: np.ndarray) -> np.ndarray:
  """Torso/thigh clearance from densely sampled points on their axes."""
  ends, radii = (np.asarray(a, np.float64) for a in
                 hopper.capsules(jnp.asarray(qpos, jnp.float32)))
  c, u, n, h = hopper._terrain_boxes()  # pylint: disable=protected-access
  out = []
  for g in range(2):
    s = np.linspace(0.0, 1.0, 2001)[:, None]
    pts = ends[g, 0] + s * (ends[g, 1] - ends[g, 0])
    best = np.inf
    for i in range(len(c)):
      p = (pts - c[i]) @ np.stack([u[i], n[i]]).T
      q = np.abs(p) - h[i]
      d = np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(
          q.max(axis=1), 0.0)
      best = min(best, d.min())
    out.append(max(best, 0.0) - radii[g])
  return np.array(out)


def test_spec_regions_kinematics_and_terrain_distance():
  task = hopper.HopperTerrain(horizon=SMOKE_HORIZON)
  env = base.ReachEnv(task)

  # -- static parts: spec, regions, parameter space.
  assert env.spec.obs_shape == (task.obs_dim,) == (20,)
  assert (env.spec.num_actions, env.spec.action_low, env.spec.action_high,
          env.spec.discrete, env.spec.max_steps) == (3, -1.0, 1.0, False,
                                                     SMOKE_HORIZON)
  regions = [int(task.region_of(jnp.array([x]))) for x in
             (-1.5, -1.21, -1.2, -0.1, 0.0, 0.1, 1.25, 2.29, 2.3, 2.5)]
  assert regions == [0, 0, 1, 2, 2, 3, 4, 4, 5, 5]
  assert len(task.region_names) == 6
  thetas = task.eval_thetas(9)
  np.testing.assert_allclose(thetas[:, 0], np.linspace(-1.5, 2.5, 9))
  nominal = jax.vmap(task.sample_nominal)(jax.random.split(
      jax.random.key(0), 256))
  assert nominal.shape == (256, 1)
  assert float(nominal.min()) >= -1.5 and float(nominal.max()) <= 2.5
  assert not np.asarray(jax.vmap(task.failed_at_start)(
      jnp.asarray(task.eval_thetas(41)))).any()

  # -- planar kinematics and body-terrain clearance vs MuJoCo / brute force.
  rng = np.random.default_rng(0)
  data = mujoco.MjData(task.mj_model)
  dist = jax.jit(task.body_terrain_dist)
  for _ in range(10):
    q = np.array([rng.uniform(-1.6, 2.6), rng.uniform(-1.3, 0.2),
                  rng.uniform(-np.pi, np.pi), -rng.uniform(0.0, 2.6),
                  -rng.uniform(0.0, 2.6), rng.uniform(-0.8, 0.8)])
    data.qpos[:] = q
    mujoco.mj_kinematics(task.mj_model, data)
    ends, _ = hopper.capsules(jnp.asarray(q, jnp.float32))
    for i, name in enumerate(('torso', 'thigh', 'leg', 'foot')):
      g = task.mj_model.geom(name).id
      axis = data.geom_xmat[g].reshape(3, 3)[:, 2] * task.mj_model.geom_size[
          g, 1]
      mj = np.stack([data.geom_xpos[g] + axis, data.geom_xpos[g] - axis])
      ours = np.asarray(ends[i])
      err = min(np.abs(ours - mj[:, [0, 2]]).max(),
                np.abs(ours - mj[::-1][:, [0, 2]]).max())
      assert err < 1e-5, (name, err)
    np.testing.assert_allclose(dist(jnp.asarray(q, jnp.float32)),
                               _brute_body_dist(q), atol=1e-3)


# ----------------------------------------------------------------- slow


@pytest.mark.slow
def test_adapter_fails_in_gap_and_stands_on_flat():
  """The `ReachEnv` adapter on MJX states under jit + vmap (one compile,
  ~20 s: slow; the adapter's bookkeeping is tested in the default suite on
  the pendulum and Dubins tasks)."""
  task = hopper.HopperTerrain(horizon=SMOKE_HORIZON)
  env = base.ReachEnv(task)
  thetas = jnp.array([[GAP], [FLAT], [FLAT], [SLOPE]])
  modes = jnp.array([ZERO, ZERO, PD, RANDOM])
  n = thetas.shape[0]

  @jax.jit
  def run(key):
    obs0, state = jax.vmap(env.reset_to)(thetas)
    # The gap env restarts on the plateau after its episode.
    state = base.set_next_theta(
        state, thetas.at[0].set(jnp.array([FLAT])))

    def body(carry, k):
      obs, state = carry
      rand = jax.random.uniform(k, (n, 3), minval=-1.0, maxval=1.0)
      act = jnp.where((modes == ZERO)[:, None], 0.0,
                      jnp.where((modes == RANDOM)[:, None], rand, _pd(obs)))
      state, step = jax.vmap(env.step)(jax.random.split(k, n), state, act)
      return (step.obs, state), (step, state.t)

    _, (steps, t) = jax.lax.scan(body, (obs0, state),
                                 jax.random.split(key, SMOKE_STEPS))
    reset_obs = jax.vmap(lambda th: env.reset_to(th)[0])(
        jnp.array([[FLAT], [FLAT], [FLAT], [SLOPE]]))
    return obs0, steps, t, reset_obs

  obs0, steps, t, reset_obs = jax.device_get(run(jax.random.key(1)))
  rew, term, trunc = steps.reward, steps.terminated, steps.truncated
  done, safe, theta = (steps.info['done'], steps.info['safe'],
                       steps.info['theta'][..., 0])

  assert obs0.shape == (n, task.obs_dim)
  assert np.isfinite(steps.obs).all() and np.isfinite(steps.final_obs).all()
  # Reward -1 exactly at the failure (the task never finishes early).
  assert set(np.unique(rew)) <= {0.0, -1.0}
  np.testing.assert_array_equal(rew == -1.0, term)
  np.testing.assert_array_equal(done, term | trunc)
  np.testing.assert_array_equal(safe, done & ~term)
  assert not (term & trunc).any()
  np.testing.assert_array_equal(steps.final_obs[~done], steps.obs[~done])
  np.testing.assert_array_equal(t, np.where(done, 0, t))  # reset counter
  for i in range(n):
    ends = np.flatnonzero(done[:, i])
    for e in ends:  # fresh episode observation after every episode end
      np.testing.assert_array_equal(steps.obs[e, i], reset_obs[i])

  # Gap, no action: falls in well within the horizon; reported with the
  # episode's theta, then restarts at next_theta.
  k = int(np.argmax(term[:, 0]))
  assert term[k, 0] and not done[:k, 0].any() and k < SMOKE_HORIZON - 10
  assert rew[k, 0] == -1.0 and done[k, 0] and not safe[k, 0]
  np.testing.assert_array_equal(theta[:k + 1, 0], np.float32(GAP))
  np.testing.assert_array_equal(theta[k + 1:, 0], np.float32(FLAT))
  assert steps.final_obs[k, 0, 1] < -0.5  # rootz: well below the rim
  # Plateau, no action: the hopper stands for a while (it slumps later).
  assert not done[:20, 1].any()
  # Plateau, PD holding the pose: safe until the time limit, then restarts.
  assert not term[:, 2].any()
  np.testing.assert_array_equal(np.flatnonzero(trunc[:, 2]),
                                [SMOKE_HORIZON - 1])
  assert safe[SMOKE_HORIZON - 1, 2]
  np.testing.assert_array_equal(theta[:, 2], np.float32(FLAT))


@pytest.fixture(scope='module')
def task():
  return hopper.HopperTerrain()


@functools.partial(jax.jit, static_argnums=(0,))
def _rollout_safe(task, w, use_pd, thetas):
  """rollout_safe for tanh(obs @ w) or the PD stance (one compile)."""
  act = lambda obs: jnp.where(use_pd, _pd(obs), jnp.tanh(obs @ w))
  return base.rollout_safe(task, act, thetas)


@pytest.mark.slow
def test_rollout_safe_and_coverage_random_policy(task):
  thetas = task.eval_thetas(24)
  w = jax.random.normal(jax.random.key(0), (task.obs_dim, 3)) / np.sqrt(
      task.obs_dim)
  safe = np.asarray(_rollout_safe(task, w, False, jnp.asarray(thetas)))
  assert safe.shape == (24,) and safe.dtype == bool
  cov = base.region_coverage(task, thetas, safe)
  assert set(cov) == {'coverage'} | {f'coverage/{r}' for r in
                                     task.region_names}
  assert all(0.0 <= v <= 1.0 for v in cov.values())
  assert cov['coverage/gap'] == 0.0
  assert cov['coverage'] < 0.5


@pytest.mark.slow
def test_pd_stance_is_safe_exactly_on_the_plateau(task):
  flat = np.linspace(1.35, 2.2, 9)
  unsafe = np.concatenate([np.linspace(-1.5, -1.35, 3),   # left edge
                           np.linspace(-1.0, -0.45, 3),   # left slope
                           np.linspace(-0.1, 0.1, 3),     # gap
                           np.linspace(0.3, 1.0, 3),      # right slope
                           np.linspace(2.35, 2.5, 3)])    # right edge
  thetas = np.concatenate([flat, unsafe]).astype(np.float32)[:, None]
  w = jnp.zeros((task.obs_dim, 3))
  safe = np.asarray(_rollout_safe(task, w, True, jnp.asarray(thetas)))
  np.testing.assert_array_equal(safe, np.arange(len(thetas)) < len(flat))


@pytest.mark.slow
def test_compact_state_and_broad_phase_match_the_full_simulation(task):
  """The compact state steps exactly like the full `mjx.Data`, and culling to
  the 3 closest foot/leg-terrain pairs changes nothing that matters (here:
  over the gap, at the slope/plateau junction, on the plateau, on a slope)."""
  thetas = jnp.array([[0.0], [1.3], [1.8], [0.7]])
  acts = 0.5 * jax.random.uniform(jax.random.key(0), (4, 25, 3),
                                  minval=-1.0, maxval=1.0)

  def compact(task, theta, acts):
    def body(s, a):
      s, _, _ = task.step(s, a)
      return s, s.qpos
    return jax.lax.scan(body, task.init_state(theta), acts)[1]

  def full(theta, acts):
    def body(d, a):
      d = d.replace(ctrl=a)
      for _ in range(task.frame_skip):
        d = mjx.step(task.mjx_model, d)
      return d, d.qpos
    return jax.lax.scan(body, task.data(task.init_state(theta)), acts)[1]

  all_pairs = hopper.HopperTerrain(max_geom_pairs=None)
  q = jax.jit(jax.vmap(functools.partial(compact, task)))(thetas, acts)
  q_full = jax.jit(jax.vmap(full))(thetas, acts)
  q_all = jax.jit(jax.vmap(functools.partial(compact, all_pairs)))(
      thetas, acts)
  np.testing.assert_allclose(q, q_full, atol=1e-6)
  np.testing.assert_allclose(q, q_all, atol=1e-4)
