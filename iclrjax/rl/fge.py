"""FGE: feasibility-guided exploration (So, Yu et al., arXiv 2602.15817).

Parameter-robust avoid problems (`rl.reach`): make a policy safe for as many
theta as possible when an unknown part of Theta is infeasible. FGE trains the
PPO core (`rl.ppo`) on initial conditions drawn, at every reset, from the
four-way mixture of the paper (Alg. 1, as its code runs it):

  theta ~ p_base rho + p_explore U(B_explore) + p_predci U(B_predci)
          + p_rehearse U(B_rehearse),                                 (mix)

with empty buffers' mass moved to the next term exactly as the code does
(`_mixture_probs`). After every PPO iteration:

1. certificates: every finished episode's theta goes into the on-policy
   buffer with its safe flag; a safe one enters the certified-feasible buffer
   D_f (one safe rollout proves theta in Theta*, so D_f has no false
   positives); an unsafe one enters the collide buffer until seen safe;
2. the feasibility classifier q_psi(feasible | obs0) is fit by BCE with
   label smoothing on the mixture
     p_mix(f, theta) = alpha p*(f|theta) p_Df(theta)
                       + (1 - alpha) p^pi(f|theta) rho(theta)
   (positives from D_f, on-policy labels from the policy's own rollouts);
3. the policy-safety classifier P_pi(safe | obs0) is fit on the on-policy
   buffer;
4. explore: among candidates from rho and the collide buffer, drop those
   with q_psi >= threshold or unsafe at t = 0, and push the least likely
   under a density model of visited theta (novelty) into B_explore;
5. rehearse: from candidates drawn from D_f push argmin P_pi(safe) into
   B_rehearse (the best response over known-feasible theta; training on the
   history of best responses is the paper's FTRL scheme);
6. B_predci: rejection samples from rho with q_psi >= threshold, the
   shortfall filled from D_f.

Everything is a fixed-size array, so one FGE iteration (rollout, PPO update,
buffers, classifiers, novelty) is one pure function and `core.loop` scans
and vmaps it over seeds. Baselines on the same PPO core and the same loop:
domain randomisation (DR: theta ~ rho), prioritised level replay (PLR,
arXiv 2010.03934: rank-prioritised replay of high-|GAE| theta with staleness)
and RARL (arXiv 1703.02702: an adversary chooses theta to make the
protagonist fail, here a tanh-Gaussian over the theta box trained by
REINFORCE on the failure indicator).

Simplifications against the paper's code, each a config or documented: the
novelty density is an exact Gaussian KDE over the box coordinates of recently
visited theta (the code fits a spline flow to visited observations; for
low-dimensional theta the KDE is exact up to the bandwidth); the code's
priority queue of past candidates and its "sample each explore pick >= 4
times" rule are not used; buffers are rings of configurable size.
"""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import logging as log_lib
from iclrjax.rl import networks
from iclrjax.rl import ppo as ppo_lib
from iclrjax.rl import rollout as ro
from iclrjax.rl import reach
from iclrjax.rl.reach import base

METHODS = ('fge', 'dr', 'plr', 'rarl')


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
    """n rows uniformly (with replacement) from the filled part."""
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


def _first_occurrence(rows: jax.Array, mask: jax.Array) -> jax.Array:
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


# -- classifiers and density ------------------------------------------------------
def _bce(logits: jax.Array, labels: jax.Array, weights: jax.Array,
         smoothing: float) -> jax.Array:
  y = labels * (1.0 - smoothing) + 0.5 * smoothing
  loss = optax.sigmoid_binary_cross_entropy(logits, y)
  return jnp.sum(loss * weights) / jnp.maximum(jnp.sum(weights), 1e-8)


def kde_log_density(points: jax.Array, centres: jax.Array, mask: jax.Array,
                    bandwidth: float) -> jax.Array:
  """log of the Gaussian KDE (bandwidth h) of the masked centres at points."""
  d = points.shape[-1]
  sq = jnp.sum((points[:, None] - centres[None]) ** 2, axis=-1)
  logk = jnp.where(mask[None], -0.5 * sq / bandwidth**2, -jnp.inf)
  n = jnp.maximum(jnp.sum(mask), 1)
  return (jax.scipy.special.logsumexp(logk, axis=1) - jnp.log(n)
          - 0.5 * d * jnp.log(2 * jnp.pi * bandwidth**2))


class Classifier(NamedTuple):
  params: Any
  opt_state: Any


# -- the trainer ---------------------------------------------------------------------
class TrainState(NamedTuple):
  ppo: ppo_lib.PPOState
  sampler: Any
  coverage: jax.Array   # [1 + R] last evaluated (overall, per region)


def config_schema(prefix: str = 'fge.') -> dict[str, cfg_lib.Spec]:
  prob = cfg_lib.Float(min=0.0, max=1.0)
  pos_int = cfg_lib.Int(min=1)
  fields = {
      'p_base': prob, 'p_explore': prob, 'p_predci': prob,
      'frac_latest': prob,
      'threshold': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                                 max_inclusive=False),
      'label_smoothing': cfg_lib.Float(min=0.0, max=1.0, max_inclusive=False),
      'alpha': prob,
      'explore_capacity': pos_int, 'rehearse_capacity': pos_int,
      'certified_capacity': pos_int, 'collide_capacity': pos_int,
      'onpol_capacity': pos_int, 'visited_capacity': pos_int,
      'predci_capacity': pos_int, 'predci_candidates': pos_int,
      'explore_candidates': pos_int,
      'collide_candidates': cfg_lib.Int(min=0),
      'rehearse_candidates': pos_int, 'max_episodes': pos_int,
      'density': cfg_lib.Choice('kde'),
      'kde_bandwidth': cfg_lib.Float(min=0.0, min_inclusive=False),
      'clf_hidden': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
      'clf_lr': cfg_lib.Float(min=0.0, min_inclusive=False),
      'clf_batch': pos_int, 'clf_steps': pos_int,
      'rehearsal_only_frac': cfg_lib.Float(min=0.0, max=1.0, nullable=True),
  }
  return {prefix + k: v for k, v in fields.items()}


def plr_schema(prefix: str = 'plr.') -> dict[str, cfg_lib.Spec]:
  return {prefix + 'capacity': cfg_lib.Int(min=2),
          prefix + 'p_replay': cfg_lib.Float(min=0.0, max=1.0),
          prefix + 'temperature': cfg_lib.Float(min=0.0, min_inclusive=False),
          prefix + 'staleness': cfg_lib.Float(min=0.0, max=1.0)}


def rarl_schema(prefix: str = 'rarl.') -> dict[str, cfg_lib.Spec]:
  return {prefix + 'learning_rate': cfg_lib.Float(min=0.0, min_inclusive=False),
          prefix + 'init_std': cfg_lib.Float(min=0.0, min_inclusive=False),
          prefix + 'ent_coef': cfg_lib.Float(min=0.0)}


def check_config(c: ml_collections.ConfigDict) -> None:
  f = c.fge
  total = f.p_base + f.p_explore + f.p_predci
  cfg_lib.check(total <= 1.0 + 1e-9, 'fge.p_base', f.p_base,
                f'p_base + p_explore + p_predci must be <= 1 (the rest is '
                f'p_rehearse), got {total:.3f}')
  cfg_lib.check(f.collide_candidates < f.explore_candidates,
                'fge.collide_candidates', f.collide_candidates,
                f'must be < fge.explore_candidates={f.explore_candidates}')
  for name in ('certified_capacity', 'collide_capacity', 'onpol_capacity',
               'visited_capacity'):
    cfg_lib.check(f[name] >= f.max_episodes, f'fge.{name}', f[name],
                  f'must be >= fge.max_episodes={f.max_episodes}')


def _mixture_probs(p_base, p_explore, p_predci, n_explore, n_rehearse,
                   n_predci):
  """The code's redistribution when buffers are empty (ResetBuf)."""
  p_predci = jnp.where(n_predci == 0, 0.0, p_predci)
  p_reh = jnp.where(n_rehearse == 0, 0.0, 1.0 - (p_explore + p_base + p_predci))
  p_exp = jnp.where(n_explore == 0, 0.0, 1.0 - (p_base + p_reh + p_predci))
  p_base = 1.0 - (p_reh + p_exp + p_predci)
  return jnp.stack([p_base, p_exp, p_predci, p_reh])


class FGEState(NamedTuple):
  certified: Ring       # [C, d] D_f: theta seen safe (no false positives)
  collide: Ring         # [C, d] theta seen unsafe
  collide_alive: jax.Array  # [C] not since seen safe
  onpol_theta: Ring     # [C, d]
  onpol_safe: Ring      # [C]
  visited: Ring         # [C, d] box coordinates of started episodes
  explore: Ring
  rehearse: Ring
  predci: jax.Array     # [P, d]
  predci_size: jax.Array
  feas: Classifier      # q_psi(feasible | obs0)
  polsafe: Classifier   # P_pi(safe | obs0)
  key: jax.Array


class PLRState(NamedTuple):
  theta: jax.Array      # [C, d]
  score: jax.Array      # [C]
  last: jax.Array       # [C] iteration last sampled
  filled: jax.Array     # [C]
  key: jax.Array


class RARLState(NamedTuple):
  params: dict[str, jax.Array]  # mean, log_std of the pre-tanh Gaussian
  opt_state: Any
  key: jax.Array


def make_trainer(task: base.ReachTask, c: ml_collections.ConfigDict,
                 method: str, num_updates: int):
  """Returns init(key) -> TrainState and step(state, t) -> (state, metrics).

  `c` holds `ppo`, `fge`, `plr`, `rarl` sections, `eval_points` and
  `eval_every` (iterations between coverage evaluations).
  """
  if method not in METHODS:
    raise ValueError(f'method must be one of {METHODS}, got {method!r}')
  env = base.ReachEnv(task)
  ppo_init, ppo_step = ppo_lib.make_ppo(env, c.ppo, num_updates=num_updates,
                                        with_batch=True)
  act = ppo_lib.greedy_policy(env.spec, c.ppo)
  E, d = c.ppo.num_envs, task.theta_dim
  f = c.fge
  eval_np = task.eval_thetas(c.eval_points)
  eval_th = jnp.asarray(eval_np)
  regions = np.asarray(jax.vmap(task.region_of)(eval_th))
  region_masks = jnp.asarray(np.stack(
      [np.ones(len(eval_np), bool)] +
      [regions == i for i in range(len(task.region_names))]), jnp.float32)
  nominal = jax.vmap(task.sample_nominal)
  clf_net = networks.MLP(tuple(f.clf_hidden), 1, 'tanh')
  clf_tx = optax.adam(f.clf_lr)
  obs0 = lambda th: base.initial_obs(task, th)
  clf_logit = lambda p, th: clf_net.apply(p, obs0(th))[..., 0]

  def coverage(ps: ppo_lib.PPOState) -> jax.Array:
    safe = base.rollout_safe(task, lambda o: act(ps.params, ps.norm, o),
                             eval_th).astype(jnp.float32)
    return (region_masks @ safe) / jnp.maximum(region_masks.sum(1), 1.0)

  def new_classifier(key):
    params = clf_net.init(key, jnp.zeros((env.spec.obs_shape[0],)))
    return Classifier(params, clf_tx.init(params))

  def fit(clf: Classifier, theta, labels, weights) -> tuple[Classifier, Any]:
    x = obs0(theta)

    def one(carry, _):
      params, opt = carry
      loss, g = jax.value_and_grad(lambda p: _bce(
          clf_net.apply(p, x)[..., 0], labels, weights,
          f.label_smoothing))(params)
      upd, opt = clf_tx.update(g, opt, params)
      return (optax.apply_updates(params, upd), opt), loss

    (params, opt), losses = jax.lax.scan(one, tuple(clf), None,
                                         length=f.clf_steps)
    return Classifier(params, opt), losses[-1]

  # ---- samplers: init(key), propose(s, t, key) -> (s, theta_E), update ----
  def fge_init(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return FGEState(
        Ring.create(f.certified_capacity, (d,)),
        Ring.create(f.collide_capacity, (d,)),
        jnp.zeros((f.collide_capacity,), bool),
        Ring.create(f.onpol_capacity, (d,)),
        Ring.create(f.onpol_capacity, (), jnp.float32),
        Ring.create(f.visited_capacity, (d,)),
        Ring.create(f.explore_capacity, (d,)),
        Ring.create(f.rehearse_capacity, (d,)),
        jnp.zeros((f.predci_capacity, d)), jnp.zeros((), jnp.int32),
        new_classifier(k1), new_classifier(k2), k3)

  def fge_propose(s: FGEState, t):
    key, k_type, k_base, k_exp, k_pred, k_reh, k_lat = jax.random.split(
        s.key, 7)
    p_explore = f.p_explore
    if f.rehearsal_only_frac is not None:
      p_explore = jnp.where(
          t >= int((1.0 - f.rehearsal_only_frac) * num_updates), 0.0,
          p_explore)
    p = _mixture_probs(f.p_base, p_explore, f.p_predci, s.explore.size,
                       s.rehearse.size, s.predci_size)
    kind = jax.random.choice(k_type, 4, (E,), p=p)
    idx = jax.random.randint(k_pred, (E,), 0, jnp.maximum(s.predci_size, 1))
    reh = jnp.where((jax.random.uniform(k_lat, (E, 1)) < f.frac_latest),
                    s.rehearse.newest()[None], s.rehearse.sample(k_reh, E))
    cands = jnp.stack([nominal(jax.random.split(k_base, E)),
                       s.explore.sample(k_exp, E), s.predci[idx], reh])
    theta = jnp.take_along_axis(cands, kind[None, :, None], 0)[0]
    return s._replace(key=key), theta, {
        'mix/p_base': p[0], 'mix/p_explore': p[1], 'mix/p_predci': p[2],
        'mix/p_rehearse': p[3]}

  def fge_update(s: FGEState, batch: ro.Batch, ps, t):
    del ps, t
    key, k_fc, k_fo, k_po, k_cand, k_col, k_ci, k_pred, k_pf = (
        jax.random.split(s.key, 9))
    ep = ended_episodes(batch, f.max_episodes)
    # 1. certificates.
    new_cert = _first_occurrence(ep.theta, ep.safe) & ~s.certified.contains(
        ep.theta)
    certified = s.certified.push(ep.theta, new_cert)
    unsafe = ep.valid & ~ep.safe
    new_col = _first_occurrence(ep.theta, unsafe) & ~s.collide.contains(
        ep.theta) & ~certified.contains(ep.theta)
    pos = s.collide.count + jnp.cumsum(new_col) - 1
    slot = jnp.where(new_col, pos % s.collide.capacity, s.collide.capacity)
    alive = s.collide_alive.at[slot].set(True, mode='drop')
    collide = s.collide.push(ep.theta, new_col)
    seen_safe = jnp.any(
        jnp.all(collide.data[:, None] == ep.theta[None], -1) & ep.safe[None],
        axis=1)
    alive = alive & ~seen_safe
    onpol_theta = s.onpol_theta.push(ep.theta, ep.valid)
    onpol_safe = s.onpol_safe.push(ep.safe.astype(jnp.float32), ep.valid)
    visited = s.visited.push(jax.vmap(task.to_box)(ep.theta), ep.valid)
    # 2. feasibility classifier on the alpha-mixture.
    B = f.clf_batch
    th_c = certified.sample(k_fc, B)
    io = jax.random.randint(k_fo, (B,), 0, jnp.maximum(onpol_theta.size, 1))
    th_o, y_o = onpol_theta.data[io], onpol_safe.data[io]
    has_c = (certified.size > 0).astype(jnp.float32)
    has_o = (onpol_theta.size > 0).astype(jnp.float32)
    alpha = jnp.where(has_o > 0, f.alpha * has_c, 1.0)
    feas, loss_f = fit(
        s.feas, jnp.concatenate([th_c, th_o]),
        jnp.concatenate([jnp.ones((B,)), y_o]),
        jnp.concatenate([jnp.full((B,), alpha * has_c),
                         jnp.full((B,), (1.0 - alpha) * has_o)]))
    # 3. policy-safety classifier on the on-policy labels.
    io2 = jax.random.randint(k_po, (B,), 0, jnp.maximum(onpol_theta.size, 1))
    polsafe, loss_p = fit(s.polsafe, onpol_theta.data[io2],
                          onpol_safe.data[io2], jnp.full((B,), has_o))
    # 4. explore: least-dense candidate not predicted feasible.
    n_col = f.collide_candidates
    n_env = f.explore_candidates - n_col
    th_env = nominal(jax.random.split(k_cand, n_env))
    any_alive = jnp.any(alive) & (certified.size > 0)
    ic = jax.random.categorical(
        k_col, jnp.where(alive, 0.0, -jnp.inf), shape=(n_col,))
    th_col = collide.data[ic]
    cand = jnp.concatenate([th_env, th_col])
    cand_ok = jnp.concatenate([jnp.ones((n_env,), bool),
                               jnp.full((n_col,), any_alive)])
    q = jax.nn.sigmoid(clf_logit(feas.params, cand))
    logp = kde_log_density(jax.vmap(task.to_box)(cand), visited.data,
                           visited.filled(), f.kde_bandwidth)
    bad = (q >= f.threshold) | jax.vmap(task.failed_at_start)(cand) | ~cand_ok
    cost = jnp.where(bad, 1e9, logp)
    pick = jnp.argmin(cost)
    explore = s.explore.push(cand[pick][None], jnp.ones((1,), bool))
    # 5. rehearse: the worst known-feasible theta under P_pi(safe).
    th_ci = certified.sample(k_ci, f.rehearse_candidates)
    psafe = jax.nn.sigmoid(clf_logit(polsafe.params, th_ci))
    rehearse = s.rehearse.push(th_ci[jnp.argmin(psafe)][None],
                               (certified.size > 0)[None])
    # 6. predicted-feasible buffer: rejection sampling from rho.
    th_p = nominal(jax.random.split(k_pred, f.predci_candidates))
    pred_ok = jax.nn.sigmoid(clf_logit(feas.params, th_p)) >= f.threshold
    order = jnp.argsort(~pred_ok, stable=True)[:f.predci_capacity]
    fill = certified.sample(k_pf, f.predci_capacity)
    keep = pred_ok[order]
    predci = jnp.where(keep[:, None], th_p[order], fill)
    n_ok = jnp.sum(keep)
    predci_size = jnp.where((n_ok > 0) | (certified.size > 0),
                            f.predci_capacity, 0).astype(jnp.int32)
    new = FGEState(certified, collide, alive, onpol_theta, onpol_safe,
                   visited, explore, rehearse, predci, predci_size, feas,
                   polsafe, key)
    return new, {'fge/certified': certified.size.astype(jnp.float32),
                 'fge/collide': jnp.sum(alive).astype(jnp.float32),
                 'fge/predci_frac': jnp.mean(pred_ok.astype(jnp.float32)),
                 'fge/loss_feas': loss_f, 'fge/loss_polsafe': loss_p,
                 'fge/explore_theta': cand[pick][0],
                 'fge/rehearse_psafe': jnp.min(psafe)}

  # ---- domain randomisation ----
  def dr_init(key):
    return key

  def dr_propose(key, t):
    del t
    key, k = jax.random.split(key)
    return key, nominal(jax.random.split(k, E)), {}

  def dr_update(key, batch, ps, t):
    del batch, ps, t
    return key, {}

  # ---- PLR ----
  P = c.plr

  def plr_init(key):
    C = P.capacity
    return PLRState(jnp.zeros((C, d)), jnp.zeros((C,)),
                    jnp.zeros((C,), jnp.int32), jnp.zeros((C,), bool), key)

  def plr_replay_probs(s: PLRState, t):
    # Rank prioritisation h = rank^(-1/beta) and staleness (PLR Eq. 2-3).
    masked = jnp.where(s.filled, s.score, -jnp.inf)
    rank = jnp.empty_like(s.score).at[jnp.argsort(-masked)].set(
        jnp.arange(1, s.score.shape[0] + 1, dtype=jnp.float32))
    h = jnp.where(s.filled, rank ** (-1.0 / P.temperature), 0.0)
    ps_ = h / jnp.maximum(h.sum(), 1e-30)
    stale = jnp.where(s.filled, (t - s.last).astype(jnp.float32), 0.0)
    pc = jnp.where(stale.sum() > 0, stale / jnp.maximum(stale.sum(), 1e-30),
                   ps_)
    return (1.0 - P.staleness) * ps_ + P.staleness * pc

  def plr_propose(s: PLRState, t):
    key, k_new, k_rep, k_idx = jax.random.split(s.key, 4)
    probs = plr_replay_probs(s, t)
    idx = jax.random.categorical(k_idx, jnp.log(probs + 1e-30), shape=(E,))
    n_filled = jnp.sum(s.filled)
    replay = (jax.random.uniform(k_rep, (E,)) < P.p_replay) & (
        n_filled >= P.capacity // 4)
    theta = jnp.where(replay[:, None], s.theta[idx],
                      nominal(jax.random.split(k_new, E)))
    last = s.last.at[jnp.where(replay, idx, P.capacity)].set(t, mode='drop')
    return s._replace(key=key, last=last), theta, {
        'plr/filled': n_filled.astype(jnp.float32)}

  def plr_update(s: PLRState, batch: ro.Batch, ps, t):
    del ps
    score_TxE = episode_scores(batch, c.ppo.gamma, c.ppo.gae_lambda)
    ep = ended_episodes(batch, f.max_episodes)
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

  # ---- RARL: adversary over the theta box ----
  R = c.rarl
  adv_tx = optax.adam(R.learning_rate)

  def rarl_init(key):
    params = {'mean': jnp.zeros((d,)),
              'log_std': jnp.full((d,), jnp.log(R.init_std))}
    return RARLState(params, adv_tx.init(params), key)

  def rarl_propose(s: RARLState, t):
    del t
    key, k = jax.random.split(s.key)
    z = s.params['mean'] + jnp.exp(s.params['log_std']) * jax.random.normal(
        k, (E, d))
    theta = jax.vmap(task.from_box)(jnp.tanh(z))
    return s._replace(key=key), theta, {
        'rarl/mean': s.params['mean'][0],
        'rarl/std': jnp.exp(s.params['log_std'][0])}

  def rarl_update(s: RARLState, batch: ro.Batch, ps, t):
    del ps, t
    ep = ended_episodes(batch, f.max_episodes)
    z = jnp.arctanh(jnp.clip(jax.vmap(task.to_box)(ep.theta), -0.999, 0.999))
    fail = (ep.valid & ~ep.safe).astype(jnp.float32)
    w = ep.valid.astype(jnp.float32)
    n = jnp.maximum(w.sum(), 1.0)
    adv = (fail - jnp.sum(fail) / n) * w

    def loss(p):
      logp = jnp.sum(jax.scipy.stats.norm.logpdf(
          z, p['mean'], jnp.exp(p['log_std'])), -1)
      return -jnp.sum(adv * logp) / n - R.ent_coef * jnp.sum(p['log_std'])

    g = jax.grad(loss)(s.params)
    upd, opt = adv_tx.update(g, s.opt_state, s.params)
    return RARLState(optax.apply_updates(s.params, upd), opt, s.key), {
        'rarl/fail': jnp.sum(fail) / n}

  samplers = {'fge': (fge_init, fge_propose, fge_update),
              'dr': (dr_init, dr_propose, dr_update),
              'plr': (plr_init, plr_propose, plr_update),
              'rarl': (rarl_init, rarl_propose, rarl_update)}
  s_init, s_propose, s_update = samplers[method]

  def init(key: jax.Array) -> TrainState:
    k_ppo, k_s, _ = jax.random.split(key, 3)  # (third key: unused)
    return TrainState(ppo_init(k_ppo), s_init(k_s),
                      jnp.zeros((1 + len(task.region_names),)))

  def step(state: TrainState, t: jax.Array):
    s, theta, m_prop = s_propose(state.sampler, t)
    ps = state.ppo._replace(
        env_state=base.set_next_theta(state.ppo.env_state, theta))
    ps, m, batch = ppo_step(ps, t)
    s, m_upd = s_update(s, batch, ps, t)
    last = (t + 1) % c.eval_every == 0
    last |= t + 1 == num_updates
    cov = jax.lax.cond(last, coverage, lambda _: state.coverage, ps)
    ep_done = batch.info['done']
    metrics = {k: m[k] for k in ('loss/policy', 'loss/value', 'entropy',
                                 'env_steps')}
    metrics['episode_safe'] = (jnp.sum(batch.info['safe']) /
                               jnp.maximum(jnp.sum(ep_done), 1))
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

  @jax.jit
  def feasibility(states: TrainState, thetas: jax.Array) -> jax.Array:
    """q_psi(feasible | theta) [S, N] of each FGE seed's classifier."""
    return jax.vmap(lambda st: jax.nn.sigmoid(clf_logit(
        st.sampler.feas.params, thetas)))(states)

  return init, step, evaluate, feasibility


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


# -- the experiment ---------------------------------------------------------------
LABELS = {'fge': 'FGE', 'dr': 'DR', 'plr': 'PLR', 'rarl': 'RARL'}


def experiment_schema() -> dict[str, cfg_lib.Spec]:
  """Constraints of configs/fge.py (types come from its default config)."""
  schema = {
      'task': cfg_lib.Choice(*reach.TASKS),
      # Keys vary with the task: check_experiment checks them.
      'task_kwargs': cfg_lib.Dict(help="the task constructor's arguments"),
      'methods': cfg_lib.Seq(item=cfg_lib.Choice(*METHODS), min_len=1),
      'num_updates': cfg_lib.Int(min=1, help='PPO iterations per method'),
      'updates_per_chunk': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
      'eval_every': cfg_lib.Int(min=1),
      'eval_points': cfg_lib.Int(min=2),
      'claims.hard_fge_min': cfg_lib.Float(min=0.0, max=1.0),
      'claims.hard_dr_max': cfg_lib.Float(min=0.0, max=1.0),
      'claims.easy_fge_min': cfg_lib.Float(min=0.0, max=1.0),
      'claims.hard_ratio': cfg_lib.Float(min=0.0),
      'claims.feasible_fge_min': cfg_lib.Float(min=0.0, max=1.0),
  }
  schema.update(ppo_lib.config_schema())
  schema.update(config_schema())
  schema.update(plr_schema())
  schema.update(rarl_schema())
  return schema


def check_experiment(c: ml_collections.ConfigDict) -> None:
  params = inspect.signature(reach.task_class(c.task)).parameters
  cfg_lib.check_keys(c.task_kwargs, 'task_kwargs',
                     sorted(p for p in params if p != 'self'),
                     f'the {c.task} task takes')
  ppo_lib.check_config(c.ppo)
  check_config(c)
  cfg_lib.check(len(set(c.methods)) == len(c.methods), 'methods',
                tuple(c.methods), 'list each method once')


def _pairwise(safe_a: np.ndarray, safe_b: np.ndarray) -> tuple[float, float]:
  """(gain, loss) of a over b: fractions of the evaluation set safe only
  under a / only under b (the paper's Coverage Gain / Coverage Loss)."""
  return (float(np.mean(safe_a & ~safe_b)), float(np.mean(~safe_a & safe_b)))


def run(r: launch.Run) -> launch.Result:
  """Trains every method on the task (seeds vmapped) and checks the claims."""
  cfg = r.config
  if cfg.task == 'hopper' and jax.default_backend() != 'cpu':
    # MJX on GPU/TPU needs full-precision matmuls (NaNs otherwise).
    jax.config.update('jax_default_matmul_precision', 'highest')
  task = reach.make_task(cfg.task, **cfg.task_kwargs.to_dict())
  S = cfg.num_seeds
  thetas = task.eval_thetas(cfg.eval_points)
  regions = np.asarray(jax.vmap(task.region_of)(jnp.asarray(thetas)))
  truth = task.feasible(thetas)
  metrics: dict[str, np.ndarray] = {}
  safe_by: dict[str, np.ndarray] = {}
  extra: dict[str, Any] = {'eval_points': int(len(thetas))}
  steps_per_update = cfg.ppo.num_envs * cfg.ppo.num_steps
  fge_state = feas_fn = None
  for method in cfg.methods:
    init, step, evaluate, feasibility = make_trainer(task, cfg, method,
                                                     cfg.num_updates)
    out = r.train(init, step, num_steps=cfg.num_updates,
                  chunk_size=min(cfg.updates_per_chunk, cfg.num_updates),
                  phase=method, log_every=cfg.log_every,
                  postfix_keys=('coverage', 'episode_safe'))
    safe = np.asarray(distributed.to_host(
        evaluate(out.state, jnp.asarray(thetas)))).astype(bool)  # [S, N]
    safe_by[method] = safe
    metrics[f'coverage/{method}'] = safe.mean(1)
    for i, name in enumerate(task.region_names):
      m = regions == i
      if m.any():
        metrics[f'coverage_{name}/{method}'] = safe[:, m].mean(1)
    if truth is not None and truth.any():
      metrics[f'coverage_feasible/{method}'] = safe[:, truth].mean(1)
    if out.steps_per_s is not None:
      metrics[f'env_steps_per_s/{method}'] = np.full(
          (S,), out.steps_per_s * steps_per_update * S)
    if method == 'fge':
      fge_state, feas_fn = out.state, feasibility
      cert = distributed.to_host(out.state.sampler.certified)
      sizes = np.minimum(np.asarray(cert.count), cert.data.shape[1])
      per_seed = [np.asarray(cert.data[i, :sizes[i]]) for i in range(S)]
      metrics['certified_size/fge'] = sizes.astype(float)
      if truth is not None:
        bad = [int((~task.feasible(th)).sum()) if len(th) else 0
               for th in per_seed]
        metrics['certified_infeasible/fge'] = np.asarray(bad, float)
      extra['certified_regions'] = [
          {name: int((np.asarray(jax.vmap(task.region_of)(jnp.asarray(th)))
                      == i).sum()) if len(th) else 0
           for i, name in enumerate(task.region_names)} for th in per_seed]
  if 'fge' in safe_by:
    for b in cfg.methods:
      if b == 'fge':
        continue
      gl = [_pairwise(safe_by['fge'][i], safe_by[b][i]) for i in range(S)]
      metrics[f'coverage_gain/fge_vs_{b}'] = np.asarray([g for g, _ in gl])
      metrics[f'coverage_loss/fge_vs_{b}'] = np.asarray([l for _, l in gl])
  _plots(r, cfg, task, thetas, truth, safe_by, fge_state, feas_fn,
         steps_per_update)
  return launch.Result(metrics=metrics,
                       claims=evaluate_claims(cfg, task, metrics),
                       extra=extra)


def _plots(r, cfg, task, thetas, truth, safe_by, fge_state, feas_fn,
           steps_per_update) -> None:
  rows = r.rows()
  for key, title in [('coverage', 'coverage of the evaluation set')] + [
      (f'coverage/{n}', f'coverage, {n} region') for n in task.region_names]:
    series = []
    for m in cfg.methods:
      steps, vals = log_lib.curves(rows, f'{m}/{key}')
      if len(steps):
        series.append((LABELS[m], steps * steps_per_update, vals))
    if series:
      log_lib.plot_series(series, r.plots_dir /
                          f'{key.replace("/", "_")}.png',
                          title=f'{task.name}: {title} (mean, 95% band)',
                          xlabel='env steps', ylabel='coverage',
                          bounds=(0.0, 1.0))
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  if task.theta_dim == 1:
    x = thetas[:, 0]
    fig, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    ax = axes[0]
    if truth is not None:
      ax.fill_between(x, 0, 1, where=truth, color='0.9',
                      label='truly feasible')
    if fge_state is not None:
      q = np.asarray(distributed.to_host(feas_fn(fge_state,
                                                 jnp.asarray(thetas))))
      for i in range(q.shape[0]):
        ax.plot(x, q[i], lw=1, label='q_psi (FGE)' if i == 0 else None,
                color='C0')
      cert = distributed.to_host(fge_state.sampler.certified)
      n = min(int(cert.count[0]), cert.data.shape[1])
      ax.plot(np.asarray(cert.data[0, :n, 0]), np.full(n, 1.03), '|',
              color='C2', label='certified (seed 0)')
      ax.axhline(cfg.fge.threshold, color='k', ls=':', lw=1)
    ax.set_ylabel('predicted feasible')
    ax.legend(fontsize=7, loc='lower left')
    ax = axes[1]
    for j, (m, safe) in enumerate(safe_by.items()):
      ax.plot(x, safe.mean(0) + 0.02 * j, lw=1.2, label=LABELS[m])
    ax.set_xlabel('theta')
    ax.set_ylabel('safe (seed mean)')
    ax.legend(fontsize=7)
    fig.suptitle(f'{task.name}: feasibility and final safety over theta')
  else:
    fig, axes = plt.subplots(1, len(safe_by), figsize=(3.2 * len(safe_by),
                                                       3), squeeze=False)
    for ax, (m, safe) in zip(axes[0], safe_by.items()):
      ax.scatter(thetas[:, 0], thetas[:, 1], c=safe.mean(0), s=4,
                 cmap='RdYlGn', vmin=0, vmax=1)
      ax.set_title(LABELS[m], fontsize=9)
      ax.set_xlabel('theta[0]')
    axes[0][0].set_ylabel('theta[1]')
    fig.suptitle(f'{task.name}: final safety over theta (seed mean)')
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'feasible_sets.png', dpi=120)
  plt.close(fig)


def evaluate_claims(cfg, task: base.ReachTask,
                    m: dict[str, np.ndarray]) -> list[launch.Claim]:
  """The issue's claims, evaluated on the seed means."""
  C = cfg.claims
  get = lambda k: (float(np.mean(m[k])) if k in m else None)
  claims = []
  fmt = lambda v: 'n/a' if v is None else f'{v:.3f}'
  if task.name == 'ToyLevels':
    hf, hd = get('coverage_hard/fge'), get('coverage_hard/dr')
    if hf is not None and hd is not None:
      claims.append(launch.Claim(
          claim=(f'FGE covers >= {C.hard_fge_min} of the hard region while '
                 f'domain randomisation covers <= {C.hard_dr_max}.'),
          holds=bool(hf >= C.hard_fge_min and hd <= C.hard_dr_max),
          evidence=f'hard-region coverage FGE {fmt(hf)} '
          f'(per seed {np.round(m["coverage_hard/fge"], 3).tolist()}), '
          f'DR {fmt(hd)}'))
    ef, ed = get('coverage_easy/fge'), get('coverage_easy/dr')
    if ef is not None:
      loss = get('coverage_loss/fge_vs_dr')
      claims.append(launch.Claim(
          claim=(f'FGE covers >= {C.easy_fge_min} of the easy region '
                 '(coverage loss against DR <= 0.05).'),
          holds=bool(ef >= C.easy_fge_min and (loss is None or loss <= 0.05)),
          evidence=f'easy-region coverage FGE {fmt(ef)}, DR {fmt(ed)}; '
          f'coverage loss vs DR {fmt(loss)}'))
    base_hard = {b: get(f'coverage_hard/{b}') for b in cfg.methods
                 if b != 'fge'}
    base_hard = {b: v for b, v in base_hard.items() if v is not None}
    if hf is not None and base_hard:
      best = max(base_hard, key=base_hard.get)
      bv = base_hard[best]
      claims.append(launch.Claim(
          claim=(f'On the hard region FGE covers >= {C.hard_ratio}x the best '
                 "baseline (the paper's +50%)."),
          holds=bool(hf >= C.hard_ratio * bv and hf > 0),
          evidence=f'FGE {fmt(hf)} vs best baseline {LABELS[best]} '
          f'{fmt(bv)} (' + ', '.join(
              f'{LABELS[b]} {fmt(v)}' for b, v in base_hard.items()) + ')'))
  bad = m.get('certified_infeasible/fge')
  if bad is not None and task.exact_ground_truth:
    claims.append(launch.Claim(
        claim='The certified-feasible buffer never holds an infeasible theta.',
        holds=bool(np.all(bad == 0)),
        evidence=f'infeasible theta in the certified buffer per seed: '
        f'{bad.astype(int).tolist()} of '
        f'{m["certified_size/fge"].astype(int).tolist()}'))
  elif bad is not None:
    frac = bad / np.maximum(m['certified_size/fge'], 1)
    claims.append(launch.Claim(
        claim=(f'{task.name}: certified theta outside the (approximate) '
               'ground-truth set stay within its grid error (<= 1% of the '
               'buffer; each has a safe rollout as witness).'),
        holds=bool(np.all(frac <= 0.01)),
        evidence=f'{bad.astype(int).tolist()} of '
        f'{m["certified_size/fge"].astype(int).tolist()} certified theta per '
        'seed lie outside the grid kernel'))
  if task.name != 'ToyLevels':
    ff, fd = get('coverage_feasible/fge'), get('coverage_feasible/dr')
    if ff is not None:
      claims.append(launch.Claim(
          claim=(f'{task.name}: FGE covers >= {C.feasible_fge_min} of the '
                 'true feasible set (DR reported beside it).'),
          holds=bool(ff >= C.feasible_fge_min),
          evidence=f'coverage of the feasible theta: FGE {fmt(ff)}, '
          f'DR {fmt(fd)}'))
  return claims
