"""Orbax checkpoints of the whole run state, resumed automatically.

The state pytree and the step, the whole data-iterator position (batches
are `data.batch_indices(key, step, ...)`); a SIGKILL mid-save leaves the
previous checkpoint as the latest (orbax renames a finished one into place).
"""

from __future__ import annotations

import math
import os
import pathlib
from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp

PyTree = Any


def _zeros(shape, dtype, sharding) -> jax.Array:
  z = jnp.zeros(shape, dtype)
  return jax.device_put(z, sharding) if sharding is not None else z


def _fill_empty(tree: PyTree, abstract: bool = False) -> PyTree:
  """Zero-size arrays (orbax refuses to save them; e.g. MJX's `act` of a
  model without actuator states) become one-element placeholders,
  replicated on the leaf's mesh if it has one."""

  def conv(x):
    if not hasattr(x, 'shape') or math.prod(x.shape):
      return x
    sharding = getattr(x, 'sharding', None)
    sharding = jax.sharding.NamedSharding(
        sharding.mesh, jax.sharding.PartitionSpec()) if isinstance(
            sharding, jax.sharding.NamedSharding) else None
    if abstract:
      return jax.ShapeDtypeStruct((1,), x.dtype, sharding=sharding)
    return _zeros((1,), x.dtype, sharding)

  return jax.tree.map(conv, tree)


class Checkpointer:
  """Saves and restores `{state, meta}` under `directory/<step>`."""

  def __init__(self, directory: str | os.PathLike, *, max_to_keep: int = 3,
               async_save: bool = True):
    self.directory = pathlib.Path(directory).absolute()
    self._mngr = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True,
            enable_async_checkpointing=async_save))

  def latest_step(self) -> int | None:
    return self._mngr.latest_step()

  def all_steps(self) -> list[int]:
    return list(self._mngr.all_steps())

  def save(self, step: int, state: PyTree,
           meta: dict[str, Any] | None = None, *, force: bool = False) -> bool:
    """Starts an (async) save of `state` at `step`; returns True if saved."""
    saved = self._mngr.save(int(step), force=force, args=ocp.args.Composite(
        state=ocp.args.StandardSave(_fill_empty(state)),
        meta=ocp.args.JsonSave(dict(meta or {}, step=int(step)))))
    if saved:
      logging.info('Checkpoint at step %d -> %s', step, self.directory)
    return saved

  def restore(self, abstract_state: PyTree,
              step: int | None = None) -> tuple[PyTree, dict[str, Any]]:
    """(state, meta) at `step` (default: the latest), with the shapes,
    dtypes and shardings of `abstract_state` (`jax.ShapeDtypeStruct`s)."""
    step = self.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(f'No checkpoint in {self.directory}')
    out = self._mngr.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(
            _fill_empty(abstract_state, abstract=True)),
        meta=ocp.args.JsonRestore()))
    logging.info('Restored checkpoint at step %d from %s', step,
                 self.directory)
    state = jax.tree.map(  # the zero-size leaves back in place
        lambda r, a: _zeros(a.shape, a.dtype, getattr(a, 'sharding', None))
        if math.prod(a.shape) == 0 else r, out['state'], abstract_state)
    return state, dict(out['meta'])

  def wait(self) -> None:
    """Blocks until async saves are on disk."""
    self._mngr.wait_until_finished()

  def close(self) -> None:
    self._mngr.wait_until_finished()
    self._mngr.close()


def abstract_like(tree: PyTree) -> PyTree:
  """`ShapeDtypeStruct`s (keeping shardings) of a pytree of arrays."""
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(
      x.shape, x.dtype, sharding=getattr(x, 'sharding', None)), tree)
