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
the raw env's `done`, and starts every episode from a fresh random reset:
`step` draws it from `jax.random.split(key)[1]` (the same convention as
gymnax); `step_batch`, which `rl.rollout` uses, takes it from a pool of
i.i.d. resets drawn once per rollout by `refill` (see `BraxEnv`).
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

  def step_batch(self, keys: jax.Array, state: EnvState,
                 action: jax.Array) -> tuple[EnvState, Step]:
    """`step` of a batch of envs (the leading axis of every argument, state
    from `jax.vmap(reset)`). The default is `jax.vmap(step)`; an env may
    share work across the batch instead (`BraxEnv`'s reset pool)."""
    return jax.vmap(self.step)(keys, state, action)

  def refill(self, key: jax.Array, state: EnvState) -> EnvState:
    """Called on a batch of env states (as `step_batch`) before each
    rollout: an env may draw its shared reset work here (`BraxEnv`'s
    pool). The default returns `state` unchanged and uses no key."""
    del key
    return state

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


class _Packing:
  """Packs a pytree of arrays into one flat array per dtype and back: a
  pool of Brax states (an MJX state has ~100 small leaves) is then a few
  arrays, drawn with one concatenation per dtype and indexed per dtype."""

  def __init__(self, example: Any):
    leaves, self.treedef = jax.tree.flatten(example)
    self.shapes = [tuple(x.shape) for x in leaves]
    self.dtypes = [jnp.dtype(x.dtype) for x in leaves]
    self.groups = sorted({d.name for d in self.dtypes})
    self.where: list[tuple[str, int, int]] = []  # (group, start, stop)
    size = dict.fromkeys(self.groups, 0)
    for shape, dtype in zip(self.shapes, self.dtypes):
      n = int(np.prod(shape, dtype=np.int64))
      self.where.append((dtype.name, size[dtype.name], size[dtype.name] + n))
      size[dtype.name] += n
    self.size = size  # {dtype: D}; a group may be empty (D = 0)

  def pack(self, tree: Any) -> dict[str, jax.Array]:
    """{dtype: [..., D]}; leading axes beyond the example's are kept."""
    parts = {g: [] for g in self.groups}
    for x, shape, dtype in zip(jax.tree.leaves(tree), self.shapes,
                               self.dtypes):
      x = jnp.asarray(x, dtype)
      lead = x.shape[:x.ndim - len(shape)]
      parts[dtype.name].append(x.reshape(lead + (int(np.prod(shape)),)))
    return {g: jnp.concatenate(p, axis=-1) for g, p in parts.items()}

  def unpack(self, packed: dict[str, jax.Array]) -> Any:
    lead = next(iter(packed.values())).shape[:-1]
    leaves = [packed[g][..., a:b].reshape(lead + shape)
              for (g, a, b), shape in zip(self.where, self.shapes)]
    return jax.tree.unflatten(self.treedef, leaves)


class BraxState(NamedTuple):
  """Raw Brax state plus our own episode step counter (and, with a reset
  pool, this env's share of the pool)."""
  env_state: Any  # brax.envs.base.State
  steps: jax.Array  # int32: steps taken in the current episode.
  # Reset pool only (None without): Q brax States drawn i.i.d. by `reset`
  # or `refill`, packed ({dtype: [Q, D]}, see `_Packing`); a batch of E envs
  # shares its E x Q entries.
  pool: dict[str, jax.Array] | None = None
  taken: jax.Array | None = None  # int32: resets the batch took from the
                                  # pool since the last refill (the same in
                                  # every env of the batch).
  reused: jax.Array | None = None  # int32: this env's resets that repeated
                                   # a pool entry (more than E x Q resets
                                   # between two refills).


class BraxEnv(Env):
  """Raw Brax env with our own time limit and a fresh-random auto-reset.

  An MJX reset is an `mjx.forward`; `step` (one env) computes a fresh reset
  every step and selects it where the episode ended (`jnp.where`: under
  `vmap` a `lax.cond` becomes the same select anyway, and one on
  `any(done)` across the batch measured no faster in PPO; `where` also
  tolerates the weak/strong dtype mix Brax envs produce, e.g. a
  Python-float reward). For a batch of envs that per-step reset is 7-9% of
  PPO's time at configs/kernel_ppo.py:brax's batch on CPU (64 envs; it is
  the cost that brax.training's `AutoResetWrapper` avoids by restoring each
  env's first state, which makes every episode of an env start from the
  same state). Resetting fewer envs per step recovers only part of it: at
  this size much of a reset's cost is per-op overhead, not width (one
  reset per step instead of 64 still cost a third as much in PPO, and a
  pool refilled a few entries per step cost about as much bookkeeping as
  it saved), hence a pool drawn once per rollout.

  Reset pool (`reset_pool` = Q, default 4): `refill` (called by
  `rl.rollout` before every rollout) draws E x Q fresh reset states i.i.d.
  for a batch of E envs in one batched call, and `step_batch` (what
  `rl.rollout` steps with) hands them out: the k-th episode end since the
  refill (in time, then env order) starts from entry k. The reset
  distribution this induces: every reset is an independent draw from the
  env's own reset (the pool is drawn with fresh keys, and which entry an
  episode takes depends only on how many ended before it, never on the
  entries), as long as at most E x Q episodes end between two refills,
  i.e. episodes average at least T / Q steps in rollouts of T steps (8 for
  T = 32 at the default Q = 4; a uniform-random policy's episodes on
  inverted_pendulum average 5.6 steps, a learnt policy's 1000). Past that
  the (E x Q + k)-th reset repeats entry k, the start of an episode that
  already began in this rollout; `BraxState.reused` counts these (PPO at
  configs/kernel_ppo.py:brax, 80 iterations: 143 of 1911 resets at Q = 4,
  892 of 1871 at Q = 1, all in the first 10 iterations, none later). A
  refill costs one batched reset of E x Q (on CPU ~1.2 ms at Q = 4 vs
  ~0.9 ms at Q = 1, per rollout of ~35 ms), so Q = 4 keeps nearly all of
  the speed-up with few repeats. Without
  `refill` calls the pool is never redrawn (every reset after the first
  E x Q repeats). `reset_pool=None` gives a fresh reset per env per step
  in `step_batch` too; `step` (one env, no batch to share a pool with) is
  always fresh, and leaves the pool untouched.
  """

  def __init__(self, name: str, brax_env: Any, episode_length: int,
               reset_pool: int | None = 4):
    if episode_length < 1:
      raise ValueError(f'episode_length must be >= 1, got {episode_length}.')
    if reset_pool is not None and reset_pool < 1:
      raise ValueError(f'reset_pool must be None or >= 1, got {reset_pool}.')
    self.brax_env = brax_env
    self.episode_length = int(episode_length)
    self.reset_pool = None if reset_pool is None else int(reset_pool)
    example = jax.eval_shape(brax_env.reset, jax.random.key(0))
    self._packing = _Packing(example)
    obs = example.obs
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

  def _draw_pool(self, key: jax.Array, n: int) -> dict[str, jax.Array]:
    """n i.i.d. resets, packed: {dtype: [n, D]}."""
    return self._packing.pack(
        jax.vmap(self.brax_env.reset)(jax.random.split(key, n)))

  def reset(self, key: jax.Array) -> tuple[jax.Array, BraxState]:
    env_state = self.brax_env.reset(key)
    state = BraxState(env_state, jnp.zeros((), jnp.int32))
    if self.reset_pool is not None:
      state = state._replace(
          pool=self._draw_pool(jax.random.fold_in(key, 1), self.reset_pool),
          taken=jnp.zeros((), jnp.int32), reused=jnp.zeros((), jnp.int32))
    return jnp.asarray(env_state.obs, jnp.float32), state

  def refill(self, key: jax.Array, state: BraxState) -> BraxState:
    if state.pool is None:
      return state
    num_envs, q = state.steps.shape[0], self.reset_pool
    pool = self._draw_pool(key, num_envs * q)
    return state._replace(
        pool={g: x.reshape(num_envs, q, self._packing.size[g])
              for g, x in pool.items()},
        taken=jnp.zeros_like(state.taken))

  def pool_states(self, state: BraxState) -> Any:
    """A batch's pool as one brax State with leading axis E x Q, in the
    order `step_batch` hands the entries out (None without a pool)."""
    if state.pool is None:
      return None
    return self._packing.unpack(
        {g: x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1])
         for g, x in state.pool.items()})

  def _advance(self, state: BraxState, action: jax.Array):
    """One raw step of one env: (stepped brax State, steps, terminated,
    truncated), no reset."""
    action = jnp.clip(
        jnp.asarray(action, jnp.float32).reshape(self.spec.num_actions),
        -1.0, 1.0)
    stepped = self.brax_env.step(state.env_state, action)
    steps = state.steps + 1
    terminated = jnp.asarray(stepped.done).reshape(()) != 0
    truncated = jnp.logical_and(steps >= self.episode_length, ~terminated)
    return stepped, steps, terminated, truncated

  def _finish(self, state: BraxState, stepped: Any, fresh: Any,
              steps: jax.Array, terminated: jax.Array, truncated: jax.Array,
              **pool_fields: Any) -> tuple[BraxState, Step]:
    """Selects `fresh` where the episode ended and builds the `Step`."""
    done = jnp.logical_or(terminated, truncated)

    def select(r, s):
      return jnp.where(
          done.reshape(done.shape + (1,) * (jnp.ndim(s) - done.ndim)), r, s)

    next_env_state = jax.tree.map(select, fresh, stepped)
    next_steps = jnp.where(done, 0, steps).astype(jnp.int32)
    return state._replace(
        env_state=next_env_state, steps=next_steps, **pool_fields), Step(
            obs=jnp.asarray(next_env_state.obs, jnp.float32),
            reward=jnp.asarray(stepped.reward, jnp.float32).reshape(
                done.shape),
            terminated=terminated,
            truncated=truncated,
            final_obs=jnp.asarray(stepped.obs, jnp.float32),
        )

  def step(self, key: jax.Array, state: BraxState,
           action: jax.Array) -> tuple[BraxState, Step]:
    stepped, steps, terminated, truncated = self._advance(state, action)
    _, key_reset = jax.random.split(key)
    fresh = self.brax_env.reset(key_reset)
    return self._finish(state, stepped, fresh, steps, terminated, truncated)

  def step_batch(self, keys: jax.Array, state: BraxState,
                 action: jax.Array) -> tuple[BraxState, Step]:
    if state.pool is None:
      return jax.vmap(self.step)(keys, state, action)
    stepped, steps, terminated, truncated = jax.vmap(self._advance)(
        state, action)
    done = jnp.logical_or(terminated, truncated)
    slots = done.shape[0] * self.reset_pool
    # The k-th episode end since the refill takes entry k (mod the size).
    rank = state.taken[0] + jnp.cumsum(done) - 1
    taken = self._packing.unpack(
        {g: x.reshape(slots, self._packing.size[g])[rank % slots]
         for g, x in state.pool.items()})
    return self._finish(
        state, stepped, taken, steps, terminated, truncated,
        taken=jnp.broadcast_to(state.taken[0] + jnp.sum(done),
                               state.taken.shape).astype(jnp.int32),
        reused=state.reused + (done & (rank >= slots)).astype(jnp.int32))


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
               episode_length: int = 1000, reset_pool: int | None = 4,
               **kwargs: Any) -> BraxEnv:
  # Imported lazily: brax pulls in MuJoCo/MJX (seconds, and warnings about
  # optional GPU packages), which gymnax-only users should not pay for.
  brax_envs = extras.require('brax.envs', 'rl')

  if backend not in BRAX_BACKENDS:
    raise ValueError(f'backend must be one of {BRAX_BACKENDS}, got {backend!r}.')
  brax_env = brax_envs.get_environment(env_name, backend=backend, **kwargs)
  return BraxEnv(_BRAX_PREFIX + env_name, brax_env, episode_length,
                 reset_pool=reset_pool)


def make(name: str, **kwargs: Any) -> Env:
  """Builds an `Env` from a name.

  Args:
    name: a gymnax id ('CartPole-v1', 'Acrobot-v1', 'Pendulum-v1', ...),
      optionally prefixed 'gymnax:', or 'brax:<env>' for a Brax env.
    **kwargs: for Brax, `backend` ('mjx' default, 'generalized',
      'positional', 'spring'), `episode_length` (default 1000),
      `reset_pool` (entries per env of the reset pool, default 4, see
      `BraxEnv`; None for a fresh reset per env per step), and the rest
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
