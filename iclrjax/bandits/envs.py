"""Synthetic multi-user bandit environments on a user graph.

Setting of Wu & Amini, "Laplacian Kernelized Bandit" (arXiv 2601.00461),
Sec. 5: n users on a
graph with weights W; a fixed pool of M arms in R^d; at round t a user u_t
arrives uniformly at random, a random subset D_t of the arms is visible, the
learner picks x_t in D_t and sees y_t = f_{u_t}(x_t) + eps_t. Regret is
f_{u_t}(x*_t) - f_{u_t}(x_t) with x*_t the best visible arm.

Graphs: 'er' (Erdos-Renyi G(n, p), resampled until connected) and 'rbf'
(users at uniform points in the unit square, w_ij = exp(-|z_i-z_j|^2/(2 l^2))
kept where it exceeds a threshold).

Reward regimes (the paper's three):
  gp_draw:          F = f_u(arm) is an exact draw from GP(0, K_G (x) K_x),
                    K_G = (L + rho I)^{-1} normalised to mean diagonal 1,
                    K_x the RBF kernel on the arms;
  gp_draw_misspec:  the same draw with other (rho, lengthscale), so that an
                    algorithm keeping the gp_draw values has a mis-specified
                    prior (not one of the paper's regimes: it tests how much
                    of the gp_draw win is the oracle prior);
  representer_draw: f = sum_j alpha_j K((x_j, u_j), .) over random anchors;
  linear_gob:       f_u(x) = theta_u . x, Theta = (I + eta L)^{-1} Theta_0.
The last two are scaled to unit standard deviation over (user, arm).

Everything is a pure function of a key, so arm pools, graphs, users, visible
sets and noise are shared by every algorithm within a seed.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from iclrjax import kernels

GRAPHS = ('er', 'rbf')
REGIMES = ('gp_draw', 'representer_draw', 'linear_gob', 'gp_draw_misspec')

# The paper's difficulty levels: (arms in the pool, visible fraction, horizon).
DIFFICULTIES = {
    'easy': (10, 0.5, 1000),
    'medium': (20, 0.25, 3000),
    'hard': (50, 0.1, 5000),
}


class Env(NamedTuple):
  arms: jax.Array   # [M, d] arm features
  F: jax.Array      # [n, M] mean reward of each arm for each user
  key: jax.Array    # raw key of the round stream (users, visible sets, noise)


def is_connected(W: jax.Array) -> jax.Array:
  """True iff the graph is connected (Fiedler eigenvalue > 0)."""
  lam = jnp.linalg.eigvalsh(kernels.laplacian(W))
  return lam[1] > 1e-8 * jnp.maximum(lam[-1], 1.0)


def er_graph(key: jax.Array, n: int, p: float,
             max_tries: int = 1000) -> jax.Array:
  """A connected Erdos-Renyi G(n, p) graph (unit weights), by rejection."""

  def sample(k):
    upper = jnp.triu(jax.random.uniform(k, (n, n)) < p, 1)
    return (upper | upper.T).astype(jnp.float64)

  def cond(c):
    return (~is_connected(c[1])) & (c[2] < max_tries)

  def body(c):
    k, _, i = c
    k, sub = jax.random.split(k)
    return k, sample(sub), i + 1

  k0, sub = jax.random.split(key)
  return jax.lax.while_loop(cond, body, (k0, sample(sub), 0))[1]


def rbf_graph(key: jax.Array, n: int, lengthscale: float,
              threshold: float) -> jax.Array:
  """Random geometric RBF graph: users uniform in [0,1]^2."""
  z = jax.random.uniform(key, (n, 2), dtype=jnp.float64)
  W = kernels.rbf(z, z, lengthscale=lengthscale)
  W = jnp.where(W >= threshold, W, 0.0)
  return W * (1.0 - jnp.eye(n))


def _chol_psd(K: jax.Array, jitter: float = 1e-8) -> jax.Array:
  return jnp.linalg.cholesky(K + jitter * jnp.eye(K.shape[0], dtype=K.dtype))


def _unit_std(F: jax.Array) -> jax.Array:
  return F / jnp.maximum(jnp.std(F), 1e-12)


def rewards(key: jax.Array, regime: jax.Array, W: jax.Array,
            arms: jax.Array, *, rho: float, arm_lengthscale: float,
            gob_eta: float, num_anchors: int, misspec_rho: float = 1.0,
            misspec_lengthscale: float = 0.5) -> jax.Array:
  """Mean rewards F [n, M] of regime index `regime` (into REGIMES)."""
  n, M = W.shape[0], arms.shape[0]

  def user_cov(r):
    return kernels.normalize_mean_diag(kernels.laplacian_kernel(W, r))

  K_G = user_cov(rho)
  K_x = kernels.rbf(arms, arms, lengthscale=arm_lengthscale)
  k_gp, k_rep_a, k_rep_x, k_rep_u, k_lin = jax.random.split(key, 5)

  def draw(K_users, K_arms):
    Z = jax.random.normal(k_gp, (n, M), dtype=arms.dtype)
    return _chol_psd(K_users) @ Z @ _chol_psd(K_arms).T

  def gp_draw():
    return draw(K_G, K_x)

  def gp_draw_misspec():
    return draw(user_cov(misspec_rho),
                kernels.rbf(arms, arms, lengthscale=misspec_lengthscale))

  def representer_draw():
    alpha = jax.random.normal(k_rep_a, (num_anchors,), dtype=arms.dtype)
    x_j = jax.random.randint(k_rep_x, (num_anchors,), 0, M)
    u_j = jax.random.randint(k_rep_u, (num_anchors,), 0, n)
    # F[u, m] = sum_j alpha_j K_G[u_j, u] K_x[x_j, m]
    F = (alpha[:, None] * K_G[u_j]).T @ K_x[x_j]
    return _unit_std(F)

  def linear_gob():
    theta0 = jax.random.normal(k_lin, (n, arms.shape[1]), dtype=arms.dtype)
    A = jnp.eye(n, dtype=W.dtype) + gob_eta * kernels.laplacian(W)
    theta = jnp.linalg.solve(A, theta0)
    return _unit_std(theta @ arms.T)

  return jax.lax.switch(regime, [gp_draw, representer_draw, linear_gob,
                                 gp_draw_misspec])


class Round(NamedTuple):
  """One round's context (`round_context`): the arriving user, the visible
  arms and the reward noise."""

  user: jax.Array     # () int32
  visible: jax.Array  # [k] int32 indices into the arm pool
  noise: jax.Array    # () reward noise of this round (same for every arm)


def round_context(key: jax.Array, t: jax.Array, num_users: int,
                  num_arms: int, num_visible: int,
                  noise_std: float) -> Round:
  """User, visible arms and noise of round t: a pure function of (key, t)."""
  k_u, k_v, k_e = jax.random.split(jax.random.fold_in(key, t), 3)
  user = jax.random.randint(k_u, (), 0, num_users)
  visible = jax.random.permutation(k_v, num_arms)[:num_visible]
  noise = noise_std * jax.random.normal(k_e, (), dtype=jnp.float64)
  return Round(user.astype(jnp.int32), visible.astype(jnp.int32), noise)
