"""Initial-condition samplers for parameter-robust avoid problems, and the
trainer that runs the PPO core on any of them.

A *sampler* chooses, before every PPO rollout, the theta each environment
resets to at its next episode end (`reach.base.set_next_theta`), and after
the rollout sees the finished episodes. It is three pure functions over a
pytree state (`Sampler`), so any sampler runs on any `reach` task inside one
scanned, seed-vmapped training loop (`make_trainer`):

* `domain_randomisation` (DR, arXiv 1703.06907): theta ~ rho, the task's
  nominal distribution;
* `uniform_box`: theta uniform over the task's box coordinates (`to_box`),
  the oracle sampler that knows where Theta is and spreads over all of it;
* `plr` (prioritised level replay, arXiv 2010.03934): rank-prioritised
  replay of high-|GAE| theta with staleness (Eq. 2-3 there);
* `rarl` (arXiv 1703.02702): an adversary over the theta box (a tanh-Gaussian
  trained by REINFORCE on the protagonist's failure indicator);
* FGE (`rl.fge.fge_sampler`), the paper's method.

The fixed-size `Ring` buffers and `ended_episodes` are shared with FGE.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.rl import ppo as ppo_lib
from iclrjax.rl import rollout as ro
from iclrjax.rl.reach import base


# -- fixed-size buffers ---------------------------------------------------------
class Ring(NamedTuple):
  """A ring buffer of rows; `count` = rows ever pushed."""

  data: jax.Array
  count: jax.Array

  @classmethod
  def create(cls, capacity: int, row_shape=(), dtype=jnp.float32) -> Ring:
    return cls(jnp.zeros((capacity, *row_shape), dtype), jnp.zeros((), jnp.int32))

  @property
  def capacity(self) -> int:
    return self.data.shape[0]

  @property
  def size(self) -> jax.Array:
    return jnp.minimum(self.count, self.capacity)

  def push(self, rows: jax.Array, mask: jax.Array) -> Ring:
    """Appends rows[i] where mask[i], in order (needs len(rows) <= capacity)."""
    pos = self.count + jnp.cumsum(mask) - 1
    idx = jnp.where(mask, pos % self.capacity, self.capacity)
    return Ring(self.data.at[idx].set(rows.astype(self.data.dtype),
                                      mode='drop'),
                self.count + jnp.sum(mask).astype(jnp.int32))

  def sample(self, key: jax.Array, n: int) -> jax.Array:
    """n rows uniformly (with replacement) from the filled part. An empty
    ring returns its zero rows: callers mask them by `size > 0`."""
    idx = jax.random.randint(key, (n,), 0, jnp.maximum(self.size, 1))
    return self.data[idx]

  def newest(self) -> jax.Array:
    return self.data[(self.count - 1) % self.capacity]

  def filled(self) -> jax.Array:
    return jnp.arange(self.capacity) < self.size

  def contains(self, rows: jax.Array) -> jax.Array:
    """[K] whether each row equals a filled entry (exact: rows are copied)."""
    eq = jnp.all(rows[:, None] == self.data[None], axis=-1)
    return jnp.any(eq & self.filled()[None], axis=1)


def first_occurrence(rows: jax.Array, mask: jax.Array) -> jax.Array:
  """mask & (no earlier masked row is equal): dedupes a batch of pushes."""
  eq = jnp.all(rows[:, None] == rows[None], axis=-1)
  earlier = jnp.tril(jnp.ones(eq.shape, bool), k=-1)
  return mask & ~jnp.any(eq & earlier & mask[None], axis=1)


class Episodes(NamedTuple):
  """Up to K episodes that ended in one rollout (compacted)."""

  theta: jax.Array   # [K, d]
  safe: jax.Array    # [K] bool
  valid: jax.Array   # [K] bool
  index: jax.Array   # [K] flat index into the [T*E] rollout


def ended_episodes(batch: ro.Batch, max_episodes: int) -> Episodes:
  info = batch.info
  done = info['done'].reshape(-1)
  n = done.shape[0]
  k = min(max_episodes, n)
  idx = jnp.nonzero(done, size=k, fill_value=0)[0]
  valid = jnp.arange(k) < jnp.sum(done)
  theta = info['theta'].reshape(n, -1)[idx]
  safe = info['safe'].reshape(-1)[idx] & valid
  return Episodes(theta, safe, valid, idx)


# -- the sampler interface --------------------------------------------------------
class Sampler(NamedTuple):
  """init(key) -> s; propose(s, t) -> (s, theta [E, d], metrics);
  update(s, batch, ppo_state, t) -> (s, metrics)."""

  init: Callable[[jax.Array], Any]
  propose: Callable[..., tuple[Any, jax.Array, dict[str, jax.Array]]]
  update: Callable[..., tuple[Any, dict[str, jax.Array]]]


def _stateless(draw: Callable[[jax.Array], jax.Array], num_envs: int
               ) -> Sampler:
  """A sampler that draws E independent theta from `draw(key)`."""

  def propose(key, t):
    del t
    key, k = jax.random.split(key)
    return key, jax.vmap(draw)(jax.random.split(k, num_envs)), {}

  return Sampler(lambda key: key, propose, lambda key, *_: (key, {}))


def domain_randomisation(task: base.ReachTask, num_envs: int) -> Sampler:
  """DR: theta ~ rho (`task.sample_nominal`)."""
  return _stateless(task.sample_nominal, num_envs)


def uniform_box(task: base.ReachTask, num_envs: int) -> Sampler:
  """theta = from_box(u), u ~ U[-1, 1]^d: uniform over the task's box
  coordinates, i.e. over all of Theta whatever rho is."""
  d = task.theta_dim
  return _stateless(lambda k: task.from_box(
      jax.random.uniform(k, (d,), jnp.float32, -1.0, 1.0)), num_envs)


# -- PLR ---------------------------------------------------------------------------
def plr_schema(prefix: str = 'plr.') -> dict[str, cfg_lib.Spec]:
  return {prefix + 'capacity': cfg_lib.Int(min=2),
          prefix + 'p_replay': cfg_lib.Float(min=0.0, max=1.0),
          prefix + 'temperature': cfg_lib.Float(min=0.0, min_inclusive=False),
          prefix + 'staleness': cfg_lib.Float(min=0.0, max=1.0)}


class PLRState(NamedTuple):
  theta: jax.Array      # [C, d]
  score: jax.Array      # [C]
  last: jax.Array       # [C] iteration last sampled
  filled: jax.Array     # [C]
  key: jax.Array


def episode_scores(batch: ro.Batch, gamma: float, lam: float) -> jax.Array:
  """[T, E] PLR score of the episode each step belongs to: the mean |GAE|
  over that episode's steps in this rollout (PLR's L1 value loss). Values
  come from the rollout; the next state's value is the next step's (cut at
  termination, the own value at truncation and at the rollout's end)."""
  v = batch.value
  next_v = jnp.concatenate([v[1:], v[-1:]], 0)
  next_v = jnp.where(batch.truncated, v, next_v)
  done = (batch.terminated | batch.truncated).astype(jnp.float32)
  adv, _ = ro.gae(batch.reward, v, next_v,
                  batch.terminated.astype(jnp.float32), done, gamma, lam)
  seg = jnp.cumsum(done, 0) - done  # episode index within the rollout
  same = seg[:, None, :] == seg[None, :, :]  # [T, T', E]
  a = jnp.abs(adv)
  return (jnp.sum(same * a[None], 1) / jnp.sum(same, 1))


def plr_replay_probs(s: PLRState, t: jax.Array, temperature: float,
                     staleness: float) -> jax.Array:
  """P_replay = (1 - rho) P_S + rho P_C with rank prioritisation
  h(S_i) = rank_i^(-1/beta) and staleness P_C ~ t - C_i (PLR Eq. 2-3)."""
  masked = jnp.where(s.filled, s.score, -jnp.inf)
  rank = jnp.empty_like(s.score).at[jnp.argsort(-masked)].set(
      jnp.arange(1, s.score.shape[0] + 1, dtype=jnp.float32))
  h = jnp.where(s.filled, rank ** (-1.0 / temperature), 0.0)
  ps = h / jnp.maximum(h.sum(), 1e-30)
  stale = jnp.where(s.filled, (t - s.last).astype(jnp.float32), 0.0)
  pc = jnp.where(stale.sum() > 0, stale / jnp.maximum(stale.sum(), 1e-30),
                 ps)
  return (1.0 - staleness) * ps + staleness * pc


def plr(task: base.ReachTask, c: ml_collections.ConfigDict, num_envs: int,
        max_episodes: int, gamma: float, gae_lambda: float) -> Sampler:
  """Prioritised level replay over theta (`c` = the `plr` config section)."""
  E, d, C = num_envs, task.theta_dim, c.capacity
  nominal = jax.vmap(task.sample_nominal)

  def init(key):
    return PLRState(jnp.zeros((C, d)), jnp.zeros((C,)),
                    jnp.zeros((C,), jnp.int32), jnp.zeros((C,), bool), key)

  def propose(s: PLRState, t):
    key, k_new, k_rep, k_idx = jax.random.split(s.key, 4)
    probs = plr_replay_probs(s, t, c.temperature, c.staleness)
    idx = jax.random.categorical(k_idx, jnp.log(probs + 1e-30), shape=(E,))
    n_filled = jnp.sum(s.filled)
    replay = (jax.random.uniform(k_rep, (E,)) < c.p_replay) & (
        n_filled >= C // 4)
    theta = jnp.where(replay[:, None], s.theta[idx],
                      nominal(jax.random.split(k_new, E)))
    last = s.last.at[jnp.where(replay, idx, C)].set(t, mode='drop')
    return s._replace(key=key, last=last), theta, {
        'plr/filled': n_filled.astype(jnp.float32)}

  def update(s: PLRState, batch: ro.Batch, ps, t):
    del ps
    score_TxE = episode_scores(batch, gamma, gae_lambda)
    ep = ended_episodes(batch, max_episodes)
    scores = score_TxE.reshape(-1)[ep.index]

    def insert(st, x):
      th, sc, ok = x
      theta, score, last, filled = st
      match = filled & jnp.all(theta == th[None], -1)
      has = jnp.any(match)
      worst = jnp.argmin(jnp.where(filled, score, -jnp.inf))
      free = jnp.argmin(filled)  # first empty slot
      slot = jnp.where(has, jnp.argmax(match),
                       jnp.where(jnp.all(filled), worst, free))
      write = ok & (has | ~jnp.all(filled) | (sc > score[worst]))
      sel = lambda new, old: jnp.where(write, new, old)
      theta = theta.at[slot].set(sel(th, theta[slot]))
      score = score.at[slot].set(sel(sc, score[slot]))
      last = last.at[slot].set(sel(jnp.where(has, last[slot], t), last[slot]))
      filled = filled.at[slot].set(filled[slot] | write)
      return (theta, score, last, filled), None

    (theta, score, last, filled), _ = jax.lax.scan(
        insert, (s.theta, s.score, s.last, s.filled),
        (ep.theta, scores, ep.valid))
    return PLRState(theta, score, last, filled, s.key), {
        'plr/mean_score': jnp.sum(jnp.where(filled, score, 0.0)) /
                          jnp.maximum(jnp.sum(filled), 1)}

  return Sampler(init, propose, update)


# -- RARL ---------------------------------------------------------------------------
def rarl_schema(prefix: str = 'rarl.') -> dict[str, cfg_lib.Spec]:
  return {prefix + 'learning_rate': cfg_lib.Float(min=0.0, min_inclusive=False),
          prefix + 'init_std': cfg_lib.Float(min=0.0, min_inclusive=False),
          prefix + 'ent_coef': cfg_lib.Float(min=0.0)}


class RARLState(NamedTuple):
  params: dict[str, jax.Array]  # mean, log_std of the pre-tanh Gaussian
  opt_state: Any
  key: jax.Array


def rarl(task: base.ReachTask, c: ml_collections.ConfigDict, num_envs: int,
         max_episodes: int) -> Sampler:
  """An adversary z ~ N(mean, std), theta = from_box(tanh z), trained by
  REINFORCE to maximise the failure rate (`c` = the `rarl` section)."""
  E, d = num_envs, task.theta_dim
  tx = optax.adam(c.learning_rate)

  def init(key):
    params = {'mean': jnp.zeros((d,)),
              'log_std': jnp.full((d,), jnp.log(c.init_std))}
    return RARLState(params, tx.init(params), key)

  def propose(s: RARLState, t):
    del t
    key, k = jax.random.split(s.key)
    z = s.params['mean'] + jnp.exp(s.params['log_std']) * jax.random.normal(
        k, (E, d))
    theta = jax.vmap(task.from_box)(jnp.tanh(z))
    return s._replace(key=key), theta, {
        'rarl/mean': s.params['mean'][0],
        'rarl/std': jnp.exp(s.params['log_std'][0])}

  def update(s: RARLState, batch: ro.Batch, ps, t):
    del ps, t
    ep = ended_episodes(batch, max_episodes)
    z = jnp.arctanh(jnp.clip(jax.vmap(task.to_box)(ep.theta), -0.999, 0.999))
    fail = (ep.valid & ~ep.safe).astype(jnp.float32)
    w = ep.valid.astype(jnp.float32)
    n = jnp.maximum(w.sum(), 1.0)
    adv = (fail - jnp.sum(fail) / n) * w

    def loss(p):
      logp = jnp.sum(jax.scipy.stats.norm.logpdf(
          z, p['mean'], jnp.exp(p['log_std'])), -1)
      return -jnp.sum(adv * logp) / n - c.ent_coef * jnp.sum(p['log_std'])

    g = jax.grad(loss)(s.params)
    upd, opt = tx.update(g, s.opt_state, s.params)
    return RARLState(optax.apply_updates(s.params, upd), opt, s.key), {
        'rarl/fail': jnp.sum(fail) / n}

  return Sampler(init, propose, update)


# -- the trainer ----------------------------------------------------------------------
class TrainState(NamedTuple):
  ppo: ppo_lib.PPOState
  sampler: Any
  coverage: jax.Array   # [1 + R] last evaluated (overall, per region)


def region_masks(task: base.ReachTask, thetas: np.ndarray) -> np.ndarray:
  """[1 + R, N] float masks: all of the set, then each of its regions."""
  regions = np.asarray(jax.vmap(task.region_of)(jnp.asarray(thetas)))
  return np.stack([np.ones(len(thetas), bool)] +
                  [regions == i for i in range(len(task.region_names))]
                  ).astype(np.float32)


def make_trainer(task: base.ReachTask, c: ml_collections.ConfigDict,
                 sampler: Sampler, num_updates: int):
  """PPO (`c.ppo`) on `task` with theta from `sampler`.

  Returns init(key) -> TrainState, step(state, t) -> (state, metrics) (one
  PPO iteration: propose, rollout and update, then the sampler's update;
  every `c.eval_every` iterations the coverage of `c.eval_points` theta) and
  evaluate(states, thetas [N, d]) -> safe flags [S, N] of each seed's
  greedy policy.
  """
  env = base.ReachEnv(task)
  ppo_init, ppo_step = ppo_lib.make_ppo(env, c.ppo, num_updates=num_updates,
                                        with_batch=True)
  act = ppo_lib.greedy_policy(env.spec, c.ppo)
  eval_np = task.eval_thetas(c.eval_points)
  eval_th = jnp.asarray(eval_np)
  masks = jnp.asarray(region_masks(task, eval_np))

  def coverage(ps: ppo_lib.PPOState) -> jax.Array:
    safe = base.rollout_safe(task, lambda o: act(ps.params, ps.norm, o),
                             eval_th).astype(jnp.float32)
    return (masks @ safe) / jnp.maximum(masks.sum(1), 1.0)

  def init(key: jax.Array) -> TrainState:
    k_ppo, k_s, _ = jax.random.split(key, 3)  # (third key: unused)
    return TrainState(ppo_init(k_ppo), sampler.init(k_s),
                      jnp.zeros((1 + len(task.region_names),)))

  def step(state: TrainState, t: jax.Array):
    s, theta, m_prop = sampler.propose(state.sampler, t)
    ps = state.ppo._replace(
        env_state=base.set_next_theta(state.ppo.env_state, theta))
    ps, m, batch = ppo_step(ps, t)
    s, m_upd = sampler.update(s, batch, ps, t)
    last = ((t + 1) % c.eval_every == 0) | (t + 1 == num_updates)
    cov = jax.lax.cond(last, coverage, lambda _: state.coverage, ps)
    metrics = {k: m[k] for k in ('loss/policy', 'loss/value', 'entropy',
                                 'env_steps')}
    metrics['episode_safe'] = (jnp.sum(batch.info['safe']) /
                               jnp.maximum(jnp.sum(batch.info['done']), 1))
    metrics['coverage'] = cov[0]
    for i, name in enumerate(task.region_names):
      metrics[f'coverage/{name}'] = cov[1 + i]
    metrics.update(m_prop)
    metrics.update(m_upd)
    return TrainState(ps, s, cov), metrics

  @jax.jit
  def evaluate(states: TrainState, thetas: jax.Array) -> jax.Array:
    """Safe flags [S, N] of each seed's greedy policy at `thetas` [N, d]."""
    return jax.vmap(lambda st: base.rollout_safe(
        task, lambda o: act(st.ppo.params, st.ppo.norm, o), thetas))(states)

  return init, step, evaluate
