"""Tests for the gymnax/Brax adapter: specs, truncation vs termination, resets.

The value-target bugs this guards against are silent: bootstrapping from a
reset observation, or treating a time-limit cut as a terminal. So each check
compares the adapter against the raw library transition it wraps.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.rl import envs

CARTPOLE_LIMIT = 500
NUM_ROLLOUT_STEPS = 600


# ------------------------------------------------------------------ specs


@pytest.mark.parametrize('name, expected', [
    ('CartPole-v1', envs.EnvSpec('CartPole-v1', (4,), True, 2, None, None,
                                 500)),
    ('gymnax:CartPole-v1', envs.EnvSpec('CartPole-v1', (4,), True, 2, None,
                                        None, 500)),
    ('Acrobot-v1', envs.EnvSpec('Acrobot-v1', (6,), True, 3, None, None, 500)),
    ('Pendulum-v1', envs.EnvSpec('Pendulum-v1', (3,), False, 1, -2.0, 2.0,
                                 200)),
])
def test_gymnax_spec(name, expected):
  assert envs.make(name).spec == expected


def test_gymnax_params_override_sets_time_limit():
  env = envs.make('CartPole-v1', max_steps_in_episode=7)
  assert env.spec.max_steps == 7
  assert env.params.max_steps_in_episode == 7


def test_brax_spec_and_bad_backend():
  env = envs.make('brax:inverted_pendulum', backend='generalized',
                  episode_length=17)
  assert env.spec == envs.EnvSpec('brax:inverted_pendulum', (4,), False, 1,
                                  -1.0, 1.0, 17)
  assert envs.make('brax:inverted_pendulum').brax_env.backend == 'mjx'
  with pytest.raises(ValueError, match='backend'):
    envs.make('brax:inverted_pendulum', backend='nope')


# ---------------------------------------------------------------- gymnax


@pytest.mark.parametrize('name, action', [
    ('Acrobot-v1', jnp.int32(2)),
    ('Pendulum-v1', jnp.array([0.5], jnp.float32)),
])
def test_gymnax_step_types_under_jit_vmap(name, action):
  env = envs.make(name)
  keys = jax.random.split(jax.random.key(0), 3)

  @jax.jit
  def one_step(keys):
    obs, state = jax.vmap(env.reset)(keys)
    actions = jnp.broadcast_to(action, (3, *jnp.shape(action)))
    state, step = jax.vmap(env.step)(keys, state, actions)
    return obs, step

  obs, step = one_step(keys)
  assert obs.shape == (3, *env.spec.obs_shape) and obs.dtype == jnp.float32
  assert step.obs.shape == obs.shape and step.final_obs.shape == obs.shape
  assert step.reward.shape == (3,) and step.reward.dtype == jnp.float32
  assert step.terminated.dtype == jnp.bool_
  assert step.truncated.dtype == jnp.bool_


def _cartpole_policy(obs, key, balance):
  """A PD controller that balances CartPole for 500+ steps, or random."""
  x, x_dot, theta, theta_dot = obs
  good = theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0
  return jnp.where(balance, good,
                   jax.random.bernoulli(key)).astype(jnp.int32)


def _cartpole_rollout(env, key, balance):
  """Rolls out one env, recording the raw gymnax transition alongside."""
  raw, params = env.gymnax_env, env.params
  key_init, key = jax.random.split(key)
  obs, state = env.reset(key_init)

  def body(carry, key):
    obs, state, length = carry
    key_act, key_env = jax.random.split(key)
    action = _cartpole_policy(obs, key_act, balance)
    # gymnax's own key convention inside `env.step`.
    key_step, key_reset = jax.random.split(key_env)
    raw_obs, _, _, raw_term, _ = raw.step_env(key_step, state, action, params)
    raw_reset_obs, _ = raw.reset_env(key_reset, params)
    state, step = env.step(key_env, state, action)
    length = length + 1
    done = step.terminated | step.truncated
    out = dict(step=step, length=length, raw_obs=raw_obs, raw_term=raw_term,
               raw_reset_obs=raw_reset_obs)
    return (step.obs, state, jnp.where(done, 0, length)), out

  return jax.lax.scan(body, (obs, state, jnp.int32(0)),
                      jax.random.split(key, NUM_ROLLOUT_STEPS))[1]


@pytest.fixture(scope='module')
def cartpole():
  env = envs.make('CartPole-v1')
  rollout = jax.jit(jax.vmap(lambda k, b: _cartpole_rollout(env, k, b)))
  balance = jnp.array([True] * 3 + [False] * 3)
  keys = jax.random.split(jax.random.key(42), balance.shape[0])
  out = jax.device_get(rollout(keys, balance))
  return dict(env=env, rollout=rollout, keys=keys, balance=balance, out=out)


def test_cartpole_truncates_exactly_at_time_limit(cartpole):
  out, balance = cartpole['out'], np.asarray(cartpole['balance'])
  step = out['step']
  # Balanced episodes run into the limit exactly once within 600 steps, at
  # step 500, and that cut is a truncation, not a termination.
  np.testing.assert_array_equal(step.truncated[balance].sum(axis=1), 1)
  np.testing.assert_array_equal(
      np.argmax(step.truncated[balance], axis=1), CARTPOLE_LIMIT - 1)
  assert not step.terminated[balance].any()
  # Every truncation, anywhere, happens at episode length 500.
  np.testing.assert_array_equal(out['length'][step.truncated], CARTPOLE_LIMIT)
  # Random episodes terminate well before the limit.
  assert step.terminated[~balance].sum(axis=1).min() >= 5
  assert (out['length'][step.terminated] < CARTPOLE_LIMIT).all()


def test_cartpole_final_obs_is_pre_reset(cartpole):
  out = cartpole['out']
  step = out['step']
  done = step.terminated | step.truncated
  assert done.any()
  # final_obs is the raw transition's observation at every step (up to
  # 1-ulp differences from XLA fusing the two computations differently)...
  np.testing.assert_allclose(step.final_obs, out['raw_obs'], rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_array_equal(step.terminated, out['raw_term'])
  # ...equals obs while the episode goes on...
  np.testing.assert_array_equal(step.obs[~done], step.final_obs[~done])
  # ...and differs from obs after a reset, which is a fresh reset obs.
  np.testing.assert_allclose(step.obs[done], out['raw_reset_obs'][done],
                             rtol=1e-5, atol=1e-6)
  assert (np.abs(step.obs[done] - step.final_obs[done]).max(axis=-1) > 0).all()
  assert (np.abs(step.obs[done]) <= 0.05).all()  # CartPole reset range.


def test_cartpole_flags_and_dtypes(cartpole):
  step = cartpole['out']['step']
  assert not (step.terminated & step.truncated).any()
  assert step.reward.dtype == np.float32 and step.obs.dtype == np.float32
  assert step.final_obs.dtype == np.float32
  assert step.terminated.dtype == np.bool_ and step.truncated.dtype == np.bool_
  np.testing.assert_array_equal(step.reward, 1.0)


def test_cartpole_rollout_is_deterministic(cartpole):
  rollout, keys, balance = (cartpole['rollout'], cartpole['keys'],
                            cartpole['balance'])
  again = jax.device_get(rollout(keys, balance))['step']
  jax.tree.map(np.testing.assert_array_equal, again, cartpole['out']['step'])
  other = jax.device_get(rollout(jax.random.split(jax.random.key(7), 6),
                                 balance))['step']
  assert not np.array_equal(other.obs, cartpole['out']['step'].obs)


def test_termination_at_time_limit_is_not_truncation():
  """gymnax flags both when the last allowed step is also terminal."""
  env = envs.make('CartPole-v1')
  _, state = env.reset(jax.random.key(0))
  # One step from the limit, pole already beyond the 12 degree threshold.
  state = state.replace(time=CARTPOLE_LIMIT - 1, theta=jnp.float32(0.3))
  key = jax.random.key(1)
  raw = env.gymnax_env.step(key, state, 1, env.params)
  assert bool(raw[3]) and bool(raw[4])  # Raw: terminated and truncated.
  _, step = jax.jit(env.step)(key, state, jnp.int32(1))
  assert bool(step.terminated) and not bool(step.truncated)
  np.testing.assert_array_equal(step.final_obs, raw[5]['final_observation'])


def test_pendulum_truncates_at_200():
  env = envs.make('Pendulum-v1')

  @jax.jit
  def rollout(key):
    obs, state = env.reset(key)

    def body(state, key):
      state, step = env.step(key, state, jnp.zeros((1,)))
      return state, step

    return jax.lax.scan(body, state, jax.random.split(key, 210))[1]

  step = rollout(jax.random.key(3))
  np.testing.assert_array_equal(np.flatnonzero(step.truncated), [199])
  assert not step.terminated.any()
  assert float(jnp.abs(step.obs[199] - step.final_obs[199]).max()) > 0


# ------------------------------------------------------------------ brax


def _brax_rollout(env, key, push, num_steps):
  """Constant-action rollout, recording the expected reset observation."""
  key_init, key = jax.random.split(key)
  obs, state = env.reset(key_init)

  def body(state, key):
    state, step = env.step(key, state, jnp.full((1,), push))
    fresh_obs, _ = env.reset(jax.random.split(key)[1])
    return state, (step, fresh_obs)

  return jax.lax.scan(body, state, jax.random.split(key, num_steps))[1]


def _check_brax_rollout(env, num_steps):
  """Per-env `step` (always a fresh reset, pool or not)."""
  limit = env.spec.max_steps
  rollout = jax.jit(jax.vmap(
      lambda k, p: _brax_rollout(env, k, p, num_steps)))
  # Env 0 is left alone (pole stays up: only time limits); env 1 is pushed
  # hard (pole falls: terminations).
  keys = jax.random.split(jax.random.key(0), 2)
  pushes = jnp.array([0.0, 1.0])
  step, fresh_obs = jax.device_get(rollout(keys, pushes))
  step_again, _ = jax.device_get(rollout(keys, pushes))
  jax.tree.map(np.testing.assert_array_equal, step, step_again)

  assert step.reward.dtype == np.float32 and step.obs.dtype == np.float32
  assert not (step.terminated & step.truncated).any()
  expected_cut = np.zeros(num_steps, bool)
  expected_cut[limit - 1::limit] = True
  np.testing.assert_array_equal(step.truncated[0], expected_cut)
  assert not step.terminated[0].any()
  assert step.terminated[1].any()
  done = step.terminated | step.truncated
  # After an episode end: a fresh reset from split(key)[1], not final_obs.
  np.testing.assert_allclose(step.obs[done], fresh_obs[done], atol=1e-6)
  assert (np.abs(step.obs[done] - step.final_obs[done]).max(axis=-1)
          > 0).all()
  assert (np.abs(step.obs[done]) <= 0.01 + 1e-6).all()  # Reset noise range.
  np.testing.assert_array_equal(step.obs[~done], step.final_obs[~done])
  # Terminal final_obs is the fallen pole (|angle| > 0.2), pre-reset.
  assert (np.abs(step.final_obs[step.terminated][:, 1]) > 0.2).all()


def test_brax_time_limit_and_auto_reset():
  """On MJX, the default backend (the adapter does not branch on the
  backend; PPO learns on it in test_ppo.py)."""
  env = envs.make('brax:inverted_pendulum', episode_length=3)
  assert env.brax_env.backend == 'mjx'
  _check_brax_rollout(env, num_steps=7)


# ------------------------------------------------------- brax reset pool

POOL_ENVS, POOL_Q, POOL_LIMIT = 8, 2, 2
POOL_REFILLS, POOL_STEPS = 40, 6  # 3 time limits per env between refills


def _pooled_rollout(env, key, pushes):
  """`POOL_REFILLS` rollouts of `POOL_STEPS` batch steps, each after a
  `refill` (as `rl.rollout` does), recording the pool's observations."""
  k_init, key = jax.random.split(key)
  _, state = jax.vmap(env.reset)(jax.random.split(k_init, POOL_ENVS))

  def one_rollout(state, key):
    k_fill, k_steps = jax.random.split(key)
    state = env.refill(k_fill, state)
    pool_obs = env.pool_states(state).obs

    def body(state, key):
      return env.step_batch(jax.random.split(key, POOL_ENVS), state, pushes)

    state, step = jax.lax.scan(body, state,
                               jax.random.split(k_steps, POOL_STEPS))
    return state, (step, pool_obs)

  state, (step, pool_obs) = jax.lax.scan(
      one_rollout, state, jax.random.split(key, POOL_REFILLS))
  fresh = jax.vmap(env.brax_env.reset)(
      jax.random.split(jax.random.key(99), 2 * POOL_ENVS * POOL_Q *
                       POOL_REFILLS)).obs
  return step, pool_obs, state.reused, fresh


@pytest.fixture(scope='module')
def pooled():
  env = envs.make('brax:inverted_pendulum', episode_length=POOL_LIMIT,
                  reset_pool=POOL_Q)
  # Env 0 is pushed hard enough to fall within the limit now and then
  # (terminations); the others only run into the time limit.
  pushes = jnp.zeros((POOL_ENVS, 1)).at[0].set(1.0)
  out = jax.device_get(
      jax.jit(lambda k: _pooled_rollout(env, k, pushes))(jax.random.key(5)))
  return dict(env=env, out=out)


def test_reset_pool_hands_out_its_entries_in_order(pooled):
  """The k-th episode end after a refill starts from pool entry k (time,
  then env order); past the pool's E x Q entries they repeat from entry 0,
  and exactly those resets are counted as reused."""
  step, pool_obs, reused, _ = pooled['out']
  slots = POOL_ENVS * POOL_Q
  done = step.terminated | step.truncated  # [refills, T, E]
  n_reused = 0
  for r in range(POOL_REFILLS):
    ends = np.argwhere(done[r])  # (t, e), time-major then env order
    assert len(ends) >= slots + 1  # every rollout overdraws the pool
    for k, (t, e) in enumerate(ends):
      np.testing.assert_array_equal(step.obs[r, t, e],
                                    pool_obs[r][k % slots])
    n_reused += len(ends) - slots
  assert int(reused.sum()) == n_reused
  # Entries are distinct draws, and differ between refills.
  flat = pool_obs.reshape(-1, pool_obs.shape[-1])
  assert len(np.unique(flat, axis=0)) == len(flat)


def test_reset_pool_resets_are_distributed_as_the_env_reset(pooled):
  """The first E x Q resets of each rollout (the non-repeated ones) against
  direct `brax_env.reset` draws: two-sample KS on each coordinate of the
  reset observation (qpos, qvel noise), p > 0.01 (deterministic seeds)."""
  stats = pytest.importorskip('scipy.stats')
  step, _, _, fresh = pooled['out']
  slots = POOL_ENVS * POOL_Q
  done = step.terminated | step.truncated
  taken = np.concatenate([
      step.obs[r][done[r]][:slots] for r in range(POOL_REFILLS)])
  assert taken.shape == (POOL_REFILLS * slots, 4)
  assert (np.abs(taken) <= 0.01 + 1e-6).all()  # Reset noise range.
  for d in range(taken.shape[1]):
    p = stats.ks_2samp(taken[:, d], fresh[:, d]).pvalue
    assert p > 0.01, (d, p)
  # Moments of U(-0.01, 0.01): mean 0, std 0.01 / sqrt(3).
  np.testing.assert_allclose(taken.mean(0), 0.0, atol=1e-3)
  np.testing.assert_allclose(taken.std(0), 0.01 / np.sqrt(3), rtol=0.1)


def test_reset_pool_keeps_truncation_and_final_obs(pooled):
  step = pooled['out'][0]
  step = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), step)  # [t, E]
  num_steps = POOL_REFILLS * POOL_STEPS
  assert step.reward.dtype == np.float32 and step.obs.dtype == np.float32
  assert not (step.terminated & step.truncated).any()
  # Unpushed envs: a time limit every POOL_LIMIT steps, nothing else.
  expected_cut = np.zeros(num_steps, bool)
  expected_cut[POOL_LIMIT - 1::POOL_LIMIT] = True
  for e in range(1, POOL_ENVS):
    np.testing.assert_array_equal(step.truncated[:, e], expected_cut)
  assert not step.terminated[:, 1:].any()
  assert step.terminated[:, 0].any()
  done = step.terminated | step.truncated
  np.testing.assert_array_equal(step.obs[~done], step.final_obs[~done])
  assert (np.abs(step.obs[done] - step.final_obs[done]).max(axis=-1)
          > 0).all()
  assert (np.abs(step.final_obs[step.terminated][:, 1]) > 0.2).all()


def test_reset_pool_off_and_per_env_step_are_exact():
  """`reset_pool=None` keeps no pool, so `step_batch` is `vmap(step)`;
  `step` on a pooled state resets fresh and leaves the pool alone."""
  env = envs.make('brax:inverted_pendulum', reset_pool=None)
  _, state = jax.eval_shape(env.reset, jax.random.key(0))
  assert state.pool is None and env.pool_states(state) is None
  assert env.refill(jax.random.key(1), state) is state
  with pytest.raises(ValueError, match='reset_pool'):
    envs.make('brax:inverted_pendulum', reset_pool=0)
