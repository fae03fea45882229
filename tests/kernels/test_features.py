"""Feature maps of the RBF kernel against the kernel itself."""

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.kernels import base
from iclrjax.kernels import features


def test_random_fourier_features_estimate_the_rbf_kernel():
  x = jax.random.normal(jax.random.key(0), (20, 3))
  fm = features.random_fourier(jax.random.key(1), 3, 20000, 1.3)
  phi = features.apply(fm, x, 'rff', 1.3)
  # Monte Carlo error ~ 1 / sqrt(D) = 0.007.
  np.testing.assert_allclose(phi @ phi.T, base.rbf(x, x, 1.3), atol=0.03)


def test_nystrom_is_exact_on_its_centres_and_their_span():
  z = jax.random.normal(jax.random.key(2), (15, 2))
  fm = features.nystrom(z, 0.8, jitter=1e-9)
  with jax.default_matmul_precision('highest'):
    phi = features.apply(fm, z, 'nystrom', 0.8)
    np.testing.assert_allclose(phi @ phi.T, base.rbf(z, z, 0.8), atol=1e-4)
    # For any x: phi(x) . phi(z_j) = k(x, z_j) (the projection reproduces
    # the kernel against the dictionary).
    x = jnp.array([[0.3, -0.2], [1.5, 0.4]])
    np.testing.assert_allclose(features.apply(fm, x, 'nystrom', 0.8) @ phi.T,
                               base.rbf(x, z, 0.8), atol=1e-4)
