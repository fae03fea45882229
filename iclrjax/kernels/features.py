"""Finite feature maps of the RBF kernel: phi(x) . phi(x') ~ k(x, x').

* Random Fourier features (Rahimi & Recht 2007): by Bochner's theorem
  k(x, x') = E_w[cos(w.(x - x'))] with w ~ N(0, I / l^2), so
  phi(x) = sqrt(2 / D) cos(x W + b), W [d, D] ~ N(0, 1 / l^2),
  b ~ U[0, 2 pi), is an unbiased D-feature estimate.
* Nystrom (Williams & Seeger 2001): with centres Z [D, d],
  phi(x) = k(x, Z) K_ZZ^{-1/2}, so phi(x) . phi(x') =
  k(x, Z) K_ZZ^{-1} k(Z, x'), exact on the span of the centres.

Both return a `FeatureMap` (a pytree of arrays) and share `apply`, so code
that holds one in a scanned state picks the map by config name.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from iclrjax.kernels import base

KINDS = ('rff', 'nystrom')


class FeatureMap(NamedTuple):
  """RFF: omega = W [d, D], bias = b [D], whiten unused ([1, 1]).
  Nystrom: omega = centres Z [D, d], whiten = K_ZZ^{-1/2} [D, D]."""

  omega: jax.Array
  bias: jax.Array
  whiten: jax.Array


def random_fourier(key: jax.Array, dim: int, num_features: int,
                   lengthscale: float) -> FeatureMap:
  """`num_features` random Fourier features of the RBF kernel of
  `lengthscale` on R^dim (apply with `apply(fm, x, 'rff', lengthscale)`)."""
  k_w, k_b = jax.random.split(key)
  omega = jax.random.normal(k_w, (dim, num_features)) / lengthscale
  bias = jax.random.uniform(k_b, (num_features,), maxval=2 * jnp.pi)
  return FeatureMap(omega, bias, jnp.eye(1))


def nystrom(centres: jax.Array, lengthscale: float,
            jitter: float = 1e-6) -> FeatureMap:
  """The Nystrom map of the RBF kernel on `centres` [D, d]."""
  D = centres.shape[0]
  K = base.rbf(centres, centres, lengthscale)
  evals, evecs = jnp.linalg.eigh(K + jitter * jnp.eye(D))
  whiten = evecs @ jnp.diag(evals**-0.5) @ evecs.T
  return FeatureMap(centres, jnp.zeros((D,)), whiten)


def apply(fm: FeatureMap, x: jax.Array, kind: str,
          lengthscale: float) -> jax.Array:
  """phi(x) [..., D] for x [..., d] under the map of `kind`."""
  if kind == 'rff':
    D = fm.bias.shape[0]
    return jnp.sqrt(2.0 / D) * jnp.cos(x @ fm.omega + fm.bias)
  if kind == 'nystrom':
    d2 = jnp.sum((x[..., None, :] - fm.omega)**2, -1)
    return jnp.exp(-0.5 * d2 / lengthscale**2) @ fm.whiten
  raise ValueError(f'kind must be one of {KINDS}, got {kind!r}')
