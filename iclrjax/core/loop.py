"""The canonical compiled training loop: `scan` over steps, `vmap` over seeds.

A method is `init(key) -> state` (one seed) and `step(state, t[, data]) ->
(state, metrics)`, t the int32 step index from which `step` draws its
minibatch, `data` a training split passed as an argument of the program.
`chunk_fn` compiles `chunk_size` steps, vmapped over seeds on the ('seeds',
'data') mesh; `chunks` yields after each chunk; `train` adds restore,
metrics.jsonl, progress and checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
import dataclasses
import os
import signal
import time
from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.core import checkpoint as ckpt_lib
from iclrjax.core import distributed
from iclrjax.core import logging as log_lib

PyTree = Any
InitFn = Callable[[jax.Array], PyTree]
StepFn = Callable[..., tuple[PyTree, Mapping[str, jax.Array]]]

# Preemption tests only: SIGKILL after logging (maybe before checkpointing)
# the chunk that completes this step.
FAULT_ENV = 'ICLRJAX_FAULT_KILL_AT_STEP'


def seed_keys(seed: int, num_seeds: int, first: int = 0,
              ids: Sequence[int] | None = None) -> jax.Array:
  """Raw uint32 keys [num_seeds, 2]; key i = fold_in(PRNGKey(seed), ids[i])
  (ids default: first, first + 1, ...)."""
  ids = np.arange(first, first + num_seeds) if ids is None else ids
  if len(ids) != num_seeds:
    raise ValueError(f'seed_ids has {len(ids)} entries, num_seeds={num_seeds}')
  base = jax.random.PRNGKey(seed)
  return jax.vmap(lambda i: jax.random.fold_in(base, i))(
      jnp.asarray(np.asarray(ids, np.uint32)))


def init_states(init_fn: InitFn, keys: jax.Array,
                mesh: jax.sharding.Mesh | None = None,
                init_args: PyTree | None = None) -> PyTree:
  """`vmap(init_fn)(keys[, init_args])`, created in its seed sharding."""
  args = (keys,) if init_args is None else (keys, init_args)
  # lax.map, not vmap: a vmapped orthogonal initialiser becomes a batched
  # LAPACK QR, which now and then deadlocks jaxlib 0.10.2's 2-thread CPU
  # pool; and each seed's state does not depend on how many seeds run.
  vinit = lambda *a: jax.lax.map(lambda x: init_fn(*x), a)
  if mesh is None:
    return jax.jit(vinit)(*args)
  sharding = distributed.seed_sharding(mesh)
  args = jax.device_put(args, sharding)
  with jax.set_mesh(mesh):
    return jax.jit(vinit, out_shardings=sharding)(*args)


def abstract_states(init_fn: InitFn, keys: jax.Array,
                    mesh: jax.sharding.Mesh | None = None,
                    init_args: PyTree | None = None) -> PyTree:
  """Shapes/dtypes (and shardings) of `init_states` without computing it."""
  args = (keys,) if init_args is None else (keys, init_args)
  shapes = jax.eval_shape(jax.vmap(init_fn), *args)
  if mesh is None:
    return shapes
  sharding = distributed.seed_sharding(mesh)
  return jax.tree.map(
      lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
      shapes)


def chunk_fn(step_fn: StepFn, chunk_size: int,
             mesh: jax.sharding.Mesh | None = None, *,
             donate: bool = True, unroll: int | bool = 1,
             compiler_options: dict[str, Any] | None = None
             ) -> Callable[..., Any]:
  """f(states, start[, data]) -> (states, metrics [num_seeds, chunk_size]):
  `chunk_size` steps of `step_fn` from step `start` for every seed.

  `unroll` is `lax.scan`'s (XLA:CPU runs convolutions inside a while loop
  ~20x slower than unrolled ones). `compiler_options`: XLA options of this
  compile (`jax.jit`'s), e.g. {'xla_backend_optimization_level': 2}.
  """

  def one_seed(state, start, data):
    ts = start + jnp.arange(chunk_size, dtype=jnp.int32)
    body = step_fn if data is None else (lambda s, t: step_fn(s, t, data))
    return jax.lax.scan(body, state, ts, unroll=unroll)

  spmd = distributed.SEEDS if mesh is not None else None

  def chunk(states, start, data=None):
    return jax.vmap(one_seed, in_axes=(0, None, None),
                    spmd_axis_name=spmd)(states, start, data)

  kwargs = {'donate_argnums': (0,)} if donate else {}
  if compiler_options:
    kwargs['compiler_options'] = compiler_options
  if mesh is None:
    return jax.jit(chunk, **kwargs)
  sharding = distributed.seed_sharding(mesh)
  jitted = jax.jit(chunk, out_shardings=(sharding, sharding), **kwargs)

  def in_mesh(fn):  # shard_batch reads the mesh while tracing
    def call(states, start, data=None):
      with jax.set_mesh(mesh):
        return fn(states, start, data)
    return call

  run = in_mesh(jitted)
  run.lower = in_mesh(jitted.lower)
  return run


@dataclasses.dataclass
class Chunk:
  """One finished chunk: steps [start, end) are done."""

  start: int
  end: int
  state: PyTree
  metrics: dict[str, np.ndarray]  # each [num_seeds, end - start], on host


def chunks(step_fn: StepFn, state: PyTree, *, start_step: int,
           num_steps: int, chunk_size: int,
           mesh: jax.sharding.Mesh | None = None,
           data: PyTree | None = None,
           unroll: int | bool = 1,
           compiler_options: dict[str, Any] | None = None
           ) -> Iterator[Chunk]:
  """Runs steps [start_step, num_steps) chunk by chunk, yielding each (a
  shorter last chunk compiles once more)."""
  compiled: dict[int, Callable[..., Any]] = {}
  if data is not None:
    data = distributed.put_data(mesh, data)
  step = start_step
  while step < num_steps:
    size = min(chunk_size, num_steps - step)
    if size not in compiled:
      compiled[size] = chunk_fn(step_fn, size, mesh, unroll=unroll,
                                compiler_options=compiler_options)
    state, metrics = compiled[size](state, jnp.int32(step), data)
    metrics = distributed.to_host(metrics)
    yield Chunk(step, step + size, state,
                {k: np.asarray(v) for k, v in metrics.items()})
    step += size


@dataclasses.dataclass
class TrainResult:
  """What `train` returns. steps_per_s: over the chunks after the first
  (which compiles); None when fewer than two ran in this process."""

  state: PyTree          # final states, leading seed axis
  num_steps: int
  resumed_from: int | None  # step restored from a checkpoint, or None
  steps_per_s: float | None = None


def train(init_fn: InitFn, step_fn: StepFn, *, seed: int, num_seeds: int,
          num_steps: int, chunk_size: int, first_seed: int = 0,
          seed_ids: Sequence[int] | None = None,
          init_args: PyTree | None = None, phase: str | None = None,
          mesh: jax.sharding.Mesh | None = None, data: PyTree | None = None,
          writer: log_lib.MetricWriter | None = None,
          checkpointer: ckpt_lib.Checkpointer | None = None,
          checkpoint_every: int = 1, log_every: int | None = None,
          progress: bool | None = None, desc: str = 'train',
          postfix_keys: tuple[str, ...] = (),
          unroll: int | bool = 1,
          compiler_options: dict[str, Any] | None = None) -> TrainResult:
  """Runs (or resumes) a whole training run; the canonical driver.

  Args:
    seed: row i of the seed axis uses `fold_in(PRNGKey(seed), seed_ids[i])`
      (default first_seed + i; a sweep repeats them: [0, 1, 0, 1]).
    init_args: per-row arguments, passed as init_fn(key, args).
    phase: names one of several training runs: metrics "<phase>/<key>".
    mesh: the ('seeds', 'data') mesh of `make_mesh` (None: one device).
    data: arrays shared by every seed, passed as `step_fn(state, t, data)`.
    writer: a row (step t + 1) every `log_every` steps (default: per chunk).
    checkpointer: restores the latest checkpoint (truncating the writer's
      rows to it), saves at the end and every `checkpoint_every` chunks.
    postfix_keys: metrics shown (seed mean) beside the progress bar.
    unroll, compiler_options: the training chunk's (`chunk_fn`).
  """
  keys = seed_keys(seed, num_seeds, first_seed, seed_ids)
  start, resumed_from = 0, None
  if checkpointer is not None and checkpointer.latest_step() is not None:
    abstract = abstract_states(init_fn, keys, mesh, init_args)
    state, meta = checkpointer.restore(abstract)
    start = resumed_from = int(meta['step'])
    logging.info('Resuming %s from step %d of %d', desc, start, num_steps)
  else:
    state = init_states(init_fn, keys, mesh, init_args)
  if writer is not None:  # rows logged after the restored step (or after 0)
    writer.truncate(start, phase=phase)
  prefix = f'{phase}/' if phase else ''

  log_every = log_every or chunk_size
  bar = log_lib.Progress(num_steps, start, desc=desc,
                         quiet=None if progress is None else not progress)
  n_chunks, steady = 0, None  # steady: (time, step) after the first chunk
  try:
    for chunk in chunks(step_fn, state, start_step=start, num_steps=num_steps,
                        chunk_size=chunk_size, mesh=mesh, data=data,
                        unroll=unroll, compiler_options=compiler_options):
      state = chunk.state
      n_chunks += 1
      metrics = chunk.metrics
      done = np.arange(chunk.start, chunk.end) + 1  # steps completed
      keep = (done % log_every == 0) | (done == num_steps)
      if writer is not None and keep.any():
        writer.write_rows(done[keep].tolist(),
                          {prefix + k: v[:, keep] for k, v in metrics.items()},
                          phase=phase)
      if chunk.end >= int(os.environ.get(FAULT_ENV) or num_steps + 1):
        logging.warning('Fault injection: SIGKILL at step %d', chunk.end)
        os.kill(os.getpid(), signal.SIGKILL)
      final = chunk.end >= num_steps
      if checkpointer is not None and (final or (
          checkpoint_every and n_chunks % checkpoint_every == 0)):
        checkpointer.save(chunk.end, state, force=final)
      bar.update(chunk.end - chunk.start, {
          k: float(np.mean(metrics[k][:, -1])) for k in postfix_keys
          if k in metrics
      })
      if n_chunks == 1:
        steady = (time.perf_counter(), chunk.end)
  finally:
    bar.close()
    if checkpointer is not None:
      checkpointer.wait()
    if writer is not None:
      writer.flush()
  speed = None if n_chunks < 2 else (
      (chunk.end - steady[1]) / (time.perf_counter() - steady[0]))
  return TrainResult(state, num_steps, resumed_from, speed)


@dataclasses.dataclass
class Program:
  """One jitted function of an experiment at its config's shapes, not run,
  for `benchmarks/paper_variants.py`: `fn(*args)` is called `calls` times
  for `steps` training steps each; `batch_axis`: whether it marks a batch
  with `shard_batch`; `init(mesh)`: concrete `args` (seeds 0.., step 0)."""

  name: str
  fn: Callable[..., Any]
  args: tuple[Any, ...]
  calls: int = 1
  steps: int = 0
  params: int = 0
  batch_axis: bool = True
  note: str = ''
  init: Callable[[jax.sharding.Mesh | None], tuple[Any, ...]] | None = None


def shapes(tree: PyTree, mesh: jax.sharding.Mesh | None = None) -> PyTree:
  """`jax.ShapeDtypeStruct`s of a pytree of arrays (shared data: placed
  with `distributed.data_sharding` on `mesh`)."""
  def sds(x):
    x = x if hasattr(x, 'dtype') else np.asarray(x)
    sharding = None if mesh is None else distributed.data_sharding(mesh, x)
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)
  return jax.tree.map(sds, tree)


def count_params(state: PyTree) -> int:
  """Entries of the shallowest sub-tree named 'params' (all leaves if none)."""
  leaves = jax.tree_util.tree_flatten_with_path(state)[0]
  names = [[str(getattr(k, 'key', getattr(k, 'name', ''))) for k in path]
           for path, _ in leaves]
  depths = [n.index('params') for n in names if 'params' in n]
  if not depths:
    return int(sum(np.prod(x.shape) for _, x in leaves))
  d = min(depths)
  first = next(n[:d + 1] for n in names if n[d:d + 1] == ['params'])
  return int(sum(np.prod(x.shape) for n, (_, x) in zip(names, leaves)
                 if n[:d + 1] == first))


def train_program(name: str, init_fn: InitFn, step_fn: StepFn, *,
                  num_seeds: int, num_steps: int, chunk_size: int,
                  data: PyTree | None = None, init_args: PyTree | None = None,
                  sharded: bool = False, batch_axis: bool = True,
                  params: int | None = None,
                  unroll: int | bool = 1) -> Program:
  """The `Program` of one training chunk, as `train` would compile it
  (`sharded`: on `Run.train`'s mesh); `data` and `init_args` may be arrays
  or `jax.ShapeDtypeStruct`s."""
  mesh = distributed.make_mesh(num_seeds) if sharded else None
  keys = jax.ShapeDtypeStruct((num_seeds, 2), jnp.uint32)
  states = abstract_states(init_fn, keys, mesh,
                           None if init_args is None else shapes(init_args))
  args = (states, jax.ShapeDtypeStruct((), jnp.int32))
  if data is not None:
    args += (shapes(data, mesh),)
  fn = chunk_fn(step_fn, chunk_size, mesh, unroll=unroll)
  if params is None:
    params = count_params(states) // num_seeds
  abstract = lambda t: any(isinstance(x, jax.ShapeDtypeStruct)
                          for x in jax.tree.leaves(t))

  def init(m):
    states = init_states(init_fn, seed_keys(0, num_seeds), m, init_args)
    if data is None:
      return states, jnp.int32(0)
    values = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                          shapes(data)) if abstract(data) else data
    return states, jnp.int32(0), distributed.put_data(m, values)

  return Program(name, fn, args, calls=-(-num_steps // chunk_size),
                 steps=chunk_size, params=params, batch_axis=batch_axis,
                 init=None if abstract(init_args) else init)
