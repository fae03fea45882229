"""Shared on-policy machinery: rollouts, GAE, observation normalisation and
episode statistics, all pure and scan-compiled.

Time limits: a step that is `truncated` (time limit, not a terminal state)
must bootstrap from the state it reached, not from the reset state. The env
adapter (`rl.envs`) returns that state as `final_obs`, so every algorithm
here computes next-state values on `final_obs` and only zeroes the bootstrap
on `terminated`; the GAE trace is cut at either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclrjax.core import distributed
from iclrjax.rl import envs as envs_lib


class RunningNorm(NamedTuple):
  """Running mean/variance of observations (parallel Welford update)."""

  mean: jax.Array
  var: jax.Array
  count: jax.Array

  @classmethod
  def create(cls, shape) -> RunningNorm:
    return cls(jnp.zeros(shape), jnp.ones(shape), jnp.asarray(1e-4))

  def update(self, x_BxD: jax.Array) -> RunningNorm:
    x = x_BxD.reshape(-1, *self.mean.shape)
    b_mean, b_var, b_n = x.mean(0), x.var(0), x.shape[0]
    delta, total = b_mean - self.mean, self.count + b_n
    mean = self.mean + delta * b_n / total
    m2 = self.var * self.count + b_var * b_n + delta**2 * self.count * b_n / total
    return RunningNorm(mean, m2 / total, total)

  def __call__(self, x: jax.Array, enabled: bool = True) -> jax.Array:
    if not enabled:
      return x
    return jnp.clip((x - self.mean) / jnp.sqrt(self.var + 1e-8), -10.0, 10.0)


class EpisodeStats(NamedTuple):
  """Running returns per env and a ring buffer of finished episode returns."""

  ep_return: jax.Array  # [E] return of the episode in progress
  ep_length: jax.Array  # [E]
  recent: jax.Array     # [K] last K finished returns (NaN while unfilled)
  count: jax.Array      # () finished episodes so far

  @classmethod
  def create(cls, num_envs: int, window: int) -> EpisodeStats:
    return cls(jnp.zeros(num_envs), jnp.zeros(num_envs, jnp.int32),
               jnp.full((window,), jnp.nan), jnp.zeros((), jnp.int32))

  def update(self, reward: jax.Array, done: jax.Array) -> EpisodeStats:
    """One step of every env: `advance`, then `push` of the finished."""
    stats, finished = self.advance(reward, done)
    return stats.push(done[None], finished[None])

  def advance(self, reward: jax.Array, done: jax.Array
              ) -> tuple[EpisodeStats, jax.Array]:
    """Adds one step's reward; returns (stats with the finished episodes
    restarted but not yet in the ring buffer, their returns [E])."""
    ret, length = self.ep_return + reward, self.ep_length + 1
    return self._replace(ep_return=jnp.where(done, 0.0, ret),
                         ep_length=jnp.where(done, 0, length)), ret

  def push(self, done_TxE: jax.Array, ret_TxE: jax.Array) -> EpisodeStats:
    """Pushes the returns of the episodes that ended (`done`) into the ring
    buffer in time-major, then env order: the same buffer as one `update`
    per step, with one scatter for the whole rollout."""
    done, ret = done_TxE.reshape(-1), ret_TxE.reshape(-1)
    K = self.recent.shape[0]
    pos = self.count + jnp.cumsum(done) - 1
    idx = jnp.where(done, pos % K, K)  # K: out of range, dropped
    # Only the last K finished episodes may land: an earlier one sharing a
    # slot must not win the scatter.
    idx = jnp.where(pos >= self.count + jnp.sum(done) - K, idx, K)
    recent = self.recent.at[idx].set(ret, mode='drop')
    return self._replace(recent=recent, count=self.count + jnp.sum(done))

  def rolling_mean(self) -> jax.Array:
    """Mean of the last K finished returns (NaN before any finished)."""
    return jnp.nanmean(self.recent)

  def full(self) -> jax.Array:
    return self.count >= self.recent.shape[0]


class Batch(NamedTuple):
  """One rollout, arrays [T, E, ...]."""

  obs: jax.Array        # observation the action was taken in (normalised)
  action: jax.Array     # env action (discrete) or pre-squash u (continuous)
  log_prob: jax.Array
  value: jax.Array      # V(obs) or policy output at rollout time
  reward: jax.Array
  terminated: jax.Array
  truncated: jax.Array
  final_obs: jax.Array  # state reached (normalised with the same stats)
  extra: Any            # algorithm-specific per-step outputs (e.g. logits)
  info: Any = None      # the env's per-step `Step.info` (None for most envs)
  raw_obs: Any = None   # obs before normalisation (only if normalize_obs)


PolicyFn = Callable[[Any, jax.Array, jax.Array],
                    tuple[jax.Array, jax.Array, jax.Array, jax.Array, Any]]
# policy(params, obs_E, key) -> (env_action_E, stored_action_E, log_prob_E,
#                                value_E, extra_E)


def rollout(env: envs_lib.Env, policy: PolicyFn, params: Any,
            env_state: Any, obs: jax.Array, stats: EpisodeStats,
            norm: RunningNorm, key: jax.Array, num_steps: int,
            normalize_obs: bool, active: jax.Array | None = None,
            shard: bool = True
            ) -> tuple[Batch, Any, jax.Array, EpisodeStats]:
  """`num_steps` steps of `num_envs` envs (leading axis of env_state/obs).

  `active` [num_steps] (optional) turns steps into no-ops where False: the
  env does not advance and nothing is counted, so a variable sample size
  n(k) runs with a static shape (the inactive rows of the batch are junk
  and must be masked by the caller).

  The env axis is the batch axis of the mesh: env states, observations,
  the per-env episode statistics and the collected batch are split over its
  'data' axis (`distributed.shard_batch`; the ring buffer of recent returns
  is no env axis and stays whole), so a 1-seed run steps its envs on every
  device. `shard=False` leaves the envs whole, for a caller that splits its
  own batch instead (one env is never split).
  """
  num_envs = obs.shape[0]
  step_env = env.step_batch  # jax.vmap(env.step) unless the env shares work
  masked = active is not None
  mark = distributed.shard_batch if shard else (lambda x: x)

  def shard_envs(env_state, obs, stats):
    env_state, obs, ret, length = mark(
        (env_state, obs, stats.ep_return, stats.ep_length))
    return env_state, obs, stats._replace(ep_return=ret, ep_length=length)

  def body(carry, xs):
    k, live = xs
    env_state, obs, stats = carry
    k_act, k_env = jax.random.split(k)
    nobs = norm(obs, normalize_obs)
    env_action, stored, logp, value, extra = policy(params, nobs, k_act)
    new_state, out = step_env(jax.random.split(k_env, num_envs), env_state,
                              env_action)
    done = out.terminated | out.truncated
    new_stats, finished = stats.advance(out.reward, done)
    b = Batch(nobs, stored, logp, value, out.reward, out.terminated,
              out.truncated, norm(out.final_obs, normalize_obs), extra,
              out.info, obs if normalize_obs else None)
    carry = (new_state, out.obs, new_stats)
    if masked:  # a static choice: unmasked rollouts skip the selects
      carry = jax.tree.map(lambda n, o: jnp.where(live, n, o), carry,
                           (env_state, obs, stats))
    return shard_envs(*carry), (mark(b), finished)

  # The env's batch-level work per rollout (`BraxEnv`'s reset pool), keyed
  # apart from the steps' keys so that other envs' rollouts are unchanged.
  env_state = env.refill(jax.random.fold_in(key, 1), env_state)
  (env_state, obs, stats), (batch, finished) = jax.lax.scan(
      body, shard_envs(env_state, obs, stats),
      (jax.random.split(key, num_steps),
       active if masked else jnp.ones((num_steps,), bool)))
  # Episode ends, from the batch after the scan rather than as one more
  # per-step scan output (a stacking write per step; at 1 seed on CPU the
  # per-op cost is what a rollout pays).
  done = batch.terminated | batch.truncated
  if masked:
    done = done & active[:, None]
  return batch, env_state, obs, stats.push(done, finished)


def gae(reward_TxE: jax.Array, value_TxE: jax.Array,
        next_value_TxE: jax.Array, terminated_TxE: jax.Array,
        done_TxE: jax.Array, gamma: float, lam: float
        ) -> tuple[jax.Array, jax.Array]:
  """Generalised advantage estimation; returns (advantages, value targets).

  delta_t = r_t + gamma (1 - terminated_t) V(s'_t) - V(s_t), with s'_t the
  state reached (bootstrapped at truncation), and
  A_t = delta_t + gamma lam (1 - done_t) A_{t+1}, the trace cut at episode
  ends (terminated or truncated).
  """
  delta = (reward_TxE + gamma * (1.0 - terminated_TxE) * next_value_TxE
           - value_TxE)
  cont = gamma * lam * (1.0 - done_TxE)

  def body(next_adv, xs):
    d, c = xs
    adv = d + c * next_adv
    return adv, adv

  _, adv = jax.lax.scan(body, jnp.zeros_like(delta[0]), (delta, cont),
                        reverse=True)
  return adv, adv + value_TxE


def minibatches(key: jax.Array | None, tree: Any, num_minibatches: int
                ) -> Any:
  """Flattens [T, E, ...] leaves and splits them into [M, B/M, ...].

  With a key the examples are shuffled first; without, they keep rollout
  order (the kernel-PPO reference code does not shuffle).
  """
  flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), tree)
  n = jax.tree.leaves(flat)[0].shape[0]
  if key is not None:
    perm = jax.random.permutation(key, n)
    flat = jax.tree.map(lambda x: x[perm], flat)
  return jax.tree.map(
      lambda x: x.reshape(num_minibatches, n // num_minibatches, *x.shape[1:]),
      flat)


def sgd_epochs(loss_fn: Callable[..., tuple[jax.Array, Any]],
               tx: optax.GradientTransformation, params: Any, opt_state: Any,
               data: Any, key: jax.Array, num_epochs: int,
               num_minibatches: int, shuffle: bool, *args: Any,
               shard: bool = False) -> tuple[Any, Any, Any]:
  """`num_epochs` passes over `data` ([T, E, ...] leaves) in
  `num_minibatches` gradient steps each, all under `lax.scan`:
  `loss_fn(params, minibatch, *args) -> (loss, info)`. Returns
  (params, opt_state, info [num_epochs, num_minibatches, ...]).

  `shard`: each minibatch is split over the mesh's 'data' axis
  (`distributed.shard_batch`), as the env batch it came from is; callers
  pass `num_envs > 1`, since a one-env rollout's few dozen samples are no
  batch worth splitting.
  """
  mark = distributed.shard_batch if shard else (lambda x: x)

  def epoch(carry, k):
    mbs = minibatches(k if shuffle else None, data, num_minibatches)

    def update(carry, mb):
      params, opt_state = carry
      mb = mark(mb)
      grads, info = jax.grad(loss_fn, has_aux=True)(params, mb, *args)
      updates, opt_state = tx.update(grads, opt_state, params)
      return (optax.apply_updates(params, updates), opt_state), info

    return jax.lax.scan(update, carry, mbs)

  (params, opt_state), info = jax.lax.scan(
      epoch, (params, opt_state), jax.random.split(key, num_epochs))
  return params, opt_state, info


def update_solved(stats: EpisodeStats, env_steps: jax.Array,
                  solved_at: jax.Array, threshold: float | None
                  ) -> tuple[jax.Array, jax.Array]:
  """(rolling mean return, solved_at): `solved_at` is set to `env_steps`
  the first time the rolling mean over a full window reaches `threshold`
  (-1 until then; unchanged without a threshold)."""
  ret = stats.rolling_mean()
  if threshold is not None:
    hit = (solved_at < 0) & stats.full() & (ret >= threshold)
    solved_at = jnp.where(hit, env_steps, solved_at)
  return ret, solved_at


def random_policy(spec: envs_lib.EnvSpec) -> PolicyFn:
  """Uniform-random actions (uniform over the actions, or uniform in the
  action box): the policy an untrained-agent control is scored with."""

  def policy(params, obs, key):
    del params
    n = obs.shape[0]
    if spec.discrete:
      a = jax.random.randint(key, (n,), 0, spec.num_actions)
    else:
      a = jax.random.uniform(key, (n, spec.num_actions),
                             minval=spec.action_low, maxval=spec.action_high)
    zeros = jnp.zeros((n,))
    return a, a, zeros, zeros, None

  return policy


def random_return(env: envs_lib.Env, keys: jax.Array, num_envs: int = 16,
                  num_steps: int | None = None, window: int = 256
                  ) -> jax.Array:
  """Per key [S]: the mean return of (up to the last `window`) episodes
  that a uniform-random policy finishes in `num_envs` x `num_steps` steps
  (default: twice the time limit, so every env finishes an episode)."""
  num_steps = num_steps or 2 * env.spec.max_steps

  def one(key):
    k_reset, k_roll = jax.random.split(key)
    obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, num_envs))
    norm = RunningNorm.create(obs.shape[1:])
    _, _, _, stats = rollout(env, random_policy(env.spec), None, state, obs,
                             EpisodeStats.create(num_envs, window), norm,
                             k_roll, num_steps, False)
    return stats.rolling_mean()

  return jax.jit(jax.vmap(one))(keys)
