"""Exact GP posterior with O(T^2) incremental updates in fixed-size buffers.

Observations are points (x, u): a feature vector and an integer tag (the
user in a multi-user kernel, the action in a state-action kernel; 0 for a
plain GP). The joint kernel is any `k(X1, u1, X2, u2) -> [n1, n2]`, e.g.
`multi_user_kernel(K_users, base_kernel)`.

With L_t the lower Cholesky factor of K_t + lam I (K_t the Gram matrix of the
t observations), the state keeps its *inverse* C_t = L_t^{-1} in the top-left
t x t block of a preallocated [T, T] buffer (identity elsewhere) and
a = C_t y. Appending (x, u, y) with cross-covariances k (k_i = 0 for i >= t):

  l = C k,   d = sqrt(k((x,u),(x,u)) + lam - |l|^2)
  row t of C <- [-(l^T C) / d, 1/d]          (inverse of [[L, 0], [l^T, d]])
  a_t <- (y - l.a) / d

and the posterior at query points Q is

  v = C k(Z_t, Q),   mean = v^T a,   var = k(Q,Q) - |v|^2

i.e. mean = k^T (K_t + lam I)^{-1} y and var = k(Q,Q) - k^T (K_t + lam I)^{-1} k,
the GP / kernel-ridge posterior. When the appended point is one of the last
queries (a bandit plays one of the arms it scored), l = C k is the query's
column of v and d^2 = var + lam, so `append(..., l=v[:, j], var=var[j])`
skips the C k pass: a round reads C twice (C k(Z_t, Q), then l^T C). Every operation is a matrix-vector or
matrix-matrix product: O(T^2) per append, O(T^2 m) per m queries, no
triangular solves (which on CPU copy the [T, T] factor into LAPACK's layout
on every call, and are slow on accelerators). Rows past t are masked, so
shapes are static and a whole bandit loop compiles under `lax.scan`. Use
float64 (`with jax.enable_x64(True)`); tests check the recursion against a
full refit to 1e-6 at t = 500.

`rebuild` recomputes the state exactly (one Cholesky) after the kernel or
lam changed, e.g. hyperparameters refitted by `log_marginal_likelihood`;
`from_data(..., lazy=True)` keeps the Cholesky factor L instead of its
inverse for a one-shot fit and predict (triangular solves, no inverse), and
`append` forms C from it on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

JointKernel = Callable[[jax.Array, jax.Array, jax.Array, jax.Array],
                       jax.Array]


class Posterior(NamedTuple):
  C: jax.Array | None  # [T, T] inverse Cholesky factor of K_t + lam I
                       # (identity past t), lower triangular; None if lazy
  a: jax.Array   # [T] C y (0 past t)
  X: jax.Array   # [T, d] observed features
  u: jax.Array   # [T] observed tags (users / actions), int32
  y: jax.Array   # [T] observed targets
  t: jax.Array   # () number of observations, int32
  L: jax.Array | None = None  # [T, T] Cholesky factor, kept instead of C
                              # by `from_data(..., lazy=True)`


def multi_user_kernel(K_users: jax.Array,
                      base_kernel: Callable[[jax.Array, jax.Array], jax.Array]
                      ) -> JointKernel:
  """k((x,u),(x',u')) = K_users[u,u'] base_kernel(x,x') as a JointKernel."""

  def k(X1, u1, X2, u2):
    return K_users[u1[:, None], u2[None, :]] * base_kernel(X1, X2)

  return k


def init(capacity: int, dim: int, dtype=jnp.float64,
         buffer_dtype=None) -> Posterior:
  """An empty posterior that can hold `capacity` observations.

  `buffer_dtype` (default `dtype`): of the [T, T] factor C only, the one
  array of size T^2. float32 halves the memory of a float64 posterior; the
  products with C then run in float32 and everything else in `dtype`
  (check the accuracy at the size used: the error grows with the
  condition number of K_t + lam I).
  """
  return Posterior(
      C=jnp.eye(capacity, dtype=buffer_dtype or dtype),
      a=jnp.zeros((capacity,), dtype),
      X=jnp.zeros((capacity, dim), dtype),
      u=jnp.zeros((capacity,), jnp.int32),
      y=jnp.zeros((capacity,), dtype),
      t=jnp.zeros((), jnp.int32),
  )


def _cross(post: Posterior, Xq: jax.Array, uq: jax.Array,
           kernel: JointKernel) -> jax.Array:
  """k(Z_t, Q) [T, m] with rows past t zeroed."""
  K = kernel(post.X, post.u, Xq.astype(post.X.dtype), uq)
  mask = jnp.arange(post.X.shape[0]) < post.t
  return jnp.where(mask[:, None], K, 0.0)


def _diag(Xq: jax.Array, uq: jax.Array, kernel: JointKernel) -> jax.Array:
  return jax.vmap(lambda x, u: kernel(x[None], u[None], x[None], u[None])[0, 0]
                  )(Xq, uq)


def _times_c(post: Posterior, x: jax.Array) -> jax.Array:
  """C @ x in C's dtype, returned in x's (the identity casts for a
  posterior whose buffer has the dtype of the rest)."""
  return (post.C @ x.astype(post.C.dtype)).astype(x.dtype)


def _eager(post: Posterior) -> Posterior:
  """The posterior with C formed (from L if it is lazy)."""
  if post.C is not None:
    return post
  eye = jnp.eye(post.L.shape[0], dtype=post.L.dtype)
  C = jax.scipy.linalg.solve_triangular(post.L, eye, lower=True)
  return post._replace(C=C, L=None)


def append(post: Posterior, x: jax.Array, u: jax.Array, y: jax.Array,
           kernel: JointKernel, noise_var: float | jax.Array,
           jitter: float = 1e-10, *, l: jax.Array | None = None,
           var: jax.Array | None = None) -> Posterior:
  """Adds observation (x, u, y) in O(T^2).

  l, var: C k and the posterior variance at (x, u), when a `predict_v`
  at this point already computed them (its column of v and its var).
  Raises (also under jit, vmap and scan) when the buffer is full: size it
  with `init(capacity, ...)` or `from_data(..., capacity=...)`.
  """
  post = _eager(post)
  capacity = post.X.shape[0]
  post = post._replace(t=eqx.error_if(
      post.t, post.t >= capacity,
      f'gp.append: the posterior buffer is full ({capacity} observations); '
      'allocate more with init(capacity, ...) or from_data(..., capacity=...)'))
  x = x.astype(post.X.dtype)
  if l is None:
    k = _cross(post, x[None], u[None], kernel)[:, 0]
    l = _times_c(post, k)
    d2 = _diag(x[None], u[None], kernel)[0] + noise_var - l @ l
  else:
    d2 = var + noise_var
  d = jnp.sqrt(jnp.maximum(d2, jitter))
  t = post.t
  lc = (l.astype(post.C.dtype) @ post.C).astype(l.dtype)
  row = (-lc / d).at[t].set(1.0 / d).astype(post.C.dtype)
  return Posterior(
      C=jax.lax.dynamic_update_slice(post.C, row[None], (t, jnp.zeros_like(t))),
      a=post.a.at[t].set((y - l @ post.a) / d),
      X=post.X.at[t].set(x),
      u=post.u.at[t].set(jnp.asarray(u, jnp.int32)),
      y=post.y.at[t].set(y),
      t=t + 1,
  )


def predict_v(post: Posterior, Xq: jax.Array, uq: jax.Array,
              kernel: JointKernel
              ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(mean [m], var [m], v [T, m]) at query points (Xq [m, d], uq [m]);
  v = C k(Z_t, Q), whose column j is `append`'s l for query j."""
  K = _cross(post, Xq, uq, kernel)
  if post.C is None:
    v = jax.scipy.linalg.solve_triangular(post.L, K, lower=True)
  else:
    v = _times_c(post, K)
  mean = v.T @ post.a
  var = _diag(Xq.astype(post.X.dtype), uq, kernel) - jnp.sum(v * v, axis=0)
  return mean, jnp.maximum(var, 0.0), v


def predict(post: Posterior, Xq: jax.Array, uq: jax.Array,
            kernel: JointKernel) -> tuple[jax.Array, jax.Array]:
  """Posterior mean and variance [m] at query points (Xq [m, d], uq [m])."""
  return predict_v(post, Xq, uq, kernel)[:2]


def _padded_gram(post: Posterior, kernel: JointKernel,
                 noise_var: float | jax.Array, size: int | None) -> jax.Array:
  """K_t + lam I in the top-left t x t block of a [size, size] identity."""
  n = size or post.X.shape[0]
  K = kernel(post.X[:n], post.u[:n], post.X[:n], post.u[:n])
  m = jnp.arange(n) < post.t
  return (jnp.where(m[:, None] & m[None, :], K, 0.0)
          + jnp.diag(jnp.where(m, noise_var, 1.0)))


def rebuild(post: Posterior, kernel: JointKernel,
            noise_var: float | jax.Array, size: int | None = None
            ) -> Posterior:
  """The same observations under a new kernel or noise variance, exactly.

  One Cholesky of the padded Gram (`size` x `size`, default the capacity;
  pass a static `size` >= t to refit a short history cheaply). The new
  factor is written into the top-left block of the buffer, which is the
  identity elsewhere (t <= size), so a short refit makes no [T, T]
  temporary.
  """
  n = size or post.X.shape[0]
  L = jnp.linalg.cholesky(_padded_gram(post, kernel, noise_var, size))
  Cn = jax.scipy.linalg.solve_triangular(L, jnp.eye(n, dtype=L.dtype),
                                         lower=True)
  cap = post.X.shape[0]
  y = jnp.where(jnp.arange(cap) < post.t, post.y, 0.0)
  if post.C is None:
    C = jnp.eye(cap, dtype=L.dtype).at[:n, :n].set(Cn)
    return post._replace(C=C, a=C @ y, L=None)
  C = post.C.at[:n, :n].set(Cn.astype(post.C.dtype))
  if C.dtype == L.dtype:
    a = C @ y
  else:  # a in the posterior's precision, not the buffer's (y = 0 past n)
    a = jnp.zeros_like(y).at[:n].set(Cn @ y[:n])
  return post._replace(C=C, a=a, L=None)


def log_marginal_likelihood(post: Posterior, kernel: JointKernel,
                            noise_var: float | jax.Array,
                            size: int | None = None) -> jax.Array:
  """log N(y_t; 0, K_t + lam I) of the t stored observations (the padding
  adds nothing: unit diagonal, y = 0 there)."""
  n = size or post.X.shape[0]
  L = jnp.linalg.cholesky(_padded_gram(post, kernel, noise_var, size))
  y = jnp.where(jnp.arange(n) < post.t, post.y[:n], 0.0)
  alpha = jax.scipy.linalg.solve_triangular(L, y, lower=True)
  return (-0.5 * alpha @ alpha - jnp.sum(jnp.log(jnp.diag(L)))
          - 0.5 * post.t * jnp.log(2 * jnp.pi))


def from_data(X: jax.Array, u: jax.Array, y: jax.Array, kernel: JointKernel,
              noise_var: float, capacity: int | None = None,
              lazy: bool = False) -> Posterior:
  """A posterior holding (X, u, y) in a buffer of `capacity` (default n:
  full, so `append` needs a larger capacity).

  Built in one batch (Cholesky and triangular inverse, O(n^3) in LAPACK)
  rather than n appends; `append` then continues from it. lazy: keep the
  Cholesky factor and skip the inverse (half the O(n^3) work) for a fit
  that is only queried; `append` forms the inverse when first called.
  """
  n, d = X.shape
  if capacity is not None and capacity < n:
    raise ValueError(f'from_data: capacity={capacity} cannot hold the {n} '
                     'observations given; pass capacity >= n (room for the '
                     'appends to come)')
  L = jnp.linalg.cholesky(kernel(X, u, X, u)
                          + noise_var * jnp.eye(n, dtype=X.dtype))
  post = init(capacity or n, d, X.dtype)
  post = post._replace(
      X=post.X.at[:n].set(X), u=post.u.at[:n].set(u.astype(jnp.int32)),
      y=post.y.at[:n].set(y), t=jnp.asarray(n, jnp.int32))
  if lazy:
    Lc = post.C.at[:n, :n].set(L)
    a = jax.scipy.linalg.solve_triangular(Lc, post.y, lower=True)
    return post._replace(C=None, L=Lc, a=a)
  C = jax.scipy.linalg.solve_triangular(L, jnp.eye(n, dtype=X.dtype),
                                        lower=True)
  return post._replace(C=post.C.at[:n, :n].set(C), a=post.a.at[:n].set(C @ y))


def full_posterior(X: jax.Array, u: jax.Array, y: jax.Array, Xq: jax.Array,
                   uq: jax.Array, kernel: JointKernel, noise_var: float
                   ) -> tuple[jax.Array, jax.Array]:
  """Reference O(t^3) refit: Cholesky of the full K_t + lam I."""
  K = kernel(X, u, X, u) + noise_var * jnp.eye(X.shape[0], dtype=X.dtype)
  c = jax.scipy.linalg.cho_factor(K, lower=True)
  Kq = kernel(X, u, Xq, uq)
  mean = Kq.T @ jax.scipy.linalg.cho_solve(c, y)
  var = _diag(Xq, uq, kernel) - jnp.sum(
      Kq * jax.scipy.linalg.cho_solve(c, Kq), axis=0)
  return mean, var
