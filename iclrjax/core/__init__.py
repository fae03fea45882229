"""The shared machinery every paper runs on (no paper of its own).

`loop.train` compiles a method's `step(state, t) -> (state, metrics)` in
chunks, vmapped over seeds and sharded over the ('seeds', 'data') mesh; a
launcher's `launch.Experiment` runs `run(Run) -> Result` (training,
evaluation, `Claim`s) after checking its config (`config.validate`).

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
