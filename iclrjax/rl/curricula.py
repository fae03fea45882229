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
* `accel` (arXiv 2203.01302): PLR's buffer grown by mutating replayed theta;
* `sfl` (sampling for learnability, arXiv 2408.15099): replay of the rho
  draws whose success rate p under the current policy has the largest
  p (1 - p);
* `paired` (arXiv 2012.02096): an adversary over the theta box trained to
  maximise the regret of the policy against an antagonist PPO agent;
* `vds` (value disagreement sampling, arXiv 2006.09641): draws from rho kept
  in proportion to the disagreement of an ensemble of critics;
* FGE (`rl.fge.fge_sampler`), the paper's method.

ACCEL, SFL, PAIRED and VDS follow the FGE release's ToyLevels runs
(oswinso/fge at feebe5b, `scripts/toylevels/run_ppo_{accel,sfl,paired,
vds}.py`); each docstring names where it deviates on purpose. The FGE
paper's last baseline, FARR (arXiv 2207.09597), is left out: it is no
sampler for one PPO learner. The release (`ppo_farr.py`) trains a fresh PPO
agent on each single theta it adds, fills a payoff matrix of policies x
theta and solves that meta-game by fictitious play (PSRO): a loop of whole
training runs.

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
from iclrjax.rl import distributions as dist
from iclrjax.rl import networks
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

  @classmethod
  def create(cls, capacity: int, d: int, key: jax.Array) -> PLRState:
    return cls(jnp.zeros((capacity, d)), jnp.zeros((capacity,)),
               jnp.zeros((capacity,), jnp.int32),
               jnp.zeros((capacity,), bool), key)


# How a level is scored from the GAE A_t of its steps (then averaged over
# the episode's steps in the rollout).
SCORES = {
    # PLR's L1 value loss (arXiv 2010.03934, Sec. 3).
    'l1': jnp.abs,
    # The positive value loss of robust PLR / ACCEL (arXiv 2203.01302,
    # Sec. 3; jaxued): the steps that went better than the critic expected.
    'pvl': lambda a: jnp.maximum(a, 0.0),
    # The FGE release's PVL (`ppo_accel.py`, `accel_branch_*`): the same
    # max(A, 0) on its cost GAE, i.e. max(-A, 0) on our reward GAE: the
    # steps that went worse than expected.
    'pvl_cost': lambda a: jnp.maximum(-a, 0.0),
}


def episode_scores(batch: ro.Batch, gamma: float, lam: float,
                   score: str = 'l1') -> jax.Array:
  """[T, E] score of the episode each step belongs to: the mean of
  `SCORES[score](GAE)` over that episode's steps in this rollout (PLR's L1
  value loss by default). Values come from the rollout; the next state's
  value is the next step's (cut at termination, the own value at truncation
  and at the rollout's end)."""
  v = batch.value
  next_v = jnp.concatenate([v[1:], v[-1:]], 0)
  next_v = jnp.where(batch.truncated, v, next_v)
  done = (batch.terminated | batch.truncated).astype(jnp.float32)
  adv, _ = ro.gae(batch.reward, v, next_v,
                  batch.terminated.astype(jnp.float32), done, gamma, lam)
  seg = jnp.cumsum(done, 0) - done  # episode index within the rollout
  same = seg[:, None, :] == seg[None, :, :]  # [T, T', E]
  a = SCORES[score](adv)
  return (jnp.sum(same * a[None], 1) / jnp.sum(same, 1))


def plr_replay_probs(s: PLRState, t: jax.Array, temperature: float,
                     staleness: float) -> jax.Array:
  """P_replay = (1 - rho) P_S + rho P_C with rank prioritisation
  h(S_i) = rank_i^(-1/beta) and staleness P_C ~ t - C_i (PLR Eq. 2-3);
  P_C is uniform over the filled slots while every staleness is 0, as in
  jaxued's `LevelSampler.staleness_weights` (tests/parity/test_ued.py)."""
  masked = jnp.where(s.filled, s.score, -jnp.inf)
  rank = jnp.empty_like(s.score).at[jnp.argsort(-masked)].set(
      jnp.arange(1, s.score.shape[0] + 1, dtype=jnp.float32))
  h = jnp.where(s.filled, rank ** (-1.0 / temperature), 0.0)
  ps = h / jnp.maximum(h.sum(), 1e-30)
  stale = jnp.where(s.filled, (t - s.last).astype(jnp.float32), 0.0)
  uniform = s.filled / jnp.maximum(jnp.sum(s.filled), 1)
  pc = jnp.where(stale.sum() > 0, stale / jnp.maximum(stale.sum(), 1e-30),
                 uniform)
  return (1.0 - staleness) * ps + staleness * pc


def plr_sample(s: PLRState, key: jax.Array, t: jax.Array, replay: jax.Array,
               temperature: float, staleness: float
               ) -> tuple[PLRState, jax.Array]:
  """[E] buffer indices drawn from `plr_replay_probs`, independently (jaxued
  draws them one by one, each draw resetting its level's staleness); the
  slots drawn where `replay` [E] are stamped as sampled at t."""
  probs = plr_replay_probs(s, t, temperature, staleness)
  idx = jax.random.categorical(key, jnp.log(probs + 1e-30),
                               shape=replay.shape)
  C = s.score.shape[0]
  last = s.last.at[jnp.where(replay, idx, C)].set(t, mode='drop')
  return s._replace(last=last), idx


def plr_insert(s: PLRState, theta_K: jax.Array, score_K: jax.Array,
               valid_K: jax.Array, t: jax.Array) -> PLRState:
  """Enters finished episodes one by one (a scan, as jaxued's
  `insert_batch`): a theta already in the buffer takes its new score (the
  replayed level's update, jaxued's `update_batch`); a new one takes a free
  slot, or the lowest-scored slot if it scores higher, stamped t. (jaxued
  evicts the slot of lowest replay weight, score and staleness mixed: the
  same slot when the staleness coefficient is 0.)"""

  def insert(st, x):
    th, sc, ok = x
    theta, score, last, filled = st
    match = filled & jnp.all(theta == th[None], -1)
    has = jnp.any(match)
    worst = jnp.argmin(jnp.where(filled, score, jnp.inf))
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
      (theta_K, score_K, valid_K))
  return PLRState(theta, score, last, filled, s.key)


def plr_update(s: PLRState, batch: ro.Batch, t: jax.Array, gamma: float,
               lam: float, max_episodes: int, score: str = 'l1',
               prefix: str = 'plr') -> tuple[PLRState, dict[str, jax.Array]]:
  """Scores the episodes that ended in `batch` and enters them
  (`plr_insert`)."""
  score_TxE = episode_scores(batch, gamma, lam, score)
  ep = ended_episodes(batch, max_episodes)
  s = plr_insert(s, ep.theta, score_TxE.reshape(-1)[ep.index], ep.valid, t)
  return s, {f'{prefix}/mean_score': jnp.sum(jnp.where(
      s.filled, s.score, 0.0)) / jnp.maximum(jnp.sum(s.filled), 1)}


def plr(task: base.ReachTask, c: ml_collections.ConfigDict, num_envs: int,
        max_episodes: int, gamma: float, gae_lambda: float) -> Sampler:
  """Prioritised level replay over theta (`c` = the `plr` config section)."""
  E, d, C = num_envs, task.theta_dim, c.capacity
  nominal = jax.vmap(task.sample_nominal)

  def propose(s: PLRState, t):
    key, k_new, k_rep, k_idx = jax.random.split(s.key, 4)
    n_filled = jnp.sum(s.filled)
    replay = (jax.random.uniform(k_rep, (E,)) < c.p_replay) & (
        n_filled >= C // 4)
    s, idx = plr_sample(s, k_idx, t, replay, c.temperature, c.staleness)
    theta = jnp.where(replay[:, None], s.theta[idx],
                      nominal(jax.random.split(k_new, E)))
    return s._replace(key=key), theta, {
        'plr/filled': n_filled.astype(jnp.float32)}

  def update(s: PLRState, batch: ro.Batch, ps, t):
    del ps
    return plr_update(s, batch, t, gamma, gae_lambda, max_episodes)

  return Sampler(lambda key: PLRState.create(C, d, key), propose, update)


# -- ACCEL --------------------------------------------------------------------------
ACCEL_SCORES = tuple(SCORES)


def accel_schema(prefix: str = 'accel.') -> dict[str, cfg_lib.Spec]:
  return {prefix + 'capacity': cfg_lib.Int(min=2),
          prefix + 'p_replay': cfg_lib.Float(min=0.0, max=1.0),
          prefix + 'temperature': cfg_lib.Float(min=0.0, min_inclusive=False),
          prefix + 'staleness': cfg_lib.Float(min=0.0, max=1.0),
          prefix + 'min_fill': cfg_lib.Float(min=0.0, max=1.0),
          prefix + 'mutate_scale': cfg_lib.Float(min=0.0),
          prefix + 'score': cfg_lib.Choice(*ACCEL_SCORES)}


class ACCELState(NamedTuple):
  plr: PLRState
  replayed: jax.Array      # [E, d] the last replayed batch (mutated next)
  mutate_next: jax.Array   # bool: the last iteration replayed


def accel_mutate(task: base.ReachTask, key: jax.Array, theta_NxD: jax.Array,
                 scale: float) -> jax.Array:
  """The release's ToyLevels edit (`ppo_accel.py`, `MutateFn`): Gaussian
  noise of sd `scale` on theta's box coordinates, clipped to [-1, 1]^d, so
  the result is a point of Theta whatever theta was."""
  u = jax.vmap(task.to_box)(theta_NxD)
  u = jnp.clip(u + scale * jax.random.normal(key, u.shape), -1.0, 1.0)
  return jax.vmap(task.from_box)(u)


def accel(task: base.ReachTask, c: ml_collections.ConfigDict, num_envs: int,
          max_episodes: int, gamma: float, gae_lambda: float) -> Sampler:
  """ACCEL (Parker-Holder et al., arXiv 2203.01302, Alg. 1) over theta:
  PLR's buffer (`plr_sample`, `plr_insert`, rank prioritisation with
  staleness, Eq. 2-3 of arXiv 2010.03934) grown by editing replayed levels.

  As the FGE release runs it on ToyLevels (`src/fge/core/algos/onpol/
  ppo_accel.py`, `AccelCfg`, jaxued's `LevelSampler`), one branch per
  iteration: after a replay iteration, a mutate iteration proposes
  `accel_mutate` of the replayed batch; otherwise the iteration replays
  (probability `p_replay`, once the buffer is `min_fill` full) or proposes
  new theta ~ rho. Finished episodes are scored (`score`: the release's
  PVL on its cost GAE) and a replayed level's score is updated, a new or
  mutated one inserted. Release values: capacity 4000, p_replay 0.8,
  temperature 0.3, staleness 0.3, min_fill 0.5, mutate_scale 0.04 (no
  duplicate check, rank prioritisation).

  Deliberate deviations:
  * robust training: the release (like ACCEL and robust PLR) updates PPO
    only on replay iterations, each a 1000-step rollout of whole episodes
    from one branch's levels. Here episodes straddle the fixed 30-step
    rollouts of `make_trainer`, so a rollout mixes episodes begun under
    earlier branches, and skipping an iteration's update would discard
    transitions of old levels, not of the new ones: every transition
    trains the policy (ACCEL without the robust stop-gradient). The
    release also counts only replay steps against its env-step budget; here
    every iteration counts.
  * levels are theta (ended episodes' theta, the replayed ones matched
    exactly), scored over their steps inside the rollout (`episode_scores`);
    the release scores each env's whole episodes from its fixed x0;
  * the buffer evicts its lowest score and stamps staleness in iterations
    (`plr_insert`, `plr_sample`); jaxued evicts the lowest replay weight
    and counts staleness in sampled episodes;
  * `capacity` scales with the episodes that end per iteration (the
    default config's 512 for 128 envs; the `paper` variant's 4000).
  """
  E, d, C = num_envs, task.theta_dim, c.capacity
  nominal = jax.vmap(task.sample_nominal)
  need = int(np.ceil(c.min_fill * C))

  def init(key):
    return ACCELState(PLRState.create(C, d, key), jnp.zeros((E, d)),
                      jnp.zeros((), bool))

  def propose(s: ACCELState, t):
    key, k_dec, k_new, k_idx, k_mut = jax.random.split(s.plr.key, 5)
    n_filled = jnp.sum(s.plr.filled)
    replay = (~s.mutate_next & (n_filled >= need)
              & (jax.random.uniform(k_dec) < c.p_replay))
    buf, idx = plr_sample(s.plr, k_idx, t, jnp.full((E,), replay),
                          c.temperature, c.staleness)
    th_replay = buf.theta[idx]
    theta = jnp.where(s.mutate_next,
                      accel_mutate(task, k_mut, s.replayed, c.mutate_scale),
                      jnp.where(replay, th_replay,
                                nominal(jax.random.split(k_new, E))))
    branch = jnp.where(s.mutate_next, 2, jnp.where(replay, 1, 0))
    new = ACCELState(buf._replace(key=key),
                     jnp.where(replay, th_replay, s.replayed), replay)
    return new, theta, {'accel/filled': n_filled.astype(jnp.float32),
                        'accel/branch': branch.astype(jnp.float32)}

  def update(s: ACCELState, batch: ro.Batch, ps, t):
    del ps
    buf, m = plr_update(s.plr, batch, t, gamma, gae_lambda, max_episodes,
                        c.score, 'accel')
    return s._replace(plr=buf), m

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


# -- SFL ------------------------------------------------------------------------------
def sfl_schema(prefix: str = 'sfl.') -> dict[str, cfg_lib.Spec]:
  return {prefix + 'every': cfg_lib.Int(min=1),
          prefix + 'p_base': cfg_lib.Float(min=0.0, max=1.0),
          prefix + 'candidates': cfg_lib.Int(min=1),
          prefix + 'buffer': cfg_lib.Int(min=1),
          prefix + 'rollouts': cfg_lib.Int(min=1)}


class SFLState(NamedTuple):
  theta: jax.Array        # [K, d] the most learnable candidates
  learnability: jax.Array  # [K] their p (1 - p)
  size: jax.Array         # 0 until the first refresh, then K
  key: jax.Array


def learnability(p: jax.Array) -> jax.Array:
  """p (1 - p) of a success rate p: largest at p = 1/2, zero for the theta
  the policy always or never solves (arXiv 2408.15099, Sec. 4)."""
  return p * (1.0 - p)


def sfl_top_k(theta_NxD: jax.Array, p_N: jax.Array, k: int
              ) -> tuple[jax.Array, jax.Array]:
  """The k candidates of highest learnability [k, d] and their scores."""
  score, idx = jax.lax.top_k(learnability(p_N), k)
  return theta_NxD[idx], score


def sfl(task: base.ReachTask, c: ml_collections.ConfigDict,
        ppo_config: ml_collections.ConfigDict) -> Sampler:
  """Sampling for learnability (Rutherford et al., arXiv 2408.15099, Alg. 1):
  every `every` iterations draw `candidates` theta from rho, estimate each
  one's success rate p under the current stochastic policy, keep the
  `buffer` of highest learnability p (1 - p); each env then draws from rho
  with probability `p_base`, else uniformly from the buffer (`c` = the `sfl`
  config section).

  The FGE release's ToyLevels settings (`scripts/toylevels/run_ppo_sfl.py`,
  `src/fge/core/algos/onpol/ppo_sfl.py`, `sfl_sampler.py`): refresh every 50
  iterations, 5000 candidates, top 100, p_base 0.1, rollouts 5 episode
  lengths long (`T_coef`). Deliberate deviations:
  * p is the safe fraction of `rollouts` independent episodes from the
    candidate itself (`base.first_failure` with a key). The release rolls
    each candidate out for 5 episode lengths and counts truncations over all
    episode ends, but its collector resets a finished episode to a fresh
    draw from rho, so only the first episode is the candidate's;
  * the buffer is refreshed after the PPO update of iterations 0, `every`,
    ... (the policy the next rollouts use); the release refreshes before
    the rollout of those iterations, so its first rollout already samples
    the buffer;
  * `candidates` is 1000 in the default CPU config (the `paper` variant's
    5000).
  """
  E, d, K = ppo_config.num_envs, task.theta_dim, c.buffer
  N, R = c.candidates, c.rollouts
  if K > N:
    raise ValueError(f'sfl.buffer={K} must be <= sfl.candidates={N}')
  nominal = jax.vmap(task.sample_nominal)
  act = ppo_lib.sampling_policy(base.ReachEnv(task).spec, ppo_config)

  def init(key):
    return SFLState(jnp.zeros((K, d)), jnp.zeros((K,)),
                    jnp.zeros((), jnp.int32), key)

  def propose(s: SFLState, t):
    del t
    key, k_base, k_new, k_idx = jax.random.split(s.key, 4)
    from_rho = (jax.random.uniform(k_base, (E,)) < c.p_base) | (s.size == 0)
    idx = jax.random.randint(k_idx, (E,), 0, K)
    theta = jnp.where(from_rho[:, None], nominal(jax.random.split(k_new, E)),
                      s.theta[idx])
    return s._replace(key=key), theta, {
        'sfl/from_rho': jnp.mean(from_rho.astype(jnp.float32))}

  def refresh(s: SFLState, ps) -> SFLState:
    key, k_cand, k_roll = jax.random.split(s.key, 3)
    cand = nominal(jax.random.split(k_cand, N))
    safe = base.rollout_safe(
        task, lambda o, k: act(ps.params, ps.norm, o, k),
        jnp.tile(cand, (R, 1)), k_roll)
    p = jnp.mean(safe.reshape(R, N).astype(jnp.float32), 0)
    theta, score = sfl_top_k(cand, p, K)
    return SFLState(theta, score, jnp.full((), K, jnp.int32), key)

  def update(s: SFLState, batch: ro.Batch, ps, t):
    del batch
    # t is the scan index, shared by the vmapped seeds: a real branch.
    s = jax.lax.cond(t % c.every == 0, refresh, lambda s, _: s, s, ps)
    return s, {'sfl/learnability': jnp.mean(s.learnability)}

  return Sampler(init, propose, update)


# -- VDS ------------------------------------------------------------------------------
def vds_schema(prefix: str = 'vds.') -> dict[str, cfg_lib.Spec]:
  return {prefix + 'ensemble': cfg_lib.Int(min=2),
          prefix + 'candidates': cfg_lib.Int(min=1),
          prefix + 'learning_rate': cfg_lib.Float(min=0.0,
                                                  min_inclusive=False),
          prefix + 'hidden': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1)}


class VDSState(NamedTuple):
  params: Any           # the ensemble's critics, stacked [K, ...]
  opt_state: Any
  norm: ro.RunningNorm  # the policy's observation statistics (a copy)
  key: jax.Array


def vds_pick(key: jax.Array, theta_NxD: jax.Array, std_N: jax.Array,
             n: int) -> jax.Array:
  """n of the candidates, each drawn with probability proportional to the
  ensemble's disagreement std (floored at 1e-9, as the release does)."""
  std = jnp.maximum(std_N, 1e-9)
  idx = jax.random.categorical(key, jnp.log(std / std.sum()), shape=(n,))
  return theta_NxD[idx]


def vds(task: base.ReachTask, c: ml_collections.ConfigDict,
        ppo_config: ml_collections.ConfigDict) -> Sampler:
  """Value disagreement sampling (Zhang et al., arXiv 2006.09641) over
  theta: draw `candidates` theta from rho and keep E of them with
  probability proportional to the std of an ensemble of `ensemble` critics
  at their initial observation; every critic fits its own GAE targets on
  each rollout (`c` = the `vds` config section).

  As the FGE release runs it on ToyLevels (`bits/vds_gae.py`,
  `scripts/toylevels/run_ppo_vds.py`): 3 critics, 1024 candidates, Adam
  8e-4, the PPO's gamma, lambda, epochs and minibatches, plain MSE summed
  over the critics, no value clamp, the policy's width. Deliberate
  deviations: GAE is cut at every episode end (the release's trace runs on
  across a time-limit cut; as for PPO, `rl.fge`); the release draws at
  every reset from fresh candidates, here each iteration draws E for the
  envs whose episodes end in it; the critics are MLPs on the observation
  also on pixel tasks (the release puts a CNN in front there).
  """
  E, K, N = ppo_config.num_envs, c.ensemble, c.candidates
  net = networks.MLP(tuple(c.hidden), 1, ppo_config.activation)
  tx = optax.adam(c.learning_rate)
  nominal = jax.vmap(task.sample_nominal)
  normalize = bool(ppo_config.normalize_obs)
  gamma, lam = float(ppo_config.gamma), float(ppo_config.gae_lambda)
  values = lambda params, obs: jax.vmap(
      lambda p: net.apply(p, obs)[..., 0])(params)   # [K, ...]

  def init(key):
    k_net, key = jax.random.split(key)
    obs = jnp.zeros((int(task.obs_dim),))
    params = jax.vmap(lambda k: net.init(k, obs))(jax.random.split(k_net, K))
    return VDSState(params, tx.init(params),
                    ro.RunningNorm.create((int(task.obs_dim),)), key)

  def propose(s: VDSState, t):
    del t
    key, k_cand, k_pick = jax.random.split(s.key, 3)
    cand = nominal(jax.random.split(k_cand, N))
    obs0 = s.norm(jax.vmap(lambda th: task.observe(task.init_state(th)))(
        cand).astype(jnp.float32), normalize)
    std = jnp.std(values(s.params, obs0), axis=0)
    return s._replace(key=key), vds_pick(k_pick, cand, std, E), {
        'vds/std': jnp.mean(std)}

  def loss_fn(params, mb):
    err = values(params, mb['obs']) - mb['target'].T
    return jnp.sum(jnp.mean(err**2, axis=1)), {}

  def update(s: VDSState, batch: ro.Batch, ps, t):
    del t
    key, k_sgd = jax.random.split(s.key)
    v = values(s.params, batch.obs)             # [K, T, E]
    next_v = values(s.params, batch.final_obs)
    done = (batch.terminated | batch.truncated).astype(jnp.float32)
    _, target = jax.vmap(lambda v, nv: ro.gae(
        batch.reward, v, nv, batch.terminated.astype(jnp.float32), done,
        gamma, lam))(v, next_v)
    data = {'obs': batch.obs, 'target': jnp.moveaxis(target, 0, -1)}
    params, opt, _ = ro.sgd_epochs(
        loss_fn, tx, s.params, s.opt_state, data, k_sgd,
        ppo_config.num_epochs, ppo_config.num_minibatches, True)
    return VDSState(params, opt, ps.norm, key), {
        'vds/loss': jnp.mean((v - target) ** 2)}

  return Sampler(init, propose, update)


# -- PAIRED ---------------------------------------------------------------------------
def paired_schema(prefix: str = 'paired.') -> dict[str, cfg_lib.Spec]:
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  return {prefix + 'learning_rate': pos,
          prefix + 'init_std': pos,
          prefix + 'ent_coef': cfg_lib.Float(min=0.0),
          prefix + 'clip_eps': pos,
          prefix + 'num_epochs': cfg_lib.Int(min=1),
          prefix + 'num_minibatches': cfg_lib.Int(min=1),
          prefix + 'regret_envs': cfg_lib.Int(min=1)}


def check_paired(c: ml_collections.ConfigDict, num_envs: int,
                 prefix: str = 'paired.') -> None:
  cfg_lib.check(c.regret_envs <= num_envs, prefix + 'regret_envs',
                c.regret_envs, f'must be <= ppo.num_envs={num_envs}')
  cfg_lib.check(c.regret_envs % c.num_minibatches == 0,
                prefix + 'num_minibatches', c.num_minibatches,
                f'must divide regret_envs={c.regret_envs}')


class PAIREDState(NamedTuple):
  params: dict[str, jax.Array]  # the adversary: mean, std (pre-softplus)
  opt_state: Any
  antagonist: ppo_lib.PPOState
  z: jax.Array       # [E, d] pre-tanh samples behind the proposed theta
  logp: jax.Array    # [E] their log-density
  theta: jax.Array   # [E, d]
  key: jax.Array


STD_MIN = 1e-5  # the release's TanhNormal floor on the std


def paired_regret(t_ant: jax.Array, t_pro: jax.Array, gamma: float
                  ) -> jax.Array:
  """The release's regret (`ppo_paired.py`, `compute_regret`) on one episode
  per theta, from each agent's first failure step (-1: safe; reward -1 at
  failure, else 0): max_t Q^A_t - mean_t Q^P_t over the episode's steps,
  with Q_t the discounted reward-to-go, i.e.

    U^A = -gamma^(t_A)                           (0 if safe),
    E U^P = -(1 - gamma^(t_P + 1)) / ((t_P + 1)(1 - gamma))   (0 if safe).

  Positive where the antagonist does better than the protagonist, and, as
  in the release, also where both fail at the same step t > 0 (the mean
  reward-to-go is below the return from the start): the estimate leans
  towards theta where the agents fail late."""
  u_ant = jnp.where(t_ant < 0, 0.0, -(gamma ** t_ant.astype(jnp.float32)))
  n = (t_pro + 1).astype(jnp.float32)
  mean_disc = (1.0 - gamma ** n) / (n * (1.0 - gamma)) if gamma < 1 else 1.0
  u_pro = jnp.where(t_pro < 0, 0.0, -mean_disc)
  return u_ant - u_pro


def adversary_log_std(params: dict[str, jax.Array]) -> jax.Array:
  return jnp.log(jax.nn.softplus(params['std']) + STD_MIN)


def adversary_loss(params, mb, clip_eps: float, ent_coef: float):
  """PPO's clipped surrogate for the adversary (a one-step bandit): `mb`
  holds pre-tanh samples z, their old log-density, advantages and a noise
  eps for a reparameterised one-sample entropy estimate (the release's
  `dist.entropy(seed=...)`)."""
  mean, log_std = params['mean'], adversary_log_std(params)
  logp = dist.tanh_gaussian_log_prob(mb['z'], mean, log_std)
  ratio = jnp.exp(logp - mb['logp'])
  adv = mb['adv']
  surrogate = jnp.minimum(ratio * adv,
                          jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
  ent = jnp.mean(dist.tanh_gaussian_entropy(
      mean + jnp.exp(log_std) * mb['eps'], log_std))
  return -jnp.mean(surrogate) - ent_coef * ent, {'entropy': ent}


def paired(task: base.ReachTask, c: ml_collections.ConfigDict,
           ppo_config: ml_collections.ConfigDict, num_updates: int
           ) -> Sampler:
  """PAIRED (Dennis et al., arXiv 2012.02096, Alg. 1) over theta: an
  adversary proposes theta, an antagonist PPO agent (`rl.ppo.make_ppo` on
  `base.ReachEnv(task)`, held in the sampler state) trains on the same
  theta, and the adversary is trained to maximise the regret of the
  protagonist (the trained policy) against the antagonist (`c` = the
  `paired` config section).

  As the FGE release runs it on ToyLevels (`src/fge/core/algos/onpol/
  ppo_paired.py`, `bits/sumppo_x0.py`, `scripts/toylevels/
  run_ppo_paired.py`): the adversary is a state-free tanh-Gaussian over
  theta's box coordinates (a learned mean and a softplus std, initial std
  0.5) trained by PPO as a one-step bandit whose reward is the regret
  (`paired_regret`, from one rollout of each agent's stochastic policy per
  theta), advantages normalised over the batch (its constant-input critic
  cancels there), clip 0.1, entropy 5e-3, 1 epoch of 16 minibatches,
  Adam 4e-4 with gradient clipping at 1.

  Deliberate deviations:
  * the sign: the release hands the regret to the adversary class it uses
    for RARL, whose loss minimises its reward (right for RARL's failure
    reward), so its PAIRED adversary minimises regret; here it maximises
    it, as PAIRED does (`maximise=False` runs the release's sign);
  * the protagonist is the trainer's PPO agent and trains on the task
    reward, and the antagonist on its own task reward; the release trains
    them on -regret and +regret placed at episode ends. The other agent's
    term of the regret does not depend on an agent's actions, so the policy
    gradients agree up to a per-theta shift of the reward;
  * the agents train on `make_trainer`'s 30-step rollouts with auto-reset
    to the adversary's theta; regret is scored on separate rollouts of the
    first `regret_envs` proposed theta, one episode each (the release scores
    and trains on the same 250-step rollouts, its later episodes restarted
    from rho), and with the agents after this iteration's update.
  """
  E, d, M = ppo_config.num_envs, task.theta_dim, c.regret_envs
  check_paired(c, E)
  env = base.ReachEnv(task)
  ant_init, ant_step = ppo_lib.make_ppo(env, ppo_config,
                                        num_updates=num_updates,
                                        with_batch=True)
  act = ppo_lib.sampling_policy(env.spec, ppo_config)
  tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(c.learning_rate))
  gamma = float(ppo_config.gamma)
  sign = 1.0 if c.maximise else -1.0
  std0 = float(np.log(np.expm1(c.init_std)))  # softplus^-1

  def init(key):
    k_ant, key = jax.random.split(key)
    params = {'mean': jnp.zeros((d,)),
              'std': jnp.full((d,), std0, jnp.float32)}
    return PAIREDState(params, tx.init(params), ant_init(k_ant),
                       jnp.zeros((E, d)), jnp.zeros((E,)), jnp.zeros((E, d)),
                       key)

  def propose(s: PAIREDState, t):
    del t
    key, k = jax.random.split(s.key)
    mean, log_std = s.params['mean'], adversary_log_std(s.params)
    z = mean + jnp.exp(log_std) * jax.random.normal(k, (E, d))
    logp = dist.tanh_gaussian_log_prob(z, mean, log_std)
    theta = jax.vmap(task.from_box)(jnp.tanh(z))
    return s._replace(z=z, logp=logp, theta=theta, key=key), theta, {
        'paired/mean': mean[0], 'paired/std': jnp.exp(log_std[0])}

  def update(s: PAIREDState, batch: ro.Batch, ps, t):
    del batch
    key, k_roll, k_eps, k_sgd = jax.random.split(s.key, 4)
    ant = s.antagonist._replace(
        env_state=base.set_next_theta(s.antagonist.env_state, s.theta))
    ant, _, _ = ant_step(ant, t)
    # Both agents from the first M theta in one rollout: rows [0, M) the
    # antagonist's, [M, 2M) the protagonist's (independent keys).
    agents = jax.tree.map(lambda a, p: jnp.stack([a, p]),
                          (ant.params, ant.norm), (ps.params, ps.norm))

    def both(obs, k):
      a = jax.vmap(act)(*agents, obs.reshape(2, M, -1),
                        jax.random.split(k, 2))
      return a.reshape(2 * M, *a.shape[2:])

    t_fail = base.first_failure(task, both, jnp.tile(s.theta[:M], (2, 1)),
                                k_roll)
    t_ant, t_pro = t_fail[:M], t_fail[M:]
    regret = paired_regret(t_ant, t_pro, gamma)
    adv = sign * (regret - regret.mean()) / (regret.std() + 1e-5)
    data = {'z': s.z[:M], 'logp': s.logp[:M], 'adv': adv,
            'eps': jax.random.normal(k_eps, (M, d))}
    params, opt, info = ro.sgd_epochs(
        lambda p, mb: adversary_loss(p, mb, c.clip_eps, c.ent_coef), tx,
        s.params, s.opt_state, jax.tree.map(lambda x: x[None], data), k_sgd,
        c.num_epochs, c.num_minibatches, True)
    new = s._replace(params=params, opt_state=opt, antagonist=ant, key=key)
    return new, {'paired/regret': jnp.mean(regret),
                 'paired/antagonist_safe': jnp.mean(
                     (t_ant < 0).astype(jnp.float32)),
                 'paired/protagonist_safe': jnp.mean(
                     (t_pro < 0).astype(jnp.float32)),
                 'paired/entropy': jnp.mean(info['entropy'])}

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
