"""The shared machinery every paper runs on (no paper of its own).

A method is two pure functions, `init(key) -> state` and
`step(state, t) -> (state, metrics)`; `train` compiles chunks of steps under
`lax.scan`, vmaps them over a leading seed axis, shards them over the
`('seeds', 'data')` mesh of `make_mesh`, and restores, checkpoints and logs
as it goes. An experiment launcher (`experiments/<name>.py`) declares an
`Experiment` whose `run(Run) -> Result` trains, evaluates and states its
`Claim`s; its config is checked against the family's constraints
(`config.validate`) before any compute runs.

- `loop`: `train`, the compiled loop (`chunk_fn`, `chunks`, `seed_keys`).
- `launch`: `Experiment`, `Run`, `Result`, `Claim`: the absl entry point.
- `config`: declarative config validation (`ConfigError` on a bad field).
- `distributed`: `make_mesh`, `shard_batch`, `data_sharding`, multi-host.
- `data`: offline TFDS datasets and `batch_indices(key, step, ...)`.
- `checkpoint`, `logging`, `supervised`, `timing`, `extras` (`require`).

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

from iclrjax.core import checkpoint
from iclrjax.core import config
from iclrjax.core import data
from iclrjax.core import distributed
from iclrjax.core import extras
from iclrjax.core import launch
from iclrjax.core import logging
from iclrjax.core import loop
from iclrjax.core import supervised
from iclrjax.core import timing
from iclrjax.core.checkpoint import Checkpointer
from iclrjax.core.config import ConfigError, validate
from iclrjax.core.data import DatasetNotFoundError, batch_indices
from iclrjax.core.distributed import (data_sharding, make_mesh,
                                      maybe_initialize, shard_batch)
from iclrjax.core.extras import MissingExtraError, require
from iclrjax.core.launch import Claim, Experiment, Result, Run
from iclrjax.core.logging import MetricWriter, mean_ci95, read_metrics
from iclrjax.core.loop import (TrainResult, chunk_fn, chunks, init_states,
                               seed_keys, train)
from iclrjax.core.supervised import make_classifier_trainer
from iclrjax.core.timing import median_time

__all__ = [
    # modules
    'checkpoint', 'config', 'data', 'distributed', 'extras', 'launch',
    'logging', 'loop', 'supervised', 'timing',
    # loop
    'train', 'TrainResult', 'chunk_fn', 'chunks', 'init_states', 'seed_keys',
    # launch
    'Experiment', 'Run', 'Result', 'Claim',
    # config
    'ConfigError', 'validate',
    # distributed
    'make_mesh', 'shard_batch', 'data_sharding', 'maybe_initialize',
    # data, extras, checkpoint, logging, supervised, timing
    'batch_indices', 'DatasetNotFoundError', 'require', 'MissingExtraError',
    'Checkpointer', 'MetricWriter', 'read_metrics', 'mean_ci95',
    'make_classifier_trainer', 'median_time',
]
