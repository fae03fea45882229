"""The shared machinery every paper runs on (no paper of its own).

A method is `init(key) -> state` and `step(state, t) -> (state, metrics)`;
`loop.train` compiles chunks of steps under `lax.scan`, vmaps them over
seeds, shards them over the `('seeds', 'data')` mesh of
`distributed.make_mesh`, and restores, checkpoints and logs as it goes. A
launcher declares a `launch.Experiment` whose `run(Run) -> Result` trains,
evaluates and states its `Claim`s, its config checked first
(`config.validate`).

Example:
    ```python
    import jax.numpy as jnp
    from iclrjax import core

    def init(key):                     # one seed's state
      return {'w': jnp.zeros(3)}

    def step(state, t):                # one step -> (state, metrics)
      w = state['w'] + 0.1 * (1.0 - state['w'])
      return {'w': w}, {'loss': jnp.sum((w - 1.0) ** 2)}

    mesh = core.make_mesh(num_seeds=2)  # ('seeds', 'data') over all devices
    result = core.train(init, step, seed=0, num_seeds=2, num_steps=50,
                        chunk_size=25, mesh=mesh, progress=False)
    print(result.state['w'].shape)     # (2, 3): one row per seed
    ```
"""

from iclrjax.core import (checkpoint, config, data, distributed, extras,
                          launch, logging, loop, supervised)
from iclrjax.core.checkpoint import Checkpointer
from iclrjax.core.config import ConfigError, validate
from iclrjax.core.data import DatasetNotFoundError, batch_indices
from iclrjax.core.distributed import data_sharding, make_mesh, shard_batch
from iclrjax.core.extras import require
from iclrjax.core.launch import Claim, Experiment, Result, Run
from iclrjax.core.logging import MetricWriter
from iclrjax.core.loop import TrainResult, train

__all__ = [
    'Checkpointer', 'Claim', 'ConfigError', 'DatasetNotFoundError',
    'Experiment', 'MetricWriter', 'Result', 'Run', 'TrainResult',
    'batch_indices', 'data_sharding', 'make_mesh', 'require', 'shard_batch',
    'train', 'validate',
]
