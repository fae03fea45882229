"""Orbax checkpoints of the whole run state, resumed automatically.

What is saved is one pytree: everything a step needs (params, optimizer
state, raw uint32 PRNG keys, replay buffers, bandit histories, ...) plus the
step counter. Data in iclrjax is a pure function of (key, step) -- batches
are drawn by `core.data.batch_indices(key, step, ...)` -- so the step *is*
the data-iterator position. A small JSON side-record stores Python-side
metadata (e.g. the config hash) next to the arrays.

Orbax writes each checkpoint into a temporary directory and renames it when
complete, so a SIGKILL mid-save leaves the previous checkpoint as the latest
one; `max_to_keep` bounds disk use.
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


def _empty(x) -> bool:
  return hasattr(x, 'shape') and math.prod(x.shape) == 0


def _placeholder_sharding(x) -> jax.sharding.Sharding | None:
  """Replicated on the leaf's mesh (so a meshed run saves and restores the
  placeholder like its other leaves), else the default placement."""
  sharding = getattr(x, 'sharding', None)
  if isinstance(sharding, jax.sharding.NamedSharding):
    return jax.sharding.NamedSharding(sharding.mesh,
                                      jax.sharding.PartitionSpec())
  return None


def _fill_empty(tree: PyTree, abstract: bool = False) -> PyTree:
  """Zero-size arrays (orbax refuses to save them; e.g. MJX's `act` of a
  model without actuator states) become one-element placeholders."""

  def conv(x):
    if not _empty(x):
      return x
    sharding = _placeholder_sharding(x)
    if abstract:
      return jax.ShapeDtypeStruct((1,), x.dtype, sharding=sharding)
    z = jnp.zeros((1,), x.dtype)
    return jax.device_put(z, sharding) if sharding is not None else z

  return jax.tree.map(conv, tree)


def _restore_empty(restored: PyTree, abstract: PyTree) -> PyTree:
  """Puts the zero-size arrays of `abstract` back in place of their
  placeholders."""

  def conv(r, a):
    if not _empty(a):
      return r
    z = jnp.zeros(a.shape, a.dtype)
    sharding = getattr(a, 'sharding', None)
    return jax.device_put(z, sharding) if sharding is not None else z

  return jax.tree.map(conv, restored, abstract)


class Checkpointer:
  """Saves and restores `{state, meta}` under `workdir/checkpoints/<step>`."""

  def __init__(self, directory: str | os.PathLike, *, max_to_keep: int = 3,
               async_save: bool = True):
    self.directory = pathlib.Path(directory).absolute()
    self._mngr = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep,
            create=True,
            enable_async_checkpointing=async_save,
        ),
    )

  def latest_step(self) -> int | None:
    return self._mngr.latest_step()

  def all_steps(self) -> list[int]:
    return list(self._mngr.all_steps())

  def save(self, step: int, state: PyTree,
           meta: dict[str, Any] | None = None, *, force: bool = False) -> bool:
    """Starts an (async) save of `state` at `step`; returns True if saved."""
    saved = self._mngr.save(
        int(step),
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(_fill_empty(state)),
            meta=ocp.args.JsonSave(dict(meta or {}, step=int(step))),
        ),
        force=force,
    )
    if saved:
      logging.info('Checkpoint at step %d -> %s', step, self.directory)
    return saved

  def restore(self, abstract_state: PyTree,
              step: int | None = None) -> tuple[PyTree, dict[str, Any]]:
    """Restores (state, meta) at `step` (default: latest).

    Args:
      abstract_state: a pytree of `jax.ShapeDtypeStruct` (with shardings)
        like the saved state, e.g. from `jax.eval_shape`; arrays come back
        with those shapes, dtypes and shardings.
      step: which checkpoint; default the latest.
    """
    step = self.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(f'No checkpoint in {self.directory}')
    out = self._mngr.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(
                _fill_empty(abstract_state, abstract=True)),
            meta=ocp.args.JsonRestore(),
        ),
    )
    logging.info('Restored checkpoint at step %d from %s', step,
                 self.directory)
    return _restore_empty(out['state'], abstract_state), dict(out['meta'])

  def wait(self) -> None:
    """Blocks until async saves are on disk."""
    self._mngr.wait_until_finished()

  def close(self) -> None:
    self._mngr.wait_until_finished()
    self._mngr.close()


def abstract_like(tree: PyTree) -> PyTree:
  """`ShapeDtypeStruct`s (keeping shardings) of a pytree of arrays."""

  def conv(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype,
                                sharding=getattr(x, 'sharding', None))

  return jax.tree.map(conv, tree)
