"""The device mesh `('seeds', 'data')`, shardings, and multi-host set-up.

The mesh spans every device of every process: 'seeds' takes gcd(num_seeds,
device count) devices and 'data' the rest (8 devices: 8 seeds are (8, 1),
10 seeds (2, 4), 1 seed (1, 8)). A step marks its batch with `shard_batch`
and XLA splits it over 'data'; `maybe_initialize` sets up multi-host.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any

from absl import logging
import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import numpy as np

SEEDS = 'seeds'
DATA = 'data'
AXES = (SEEDS, DATA)

_initialized = False


def maybe_initialize(enabled: bool, **kwargs: Any) -> None:
  """Calls `jax.distributed.initialize(**kwargs)` once if `enabled`.

  JAX finds the coordinator itself on TPU pods, SLURM and Open MPI; else set
  JAX_COORDINATOR_ADDRESS (process 0's host:port), JAX_NUM_PROCESSES and
  JAX_PROCESS_ID on every process. CPU collectives go through gloo.
  """
  global _initialized
  if not enabled or _initialized:
    return
  for kwarg, env, conv in (
      ('coordinator_address', 'JAX_COORDINATOR_ADDRESS', str),
      ('num_processes', 'JAX_NUM_PROCESSES', int),
      ('process_id', 'JAX_PROCESS_ID', int)):
    if kwarg not in kwargs and os.environ.get(env):
      kwargs[kwarg] = conv(os.environ[env])
  if 'cpu' in (jax.config.jax_platforms or 'cpu'):
    jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  jax.distributed.initialize(**kwargs)
  _initialized = True
  logging.info('jax.distributed: process %d of %d, %d global devices',
               jax.process_index(), jax.process_count(), jax.device_count())


def mesh_shape(num_seeds: int, num_devices: int) -> tuple[int, int]:
  """(seeds, data) sizes: seeds take gcd(num_seeds, devices), data the rest."""
  if num_seeds < 1 or num_devices < 1:
    raise ValueError(f'need num_seeds >= 1 and num_devices >= 1, got '
                     f'{num_seeds}, {num_devices}')
  k = math.gcd(num_seeds, num_devices)
  return k, num_devices // k


def make_mesh(num_seeds: int = 1, devices: list[Any] | None = None) -> Mesh:
  """The ('seeds', 'data') mesh over `devices` (default: every device)."""
  devices = list(devices if devices is not None else jax.devices())
  k, m = mesh_shape(num_seeds, len(devices))
  mesh = Mesh(np.array(devices).reshape(k, m), AXES)
  check_covers_processes(mesh)
  return mesh


def check_covers_processes(mesh: Mesh) -> None:
  """A clear error unless every process owns a device of `mesh`."""
  owners = {d.process_index for d in mesh.devices.flat}
  missing = sorted(set(range(jax.process_count())) - owners)
  if missing:
    raise ValueError(
        f'the mesh {dict(mesh.shape)} leaves out process(es) {missing}: a '
        'multi-host run must use devices of every process (build the mesh '
        'from jax.devices())')


def mesh_size(mesh: Mesh | None) -> dict[str, int]:
  """{'seeds': k, 'data': m} of a mesh (None: one device)."""
  return {a: 1 if mesh is None else int(mesh.shape[a]) for a in AXES}


def seed_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (seed) axis over 'seeds'; replicated over 'data'."""
  return NamedSharding(mesh, P(SEEDS))


def replicated(mesh: Mesh) -> NamedSharding:
  """Every array on every device."""
  return NamedSharding(mesh, P())


def data_sharding(mesh: Mesh, x: Any) -> NamedSharding:
  """Leading (example) axis of a shared array (a training split) over
  'data' if it divides evenly, else replicated."""
  m, shape = mesh.shape[DATA], np.shape(x)
  return NamedSharding(mesh, P(DATA) if m > 1 and shape and shape[0] % m == 0
                       else P())


def put_data(mesh: Mesh | None, tree: Any) -> Any:
  """Places a pytree of shared arrays with `data_sharding` (None: as is);
  every process passes the same host values and takes its own shards."""
  if mesh is None:
    return jax.tree.map(jax.numpy.asarray, tree)
  return jax.tree.map(
      lambda x: jax.device_put(np.asarray(x), data_sharding(mesh, x)), tree)


class BatchSplitError(ValueError):
  """A batch axis does not divide the mesh's data axis (one line: sizes, fix)."""


_RECORDERS: list[list[int]] = []


@contextlib.contextmanager
def record_splits():
  """Yields a list of the size of every batch axis `shard_batch` marks
  while tracing inside the block (what `Run.train` records per phase)."""
  sizes: list[int] = []
  _RECORDERS.append(sizes)
  try:
    yield sizes
  finally:
    _RECORDERS.remove(sizes)


def shard_batch(tree: Any, axis: int = 0) -> Any:
  """Marks `axis` of every leaf (a minibatch, an env batch) as the batch
  axis, split over 'data'; the identity outside a mesh context.

  Raises:
    BatchSplitError: the batch does not divide the data axis (the work would
      otherwise be replicated on every device while the mesh claims a split).
  """
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or DATA not in mesh.axis_names:
    return tree
  m = mesh.shape[DATA]

  def constrain(x):
    if not hasattr(x, 'shape') or x.ndim <= axis or x.shape[axis] == 1:
      return x  # a batch of one is no batch axis
    n = x.shape[axis]
    for sizes in _RECORDERS:
      sizes.append(n)
    if m == 1:
      return x
    if n % m:
      raise BatchSplitError(
          f'a batch axis of size {n} does not split over the mesh\'s data '
          f'axis of {m} devices: make that batch size a multiple of {m}, or '
          'run on a device count that divides it')
    spec = [None] * x.ndim
    spec[axis] = DATA
    return jax.lax.with_sharding_constraint(x, P(*spec))

  return jax.tree.map(constrain, tree)


def split_record(sizes: list[int], mesh: Mesh | None) -> dict[str, Any]:
  """What a phase did with the data axis, for summary.json."""
  m = mesh_size(mesh)[DATA]
  batches = sorted(set(sizes))
  if not batches:
    how = 'no batch axis' + (
        ': every device of the data axis runs the same work' if m > 1 else '')
  else:
    how = f'batch {"/".join(map(str, batches))} ' + (
        f'split over {m} devices' if m > 1 else 'on one device')
  return {'data': m, 'batch': batches, 'split': bool(batches) and m > 1,
          'how': how}


def to_host(tree: Any) -> Any:
  """Fetches a pytree as numpy; arrays spanning hosts are all-gathered
  (leaves already on the host pass through)."""

  def fetch(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return jax.device_get(x)

  return jax.tree.map(fetch, tree)


def describe(mesh: Mesh | None = None) -> dict[str, Any]:
  """Backend, devices and the mesh actually used, for summary.json."""
  devs = list(mesh.devices.flat) if mesh is not None else jax.devices()[:1]
  return {
      'backend': jax.default_backend(),
      'devices': len(devs),
      'device_kind': devs[0].device_kind if devs else 'none',
      'processes': jax.process_count(),
      'mesh': mesh_size(mesh),
      'host_cpus': os.cpu_count(),
  }
