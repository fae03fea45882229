"""Templates for adding a paper (no paper of their own).

- Minibatch least squares vs the normal equations (template, no arXiv id):
  `linreg`, the smallest method that uses every piece of `iclrjax.core`.

Example:
    ```python
    import jax.numpy as jnp
    import ml_collections
    from iclrjax import core
    from iclrjax.examples import linreg

    cfg = ml_collections.ConfigDict(dict(
        num_examples=64, dim=4, noise=0.1, batch_size=16, optimizer='adam',
        learning_rate=0.05, num_steps=300))
    result = core.train(linreg.make_init(cfg), linreg.make_step(cfg), seed=0,
                        num_seeds=2, num_steps=cfg.num_steps, chunk_size=100,
                        progress=False)
    s = result.state                   # linreg.State, leading seed axis
    err = jnp.linalg.norm(s.w - s.w_ols, axis=-1) / jnp.linalg.norm(
        s.w_ols, axis=-1)
    print(err)                         # relative distance to OLS, per seed
    ```
"""

from iclrjax.examples import linreg
from iclrjax.examples.linreg import (State, check_config, config_schema,
                                     make_init, make_optimizer, make_step,
                                     ols)

__all__ = [
    'linreg',
    'State', 'check_config', 'config_schema', 'make_init', 'make_optimizer',
    'make_step', 'ols',
]
