"""Parameter-robust avoid problems (FGE, arXiv 2602.15817, Sec. 2).

A parameter theta in a box Theta fixes the initial state s0(theta), the
dynamics f_theta and the failure set F_theta. The goal is a policy that stays
out of F_theta up to the horizon for as many theta as possible; some theta
are infeasible (no policy is safe from them) and the feasible set Theta* is
unknown. The RL form (the paper's Lemma 1, as its code runs it): reward -1 at
the first step inside F_theta, the episode terminates there, else 0, so
J(pi, theta) = -E[gamma^T_fail] and J = 0 exactly on safe rollouts.

`ReachTask` is the problem (pure JAX methods, static config on the object);
`ReachEnv` adapts it to the project's `rl.envs.Env` so the PPO core trains on
it unchanged. The adapter resets every finished episode to the theta in
`state.next_theta`, which the training algorithm (domain randomisation, PLR,
RARL, FGE in `rl.fge`) writes before each rollout with `set_next_theta`; its
`Step.info` reports, per step, the theta of the episode that step belongs to
and, when the episode ends, whether it ended safe. `coverage` runs the
deterministic policy from a fixed evaluation set of theta.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.rl import envs as envs_lib


class ReachTask:
  """A parameter-robust avoid problem. Subclasses set the attributes and
  implement the methods marked abstract; all methods are pure JAX on one
  (unbatched) theta or state."""

  name: str
  theta_low: np.ndarray    # [d] box bounds of Theta
  theta_high: np.ndarray   # [d]
  obs_dim: int
  discrete: bool
  num_actions: int         # discrete: #actions; continuous: action dim
  action_low: float | None = None
  action_high: float | None = None
  horizon: int             # safe = no failure for `horizon` steps (or until
                           # the task finishes early without failing)
  region_names: tuple[str, ...] = ('all',)
  # Whether `feasible` is exact (ToyLevels) or a numerical approximation
  # (a grid viability kernel), which decides how a disagreement is read.
  exact_ground_truth: bool = True
  # Pixel tasks: the observation is an image [H, W, C] flattened, then any
  # extra features; the policy network reads it with a CNN (rl.networks).
  image_shape: tuple[int, ...] | None = None

  @property
  def feature_dim(self) -> int:
    """Size of `initial_features` (the classifiers' input)."""
    return int(self.obs_dim)

  def initial_features(self, theta: jax.Array) -> jax.Array:
    """What FGE's classifiers and novelty density read for theta: the
    initial observation (the paper's obs0); pixel tasks return theta's box
    coordinates instead, as the paper's code does there."""
    return jnp.asarray(self.observe(self.init_state(theta)), jnp.float32)

  @property
  def theta_dim(self) -> int:
    return int(np.asarray(self.theta_low).shape[0])

  # -- abstract ---------------------------------------------------------------
  def sample_nominal(self, key: jax.Array) -> jax.Array:
    """theta ~ rho, the nominal (domain-randomisation) distribution."""
    raise NotImplementedError

  def init_state(self, theta: jax.Array) -> Any:
    """s0(theta)."""
    raise NotImplementedError

  def observe(self, state: Any) -> jax.Array:
    raise NotImplementedError

  def step(self, state: Any, action: jax.Array
           ) -> tuple[Any, jax.Array, jax.Array]:
    """(s', failed, finished): failed = s' in F_theta; finished = the task
    ended without failure before the horizon (e.g. the agent landed)."""
    raise NotImplementedError

  # -- defaults ---------------------------------------------------------------
  def failed_at_start(self, theta: jax.Array) -> jax.Array:
    """True where s0(theta) is already in F_theta (such theta are never
    explore candidates)."""
    del theta
    return jnp.asarray(False)

  def region_of(self, theta: jax.Array) -> jax.Array:
    """Index into `region_names` (for per-region coverage)."""
    del theta
    return jnp.asarray(0, jnp.int32)

  def to_box(self, theta: jax.Array) -> jax.Array:
    """Theta -> [-1, 1]^d (the coordinates novelty and RARL work in)."""
    lo, hi = jnp.asarray(self.theta_low), jnp.asarray(self.theta_high)
    return 2.0 * (theta - lo) / (hi - lo) - 1.0

  def from_box(self, u: jax.Array) -> jax.Array:
    lo, hi = jnp.asarray(self.theta_low), jnp.asarray(self.theta_high)
    return lo + (jnp.clip(u, -1.0, 1.0) + 1.0) * 0.5 * (hi - lo)

  def eval_thetas(self, n: int) -> np.ndarray:
    """A fixed evaluation set [n, d] (default: a uniform grid over the box)."""
    d = self.theta_dim
    per = max(2, int(round(n ** (1.0 / d))))
    axes = [np.linspace(lo, hi, per) for lo, hi in
            zip(np.asarray(self.theta_low), np.asarray(self.theta_high))]
    grid = np.stack(np.meshgrid(*axes, indexing='ij'), -1).reshape(-1, d)
    return grid.astype(np.float32)

  def feasible(self, thetas: np.ndarray) -> np.ndarray | None:
    """Ground-truth feasibility of each theta, where the task knows it."""
    del thetas
    return None

  def __repr__(self) -> str:
    return f'{type(self).__name__}({self.name})'


class ReachState(NamedTuple):
  task_state: Any
  theta: jax.Array       # [d] theta of the episode in progress
  next_theta: jax.Array  # [d] theta the next reset uses
  t: jax.Array           # int32 steps into the episode


class ReachEnv(envs_lib.Env):
  """`ReachTask` as an `Env`: reward -1 at the first failure (terminal), 0
  otherwise; time limit `task.horizon` (truncation, bootstrapped); auto-reset
  to `state.next_theta`. `Step.info = {'theta', 'done', 'safe'}` per step:
  the episode's theta, whether it ended at this step, and whether it ended
  without failure (only meaningful where `done`)."""

  def __init__(self, task: ReachTask):
    self.task = task
    self.spec = envs_lib.EnvSpec(
        name=task.name, obs_shape=(int(task.obs_dim),),
        discrete=bool(task.discrete), num_actions=int(task.num_actions),
        action_low=task.action_low, action_high=task.action_high,
        max_steps=int(task.horizon),
        image_shape=(None if task.image_shape is None
                     else tuple(task.image_shape)))

  def reset_to(self, theta: jax.Array) -> tuple[jax.Array, ReachState]:
    s = self.task.init_state(theta)
    return (jnp.asarray(self.task.observe(s), jnp.float32),
            ReachState(s, theta, theta, jnp.zeros((), jnp.int32)))

  def reset(self, key: jax.Array) -> tuple[jax.Array, ReachState]:
    return self.reset_to(self.task.sample_nominal(key))

  def step(self, key: jax.Array, state: ReachState, action: jax.Array
           ) -> tuple[ReachState, envs_lib.Step]:
    del key
    task = self.task
    if task.discrete:
      action = jnp.asarray(action).astype(jnp.int32).reshape(())
    else:
      action = jnp.clip(jnp.asarray(action, jnp.float32).reshape(
          task.num_actions), task.action_low, task.action_high)
    s, failed, finished = task.step(state.task_state, action)
    failed = jnp.asarray(failed, bool).reshape(())
    t = state.t + 1
    terminated = failed | jnp.asarray(finished, bool).reshape(())
    truncated = (t >= task.horizon) & ~terminated
    done = terminated | truncated
    final_obs = jnp.asarray(task.observe(s), jnp.float32)
    fresh = task.init_state(state.next_theta)
    s_next = jax.tree.map(lambda r, x: jnp.where(done, r, x), fresh, s)
    new = ReachState(
        s_next, jnp.where(done, state.next_theta, state.theta),
        state.next_theta, jnp.where(done, 0, t).astype(jnp.int32))
    info = {'theta': state.theta, 'done': done, 'safe': done & ~failed}
    return new, envs_lib.Step(
        obs=jnp.asarray(task.observe(s_next), jnp.float32),
        reward=-failed.astype(jnp.float32), terminated=terminated,
        truncated=truncated, final_obs=final_obs, info=info)


def set_next_theta(env_state: ReachState, theta_E: jax.Array) -> ReachState:
  """Writes the theta each env resets to at its next episode end."""
  return env_state._replace(next_theta=theta_E)


def initial_obs(task: ReachTask, theta_N: jax.Array) -> jax.Array:
  """`task.initial_features` for a batch of theta: the classifiers' input
  (the paper conditions its classifiers on the initial observation)."""
  return jax.vmap(task.initial_features)(theta_N)


def first_failure(task: ReachTask, act: Callable[..., jax.Array],
                  theta_N: jax.Array, key: jax.Array | None = None
                  ) -> jax.Array:
  """[N] int32: the step whose transition first enters F_theta (0 where
  s0(theta) is already in it), -1 where `act` keeps theta safe for the whole
  horizon (or until the task finishes). `act` maps obs [N, obs_dim] to
  actions [N] or [N, num_actions]; with a `key` it is act(obs, key_t) with a
  fresh key per step (a stochastic policy). One episode per theta, no reset:
  its return is -gamma^t at failure step t and 0 if safe."""
  s0 = jax.vmap(task.init_state)(theta_N)
  failed0 = jax.vmap(task.failed_at_start)(theta_N).astype(bool)
  n = theta_N.shape[0]
  step_task = jax.vmap(task.step)
  keys = (jax.random.split(key, task.horizon) if key is not None
          else jnp.zeros((task.horizon,)))

  def body(carry, xs):
    s, alive, t_fail = carry
    t, k = xs
    obs = jax.vmap(task.observe)(s)
    a = act(obs) if key is None else act(obs, k)
    if task.discrete:
      a = a.astype(jnp.int32).reshape(n)
    else:
      a = jnp.clip(a.reshape(n, task.num_actions), task.action_low,
                   task.action_high)
    s_new, f, fin = step_task(s, a)
    t_fail = jnp.where(alive & f, t, t_fail)
    alive = alive & ~f & ~fin
    # Freeze finished/failed envs (their state stops changing).
    s = jax.tree.map(
        lambda new, old: jnp.where(
            alive.reshape((-1,) + (1,) * (new.ndim - 1)), new, old), s_new, s)
    return (s, alive, t_fail), None

  (_, _, t_fail), _ = jax.lax.scan(
      body, (s0, ~failed0, jnp.where(failed0, 0, -1).astype(jnp.int32)),
      (jnp.arange(task.horizon, dtype=jnp.int32), keys))
  return t_fail


def rollout_safe(task: ReachTask, act: Callable[..., jax.Array],
                 theta_N: jax.Array, key: jax.Array | None = None
                 ) -> jax.Array:
  """Safe flags [N]: whether `act` (obs [N, obs_dim] -> actions [N] or
  [N, num_actions]; with a `key`, act(obs, key_t), see `first_failure`)
  keeps each theta out of its failure set for the whole horizon (or until
  the task finishes). The coverage metric (paper Sec. 5) is their mean."""
  return first_failure(task, act, theta_N, key) < 0


def region_coverage(task: ReachTask, thetas: np.ndarray, safe: np.ndarray
                    ) -> dict[str, float]:
  """{'coverage': mean safe, 'coverage/<region>': mean safe per region}."""
  safe = np.asarray(safe, np.float64)
  out = {'coverage': float(safe.mean())}
  regions = np.asarray(jax.vmap(task.region_of)(jnp.asarray(thetas)))
  for i, name in enumerate(task.region_names):
    m = regions == i
    if m.any():
      out[f'coverage/{name}'] = float(safe[m].mean())
  return out


class GymnaxTask(ReachTask):
  """A user's gymnax environment as a parameter-robust avoid problem.

  `initial_state(theta) -> env state` places theta in the environment (an
  initial state, or parameters the state carries), `failed(env state)` is
  the failure set F_theta; theta lives in the box [theta_low, theta_high]
  and rho is uniform over it unless `sample_nominal(key) -> theta` is
  given. The environment steps with `step_env` at a fixed key (a
  deterministic environment) and `done` without failure (e.g. gymnax's own
  time limit) ends an episode safely.
  """

  def __init__(self, env: Any, env_params: Any, theta_low, theta_high,
               initial_state: Callable[[jax.Array], Any],
               failed: Callable[[Any], jax.Array], horizon: int,
               sample_nominal: Callable[[jax.Array], jax.Array] | None = None,
               name: str | None = None):
    self.env, self.env_params = env, env_params
    self.theta_low = np.asarray(theta_low, np.float32).reshape(-1)
    self.theta_high = np.asarray(theta_high, np.float32).reshape(-1)
    self._initial, self._failed = initial_state, failed
    self._nominal = sample_nominal
    self.horizon = int(horizon)
    self.name = name or type(env).__name__
    space = env.action_space(env_params)
    self.discrete = hasattr(space, 'n')
    if self.discrete:
      self.num_actions = int(space.n)
    else:
      self.num_actions = int(np.prod(space.shape))
      self.action_low = float(np.min(space.low))
      self.action_high = float(np.max(space.high))
    obs = self.observe(self.init_state(jnp.asarray(self.theta_low)))
    self.obs_dim = int(np.prod(np.shape(obs)))

  def sample_nominal(self, key: jax.Array) -> jax.Array:
    if self._nominal is not None:
      return jnp.asarray(self._nominal(key), jnp.float32)
    return jax.random.uniform(key, self.theta_low.shape, jnp.float32,
                              self.theta_low, self.theta_high)

  def init_state(self, theta: jax.Array) -> Any:
    return self._initial(theta)

  def observe(self, state: Any) -> jax.Array:
    return jnp.ravel(self.env.get_obs(state, self.env_params))

  def step(self, state: Any, action: jax.Array):
    if not self.discrete:
      action = jnp.reshape(action, (self.num_actions,))
    _, nxt, _, done, _ = self.env.step_env(jax.random.key(0), state, action,
                                           self.env_params)
    failed = jnp.asarray(self._failed(nxt), bool)
    return nxt, failed, jnp.asarray(done, bool) & ~failed

  def failed_at_start(self, theta: jax.Array) -> jax.Array:
    return jnp.asarray(self._failed(self.init_state(theta)), bool)
