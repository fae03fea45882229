"""Statistical learning: weak-to-strong generalization, data mixtures, SGD.

- Weak-to-strong generalization under spurious correlations (W2S,
  Enhanced-W2S), arXiv 2509.24005: `w2s` (the Gaussian feature model's
  simulations and closed forms; Enhanced-W2S on frozen features) and
  `datasets` (the offline spurious-digits benchmark).
- FastMix: Fast Data Mixture Optimization via Gradient Descent, arXiv
  2606.14971: `fastmix` (the bilevel search, DoReMi and RegMix; RegMix
  needs the `stats` extra).
- Almost Bayesian: the fractal dynamics of stochastic gradient descent,
  arXiv 2503.22478: `sgd_llc` (the local learning coefficient by SGLD,
  which needs the `stats` extra, and the diffusion-exponent fits).

Example:
    ```python
    import jax
    import jax.numpy as jnp
    from iclrjax.stats import sgd_llc, w2s

    geom = w2s.make_geometry(jax.random.PRNGKey(0), d_z=8, p=16, p_t=4,
                             p_s=2, mu_t=4.0)
    kw = dict(n=400, big_n=4000, eta_l=0.1, eta_u=0.3, eta_t=0.5)
    print(w2s.simulate(jax.random.PRNGKey(1), geom, **kw))  # one draw
    print(w2s.closed_form(geom, **kw))        # teacher / student excess risk

    # The LLC of least squares at its minimum (SGLD: the `stats` extra).
    X = jax.random.normal(jax.random.PRNGKey(2), (256, 3))
    data = (X, X @ jnp.ones(3))
    loss = lambda w, ex: sgd_llc.gaussian_nll(ex[0] @ w, ex[1])
    w_star = sgd_llc.minimise(loss, jnp.zeros(3), data, num_steps=200, lr=0.1)
    est = sgd_llc.estimate_llc(jax.random.PRNGKey(3), loss, w_star, data,
                               num_chains=4, num_steps=500, num_burnin=200,
                               batch_size=64, step_size=1e-3, gamma=1.0)
    print(float(est.llc))   # 1.29 (short chains); d / 2 = 1.5 is the limit
    ```
"""

from iclrjax.stats import datasets
from iclrjax.stats import fastmix
from iclrjax.stats import sgd_llc
from iclrjax.stats import w2s
from iclrjax.stats.datasets import SpuriousDigits, load_spurious_digits
from iclrjax.stats.fastmix import (DoremiState, SearchState, doremi_step,
                                   init_search, inner_step, mixed_loss,
                                   outer_grad, regmix_fit, regmix_search,
                                   search_step, source_losses, z_optimizer)
from iclrjax.stats.sgd_llc import (LLCEstimate, displacement_exponent,
                                   dln_learning_coefficient, estimate_llc,
                                   minimise, regular_llc, spectral_dimension)
from iclrjax.stats.w2s import (Geometry, Head, Risks, closed_form,
                               confident_subset, enhanced_w2s, fit_head,
                               gce_loss, make_geometry, quoted_limit,
                               simulate)

__all__ = [
    'datasets', 'fastmix', 'sgd_llc', 'w2s',
    # W2S
    'make_geometry', 'Geometry', 'simulate', 'closed_form', 'quoted_limit',
    'Risks', 'Head', 'fit_head', 'gce_loss', 'confident_subset',
    'enhanced_w2s', 'load_spurious_digits', 'SpuriousDigits',
    # FastMix
    'init_search', 'search_step', 'SearchState', 'inner_step', 'outer_grad',
    'mixed_loss', 'source_losses', 'z_optimizer', 'doremi_step',
    'DoremiState', 'regmix_fit', 'regmix_search',
    # SGD and the LLC
    'estimate_llc', 'LLCEstimate', 'minimise', 'regular_llc',
    'dln_learning_coefficient', 'displacement_exponent',
    'spectral_dimension',
]
