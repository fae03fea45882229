"""LK-GP-UCB / LK-GP-TS against the paper's baselines (configs/lkgp_bandit.py).

  python -m experiments.lkgp_bandit --config=configs/lkgp_bandit.py:smoke --workdir=/tmp/lkgp

Every (seed, reward regime, algorithm) runs in one compiled `lax.scan` over
rounds: algorithms differ only by arrays (K_G, kernel weights, beta/nu, a TS
flag, GraphUCB's width flag), so they are a vmap axis and share the users,
visible sets and noise of their seed. Hyperparameter refits (LK-GP-UCB-ML's
type-II maximum likelihood and COOP-KernelUCB's MMD agent kernel, every
`refit_every` rounds) run outside that vmap under a `lax.cond` on the round
counter, for their own algorithm only, and recompute its posterior exactly.
With `lam_schedule='spectral_ratio'` every algorithm refits exactly with
lam_t = max(noise^2, lambda_max(K_t) / lam_ratio) for the first
`exact_rounds` rounds, then freezes lam and uses the O(t^2) recursion.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from experiments import plots
from iclrjax.bandits import envs
from iclrjax.bandits import lkgp
from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import logging as log_lib
from iclrjax.core import loop
from iclrjax.kernels import gp

ALGORITHMS = lkgp.ALGORITHMS
RIVALS = ('indep_gp_ucb', 'pooled_gp_ucb', 'goblin', 'graphucb',
          'coop_kernelucb')   # the paper's baselines
# The non-graph user kernel between independent and pooled (a 1 1^T +
# (1 - a) I, (a, l) fitted): what every LK claim is measured against.
SHARED = 'shared_gp_ucb_ml'


class State(NamedTuple):
  arms: jax.Array        # [M, d]
  W: jax.Array           # [n, n] the user graph
  F: jax.Array           # [R, n, M] mean rewards per regime
  K_users: jax.Array     # [R, A, n, n] each algorithm's user kernel
  penalty: jax.Array     # [R, A, n] diag of K_users^{-1} (GraphUCB's P_uu)
  rho: jax.Array         # [R, A] graph regulariser (fitted for *_ml; the
                         # share a of shared_gp_ucb_ml)
  lengthscale: jax.Array  # [R, A] RBF lengthscale (fitted for *_ml)
  lam: jax.Array         # [R, A] ridge / noise variance
  V: jax.Array           # [R, A, n, d, d] per-user sum of x x^T (GraphUCB)
  post: gp.Posterior     # leading axes [R, A]
  cum_regret: jax.Array  # [R, A]
  round_key: jax.Array   # raw key: users, visible sets, noise
  ts_key: jax.Array      # raw key: Thompson perturbations


def config_schema() -> dict[str, cfg_lib.Spec]:
  pos = dict(min=0.0, min_inclusive=False)
  return {
      'num_users': cfg_lib.Int(min=2),
      'dim': cfg_lib.Int(min=1),
      'num_arms': cfg_lib.Int(min=2),
      'visible_fraction': cfg_lib.Float(min=0.0, max=1.0,
                                        min_inclusive=False),
      'horizon': cfg_lib.Int(min=1),
      'graph': cfg_lib.Choice(*envs.GRAPHS),
      'er_p': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False),
      'rbf_graph_lengthscale': cfg_lib.Float(**pos),
      'rbf_graph_threshold': cfg_lib.Float(min=0.0, max=1.0),
      'regimes': cfg_lib.Seq(item=cfg_lib.Choice(*envs.REGIMES), min_len=1),
      'rho': cfg_lib.Float(**pos),
      'arm_lengthscale': cfg_lib.Float(**pos),
      'misspec_rho': cfg_lib.Float(**pos, help="gp_draw_misspec's rho"),
      'misspec_lengthscale': cfg_lib.Float(
          **pos, help="gp_draw_misspec's arm lengthscale"),
      'gob_eta': cfg_lib.Float(min=0.0),
      'num_anchors': cfg_lib.Int(min=1),
      'noise_std': cfg_lib.Float(**pos),
      'algorithms': cfg_lib.Seq(item=cfg_lib.Choice(*ALGORITHMS), min_len=1),
      'beta': cfg_lib.Float(min=0.0),
      'nu': cfg_lib.Float(min=0.0),
      'lam': cfg_lib.Float(**pos, nullable=True,
                           help='ridge / noise variance; None: noise_std^2'),
      'lam_schedule': cfg_lib.Choice('constant', 'spectral_ratio'),
      'lam_ratio': cfg_lib.Float(min=1.0),
      'exact_rounds': cfg_lib.Int(min=1),
      'lengthscale': cfg_lib.Float(**pos, help='RBF base-kernel lengthscale'),
      'refit_every': cfg_lib.Int(min=1),
      'ml_rho_grid': cfg_lib.Seq(item=cfg_lib.Float(**pos), min_len=1),
      'ml_lengthscale_grid': cfg_lib.Seq(item=cfg_lib.Float(**pos),
                                         min_len=1),
      'coop_y_lengthscale': cfg_lib.Float(**pos),
      'shared_grid': cfg_lib.Seq(item=cfg_lib.Float(min=0.0, max=1.0),
                                 min_len=1),
      'shared_init': cfg_lib.Float(min=0.0, max=1.0),
      'buffer_dtype': cfg_lib.Choice(
          'float64', 'float32', help="the posteriors' [T, T] factors; "
          'float32 halves the memory (the rest stays float64)'),
      'chunk_size': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
      'win_fraction': cfg_lib.Float(min=0.0, max=1.0),
      'pooled_margin': cfg_lib.Float(min=0.0, max=1.0),
      'linear_ratio': cfg_lib.Float(**pos),
  }


def check_config(cfg: ml_collections.ConfigDict) -> None:
  k = num_visible(cfg)
  cfg_lib.check(1 <= k, 'visible_fraction', cfg.visible_fraction,
                f'must leave at least one visible arm of num_arms='
                f'{cfg.num_arms}')
  cfg_lib.check(len(set(cfg.algorithms)) == len(cfg.algorithms), 'algorithms',
                tuple(cfg.algorithms), 'must not repeat an algorithm')
  cfg_lib.check(len(set(cfg.regimes)) == len(cfg.regimes), 'regimes',
                tuple(cfg.regimes), 'must not repeat a regime')
  cfg_lib.check(cfg.exact_rounds <= cfg.horizon, 'exact_rounds',
                cfg.exact_rounds, f'must be <= horizon={cfg.horizon}')


def num_visible(cfg) -> int:
  return int(round(cfg.visible_fraction * cfg.num_arms))


def noise_var(cfg) -> float:
  return cfg.lam if cfg.lam is not None else cfg.noise_std**2


def _algo_arrays(cfg) -> dict[str, jax.Array]:
  algs = [ALGORITHMS[a] for a in cfg.algorithms]
  return {
      'w_rbf': jnp.array([a.base_kernel in ('rbf', 'rbf_linear')
                          for a in algs], jnp.float64),
      'w_lin': jnp.array([a.base_kernel in ('linear', 'rbf_linear')
                          for a in algs], jnp.float64),
      'coef': jnp.array([cfg.nu if a.rule == 'ts' else cfg.beta
                         for a in algs], jnp.float64),
      'ts': jnp.array([a.rule == 'ts' for a in algs]),
      'per_user': jnp.array([a.width == 'per_user' for a in algs]),
  }


def _initial_rho(cfg, algorithm: str) -> float:
  """The state's rho slot: the graph regulariser, or for the shared
  kernel its share a (`lkgp.user_kernel`)."""
  if ALGORITHMS[algorithm].user_kernel == 'shared':
    return cfg.shared_init
  return cfg.rho


def make_init(cfg):
  """key -> State: environment (graph, arms, rewards) and empty posteriors."""
  regime_ids = jnp.array([envs.REGIMES.index(r) for r in cfg.regimes])
  R, A = len(cfg.regimes), len(cfg.algorithms)

  def init(key: jax.Array) -> State:
    k_graph, k_arms, k_rew, k_round, k_ts, k_perm, k_perm2 = (
        jax.random.split(key, 7))
    if cfg.graph == 'er':
      W = envs.er_graph(k_graph, cfg.num_users, cfg.er_p)
    else:
      W = envs.rbf_graph(k_graph, cfg.num_users, cfg.rbf_graph_lengthscale,
                         cfg.rbf_graph_threshold)
    arms = jax.random.uniform(k_arms, (cfg.num_arms, cfg.dim),
                              dtype=jnp.float64, minval=-1.0, maxval=1.0)
    F = jax.vmap(lambda k, r: envs.rewards(
        k, r, W, arms, rho=cfg.rho, arm_lengthscale=cfg.arm_lengthscale,
        gob_eta=cfg.gob_eta, num_anchors=cfg.num_anchors,
        misspec_rho=cfg.misspec_rho,
        misspec_lengthscale=cfg.misspec_lengthscale))(
            jax.random.split(k_rew, R), regime_ids)
    perms = {'permuted': jax.random.permutation(k_perm, cfg.num_users),
             'permuted2': jax.random.permutation(k_perm2, cfg.num_users)}
    K_users = jnp.stack([
        lkgp.user_kernel(ALGORITHMS[a].user_kernel, W, cfg.rho,
                         perms.get(ALGORITHMS[a].user_kernel),
                         share=cfg.shared_init)
        for a in cfg.algorithms])
    penalty = jnp.diagonal(jnp.linalg.inv(K_users), axis1=1, axis2=2)
    post = gp.init(cfg.horizon, cfg.dim, jnp.float64,
                   buffer_dtype=jnp.dtype(cfg.get('buffer_dtype', 'float64')))
    rep = lambda x: jnp.broadcast_to(x, (R,) + x.shape)
    full = lambda v: jnp.full((R, A), v, jnp.float64)
    return State(
        arms=arms, W=W, F=F, K_users=rep(K_users), penalty=rep(penalty),
        rho=rep(jnp.array([_initial_rho(cfg, a) for a in cfg.algorithms],
                          jnp.float64)),
        lengthscale=full(cfg.lengthscale),
        lam=full(noise_var(cfg)),
        V=jnp.zeros((R, A, cfg.num_users, cfg.dim, cfg.dim), jnp.float64),
        post=jax.tree.map(lambda x: jnp.broadcast_to(x, (R, A) + x.shape),
                          post),
        cum_regret=jnp.zeros((R, A), jnp.float64), round_key=k_round,
        ts_key=k_ts)

  return init


def _refits(cfg):
  """[(algorithm index, kind)] of the algorithms refitted every k rounds."""
  return [(i, ALGORITHMS[a].refit) for i, a in enumerate(cfg.algorithms)
          if ALGORITHMS[a].refit != 'none']


def make_step(cfg):
  """(State, t) -> (State, metrics): one round for every regime/algorithm."""
  k_vis, lam0 = num_visible(cfg), noise_var(cfg)
  algo = _algo_arrays(cfg)
  refits = _refits(cfg)
  rho_grid = jnp.asarray(cfg.ml_rho_grid, jnp.float64)
  ls_grid = jnp.asarray(cfg.ml_lengthscale_grid, jnp.float64)
  share_grid = jnp.asarray(cfg.shared_grid, jnp.float64)
  E = cfg.exact_rounds

  def one_algorithm(post, K_users, ls, lam, V, penalty, w_rbf, w_lin, coef,
                    ts, per_user, a_idx, F, arms, ctx, ts_key, t):
    kernel = lkgp.joint_kernel(K_users, w_rbf, w_lin, ls)
    Xq = arms[ctx.visible]
    uq = jnp.full((k_vis,), ctx.user, jnp.int32)
    mean, var, v = gp.predict_v(post, Xq, uq, kernel)
    width = jnp.where(per_user, lkgp.graphucb_width(
        V[ctx.user], penalty[ctx.user], lam, Xq), jnp.sqrt(var))
    j = jnp.argmax(lkgp.acquisition(mean, width, coef, ts,
                                    jax.random.fold_in(ts_key, a_idx)))
    arm = ctx.visible[j]
    f_user = F[ctx.user]
    y = f_user[arm] + ctx.noise
    post = gp.append(post, arms[arm], ctx.user, y, kernel, lam, l=v[:, j],
                     var=var[j])
    V = V.at[ctx.user].add(jnp.outer(arms[arm], arms[arm]))
    if cfg.lam_schedule == 'spectral_ratio':
      def exact(c):
        p, _ = c
        new = lkgp.spectral_ratio_lam(p, kernel, lam0, cfg.lam_ratio, E)
        return gp.rebuild(p, kernel, new, size=E), new
      post, lam = jax.lax.cond(t < E, exact, lambda c: c, (post, lam))
    return post, lam, V, jnp.max(f_user[ctx.visible]) - f_user[arm]

  # One row per (regime, algorithm), row r * A + a: the batch of a round,
  # split over the mesh's 'data' axis (R x A must divide it).
  R, A = len(cfg.regimes), len(cfg.algorithms)
  over_rows = jax.vmap(one_algorithm, in_axes=(0,) * 13 + (None,) * 4)
  flat = lambda x: x.reshape(R * A, *x.shape[2:])
  unflat = lambda x: x.reshape(R, A, *x.shape[1:])
  cols = tuple(jnp.tile(algo[k], R) for k in (
      'w_rbf', 'w_lin', 'coef', 'ts', 'per_user')) + (
          jnp.tile(jnp.arange(A), R),)

  def refit_one(W, kind: str, post, lam, ls):
    """One algorithm's posterior in one regime refitted exactly:
    (post, K_users, rho, lengthscale)."""
    if kind == 'ml':
      rho, ls = lkgp.ml_grid_fit(post, W, lam, rho_grid, ls_grid)
      K = lkgp.user_kernel('laplacian', W, rho)
    elif kind == 'ml_shared':  # (a, l), as lk_gp_ucb_ml fits (rho, l)
      rho, ls = lkgp.ml_grid_fit(post, W, lam, share_grid, ls_grid,
                                 kind='shared')
      K = lkgp.user_kernel('shared', W, rho, share=rho)
    else:  # coop
      rho = jnp.asarray(cfg.rho, jnp.float64)
      K = lkgp.coop_user_kernel(post, cfg.num_users, ls,
                                cfg.coop_y_lengthscale)
    post = gp.rebuild(post, lkgp.joint_kernel(K, 1.0, 0.0, ls), lam)
    return post, K, rho, ls

  def refit_all(state: State, due: jax.Array) -> State:
    """Refits every refitted algorithm in every regime, each (algorithm,
    regime) under its own `lax.cond` on `due`: a cond copies what it may
    change, so over the whole state it would copy every [T, T] buffer."""
    for a, kind in refits:
      for r in range(R):
        pick = lambda x, r=r, a=a: x[r, a]
        sub = (jax.tree.map(pick, state.post), pick(state.K_users),
               pick(state.rho), pick(state.lengthscale))
        post, K, rho, ls = jax.lax.cond(
            due, lambda s, lam, kind=kind: refit_one(
                state.W, kind, s[0], lam, s[3]),
            lambda s, lam: s, sub, pick(state.lam))
        put = lambda full, part, r=r, a=a: full.at[r, a].set(part)
        state = state._replace(
            post=jax.tree.map(put, state.post, post),
            K_users=put(state.K_users, K), rho=put(state.rho, rho),
            lengthscale=put(state.lengthscale, ls))
    return state

  def step(state: State, t: jax.Array):
    ctx = envs.round_context(state.round_key, t, cfg.num_users, cfg.num_arms,
                             k_vis, cfg.noise_std)
    ts_key = jax.random.fold_in(state.ts_key, t)
    rows = distributed.shard_batch((
        *jax.tree.map(flat, (state.post, state.K_users, state.lengthscale,
                             state.lam, state.V, state.penalty)),
        *cols, jnp.repeat(state.F, A, axis=0)))
    post, lam, V, regret = jax.tree.map(
        unflat, over_rows(*rows, state.arms, ctx, ts_key, t))
    state = state._replace(post=post, lam=lam, V=V,
                           cum_regret=state.cum_regret + regret)
    if refits:
      due = ((t + 1) % cfg.refit_every == 0) & (t + 1 < cfg.horizon)
      state = refit_all(state, due)
    return state, _metrics(cfg, state)

  return step


def metric_name(cfg, regime: str, algorithm: str) -> str:
  """`cumulative_regret/<algorithm>` for the first regime, else prefixed."""
  if regime == cfg.regimes[0]:
    return f'cumulative_regret/{algorithm}'
  return f'{regime}/cumulative_regret/{algorithm}'


def hyper_name(regime: str, algorithm: str, what: str) -> str:
  return f'{regime}/{what}/{algorithm}'


def _hypers(cfg):
  """(algorithm, what) pairs recorded per regime: the fitted ones, LK's lam."""
  out = [(a, w) for a in cfg.algorithms if ALGORITHMS[a].refit == 'ml'
         for w in ('rho', 'lengthscale')]
  out += [(a, w) for a in cfg.algorithms
          if ALGORITHMS[a].refit == 'ml_shared'
          for w in ('share', 'lengthscale')]
  return out + [(a, 'lam') for a in cfg.algorithms if a == 'lk_gp_ucb']


def _metrics(cfg, state: State) -> dict[str, jax.Array]:
  out = {}
  for r, reg in enumerate(cfg.regimes):
    for a, alg in enumerate(cfg.algorithms):
      out[metric_name(cfg, reg, alg)] = state.cum_regret[r, a]
    for alg, what in _hypers(cfg):
      a = cfg.algorithms.index(alg)
      arr = {'rho': state.rho, 'share': state.rho,
             'lengthscale': state.lengthscale, 'lam': state.lam}[what]
      out[hyper_name(reg, alg, what)] = arr[r, a]
  return out


# -- claims ---------------------------------------------------------------------------------
def _wins(a: np.ndarray, b: np.ndarray) -> int:
  return int(np.sum(a < b))


def _beats_all(cfg, cum, regime, algorithm, rivals, margin):
  """(holds, text): `algorithm` below every rival in >= need seeds and (if
  margin) its mean >= margin below pooled GP-UCB."""
  S = cfg.num_seeds
  need = math.ceil(cfg.win_fraction * S)
  get = lambda alg: cum[metric_name(cfg, regime, alg)]
  x = get(algorithm)
  wins = {b: _wins(x, get(b)) for b in rivals}
  holds = all(w >= need for w in wins.values())
  text = f'{x.mean():.1f}; wins: ' + ', '.join(
      f'{b} {w}/{S} ({get(b).mean():.1f})' for b, w in wins.items())
  if margin is not None:
    gap = 1.0 - x.mean() / get('pooled_gp_ucb').mean()
    holds = holds and gap >= margin
    text += f'; {gap:.1%} below pooled'
  return holds, text


def _over_shared(cfg, cum, regime, alg) -> tuple[bool, str, float, float]:
  """(holds, text, d, ci): SHARED - alg, paired 95% CI above 0."""
  get = lambda a: cum[metric_name(cfg, regime, a)]
  d, ci = log_lib.mean_ci95(get(SHARED) - get(alg))
  return (bool(d - ci > 0), f'{SHARED} - {alg} {d:+.1f} +- {ci:.1f} '
          f'(lower in {_wins(get(alg), get(SHARED))}/{cfg.num_seeds})', d, ci)


def evaluate_claims(cfg, cum: dict[str, np.ndarray],
                    hypers: dict[str, np.ndarray] | None = None
                    ) -> list[launch.Claim]:
  """The paper's claims on final cumulative regret per seed, with controls.

  The paper's "LK beats every baseline" is recorded in each claim's
  evidence (wins per baseline, the margin below pooled GP-UCB) but is not
  the claim: LK on the user-permuted graph (the same spectrum and shared
  component, the wrong neighbours) passes it too. What survives is the
  claim made: the LK algorithm beats the fitted non-graph user kernel
  between independent and pooled (`SHARED`, a 1 1^T + (1 - a) I with
  (a, l) by type-II ML), a paired 95% CI of SHARED - LK above 0; its
  control is the same with the permuted-graph LK in LK's place. The graph
  claims compare LK with the permuted graph directly, their control a
  second permutation; the linear claim's control is the graph-free linear
  model (per-user LinUCB)."""
  S = cfg.num_seeds
  need = math.ceil(cfg.win_fraction * S)
  have = lambda *algs: all(a in cfg.algorithms for a in algs)
  rivals = tuple(b for b in RIVALS if b in cfg.algorithms)
  claims = []
  oracle = ('the algorithm\'s rho and lengthscale are the generating ones '
            '(an oracle prior)')
  cases = [('gp_draw', 'lk_gp_ucb', 'lk_gp_ucb_permuted', oracle),
           ('gp_draw', 'lk_gp_ts', 'lk_gp_ts_permuted', oracle),
           ('gp_draw_misspec', 'lk_gp_ucb', 'lk_gp_ucb_permuted',
            f'the algorithm keeps rho={cfg.rho}, l={cfg.lengthscale}; the '
            f'rewards have rho={cfg.misspec_rho}, '
            f'l={cfg.misspec_lengthscale}'),
           ('gp_draw_misspec', 'lk_gp_ucb_ml', 'lk_gp_ucb_permuted',
            f'(rho, l) fitted by type-II ML on a '
            f'{len(cfg.ml_rho_grid)}x{len(cfg.ml_lengthscale_grid)} grid '
            f'every {cfg.refit_every} rounds; the control keeps its rho and '
            'l'),
           ('representer_draw', 'lk_gp_ucb', 'lk_gp_ucb_permuted',
            f'f a sum of {cfg.num_anchors} random representers of the LK '
            'kernel with the algorithm\'s rho and lengthscale, scaled to '
            'unit sd')]
  for regime, alg, control, note in cases:
    if regime not in cfg.regimes or not have(alg, control, SHARED,
                                             'pooled_gp_ucb', *rivals):
      continue
    holds, text, _, _ = _over_shared(cfg, cum, regime, alg)
    c_holds, c_text, _, _ = _over_shared(cfg, cum, regime, control)
    _, b_text = _beats_all(cfg, cum, regime, alg, rivals, cfg.pooled_margin)
    text += f'; against the paper\'s baselines: {alg} {b_text}'
    if hypers:
      text += '; {} fitted a {:.2f}, l {:.2f}'.format(SHARED, *(
          hypers[hyper_name(regime, SHARED, w)].mean()
          for w in ('share', 'lengthscale')))
      if alg == 'lk_gp_ucb_ml':
        text += '; {} fitted rho {:.2f}, l {:.2f}'.format(alg, *(
            hypers[hyper_name(regime, alg, w)].mean()
            for w in ('rho', 'lengthscale')))
      text += ' (seed means)'
    claims.append(launch.Claim(
        claim=(f'[{regime}, {alg}] {alg} has lower cumulative regret than '
               'the best non-graph multi-user kernel, GP-UCB with K_G = '
               'a 1 1^T + (1 - a) I and (a, l) fitted by type-II ML '
               f'({SHARED}): paired 95% CI of {SHARED} - {alg} above 0 '
               f'({note}).'),
        holds=holds, evidence=text,
        control=launch.control_text(
            f'{control} (LK on the user-permuted graph) in {alg}\'s place',
            c_text, c_holds)))

  for regime in ('gp_draw', 'gp_draw_misspec'):
    if regime not in cfg.regimes or not have(
        'lk_gp_ucb', 'lk_gp_ucb_permuted', 'lk_gp_ucb_permuted2'):
      continue
    get = lambda alg, regime=regime: cum[metric_name(cfg, regime, alg)]
    lk, p1, p2 = (get(a) for a in ('lk_gp_ucb', 'lk_gp_ucb_permuted',
                                   'lk_gp_ucb_permuted2'))
    d, ci = log_lib.mean_ci95(p1 - lk)
    d0, ci0 = log_lib.mean_ci95(p1 - p2)
    claims.append(launch.Claim(
        claim=(f'[{regime}, graph] The graph is what helps: LK-GP-UCB has '
               'lower cumulative regret than LK-GP-UCB on the graph with its '
               'users permuted (paired 95% CI of permuted - LK above 0).'),
        holds=bool(d - ci > 0),
        evidence=(f'LK-GP-UCB {lk.mean():.1f} vs permuted {p1.mean():.1f}: '
                  f'permuted - LK {d:+.1f} +- {ci:.1f} over {S} seeds '
                  f'(lower in {_wins(lk, p1)}/{S})'),
        control=launch.control_text(
            'a second, independent permutation in LK\'s place',
            f'permuted - permuted2 {d0:+.1f} +- {ci0:.1f}', d0 - ci0 > 0)))

  lin = 'lk_gp_ucb_rbflin' if have('lk_gp_ucb_rbflin') else 'lk_gp_ucb'
  if 'linear_gob' in cfg.regimes and have(lin, 'goblin', 'peruser_linucb'):
    get = lambda alg: cum[metric_name(cfg, 'linear_gob', alg)]
    gob = get('goblin').mean()
    ratio = get(lin).mean() / gob
    c_ratio = get('peruser_linucb').mean() / gob
    base = 'RBF + linear' if lin == 'lk_gp_ucb_rbflin' else 'RBF'
    text = (f'{lin} {get(lin).mean():.1f} vs GOB.Lin {gob:.1f}: ratio '
            f'{ratio:.2f}')
    if lin != 'lk_gp_ucb' and have('lk_gp_ucb'):
      text += (f'; LK-GP-UCB with the RBF kernel alone '
               f'{get("lk_gp_ucb").mean():.1f}, ratio '
               f'{get("lk_gp_ucb").mean() / gob:.2f}')
    claims.append(launch.Claim(
        claim=(f'[linear_gob] LK-GP-UCB ({base} base kernel) is within '
               f'{cfg.linear_ratio}x of GOB.Lin\'s cumulative regret.'),
        holds=bool(ratio <= cfg.linear_ratio), evidence=text,
        control=launch.control_text(
            'per-user LinUCB (the well-specified linear model without the '
            'graph)', f'{get("peruser_linucb").mean():.1f}, ratio '
            f'{c_ratio:.2f}', c_ratio <= cfg.linear_ratio)))
  return claims


def run(r: launch.Run) -> launch.Result:
  """Runs every (seed, regime, algorithm) for `horizon` rounds."""
  cfg = r.config
  with jax.enable_x64(True):
    out = r.train(make_init(cfg), make_step(cfg), num_steps=cfg.horizon,
                  chunk_size=cfg.chunk_size, log_every=cfg.log_every)
    final = distributed.to_host(
        jax.vmap(functools.partial(_metrics, cfg))(out.state))
  final = {k: np.asarray(v) for k, v in final.items()}
  cum = {k: v for k, v in final.items() if 'cumulative_regret' in k}
  hypers = {k: v for k, v in final.items() if k not in cum}
  for reg in cfg.regimes:
    keys = [metric_name(cfg, reg, a) for a in cfg.algorithms]
    plots.plot_run(r, keys, f'cumulative_regret_{reg}',
                   labels=list(cfg.algorithms), xlabel='round',
                   ylabel='cumulative regret',
                   title=f'{reg}, {cfg.graph} graph, n={cfg.num_users}, '
                   f'{num_visible(cfg)}/{cfg.num_arms} arms visible')
  for alg, what in _hypers(cfg):
    plots.plot_run(r, [hyper_name(reg, alg, what) for reg in cfg.regimes],
                   f'{what}_{alg}', labels=list(cfg.regimes), xlabel='round',
                   ylabel=what, title=f'{alg}: {what} per regime')
  return launch.Result(metrics=final,
                       claims=evaluate_claims(cfg, cum, hypers))


class _X64:
  """A compiled function of this experiment as `run` calls it, under
  `jax.enable_x64` (its posteriors are float64), whatever the caller's
  setting: its inputs are cast to the dtypes of `args` (the
  ShapeDtypeStructs it is lowered from), so 32-bit tracers
  (`jax.make_jaxpr` without x64) and 32-bit zeros work too."""

  def __init__(self, fn, args):
    self.fn, self.args = fn, args

  def _cast(self, xs):
    return jax.tree.map(lambda x, s: jnp.asarray(x, s.dtype), xs, self.args)

  def __call__(self, *xs):
    with jax.enable_x64(True):
      return self.fn(*self._cast(xs))

  def lower(self, *args):
    with jax.enable_x64(True):
      return _X64Lowered(self.fn.lower(*args), self._cast)


class _X64Lowered:

  def __init__(self, lowered, cast):
    self.lowered, self.cast = lowered, cast

  def as_text(self):
    return self.lowered.as_text()

  def compile(self):
    with jax.enable_x64(True):
      compiled = self.lowered.compile()

    def call(*xs):
      with jax.enable_x64(True):
        return compiled(*self.cast(xs))

    call.memory_analysis = compiled.memory_analysis
    return call


def programs(cfg, sharded: bool = False) -> list[loop.Program]:
  """The compiled bandit loop: a chunk of rounds for every seed x regime x
  algorithm (the refits under their `lax.cond`), float64 as `run` runs it
  (`benchmarks/paper_variants.py`). The final metrics are a vmap of
  indexing."""
  with jax.enable_x64(True):
    prog = loop.train_program(
        'train', make_init(cfg), make_step(cfg), num_seeds=cfg.num_seeds,
        num_steps=cfg.horizon, chunk_size=cfg.chunk_size, sharded=sharded,
        params=0)

  def init(mesh):
    with jax.enable_x64(True):
      return prog.init(mesh)

  R, A = len(cfg.regimes), len(cfg.algorithms)
  return [dataclasses.replace(
      prog, fn=_X64(prog.fn, prog.args), init=prog.init and init,
      note=(f'{R} x {A} (regime, algorithm) rows of [T, T] '
            f'{cfg.buffer_dtype} posterior factors per seed, no model '
            'parameters; the refits (every refit_every rounds, under '
            'lax.cond) are charged to every round by the FLOP count'))]


PAPER_SCALE = (
    'arXiv 2601.00461 (experiments, synthetic only): n = 20 users on '
    'Erdos-Renyi or RBF graphs, noise 0.1, three levels (10 / 20 / 50 arms, '
    '50% / 25% / 10% visible, T = 1000 / 3000 / 5000 rounds) x three reward '
    'regimes (linear GOB, GP draw, representer draw), LK-GP-UCB / -TS '
    'against six baselines; exact GP posteriors with O(t^2) updates, no '
    'trained model (seeds, feature dimension, rho, lambda, beta not in what '
    'we have of the paper).')


EXPERIMENT = launch.Experiment('lkgp_bandit', run, schema=config_schema(),
                               check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
