"""Meshes and shardings for the seed/env/batch axis, single- or multi-host.

Every experiment vmaps over a leading *seed* axis (independent runs or sweep
points). Scaling out shards that axis over a 1-D `jax.sharding.Mesh` whose
single axis is called `'seeds'`; nothing else changes, so the same program
runs on one CPU, eight GPUs or a TPU pod. Multi-host runs call
`jax.distributed.initialize()` first (`maybe_initialize`), after which
`jax.devices()` lists every host's devices and the mesh spans them all.
"""

from __future__ import annotations

import math
import os
from typing import Any

from absl import logging
import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import numpy as np

AXIS = 'seeds'

_initialized = False


def maybe_initialize(enabled: bool, **kwargs: Any) -> None:
  """Calls `jax.distributed.initialize(**kwargs)` once if `enabled`.

  On TPU pods and SLURM / Open MPI GPU clusters JAX discovers the
  coordinator and the process ids itself. Elsewhere set, on every process,
  JAX_COORDINATOR_ADDRESS (host:port of process 0), JAX_NUM_PROCESSES and
  JAX_PROCESS_ID (or pass them as kwargs). On CPU hosts the collectives go
  through gloo.
  """
  global _initialized
  if not enabled or _initialized:
    return
  for kwarg, env in (('coordinator_address', 'JAX_COORDINATOR_ADDRESS'),
                     ('num_processes', 'JAX_NUM_PROCESSES'),
                     ('process_id', 'JAX_PROCESS_ID')):
    if kwarg not in kwargs and os.environ.get(env):
      value = os.environ[env]
      kwargs[kwarg] = value if kwarg == 'coordinator_address' else int(value)
  if jax.config.jax_platforms in (None, '', 'cpu') or 'cpu' in str(
      jax.config.jax_platforms):
    jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  jax.distributed.initialize(**kwargs)
  _initialized = True
  logging.info('jax.distributed: process %d of %d, %d global devices',
               jax.process_index(), jax.process_count(), jax.device_count())


def num_shards(num_items: int, devices: list[Any] | None = None) -> int:
  """How many devices an axis of `num_items` is split over.

  The largest device count that divides `num_items`, so every device holds
  the same number of seeds and the per-seed programs are identical whatever
  the device count (seed i is the same computation on 1 or 8 devices).
  """
  n = len(devices if devices is not None else jax.devices())
  return math.gcd(num_items, n)


def make_mesh(num_items: int | None = None,
              devices: list[Any] | None = None) -> Mesh:
  """A 1-D mesh over the devices that evenly split `num_items` seeds."""
  devices = list(devices if devices is not None else jax.devices())
  k = len(devices) if num_items is None else num_shards(num_items, devices)
  if k < len(devices):
    logging.warning(
        '%d seeds do not split evenly over %d devices; using %d of them. '
        'Set num_seeds to a multiple of %d to use every device.', num_items,
        len(devices), k, len(devices))
  return Mesh(np.array(devices[:k]), (AXIS,))


def seed_sharding(mesh: Mesh) -> NamedSharding:
  """Shards the leading axis over the mesh; other axes replicated."""
  return NamedSharding(mesh, P(AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def to_host(tree: Any) -> Any:
  """Fetches a pytree as numpy; arrays spanning hosts are all-gathered.

  Leaves that are already on the host (numpy, Python scalars) pass through
  unchanged, so calling it twice is harmless.
  """

  def fetch(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return jax.device_get(x)

  return jax.tree.map(fetch, tree)


def is_main_process() -> bool:
  """Only process 0 writes files (metrics, plots, summary)."""
  return jax.process_index() == 0


def describe() -> dict[str, Any]:
  """Backend and device info for summary.json."""
  devs = jax.devices()
  return {
      'backend': jax.default_backend(),
      'devices': len(devs),
      'device_kind': devs[0].device_kind if devs else 'none',
      'processes': jax.process_count(),
  }
