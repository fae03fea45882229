"""Base kernels as pure functions of two point sets.

Every kernel has the signature `k(X1 [n1, d], X2 [n2, d], **params) -> [n1, n2]`
and is differentiable in its inputs and parameters. `get(name, **params)`
returns one with its parameters bound, for code that picks a kernel by
config name.
"""

from __future__ import annotations

from collections.abc import Callable
import functools

import jax
import jax.numpy as jnp

Kernel = Callable[[jax.Array, jax.Array], jax.Array]


def sq_dist(X1: jax.Array, X2: jax.Array) -> jax.Array:
  """Pairwise squared Euclidean distances [n1, n2], clipped at 0."""
  d2 = (jnp.sum(X1**2, -1)[:, None] + jnp.sum(X2**2, -1)[None, :]
        - 2.0 * X1 @ X2.T)
  return jnp.maximum(d2, 0.0)


def rbf(X1: jax.Array, X2: jax.Array, lengthscale: float = 1.0,
        variance: float = 1.0) -> jax.Array:
  """Squared exponential: v * exp(-|x - x'|^2 / (2 l^2))."""
  return variance * jnp.exp(-0.5 * sq_dist(X1, X2) / lengthscale**2)


def matern52(X1: jax.Array, X2: jax.Array, lengthscale: float = 1.0,
             variance: float = 1.0) -> jax.Array:
  """Matern-5/2: v (1 + sqrt5 r/l + 5 r^2/(3 l^2)) exp(-sqrt5 r/l)."""
  d2 = sq_dist(X1, X2)
  # sqrt has an infinite derivative at 0; the kernel itself is smooth there.
  r = jnp.sqrt(jnp.where(d2 > 0, d2, 1.0))
  r = jnp.where(d2 > 0, r, 0.0)
  s = jnp.sqrt(5.0) * r / lengthscale
  return variance * (1.0 + s + s**2 / 3.0) * jnp.exp(-s)


def linear(X1: jax.Array, X2: jax.Array, variance: float = 1.0,
           bias: float = 0.0) -> jax.Array:
  """Linear (dot-product) kernel: v x.x' + b."""
  return variance * X1 @ X2.T + bias


KERNELS: dict[str, Kernel] = {
    'rbf': rbf,
    'matern52': matern52,
    'linear': linear,
}


def get(name: str, **params) -> Kernel:
  """The base kernel `name` with `params` bound (e.g. lengthscale=0.5)."""
  if name not in KERNELS:
    raise ValueError(f'Unknown kernel {name!r}; choose from {sorted(KERNELS)}')
  return functools.partial(KERNELS[name], **params)
