"""LK-GP-UCB and LK-GP-TS (Wu & Amini, "Laplacian Kernelized Bandit",
arXiv 2601.00461) and their baselines, as one compiled program.

All algorithms are GP bandits with a multi-user kernel
K((x,u),(x',u')) = K_G[u,u'] K_x(x,x') (paper Thm. 2.1) and differ only in
K_G, the base kernel K_x and the acquisition rule:

  algorithm        K_G                          K_x     rule
  lk_gp_ucb        (L + rho I)^{-1}             RBF     UCB
  lk_gp_ts         (L + rho I)^{-1}             RBF     TS
  indep_gp_ucb     I (independent users)        RBF     UCB
  pooled_gp_ucb    1 1^T (one shared function)  RBF     UCB
  goblin           (I + L)^{-1} (GOB.Lin)       linear  UCB
  peruser_linucb   I                            linear  UCB
  pooled_linucb    1 1^T                        linear  UCB

Every K_G is normalised to mean diagonal 1 (a global scale only rescales the
prior variance). With the posterior of `kernels.gp` (O(T^2) updates):

  mu_t(x,u)     = k_t(x,u)^T (K_t + lam I)^{-1} y_t
  sigma_t^2(x,u) = K((x,u),(x,u)) - k_t(x,u)^T (K_t + lam I)^{-1} k_t(x,u)
  UCB: x_t = argmax_{x in D_t} mu_{t-1}(x,u_t) + beta sigma_{t-1}(x,u_t)
  TS:  x_t = argmax_{x in D_t} mu_{t-1}(x,u_t) + nu z_t(x) sigma_{t-1}(x,u_t),
       z_t(x) ~ N(0,1) independently per arm (as the paper states the rule).

GOB.Lin (Cesa-Bianchi et al. 2013) is LinUCB in the lifted space with
A = (I + L) (x) I_d, i.e. exactly this GP-UCB with a linear kernel and
K_G = (I + L)^{-1}; per-user and pooled LinUCB likewise. Because the
algorithms differ only by arrays (K_G per seed, kernel weights, beta/nu, a
TS flag), they are a vmap axis: every (seed, reward regime, algorithm) runs
in one compiled `lax.scan`, on the same users, visible sets and noise.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from iclrjax import kernels
from iclrjax.bandits import envs
from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.kernels import gp


@dataclasses.dataclass(frozen=True)
class Algorithm:
  user_kernel: str   # 'laplacian' | 'gob' | 'independent' | 'pooled'
  base_kernel: str   # 'rbf' | 'linear'
  rule: str          # 'ucb' | 'ts'


ALGORITHMS = {
    'lk_gp_ucb': Algorithm('laplacian', 'rbf', 'ucb'),
    'lk_gp_ts': Algorithm('laplacian', 'rbf', 'ts'),
    'indep_gp_ucb': Algorithm('independent', 'rbf', 'ucb'),
    'pooled_gp_ucb': Algorithm('pooled', 'rbf', 'ucb'),
    'goblin': Algorithm('gob', 'linear', 'ucb'),
    'peruser_linucb': Algorithm('independent', 'linear', 'ucb'),
    'pooled_linucb': Algorithm('pooled', 'linear', 'ucb'),
}


def user_kernel(kind: str, W: jax.Array, rho: float) -> jax.Array:
  """K_G of an algorithm, normalised to mean diagonal 1."""
  n = W.shape[0]
  if kind == 'laplacian':
    K = kernels.laplacian_kernel(W, rho)
  elif kind == 'gob':
    K = kernels.laplacian_kernel(W, 1.0)  # (I + L)^{-1}
  elif kind == 'independent':
    K = jnp.eye(n, dtype=W.dtype)
  elif kind == 'pooled':
    K = jnp.ones((n, n), dtype=W.dtype)
  else:
    raise ValueError(f'unknown user kernel {kind!r}')
  return kernels.normalize_mean_diag(K)


class State(NamedTuple):
  arms: jax.Array        # [M, d]
  F: jax.Array           # [R, n, M] mean rewards per regime
  K_users: jax.Array     # [A, n, n] each algorithm's user kernel
  post: gp.Posterior     # leading axes [R, A]
  cum_regret: jax.Array  # [R, A]
  round_key: jax.Array   # raw key: users, visible sets, noise
  ts_key: jax.Array      # raw key: Thompson perturbations


def config_schema() -> dict[str, cfg_lib.Spec]:
  return {
      'num_users': cfg_lib.Int(min=2),
      'dim': cfg_lib.Int(min=1),
      'num_arms': cfg_lib.Int(min=2),
      'visible_fraction': cfg_lib.Float(min=0.0, max=1.0,
                                        min_inclusive=False),
      'horizon': cfg_lib.Int(min=1),
      'graph': cfg_lib.Choice(*envs.GRAPHS),
      'er_p': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False),
      'rbf_graph_lengthscale': cfg_lib.Float(min=0.0, min_inclusive=False),
      'rbf_graph_threshold': cfg_lib.Float(min=0.0, max=1.0),
      'regimes': cfg_lib.Seq(item=cfg_lib.Choice(*envs.REGIMES), min_len=1),
      'rho': cfg_lib.Float(min=0.0, min_inclusive=False),
      'arm_lengthscale': cfg_lib.Float(min=0.0, min_inclusive=False),
      'gob_eta': cfg_lib.Float(min=0.0),
      'num_anchors': cfg_lib.Int(min=1),
      'noise_std': cfg_lib.Float(min=0.0, min_inclusive=False),
      'algorithms': cfg_lib.Seq(item=cfg_lib.Choice(*ALGORITHMS), min_len=1),
      'beta': cfg_lib.Float(min=0.0),
      'nu': cfg_lib.Float(min=0.0),
      'lam': cfg_lib.Float(min=0.0, min_inclusive=False, nullable=True,
                           help='ridge / noise variance; None: noise_std^2'),
      'lengthscale': cfg_lib.Float(min=0.0, min_inclusive=False,
                                   help='RBF base-kernel lengthscale'),
      'chunk_size': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
      'win_fraction': cfg_lib.Float(min=0.0, max=1.0),
      'pooled_margin': cfg_lib.Float(min=0.0, max=1.0),
      'linear_ratio': cfg_lib.Float(min=0.0, min_inclusive=False),
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


def num_visible(cfg) -> int:
  return int(round(cfg.visible_fraction * cfg.num_arms))


def noise_var(cfg) -> float:
  return cfg.lam if cfg.lam is not None else cfg.noise_std**2


def _algo_arrays(cfg) -> dict[str, jax.Array]:
  algs = [ALGORITHMS[a] for a in cfg.algorithms]
  return {
      'w_rbf': jnp.array([a.base_kernel == 'rbf' for a in algs], jnp.float64),
      'w_lin': jnp.array([a.base_kernel == 'linear' for a in algs],
                         jnp.float64),
      'coef': jnp.array([cfg.nu if a.rule == 'ts' else cfg.beta
                         for a in algs], jnp.float64),
      'ts': jnp.array([a.rule == 'ts' for a in algs]),
  }


def make_init(cfg):
  """key -> State: environment (graph, arms, rewards) and empty posteriors."""
  regime_ids = jnp.array([envs.REGIMES.index(r) for r in cfg.regimes])

  def init(key: jax.Array) -> State:
    k_graph, k_arms, k_rew, k_round, k_ts = jax.random.split(key, 5)
    if cfg.graph == 'er':
      W = envs.er_graph(k_graph, cfg.num_users, cfg.er_p)
    else:
      W = envs.rbf_graph(k_graph, cfg.num_users, cfg.rbf_graph_lengthscale,
                         cfg.rbf_graph_threshold)
    arms = jax.random.uniform(k_arms, (cfg.num_arms, cfg.dim),
                              dtype=jnp.float64, minval=-1.0, maxval=1.0)
    F = jax.vmap(lambda k, r: envs.rewards(
        k, r, W, arms, rho=cfg.rho, arm_lengthscale=cfg.arm_lengthscale,
        gob_eta=cfg.gob_eta, num_anchors=cfg.num_anchors))(
            jax.random.split(k_rew, len(cfg.regimes)), regime_ids)
    K_users = jnp.stack([user_kernel(ALGORITHMS[a].user_kernel, W, cfg.rho)
                         for a in cfg.algorithms])
    R, A = len(cfg.regimes), len(cfg.algorithms)
    post = gp.init(cfg.horizon, cfg.dim, jnp.float64)
    post = jax.tree.map(lambda x: jnp.broadcast_to(x, (R, A) + x.shape), post)
    return State(arms, F, K_users, post, jnp.zeros((R, A), jnp.float64),
                 k_round, k_ts)

  return init


def joint_kernel(K_users, w_rbf, w_lin, lengthscale) -> gp.JointKernel:
  """K_G[u,u'] (w_rbf RBF(x,x') + w_lin x.x'): one formula for all rules."""

  def base(X1, X2):
    return (w_rbf * kernels.rbf(X1, X2, lengthscale=lengthscale)
            + w_lin * kernels.linear(X1, X2))

  return gp.multi_user_kernel(K_users, base)


def make_step(cfg):
  """(State, t) -> (State, metrics): one round for every regime/algorithm."""
  k_vis, lam = num_visible(cfg), noise_var(cfg)
  algo = _algo_arrays(cfg)
  metric_names = [[metric_name(cfg, r, a) for a in cfg.algorithms]
                  for r in cfg.regimes]

  def one_algorithm(post, K_users, w_rbf, w_lin, coef, ts, a_idx, F, arms,
                    ctx, ts_key):
    kernel = joint_kernel(K_users, w_rbf, w_lin, cfg.lengthscale)
    Xq = arms[ctx.visible]
    uq = jnp.full((k_vis,), ctx.user, jnp.int32)
    mean, var = gp.predict(post, Xq, uq, kernel)
    z = jnp.where(ts, jax.random.normal(jax.random.fold_in(ts_key, a_idx),
                                        (k_vis,), jnp.float64), 1.0)
    j = jnp.argmax(mean + coef * z * jnp.sqrt(var))
    arm = ctx.visible[j]
    f_user = F[ctx.user]
    y = f_user[arm] + ctx.noise
    post = gp.append(post, arms[arm], ctx.user, y, kernel, lam)
    return post, jnp.max(f_user[ctx.visible]) - f_user[arm]

  over_algos = jax.vmap(one_algorithm,
                        in_axes=(0, 0, 0, 0, 0, 0, 0, None, None, None, None))
  over_regimes = jax.vmap(over_algos, in_axes=(0,) + (None,) * 6 +
                          (0, None, None, None))

  def step(state: State, t: jax.Array):
    ctx = envs.round_context(state.round_key, t, cfg.num_users, cfg.num_arms,
                             k_vis, cfg.noise_std)
    ts_key = jax.random.fold_in(state.ts_key, t)
    post, regret = over_regimes(
        state.post, state.K_users, algo['w_rbf'], algo['w_lin'],
        algo['coef'], algo['ts'], jnp.arange(len(cfg.algorithms)), state.F,
        state.arms, ctx, ts_key)
    cum = state.cum_regret + regret
    metrics = {metric_names[r][a]: cum[r, a]
               for r in range(len(cfg.regimes))
               for a in range(len(cfg.algorithms))}
    return state._replace(post=post, cum_regret=cum), metrics

  return step


def metric_name(cfg, regime: str, algorithm: str) -> str:
  """`cumulative_regret/<algorithm>` for the first regime, else prefixed."""
  if regime == cfg.regimes[0]:
    return f'cumulative_regret/{algorithm}'
  return f'{regime}/cumulative_regret/{algorithm}'


def _wins(a: np.ndarray, b: np.ndarray) -> int:
  return int(np.sum(a < b))


def evaluate_claims(cfg, cum: dict[str, np.ndarray]) -> list[launch.Claim]:
  """The issue's claims on final cumulative regret per seed."""
  S = cfg.num_seeds
  need = math.ceil(cfg.win_fraction * S)
  main = cfg.regimes[0]
  claims = []

  def get(regime, algo):
    return cum.get(metric_name(cfg, regime, algo))

  lk, ts = get(main, 'lk_gp_ucb'), get(main, 'lk_gp_ts')
  rivals = ('indep_gp_ucb', 'pooled_gp_ucb', 'goblin')
  if lk is not None and all(get(main, b) is not None for b in rivals):
    wins = {b: _wins(lk, get(main, b)) for b in rivals}
    pooled = get(main, 'pooled_gp_ucb')
    gap = 1.0 - lk.mean() / pooled.mean()
    claims.append(launch.Claim(
        claim=(f'[{main}] LK-GP-UCB has lower cumulative regret than '
               'independent GP-UCB, pooled GP-UCB and GOB.Lin in at least '
               f'{need}/{S} seeds, and a mean at least '
               f'{cfg.pooled_margin:.0%} below pooled GP-UCB.'),
        holds=bool(all(w >= need for w in wins.values())
                   and gap >= cfg.pooled_margin),
        evidence=(f'LK-GP-UCB {lk.mean():.1f}; wins: ' + ', '.join(
            f'{b} {w}/{S} ({get(main, b).mean():.1f})'
            for b, w in wins.items()) + f'; {gap:.1%} below pooled')))
  if ts is not None and all(get(main, b) is not None for b in rivals[:2]):
    wins = {b: _wins(ts, get(main, b)) for b in rivals[:2]}
    claims.append(launch.Claim(
        claim=(f'[{main}] LK-GP-TS has lower cumulative regret than '
               f'independent and pooled GP-UCB in at least {need}/{S} seeds.'),
        holds=bool(all(w >= need for w in wins.values())),
        evidence=(f'LK-GP-TS {ts.mean():.1f}; wins: ' + ', '.join(
            f'{b} {w}/{S} ({get(main, b).mean():.1f})'
            for b, w in wins.items()))))
  if 'linear_gob' in cfg.regimes:
    lk_lin, gob = get('linear_gob', 'lk_gp_ucb'), get('linear_gob', 'goblin')
    if lk_lin is not None and gob is not None:
      ratio = lk_lin.mean() / gob.mean()
      claims.append(launch.Claim(
          claim=('[linear_gob] LK-GP-UCB (RBF base kernel) is within '
                 f'{cfg.linear_ratio}x of GOB.Lin\'s cumulative regret.'),
          holds=bool(ratio <= cfg.linear_ratio),
          evidence=(f'LK-GP-UCB {lk_lin.mean():.1f} vs GOB.Lin '
                    f'{gob.mean():.1f}: ratio {ratio:.2f}')))
  return claims


def run(r: launch.Run) -> launch.Result:
  """Runs every (seed, regime, algorithm) for `horizon` rounds."""
  cfg = r.config
  with jax.enable_x64(True):
    out = r.train(make_init(cfg), make_step(cfg), num_steps=cfg.horizon,
                  chunk_size=cfg.chunk_size, log_every=cfg.log_every)
    cum_SxRxA = np.asarray(distributed.to_host(out.state.cum_regret))
  cum = {metric_name(cfg, reg, alg): cum_SxRxA[:, i, j]
         for i, reg in enumerate(cfg.regimes)
         for j, alg in enumerate(cfg.algorithms)}
  for reg in cfg.regimes:
    keys = [metric_name(cfg, reg, a) for a in cfg.algorithms]
    r.plot(keys, f'cumulative_regret_{reg}', labels=list(cfg.algorithms),
           xlabel='round', ylabel='cumulative regret',
           title=f'{reg}, {cfg.graph} graph, n={cfg.num_users}, '
           f'{num_visible(cfg)}/{cfg.num_arms} arms visible')
  return launch.Result(metrics=cum, claims=evaluate_claims(cfg, cum))
