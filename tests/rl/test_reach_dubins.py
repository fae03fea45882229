"""Dubins Circle (FGE's circular-track task): geometry against a closed form,
dynamics against hand-computed trajectories, the adapter under jit + vmap."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.rl.reach import base
from iclrjax.rl.reach import dubins


def _disc_touches_rectangle(p, c, length, angle, r):
  """Distance from p to the rectangle (local-frame clamp) below r."""
  d = np.asarray(p) - np.asarray(c)
  u = d[0] * math.cos(angle) + d[1] * math.sin(angle)
  w = d[0] * math.sin(angle) - d[1] * math.cos(angle)
  gap = np.hypot(max(abs(u) - length / 2, 0.0),
                 max(abs(w) - dubins.EGO_R, 0.0))
  return gap < r


def test_rectangle_hit_is_the_disc_rectangle_distance():
  rng = np.random.default_rng(0)
  hit = jax.jit(dubins.rectangle_hit, static_argnums=4)
  n_hit = 0
  for _ in range(400):
    c = rng.uniform(-2, 2, 2)
    length, angle = rng.uniform(0.6, 2.0), rng.uniform(0, 2 * math.pi)
    p = c + rng.uniform(-2.5, 2.5, 2)
    want = _disc_touches_rectangle(p, c, length, angle, dubins.EGO_R)
    got = bool(hit(jnp.asarray(p, jnp.float32), jnp.asarray(c, jnp.float32),
                   jnp.float32(length), jnp.float32(angle), dubins.EGO_R))
    assert got == want, (p, c, length, angle)
    n_hit += want
  assert 50 < n_hit < 350  # both outcomes are exercised


def _run(task, theta, steer, acc=0.0, steps=200):
  s0 = task.init_state(jnp.asarray(theta, jnp.float32))

  def body(s, _):
    s, failed, _ = task.step(s, jnp.array([steer, acc], jnp.float32))
    return s, (failed, jnp.linalg.norm(s.ego[:2]))

  return jax.jit(lambda s: jax.lax.scan(body, s, None, length=steps)[1])(s0)


def test_start_state_and_observation():
  task = dubins.DubinsCircle()
  s = task.init_state(jnp.array([0.2, 0.3, 1.0, 1.5]))
  np.testing.assert_allclose(s.ego, [5.75, 0.0, math.pi / 2, 2.5], atol=1e-6)
  np.testing.assert_allclose(s.cars[0, :2], [-5.75, 0.0], atol=1e-5)
  a1 = math.pi + math.pi / 8
  np.testing.assert_allclose(s.cars[1, :2],
                             [7.25 * math.cos(a1), 7.25 * math.sin(a1)],
                             atol=1e-5)
  np.testing.assert_allclose(s.cars[:, 3:], [[0.2, 1.0], [0.3, 1.5]])
  obs = np.asarray(task.observe(s))
  assert obs.shape == (14,)
  # Heading along the tangent, a quarter into the track, mid speed.
  np.testing.assert_allclose(obs[:4], [1.0, 0.0, 0.25, 0.5], atol=1e-6)
  # Car 0 half a lap away in the same lane; car 1 one lane out.
  norm_w = lambda w: (w - dubins.W_MIN) / (dubins.W_MAX - dubins.W_MIN)
  np.testing.assert_allclose(obs[4:9], [-1.0, 0.0, 0.0, norm_w(0.2) - 0.5,
                                        1.0], atol=1e-5)
  np.testing.assert_allclose(obs[9:14], [math.cos(a1), math.sin(a1), 0.5,
                                         norm_w(0.3) - 0.5, 1.5], atol=1e-5)
  assert not bool(task._failed(s))


def test_straight_driving_leaves_the_track_when_predicted():
  """Steer 0 from (5.75, 0) heading +y at 2.5: |p| passes 7.5 once
  5.75^2 + (0.25 k)^2 > 7.5^2, i.e. at step k = 20 (cars parked far)."""
  task = dubins.DubinsCircle()
  failed, r = _run(task, [dubins.W_MIN, dubins.W_MIN, 0.6, 0.6], 0.0,
                   steps=40)
  first = int(np.argmax(np.asarray(failed)))
  k = math.ceil(math.sqrt(7.5**2 - 5.75**2) / 0.25)
  assert first == k - 1, (first, k)
  assert float(r[first]) > 7.5 > float(r[first - 1])


def test_lane_keeping_ego_rear_ends_the_slow_car_in_its_lane():
  """Steering for the inner lane circle (turn rate v / 5.75) keeps the
  ego on the track; it gains (2.5/5.75 - pi/32) rad/s on car 0, half a
  lap ahead, and touches it once the arc gap shrinks to the car's half
  length plus the ego radius."""
  task = dubins.DubinsCircle(release_rectangles=False)
  steer = dubins.R_MID / (2 * dubins.LANES[0])
  length = 1.0
  failed, r = _run(task, [dubins.W_MIN, dubins.W_MAX, length, 0.6], steer,
                   steps=150)
  failed, r = np.asarray(failed), np.asarray(r)
  first = int(np.argmax(failed))
  assert failed.any()
  assert np.all((r[:first] > 5.5) & (r[:first] < 7.5))
  closing = 2.5 / 5.75 - dubins.W_MIN
  gap = math.pi - (length / 2 + dubins.EGO_R) / 5.75
  assert abs((first + 1) * 0.1 - gap / closing) < 0.3, (first, gap / closing)


def test_reach_env_under_jit_vmap():
  env = base.ReachEnv(dubins.DubinsCircle(horizon=30))
  assert env.spec.obs_shape == (14,) and env.spec.num_actions == 2
  keys = jax.random.split(jax.random.key(0), 8)
  obs, state = jax.vmap(env.reset)(keys)
  assert obs.shape == (8, 14)
  theta = np.asarray(state.theta)
  assert np.all((theta >= env.task.theta_low) & (theta <= env.task.theta_high))

  @jax.jit
  def run(state):
    def body(state, k):
      a = jax.random.uniform(k, (8, 2), minval=-1, maxval=1)
      state, step = jax.vmap(env.step)(jax.random.split(k, 8), state, a)
      return state, step
    return jax.lax.scan(body, state, jax.random.split(jax.random.key(1), 40))

  _, steps = run(state)
  assert np.isfinite(np.asarray(steps.obs)).all()
  np.testing.assert_array_equal(np.asarray(steps.reward) == -1.0,
                                np.asarray(steps.terminated))
  # Every env ends an episode (failure or the 30-step limit) within 40.
  assert np.asarray(steps.info['done']).any(0).all()


def test_skewed_nominal_and_regions():
  """The skewed rho puts 0.9 + 0.099 x (easy share of the box) on the easy
  region and ~1e-3 + 0.099 x (hard share) on the hard one; regions split
  the box as the docstring says."""
  task = dubins.DubinsCircle(nominal='skewed')
  th = np.asarray(jax.jit(jax.vmap(task.sample_nominal))(
      jax.random.split(jax.random.key(0), 40_000)))
  assert np.all((th >= task.theta_low) & (th <= task.theta_high))
  reg = np.asarray(jax.vmap(task.region_of)(jnp.asarray(th)))
  span = dubins.W_MAX - dubins.W_MIN
  easy_share = ((dubins.EASY_W[1] - dubins.EASY_W[0]) / span) ** 2
  hard_share = ((dubins.W_MAX - dubins.HARD_W1) / span
                * (dubins.EASY_W[1] - dubins.EASY_W[0]) / span)
  np.testing.assert_allclose(np.mean(reg == 0), 0.9 + 0.099 * easy_share,
                             atol=0.005)
  np.testing.assert_allclose(np.mean(reg == 1), 1e-3 + 0.099 * hard_share,
                             atol=0.002)
  assert [int(task.region_of(jnp.array(t))) for t in
          ([0.3, 0.5, 1.0, 1.0], [0.8, 0.3, 1.0, 1.0], [0.8, 0.8, 1.0, 1.0],
           [0.1, 0.3, 1.0, 1.0])] == [0, 1, 2, 2]
