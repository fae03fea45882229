"""Multi-user GP bandits on a user graph.

- Laplacian Kernelized Bandit (LK-GP-UCB, LK-GP-TS and their baselines),
  arXiv 2601.00461: `lkgp` (user kernels, the joint kernel, the
  acquisition rules (`select`), widths, hyperparameter refits) and
  `envs` (graphs, reward regimes, rounds); the GP
  posterior is `iclrjax.kernels.gp`.

Example:
    ```python
    import jax
    import jax.numpy as jnp
    from iclrjax.bandits import envs, lkgp
    from iclrjax.kernels import gp

    with jax.enable_x64(True):
      k_graph, k_arms, k_f, k_rounds = jax.random.split(
          jax.random.PRNGKey(0), 4)
      W = envs.er_graph(k_graph, n=8, p=0.5)   # a connected user graph
      arms = jax.random.normal(k_arms, (40, 2), jnp.float64)
      F = envs.rewards(k_f, 0, W, arms, rho=0.1, arm_lengthscale=1.0,
                       gob_eta=1.0, num_anchors=10)  # regime 0: 'gp_draw'
      kernel = lkgp.joint_kernel(lkgp.user_kernel('laplacian', W, rho=0.1),
                                 1.0, 0.0, 1.0)
      post, regret = gp.init(capacity=20, dim=2), 0.0
      for t in range(20):                       # LK-GP-UCB
        ctx = envs.round_context(k_rounds, t, num_users=8, num_arms=40,
                                 num_visible=5, noise_std=0.1)
        j, l, var = lkgp.select(post, kernel, arms[ctx.visible], ctx.user,
                                rule='ucb', coef=2.0)
        arm = ctx.visible[j]
        post = gp.append(post, arms[arm], ctx.user,
                         F[ctx.user, arm] + ctx.noise, kernel, 0.01, l=l,
                         var=var)
        regret += F[ctx.user, ctx.visible].max() - F[ctx.user, arm]
      print('cumulative regret', float(regret))
    ```
"""

from iclrjax.bandits import envs
from iclrjax.bandits import lkgp
from iclrjax.bandits.envs import (Round, er_graph, rbf_graph, rewards,
                                  round_context)
from iclrjax.bandits.lkgp import (Algorithm, acquisition, coop_user_kernel,
                                  graphucb_width, joint_kernel, lk_kernel,
                                  ml_grid_fit, select, spectral_ratio_lam,
                                  user_kernel)

__all__ = [
    'envs', 'lkgp',
    'er_graph', 'rbf_graph', 'rewards', 'round_context', 'Round',
    'Algorithm', 'user_kernel', 'joint_kernel', 'lk_kernel', 'select',
    'acquisition', 'graphucb_width',
    'coop_user_kernel', 'ml_grid_fit', 'spectral_ratio_lam',
]
