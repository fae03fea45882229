"""LK-GP-UCB and LK-GP-TS (Wu & Amini, "Laplacian Kernelized Bandit",
arXiv 2601.00461) and the paper's baselines, as pure functions.

All algorithms are GP (kernel ridge) bandits with a multi-user kernel
K((x,u),(x',u')) = K_G[u,u'] K_x(x,x') (paper Thm. 2.1) and differ in K_G,
the base kernel K_x, the width and the acquisition rule:

  algorithm        K_G                          K_x     rule
  lk_gp_ucb        (L + rho I)^{-1}             RBF     UCB
  lk_gp_ts         (L + rho I)^{-1}             RBF     TS
  lk_gp_ucb_ml     (L + rho I)^{-1}, (rho, l) refitted by type-II maximum
                   likelihood on a grid every k rounds      RBF   UCB
  indep_gp_ucb     I (independent users)        RBF     UCB
  indep_gp_ts      I                            RBF     TS
  pooled_gp_ucb    1 1^T (one shared function)  RBF     UCB
  shared_gp_ucb_ml a 1 1^T + (1 - a) I, (a, l) refitted by type-II
                   maximum likelihood on a grid every k rounds (the non-graph
                   kernel between independent and pooled)  RBF     UCB
  goblin           (I + L)^{-1} (GOB.Lin)       linear  UCB
  graphucb         (L + rho I)^{-1}, per-user width      linear  UCB
  coop_kernelucb   exp(-MMD^2 / tau) of the users' (x, y) samples, re-
                   estimated every k rounds                 RBF   UCB
  peruser_linucb   I                            linear  UCB
  pooled_linucb    1 1^T                        linear  UCB
  lk_gp_ucb_rbflin (L + rho I)^{-1}             RBF + linear   UCB
  *_permuted       LK on the graph with its users shuffled (an ablation:
                   the same spectrum, the wrong neighbours); *_permuted2 on a
                   second, independent shuffle (its null control)

Every K_G is normalised to mean diagonal 1 (a global scale only rescales the
prior variance). With the posterior of `kernels.gp` (O(T^2) updates):

  mu_t(x,u)     = k_t(x,u)^T (K_t + lam I)^{-1} y_t
  sigma_t^2(x,u) = K((x,u),(x,u)) - k_t(x,u)^T (K_t + lam I)^{-1} k_t(x,u)
  UCB: x_t = argmax_{x in D_t} mu_{t-1}(x,u_t) + beta sigma_{t-1}(x,u_t)
  TS:  x_t = argmax_{x in D_t} mu_{t-1}(x,u_t) + nu z_t(x) sigma_{t-1}(x,u_t),
       z_t(x) ~ N(0,1) independently per arm (as the paper states the rule).

Baselines, as their papers define them and reconstructed in this kernel form:
- GOB.Lin (Cesa-Bianchi et al. 2013) is LinUCB in the lifted space with
  A = (I + L) (x) I_d, i.e. this GP-UCB with a linear kernel and
  K_G = (I + L)^{-1}; per-user and pooled LinUCB likewise.
- GraphUCB (Yang, Toni & Dong, AISTATS 2020) estimates Theta by
  Laplacian-regularised least squares, min sum_s (y_s - x_s.theta_{u_s})^2
  + lam tr(Theta^T (L + eps I) Theta): the mean of a linear-kernel GP with
  K_G = (L + eps I)^{-1} (here eps = rho). Its width uses only the user's
  block, ||x||_{M_u^{-1}} with M_u = V_u + lam (L + eps I)_{uu} I and V_u =
  sum_{s: u_s = u} x_s x_s^T (`graphucb_width`), not the joint posterior.
- COOP-KernelUCB (Dubey & Pentland, ICML 2020) is KernelUCB on K_z (x) K_x
  with the agent kernel K_z estimated from kernel mean embeddings of each
  agent's data. Every user here sees arms from the same law, so an
  embedding of contexts alone would make all users identical; we embed the
  (x, y) pairs, K_z[u,v] = exp(-MMD^2(P_u, P_v) / tau) with the median
  heuristic for tau (`coop_user_kernel`, a reconstruction).

The paper's lam schedule ("spectral ratio", with exact inversion for small
t and the O(t^2) recursion after) is not given in a form we could recover;
`spectral_ratio_lam` is our reading: lam_t = max(lam_0, lambda_max(K_t) /
ratio) recomputed with an exact refit each round for t < E, then frozen.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from iclrjax import kernels
from iclrjax.kernels import gp


@dataclasses.dataclass(frozen=True)
class Algorithm:
  """One row of the table above: user kernel K_G, base kernel K_x,
  acquisition rule, width and hyperparameter refit (`ALGORITHMS`)."""

  user_kernel: str   # 'laplacian' | 'gob' | 'independent' | 'pooled' |
                     # 'shared' | 'permuted' | 'permuted2' | 'coop'
  base_kernel: str   # 'rbf' | 'linear' | 'rbf_linear' (their sum)
  rule: str          # 'ucb' | 'ts'
  width: str = 'joint'   # 'joint' (GP variance) | 'per_user' (GraphUCB)
  refit: str = 'none'    # 'none' | 'ml' (grid type-II ML of rho and the
                         # lengthscale) | 'ml_shared' (of a and the
                         # lengthscale) | 'coop' (MMD)


ALGORITHMS = {
    'lk_gp_ucb': Algorithm('laplacian', 'rbf', 'ucb'),
    'lk_gp_ts': Algorithm('laplacian', 'rbf', 'ts'),
    'lk_gp_ucb_ml': Algorithm('laplacian', 'rbf', 'ucb', refit='ml'),
    'indep_gp_ucb': Algorithm('independent', 'rbf', 'ucb'),
    'indep_gp_ts': Algorithm('independent', 'rbf', 'ts'),
    'pooled_gp_ucb': Algorithm('pooled', 'rbf', 'ucb'),
    'shared_gp_ucb_ml': Algorithm('shared', 'rbf', 'ucb', refit='ml_shared'),
    'lk_gp_ucb_rbflin': Algorithm('laplacian', 'rbf_linear', 'ucb'),
    'goblin': Algorithm('gob', 'linear', 'ucb'),
    'graphucb': Algorithm('laplacian', 'linear', 'ucb', width='per_user'),
    'coop_kernelucb': Algorithm('coop', 'rbf', 'ucb', refit='coop'),
    'peruser_linucb': Algorithm('independent', 'linear', 'ucb'),
    'pooled_linucb': Algorithm('pooled', 'linear', 'ucb'),
    'lk_gp_ucb_permuted': Algorithm('permuted', 'rbf', 'ucb'),
    'lk_gp_ts_permuted': Algorithm('permuted', 'rbf', 'ts'),
    'lk_gp_ucb_permuted2': Algorithm('permuted2', 'rbf', 'ucb'),
}


def user_kernel(kind: str, W: jax.Array, rho: float | jax.Array,
                perm: jax.Array | None = None,
                share: float | jax.Array = 0.5) -> jax.Array:
  """K_G of an algorithm, normalised to mean diagonal 1.

  'permuted' (and 'permuted2', given another `perm`) is the Laplacian
  kernel of W with its users relabelled by `perm` (`W[perm][:, perm]`);
  'shared' is share 1 1^T + (1 - share) I (no graph: every pair of users
  correlates by `share`; 0 independent, 1 pooled); 'coop' starts
  independent (no data yet).
  """
  n = W.shape[0]
  if kind == 'laplacian':
    K = kernels.laplacian_kernel(W, rho)
  elif kind in ('permuted', 'permuted2'):
    K = kernels.laplacian_kernel(W[perm][:, perm], rho)
  elif kind == 'gob':
    K = kernels.laplacian_kernel(W, 1.0)  # (I + L)^{-1}
  elif kind in ('independent', 'coop'):
    K = jnp.eye(n, dtype=W.dtype)
  elif kind == 'pooled':
    K = jnp.ones((n, n), dtype=W.dtype)
  elif kind == 'shared':
    K = share + (1.0 - share) * jnp.eye(n, dtype=W.dtype)
  else:
    raise ValueError(f'unknown user kernel {kind!r}')
  return kernels.normalize_mean_diag(K)


def joint_kernel(K_users, w_rbf, w_lin, lengthscale) -> gp.JointKernel:
  """K_G[u,u'] (w_rbf RBF(x,x') + w_lin x.x'): one formula for all rules."""

  def base(X1, X2):
    # A weight given as the Python number 0 drops its term (the same
    # values: no [n1, n2] Gram is made for it).
    if isinstance(w_lin, (int, float)) and w_lin == 0:
      return w_rbf * kernels.rbf(X1, X2, lengthscale=lengthscale)
    if isinstance(w_rbf, (int, float)) and w_rbf == 0:
      return w_lin * kernels.linear(X1, X2)
    return (w_rbf * kernels.rbf(X1, X2, lengthscale=lengthscale)
            + w_lin * kernels.linear(X1, X2))

  return gp.multi_user_kernel(K_users, base)


def lk_kernel(W: jax.Array, rho: float | jax.Array = 0.1,
              lengthscale: float | jax.Array = 1.0, w_rbf: float = 1.0,
              w_lin: float = 0.0) -> gp.JointKernel:
  """The LK-GP prior on a user graph W [n, n] (symmetric, nonnegative):
  K_G = (L + rho I)^{-1} normalised to mean diagonal 1 (paper Thm. 2.1)
  times w_rbf RBF(lengthscale) + w_lin x.x' on the arms. Defaults: the
  paper's rho = 0.1 and our experiment's unit lengthscale, RBF only."""
  return joint_kernel(user_kernel('laplacian', W, rho), w_rbf, w_lin,
                      lengthscale)


def acquisition(mean: jax.Array, width: jax.Array,
                coef: float | jax.Array, ts: bool | jax.Array = False,
                key: jax.Array | None = None) -> jax.Array:
  """The arms' scores: UCB mean + coef width; TS (`ts` True, `key` given)
  mean + coef z width with z ~ N(0, 1) per arm, as the paper states the
  rule (module docstring). `ts` may be a traced flag (one program for
  both rules); the arm played is the argmax."""
  if key is None:
    if not isinstance(ts, bool) or ts:
      raise ValueError('acquisition: Thompson sampling (ts) needs a key')
    return mean + coef * width
  z = jnp.where(ts, jax.random.normal(key, mean.shape, mean.dtype), 1.0)
  return mean + coef * z * width


def select(post: gp.Posterior, kernel: gp.JointKernel, arms: jax.Array,
           user: int | jax.Array, *, rule: str = 'ucb',
           coef: float | jax.Array = 0.5, key: jax.Array | None = None
           ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(j, l, var): the arm of `arms` [m, d] that `rule` ('ucb' or 'ts')
  plays for `user`, its column l of `gp.predict_v`'s v and its posterior
  variance, so that `gp.append(post, arms[j], user, y, kernel, noise_var,
  l=l, var=var)` adds the reward in O(T^2) without a second pass. coef:
  beta (UCB) or nu (TS), both 0.5 in our experiment; TS needs `key`.

  Example (a user's own graph and arms, float32; float64 under
  `jax.enable_x64`):
    ```python
    import jax
    import jax.numpy as jnp
    from iclrjax.bandits import lkgp
    from iclrjax.kernels import gp

    n, d = 6, 3                                  # users on a ring
    W = jnp.roll(jnp.eye(n), 1, 1) + jnp.roll(jnp.eye(n), -1, 1)
    arms = jax.random.uniform(jax.random.key(0), (40, d), minval=-1.0)
    theta = jnp.linspace(-1.0, 1.0, n)[:, None] * jnp.ones(d)  # smooth
    reward = lambda x, u: jnp.sin(2.0 * x @ theta[u])
    kernel = lkgp.lk_kernel(W, rho=0.1, lengthscale=1.0)
    noise_var = 0.01

    @jax.jit
    def round_(post, t):
      user = t % n
      j, l, var = lkgp.select(post, kernel, arms, user, rule='ts',
                              key=jax.random.key(t))
      y = reward(arms[j], user) + 0.1 * jax.random.normal(
          jax.random.fold_in(jax.random.key(1), t))
      post = gp.append(post, arms[j], user, y, kernel, noise_var, l=l,
                       var=var)
      return post, jnp.max(reward(arms, user)) - reward(arms[j], user)

    post = gp.init(capacity=120, dim=d, dtype=jnp.float32)
    post, regret = jax.lax.scan(round_, post, jnp.arange(120))
    print(regret[:60].mean(), regret[60:].mean())  # falls as it learns
    ```
  """
  if rule not in ('ucb', 'ts'):
    raise ValueError(f"rule must be 'ucb' or 'ts', got {rule!r}")
  uq = jnp.full((arms.shape[0],), user, jnp.int32)
  mean, var, v = gp.predict_v(post, arms, uq, kernel)
  j = jnp.argmax(acquisition(mean, jnp.sqrt(var), coef, rule == 'ts',
                             key if rule == 'ts' else None))
  return j, v[:, j], var[j]


# -- GraphUCB's per-user width ---------------------------------------------------------
def graphucb_width(V_u: jax.Array, penalty_uu: jax.Array, lam: jax.Array,
                   Xq: jax.Array) -> jax.Array:
  """sqrt(lam x^T (V_u + lam P_uu I)^{-1} x) per row of Xq [m, d].

  P = K_G^{-1} is the penalty matrix (L + eps I up to the normalisation);
  lam x^T M_u^{-1} x is the posterior variance of x.theta_u when the other
  users' blocks are dropped from the joint precision (Yang et al. 2020).
  """
  d = V_u.shape[-1]
  M = V_u + lam * penalty_uu * jnp.eye(d, dtype=V_u.dtype)
  sol = jnp.linalg.solve(M, Xq.T)                              # [d, m]
  return jnp.sqrt(jnp.maximum(lam * jnp.sum(Xq.T * sol, axis=0), 0.0))


# -- COOP-KernelUCB's agent kernel -----------------------------------------------------
def coop_user_kernel(post: gp.Posterior, num_users: int,
                     lengthscale: float | jax.Array,
                     y_lengthscale: float | jax.Array) -> jax.Array:
  """exp(-MMD^2 / tau) between the users' empirical (x, y) laws.

  With phi the feature map of k((x,y),(x',y')) = rbf(x,x') rbf(y,y'), the
  mean embedding of user u is mu_u = mean_{s: u_s = u} phi(x_s, y_s), and
  MMD^2(u, v) = <mu_u,mu_u> + <mu_v,mu_v> - 2 <mu_u,mu_v>, all from one
  Gram of the stored observations. tau is the median MMD^2 over pairs of
  users that both have data; users without data stay independent.
  """
  T = post.X.shape[0]
  seen = jnp.arange(T) < post.t
  G = (kernels.rbf(post.X, post.X, lengthscale=lengthscale)
       * kernels.rbf(post.y[:, None], post.y[:, None],
                     lengthscale=y_lengthscale))
  onehot = jax.nn.one_hot(post.u, num_users, dtype=G.dtype) * seen[:, None]
  counts = onehot.sum(0)
  S = onehot.T @ G @ onehot                                    # [n, n]
  E = S / jnp.maximum(counts[:, None] * counts[None, :], 1.0)
  mmd2 = jnp.maximum(jnp.diag(E)[:, None] + jnp.diag(E)[None, :] - 2 * E, 0.)
  has = counts > 0
  pair = has[:, None] & has[None, :] & ~jnp.eye(num_users, dtype=bool)
  tau = jnp.nanmedian(jnp.where(pair, mmd2, jnp.nan))
  tau = jnp.where(jnp.isfinite(tau) & (tau > 0), tau, 1.0)
  K = jnp.where(pair, jnp.exp(-mmd2 / tau), 0.0)
  return K + jnp.eye(num_users, dtype=K.dtype)


# -- hyperparameters ---------------------------------------------------------------------
def ml_grid_fit(post: gp.Posterior, W: jax.Array, noise_var: jax.Array,
                rho_grid: jax.Array, lengthscale_grid: jax.Array,
                kind: str = 'laplacian') -> tuple[jax.Array, jax.Array]:
  """(rho, lengthscale) on the grid maximising log p(y_t | rho, l).

  Type-II maximum likelihood of the prior K_G(rho) (x) RBF(l) with the
  noise variance fixed, K_G = `user_kernel(kind, W, rho)` (for 'shared'
  the grid's rho is the share a of a 1 1^T + (1 - a) I); one Cholesky of
  the stored Gram per grid point (`gp.log_marginal_likelihood`), evaluated
  with `lax.map` to bound memory.
  """
  if kind not in ('laplacian', 'shared'):
    raise ValueError(f"ml_grid_fit fits kind 'laplacian' or 'shared', got "
                     f'{kind!r}')
  R, Ls = jnp.meshgrid(rho_grid, lengthscale_grid, indexing='ij')
  R, Ls = R.ravel(), Ls.ravel()

  def lml(p):
    K_users = user_kernel(kind, W, p[0], share=p[0])
    return gp.log_marginal_likelihood(
        post, joint_kernel(K_users, 1.0, 0.0, p[1]), noise_var)

  scores = jax.lax.map(lml, jnp.stack([R, Ls], axis=1))
  i = jnp.argmax(scores)
  return R[i], Ls[i]


def spectral_ratio_lam(post: gp.Posterior, kernel: gp.JointKernel,
                       lam_min: jax.Array, ratio: float, size: int
                       ) -> jax.Array:
  """max(lam_min, lambda_max(K_t) / ratio), K_t the Gram of the first t <=
  `size` observations: caps the condition number of K_t + lam I at
  ratio + 1 (our reading of the paper's spectral-ratio schedule)."""
  X, u = post.X[:size], post.u[:size]
  m = jnp.arange(size) < post.t
  K = jnp.where(m[:, None] & m[None, :], kernel(X, u, X, u), 0.0)
  return jnp.maximum(lam_min, jnp.linalg.eigvalsh(K)[-1] / ratio)
