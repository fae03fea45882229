"""RKHS kernels and GP posteriors (shared by bandits and kernel RL).

- Laplacian Kernelized Bandit, arXiv 2601.00461: the graph kernels of its
  Thm. 2.1 (`laplacian_kernel`, `multi_user_gram`, `joint_penalty`, in
  `graph`), used by `iclrjax.bandits`.
- Sampling Complexity of TD and PPO in RKHS, arXiv 2509.24991: the finite
  feature maps of its RKHS critic (`random_fourier`, `nystrom`, in
  `features`), used by `iclrjax.rl.kernel_ppo`.

`base` holds the base kernels (`rbf`, `matern52`, `linear`, `get` by name)
and `gp` an exact GP posterior with O(T^2) incremental updates.

Example:
    ```python
    import jax
    import jax.numpy as jnp
    from iclrjax import kernels
    from iclrjax.kernels import gp

    W = jnp.array([[0., 1., 0.], [1., 0., 1.], [0., 1., 0.]])  # 3 users
    K_users = kernels.normalize_mean_diag(kernels.laplacian_kernel(W, 0.1))
    kernel = gp.multi_user_kernel(K_users, kernels.get('rbf', lengthscale=0.5))
    X = jax.random.normal(jax.random.PRNGKey(0), (12, 2))
    u = jnp.arange(12) % 3                       # the user of each point
    post = gp.from_data(X, u, jnp.sin(X[:, 0]), kernel, noise_var=0.01)
    mean, var = gp.predict(post, X[:4], u[:4], kernel)
    print(mean, var)
    ```
"""

from iclrjax.kernels import base
from iclrjax.kernels import features
from iclrjax.kernels import gp
from iclrjax.kernels import graph
from iclrjax.kernels.base import get, linear, matern52, rbf, sq_dist
from iclrjax.kernels.features import FeatureMap, nystrom, random_fourier
from iclrjax.kernels.graph import (joint_penalty, laplacian, laplacian_kernel,
                                   multi_user_gram, normalize_mean_diag)

__all__ = [
    'base', 'features', 'gp', 'graph',
    'get', 'joint_penalty', 'laplacian', 'laplacian_kernel', 'linear',
    'matern52', 'multi_user_gram', 'normalize_mean_diag', 'rbf', 'sq_dist',
    'FeatureMap', 'nystrom', 'random_fourier',
]
