"""Causal-effect estimators.

- Debiased front-door learners for heterogeneous effects (FD-PI, FD-DR,
  FD-R, FD-R3), arXiv 2509.22531: `frontdoor`. Nuisance learners: linear
  (IRLS / ridge), a JAX MLP, or XGBoost (the `causal` extra).

Example:
    ```python
    import jax
    from iclrjax.causal import frontdoor

    data = frontdoor.simulate(jax.random.PRNGKey(0), n=1000)  # C, X, Z, Y, tau
    tau_hat = frontdoor.estimate_two_fold(jax.random.PRNGKey(1), data)
    for name, t in tau_hat.items():    # 'fd_pi', 'fd_dr', 'fd_r'
      print(name, float(frontdoor.rmse(t, data.tau)))
    ```
"""

from iclrjax.causal import frontdoor
from iclrjax.causal.frontdoor import (Data, Nuisances, Params,
                                      estimate_fd_r3, estimate_two_fold,
                                      fd_pi, fd_pseudo_outcome, fit_linear,
                                      linear_learner, make_params,
                                      mlp_learner, predict_linear, rmse,
                                      simulate, true_tau, xgb_learner, zeta)

__all__ = [
    'frontdoor',
    'simulate', 'make_params', 'true_tau', 'Data', 'Params', 'Nuisances',
    'estimate_two_fold', 'estimate_fd_r3', 'fd_pi', 'fd_pseudo_outcome',
    'zeta', 'fit_linear', 'predict_linear', 'linear_learner', 'mlp_learner',
    'xgb_learner', 'rmse',
]
