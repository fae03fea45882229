"""Minibatch least squares (the core template experiment).

  python -m experiments.linreg --config=configs/linreg.py:smoke --workdir=/tmp/linreg

Variants: `smoke` (CI, seconds), default (CPU, seconds), `paper` (larger
problem, many seeds; meant for an accelerator). Pass criterion: the relative
distance to the closed-form least-squares solution is below `tolerance` on
every seed.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in ('smoke', 'default', 'paper'):
    raise ValueError(f'Unknown variant {arg!r}: use smoke, default or paper '
                     '(e.g. --config=configs/linreg.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 4               # vmapped; sharded over devices
  c.num_examples = 256          # per seed
  c.dim = 8
  c.noise = 0.1
  c.batch_size = 32
  c.optimizer = 'adam'
  c.learning_rate = 0.05
  c.num_steps = 2000
  c.chunk_size = 100            # steps per compiled scan call
  c.checkpoint_every = 5        # chunks
  c.keep_checkpoints = 3
  c.tolerance = 1e-2            # max relative error to the OLS solution
  c.distributed = False         # jax.distributed.initialize() (multi-host)
  if variant == 'smoke':
    c.num_steps = 600
    c.chunk_size = 50
    c.checkpoint_every = 3
    c.tolerance = 5e-2
  elif variant == 'paper':
    c.num_seeds = 64
    c.num_examples = 65536
    c.dim = 512
    c.batch_size = 1024
    c.learning_rate = 0.01
    c.num_steps = 20000
    c.chunk_size = 1000
  return c
