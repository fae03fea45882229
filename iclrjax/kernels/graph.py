"""Graph kernels over users and the multi-user product kernel.

Laplacian Kernelized Bandit (Wu & Amini, arXiv 2601.00461), Theorem 2.1: the
joint penalty of per-user functions f_1..f_n in H_x,

  PEN(f; rho) = 1/2 sum_{i,j} w_ij |f_i - f_j|^2 + rho sum_i |f_i|^2
              = sum_{i,j} [L + rho I]_{ij} <f_i, f_j>,

is the squared RKHS norm of the lifted f(x, u) = f_u(x) under the kernel

  K((x, u), (x', u')) = [(L + rho I)^{-1}]_{u u'} K_x(x, x'),   L = D - W.

`joint_penalty` computes the left-hand side directly, for tests of the
theorem.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def laplacian(W: jax.Array) -> jax.Array:
  """Combinatorial graph Laplacian L = D - W of a symmetric weight matrix."""
  return jnp.diag(jnp.sum(W, axis=1)) - W


def laplacian_kernel(W: jax.Array, rho: float) -> jax.Array:
  """The user kernel (D - W + rho I)^{-1} (paper Thm. 2.1), for rho > 0.

  L + rho I is symmetric positive definite for W >= 0 symmetric and
  rho > 0, so it is inverted through its Cholesky factor.
  """
  n = W.shape[0]
  L_rho = laplacian(W) + rho * jnp.eye(n, dtype=W.dtype)
  c = jax.scipy.linalg.cho_factor(L_rho, lower=True)
  K = jax.scipy.linalg.cho_solve(c, jnp.eye(n, dtype=W.dtype))
  return 0.5 * (K + K.T)


def normalize_mean_diag(K: jax.Array) -> jax.Array:
  """Scales a kernel matrix to mean diagonal 1 (unit average prior variance)."""
  return K / jnp.mean(jnp.diag(K))


def multi_user_gram(K_users: jax.Array, X1: jax.Array, u1: jax.Array,
                    X2: jax.Array, u2: jax.Array,
                    base_kernel: Callable[[jax.Array, jax.Array], jax.Array]
                    ) -> jax.Array:
  """Gram matrix of K((x,u),(x',u')) = K_users[u,u'] * base_kernel(x,x').

  Args:
    K_users: [n_users, n_users] user kernel (e.g. `laplacian_kernel`).
    X1: [n1, d] points; u1: [n1] integer users of those points.
    X2: [n2, d] points; u2: [n2] integer users.
    base_kernel: k(X1, X2) -> [n1, n2].

  Returns:
    [n1, n2] Gram matrix.
  """
  return K_users[u1[:, None], u2[None, :]] * base_kernel(X1, X2)


def joint_penalty(W: jax.Array, rho: float, G: jax.Array) -> jax.Array:
  """PEN(f; rho) from the Gram matrix G_ij = <f_i, f_j>_{H_x} of f_1..f_n.

  Computed as the paper writes it, 1/2 sum_ij w_ij |f_i - f_j|^2 +
  rho sum_i |f_i|^2 with |f_i - f_j|^2 = G_ii + G_jj - 2 G_ij, not through
  the Laplacian, so that tests can check Thm. 2.1 against it.
  """
  g = jnp.diag(G)
  dist2 = g[:, None] + g[None, :] - 2.0 * G
  return 0.5 * jnp.sum(W * dist2) + rho * jnp.sum(g)
