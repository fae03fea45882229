"""RKHS kernels and GP posteriors (shared by bandits and kernel RL).

`laplacian_kernel` and `multi_user_gram` are the public graph-kernel API.
"""

from iclrjax.kernels.base import get, linear, matern52, rbf, sq_dist
from iclrjax.kernels.graph import (joint_penalty, laplacian, laplacian_kernel,
                                   multi_user_gram, normalize_mean_diag)
from iclrjax.kernels import gp

__all__ = [
    'get', 'gp', 'joint_penalty', 'laplacian', 'laplacian_kernel', 'linear',
    'matern52', 'multi_user_gram', 'normalize_mean_diag', 'rbf', 'sq_dist',
]
