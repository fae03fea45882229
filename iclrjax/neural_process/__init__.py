"""Transformer neural processes.

- Efficient Autoregressive Inference for Transformer Probabilistic Models
  (the causal autoregressive buffer), arXiv 2510.09477: `arbuffer` (the
  TNP with a Gaussian-mixture head, its training loss, one-pass joint
  log-densities, cached joint sampling, the re-encoding baseline and GP
  tasks with exact GP log-densities).

Example:
    ```python
    import jax
    from iclrjax.neural_process import arbuffer as ar

    cfg = ar.Config(d_model=32, num_layers=2, d_ff=64)
    params = ar.init(jax.random.PRNGKey(0), cfg)
    x, y, ls, noise = ar.gp_tasks(jax.random.PRNGKey(1), ar.GPPrior(),
                                  num_tasks=2, num_points=12)
    xc, yc, xt, yt = x[:, :8], y[:, :8], x[:, 8:], y[:, 8:]
    logp = ar.joint_logpdf(params, cfg, xc, yc, xt, yt)   # [2, 4], one pass
    draws = ar.sample(params, cfg, jax.random.PRNGKey(2), xc, yc, xt,
                      num_samples=3)                     # [2, 3, 4] joint
    print(logp.sum(-1), draws.shape)
    ```
"""

from iclrjax.neural_process import arbuffer
from iclrjax.neural_process.arbuffer import (Batch, Config, GPPrior, Mixture,
                                             decode_logpdf, forward,
                                             gp_logpdf, gp_tasks, init,
                                             joint_logpdf, loss,
                                             marginal_logpdf, mixture_logpdf,
                                             prefill, reencode_logpdf,
                                             reencode_sample, sample,
                                             training_mask)

__all__ = [
    'arbuffer',
    'Config', 'init', 'Batch', 'forward', 'loss', 'training_mask',
    'Mixture', 'mixture_logpdf', 'prefill', 'joint_logpdf',
    'marginal_logpdf', 'decode_logpdf', 'sample', 'reencode_logpdf',
    'reencode_sample', 'GPPrior', 'gp_tasks', 'gp_logpdf',
]
