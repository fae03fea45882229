"""One functional interface over gymnax and Brax (all physics backends).

The PPO core only ever sees `Env.reset(key)` and `Env.step(key, state,
action)`; both are pure, so a rollout is `jax.jit(jax.vmap(...))` over a
`lax.scan`. The adapter exists because the two libraries disagree on exactly
the details that bias value targets:

* Termination vs truncation. A true terminal state must not be bootstrapped;
  a time-limit cut must be bootstrapped from the observation reached *before*
  the reset. So `Step` carries `terminated`, `truncated` and `final_obs`
  separately, with the invariant that `terminated & truncated` is never true
  (a step that both terminates and hits the limit is a termination).
* Auto-reset. Every step auto-resets a finished episode; `Step.obs` is what
  the policy sees next (a fresh reset observation after an episode end) and
  `Step.final_obs` is the pre-reset observation.

gymnax (1.0.1) already auto-resets in `env.step`, returns 6 values
`(obs, state, reward, terminated, truncated, info)` with the pre-reset
observation in `info['final_observation']`, and draws the reset from
`jax.random.split(key)[1]`. Its `truncated` is `time >= max_steps_in_episode`
*regardless* of termination, so here it is masked with `~terminated`.

Brax's `EpisodeWrapper`/`AutoResetWrapper` are not used: the auto-reset
wrapper always restores the *first* reset state (no fresh randomness per
episode), drops the pre-reset observation, and folds the time limit into
`done`. `BraxEnv` instead keeps its own step counter, takes `terminated` from
the raw env's `done`, and resets from `jax.random.split(key)[1]` (the same
convention as gymnax), so every episode starts from a fresh random state.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.core import extras

EnvState = Any  # Any pytree; opaque to callers.

_GYMNAX_PREFIX = 'gymnax:'
_BRAX_PREFIX = 'brax:'
BRAX_BACKENDS = ('mjx', 'generalized', 'positional', 'spring')


class EnvSpec(NamedTuple):
  """Static description of an environment, enough to build a policy."""
  name: str
  obs_shape: tuple[int, ...]
  discrete: bool
  num_actions: int  # Discrete: number of actions; continuous: action dim.
  action_low: float | None  # Continuous only (scalar bound), else None.
  action_high: float | None
  max_steps: int  # Time limit (truncation) per episode.
  # Pixel observations: obs = image [H, W, C] flattened, then extra features.
  image_shape: tuple[int, ...] | None = None


class Step(NamedTuple):
  """What one environment step returns besides the new state."""
  obs: jax.Array  # Next observation AFTER auto-reset (what the policy sees).
  reward: jax.Array  # float32 scalar.
  terminated: jax.Array  # bool scalar: true terminal state (no bootstrap).
  truncated: jax.Array  # bool scalar: time limit hit and not terminated.
  final_obs: jax.Array  # Observation reached by this step, BEFORE any reset.
  info: Any = None  # Env-specific per-step pytree (e.g. `rl.reach` episodes).


class Env:
  """Plain Python object holding static config; methods are pure.

  `reset` and `step` can be wrapped in `jax.jit`/`jax.vmap`/`lax.scan`
  freely. An `Env` hashes by identity, so it may also be a static argument.
  """

  spec: EnvSpec

  def reset(self, key: jax.Array) -> tuple[jax.Array, EnvState]:
    """Returns `(obs, state)` of a fresh episode drawn with `key`."""
    raise NotImplementedError

  def step(self, key: jax.Array, state: EnvState,
           action: jax.Array) -> tuple[EnvState, Step]:
    """Advances one step; auto-resets when terminated or truncated."""
    raise NotImplementedError

  def __repr__(self) -> str:
    return f'{type(self).__name__}({self.spec})'


def _scalar_bound(bound: Any, what: str, name: str) -> float:
  """EnvSpec stores scalar bounds; refuse per-dimension ones loudly."""
  arr = np.asarray(bound, dtype=np.float64)
  if arr.size == 0 or not np.all(arr == arr.flat[0]):
    raise ValueError(f'{name}: non-uniform action {what} {arr} is not '
                     'supported (EnvSpec holds scalar bounds).')
  return float(arr.flat[0])


class GymnaxEnv(Env):
  """gymnax environment with truncation normalised to exclude termination."""

  def __init__(self, name: str, gymnax_env: Any, params: Any):
    self.gymnax_env = gymnax_env
    self.params = params
    space = gymnax_env.action_space(params)
    discrete = hasattr(space, 'n')
    if discrete:
      num_actions = int(space.n)
      low = high = None
      self._action_shape: tuple[int, ...] = ()
    else:
      self._action_shape = tuple(int(d) for d in space.shape)
      num_actions = int(np.prod(self._action_shape, dtype=np.int64))
      low = _scalar_bound(space.low, 'low', name)
      high = _scalar_bound(space.high, 'high', name)
    # eval_shape traces reset without compiling or running it; it is the
    # ground truth even where `observation_space` and `get_obs` disagree.
    obs = jax.eval_shape(lambda k: gymnax_env.reset(k, params)[0],
                         jax.random.key(0))
    self.spec = EnvSpec(
        name=name,
        obs_shape=tuple(int(d) for d in obs.shape),
        discrete=discrete,
        num_actions=num_actions,
        action_low=low,
        action_high=high,
        max_steps=int(params.max_steps_in_episode),
    )

  def _prepare_action(self, action: jax.Array) -> jax.Array:
    if self.spec.discrete:
      return jnp.asarray(action).astype(jnp.int32).reshape(())
    action = jnp.asarray(action, jnp.float32).reshape(self._action_shape)
    return jnp.clip(action, self.spec.action_low, self.spec.action_high)

  def reset(self, key: jax.Array) -> tuple[jax.Array, EnvState]:
    obs, state = self.gymnax_env.reset(key, self.params)
    return jnp.asarray(obs, jnp.float32), state

  def step(self, key: jax.Array, state: EnvState,
           action: jax.Array) -> tuple[EnvState, Step]:
    obs, state, reward, terminated, truncated, info = self.gymnax_env.step(
        key, state, self._prepare_action(action), self.params)
    terminated = jnp.asarray(terminated).astype(bool).reshape(())
    # gymnax 1.0.1: truncated = time >= max_steps_in_episode, even when the
    # same step is terminal. A terminal step must not bootstrap.
    truncated = jnp.logical_and(
        jnp.asarray(truncated).astype(bool).reshape(()), ~terminated)
    return state, Step(
        obs=jnp.asarray(obs, jnp.float32),
        reward=jnp.asarray(reward, jnp.float32).reshape(()),
        terminated=terminated,
        truncated=truncated,
        final_obs=jnp.asarray(info['final_observation'], jnp.float32),
    )


class BraxState(NamedTuple):
  """Raw Brax state plus our own episode step counter."""
  env_state: Any  # brax.envs.base.State
  steps: jax.Array  # int32: steps taken in the current episode.


class BraxEnv(Env):
  """Raw Brax env with our own time limit and a fresh-random auto-reset.

  Both the stepped and a freshly reset state are computed every step and
  selected with `jnp.where`: under `vmap` a `lax.cond` becomes the same
  select anyway, and `where` also tolerates the weak/strong dtype mix Brax
  envs produce (e.g. a Python-float reward). Reset costs one forward pass,
  small next to the `n_frames` physics substeps of a step.
  """

  def __init__(self, name: str, brax_env: Any, episode_length: int):
    if episode_length < 1:
      raise ValueError(f'episode_length must be >= 1, got {episode_length}.')
    self.brax_env = brax_env
    self.episode_length = int(episode_length)
    obs = jax.eval_shape(brax_env.reset, jax.random.key(0)).obs
    if not hasattr(obs, 'shape'):
      raise ValueError(f'{name}: dict observations are not supported.')
    self.spec = EnvSpec(
        name=name,
        obs_shape=tuple(int(d) for d in obs.shape),
        discrete=False,
        num_actions=int(brax_env.action_size),
        action_low=-1.0,
        action_high=1.0,
        max_steps=self.episode_length,
    )

  def reset(self, key: jax.Array) -> tuple[jax.Array, BraxState]:
    env_state = self.brax_env.reset(key)
    return (jnp.asarray(env_state.obs, jnp.float32),
            BraxState(env_state, jnp.zeros((), jnp.int32)))

  def step(self, key: jax.Array, state: BraxState,
           action: jax.Array) -> tuple[BraxState, Step]:
    action = jnp.clip(
        jnp.asarray(action, jnp.float32).reshape(self.spec.num_actions),
        -1.0, 1.0)
    stepped = self.brax_env.step(state.env_state, action)
    steps = state.steps + 1
    terminated = jnp.asarray(stepped.done).reshape(()) != 0
    truncated = jnp.logical_and(steps >= self.episode_length, ~terminated)
    done = jnp.logical_or(terminated, truncated)
    _, key_reset = jax.random.split(key)
    fresh = self.brax_env.reset(key_reset)
    next_env_state = jax.tree.map(lambda r, s: jnp.where(done, r, s), fresh,
                                  stepped)
    next_steps = jnp.where(done, 0, steps).astype(jnp.int32)
    return BraxState(next_env_state, next_steps), Step(
        obs=jnp.asarray(next_env_state.obs, jnp.float32),
        reward=jnp.asarray(stepped.reward, jnp.float32).reshape(()),
        terminated=terminated,
        truncated=truncated,
        final_obs=jnp.asarray(stepped.obs, jnp.float32),
    )


def _make_gymnax(env_id: str, **kwargs: Any) -> GymnaxEnv:
  """Builds a gymnax env; kwargs naming an EnvParams field override params.

  gymnax keeps physics constants and the time limit in a params pytree, not
  in the constructor, so e.g. `max_steps_in_episode=50` must go there; the
  remaining kwargs go to the env constructor.
  """
  # Build once to learn the params fields, then again with constructor args.
  # Imported here: gymnax creates JAX arrays at import time, which starts the
  # XLA backend and would make a later jax.distributed.initialize() fail.
  gymnax = extras.require('gymnax', 'rl')
  probe_env, probe_params = gymnax.make(env_id)
  del probe_env
  fields = {f.name for f in dataclasses.fields(probe_params)}
  overrides = {k: v for k, v in kwargs.items() if k in fields}
  ctor_kwargs = {k: v for k, v in kwargs.items() if k not in fields}
  gymnax_env, params = gymnax.make(env_id, **ctor_kwargs)
  if overrides:
    params = params.replace(**overrides)
  return GymnaxEnv(env_id, gymnax_env, params)


def _make_brax(env_name: str, *, backend: str = 'mjx',
               episode_length: int = 1000, **kwargs: Any) -> BraxEnv:
  # Imported lazily: brax pulls in MuJoCo/MJX (seconds, and warnings about
  # optional GPU packages), which gymnax-only users should not pay for.
  brax_envs = extras.require('brax.envs', 'rl')

  if backend not in BRAX_BACKENDS:
    raise ValueError(f'backend must be one of {BRAX_BACKENDS}, got {backend!r}.')
  brax_env = brax_envs.get_environment(env_name, backend=backend, **kwargs)
  return BraxEnv(_BRAX_PREFIX + env_name, brax_env, episode_length)


def make(name: str, **kwargs: Any) -> Env:
  """Builds an `Env` from a name.

  Args:
    name: a gymnax id ('CartPole-v1', 'Acrobot-v1', 'Pendulum-v1', ...),
      optionally prefixed 'gymnax:', or 'brax:<env>' for a Brax env.
    **kwargs: for Brax, `backend` ('mjx' default, 'generalized',
      'positional', 'spring'), `episode_length` (default 1000), and the rest
      for the env constructor. For gymnax, names of EnvParams fields (e.g.
      `max_steps_in_episode`) override the params, the rest go to the
      constructor.

  Returns:
    The adapted environment.
  """
  if name.startswith(_BRAX_PREFIX):
    return _make_brax(name[len(_BRAX_PREFIX):], **kwargs)
  if name.startswith(_GYMNAX_PREFIX):
    name = name[len(_GYMNAX_PREFIX):]
  return _make_gymnax(name, **kwargs)
