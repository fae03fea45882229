"""The one training step of the diffusion / flow papers.

Every paper's trainer is (init, step) for `core.loop.train`: a minibatch,
the loss and its gradient, one optax update, the EMA of the parameters.
Only the loss, the optimizer, the data source and the initial parameters
differ, so they are the arguments here and the step is written once
(`optimizer` builds the family's clipped Adam(W) with its warm-up):

  step(state, t, data) -> (state, {'loss', 'grad_norm', 'ema_decay', **aux})

Random streams. With a `batch_fn` (a dataset passed as `data`), the state's
key splits into (k_batch, k_noise): the minibatch is batch_fn(k_batch, t,
data) and the loss gets fold_in(k_noise, t). Without one (data generated
inside the loss, e.g. Flow2GAN's synthetic clips), the loss gets
fold_in(key, t) and builds its own batch. The key itself never changes, so
step t's randomness is a function of (seed, t) alone: a resumed run draws
what an unbroken one does.

EMA: ema <- d_t ema + (1 - d_t) params with d_t = `nets.ema_decay_debiased`
(t - ema_start) from step `ema_start` on (held at its initial value before
it): the bias-corrected EMA of `optax.ema(ema_decay, debias=True)`, each
iterate weighted by the configured decay, so 1 / (1 - ema_decay) is the
averaging horizon in steps (fit it to the run length).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclrjax.core import data as data_lib
from iclrjax.core import distributed
from iclrjax.diffusion import nets

PyTree = Any
# (params, batch, key, frozen) -> loss, or (loss, aux dict) with has_aux.
LossFn = Callable[..., Any]
BatchFn = Callable[[jax.Array, jax.Array, Any], Any]


class TrainState(NamedTuple):
  params: PyTree
  opt_state: PyTree
  ema: PyTree        # EMA of params (sampling uses it)
  key: jax.Array     # raw key, folded with the step
  frozen: PyTree = ()  # parameters the loss reads but never trains


def minibatch(num_examples: int | None, batch_size: int, dtype: Any = None
              ) -> BatchFn:
  """batch_fn drawing `batch_size` rows of `data` [num_examples, ...] (an
  array, or a pytree of arrays sharing the leading axis, e.g. (images,
  labels)) epoch-wise without replacement (`core.data.batch_indices`), cast
  to `dtype` if given (every leaf), split over the mesh's 'data'
  axis. num_examples=None: the leading size of `data` (static at trace
  time)."""

  def batch_fn(key: jax.Array, t: jax.Array, data: Any) -> Any:
    n = (jax.tree.leaves(data)[0].shape[0] if num_examples is None
         else num_examples)
    idx = data_lib.batch_indices(key, t, n, batch_size)

    def take(a):
      a = a[idx]
      return a if dtype is None else jnp.asarray(a, dtype)

    return distributed.shard_batch(jax.tree.map(take, data))

  return batch_fn


def init_state(params: PyTree, tx: optax.GradientTransformation,
               key: jax.Array, frozen: PyTree = ()) -> TrainState:
  """The state before step 0: the EMA starts at `params`."""
  return TrainState(params, tx.init(params), params, key, frozen)


def optimizer(learning_rate: float, *, warmup_steps: int = 0,
              cosine_steps: int | None = None, end_factor: float = 0.1,
              grad_clip: float = 0.0, b1: float = 0.9, b2: float = 0.999,
              weight_decay: float | None = None, flatten: bool = False
              ) -> optax.GradientTransformation:
  """The family's optimizer: global-norm clipping, then Adam on a warm-up
  schedule.

  Args:
    learning_rate: the peak learning rate.
    warmup_steps: a linear warm-up from 0 over this many steps.
    cosine_steps: None: constant after the warm-up (a plain float learning
      rate, no schedule, when warmup_steps is 0). Else the total steps of
      `optax.warmup_cosine_decay_schedule(0, learning_rate,
      max(warmup_steps, 1), max(cosine_steps, warmup_steps + 1),
      end_value=end_factor * learning_rate)`.
    end_factor: the cosine schedule's final learning rate / learning_rate.
    grad_clip: `optax.clip_by_global_norm(grad_clip)` before Adam; <= 0: no
      clipping (and no clipping transform in the chain).
    b1, b2: Adam's moment decays.
    weight_decay: None: `optax.adam`; a float: `optax.adamw` with it (0.0
      included: AdamW's state, Adam's updates).
    flatten: run the chain on the parameters raveled into one vector
      (`optax.flatten`): the same updates (the clipping norm summed in
      another order), a few array ops per step instead of ~20 per leaf, so
      a model with hundreds of small leaves compiles ~2x faster. Each step
      copies the gradients and updates into and out of that vector (one
      dtype for all leaves), and the moments lose any per-leaf sharding:
      for replicated (data-parallel) parameters, not sharded ones.

  The optimizer state's structure follows these choices, so a checkpoint
  restores into the optimizer built with the arguments that wrote it.
  """
  if cosine_steps is None:
    lr = (optax.linear_schedule(0.0, learning_rate, warmup_steps)
          if warmup_steps > 0 else learning_rate)
  else:
    lr = optax.warmup_cosine_decay_schedule(
        0.0, learning_rate, max(warmup_steps, 1),
        max(cosine_steps, warmup_steps + 1),
        end_value=end_factor * learning_rate)
  adam = (optax.adam(lr, b1=b1, b2=b2) if weight_decay is None else
          optax.adamw(lr, b1=b1, b2=b2, weight_decay=weight_decay))
  if grad_clip > 0:
    adam = optax.chain(optax.clip_by_global_norm(grad_clip), adam)
  return optax.flatten(adam) if flatten else adam


def make_trainer(init_params: Callable[..., PyTree], loss_fn: LossFn,
                 tx: optax.GradientTransformation, *,
                 ema_decay: float, batch_fn: BatchFn | None = None,
                 has_aux: bool = False, ema_start: int = 0):
  """(init, step) for `core.loop.train`.

  Args:
    init_params: (key, *init_args) -> params; `init(key, *init_args)`
      splits the key into (k_init, k_run) and keeps k_run in the state.
    loss_fn: (params, batch, key, frozen) -> scalar loss, or (loss, aux)
      with `has_aux` (aux: a dict of scalars, logged as metrics).
    tx: the optimizer.
    ema_decay: the EMA decay d (bias-corrected, `nets.ema_decay_debiased`).
    batch_fn: (k_batch, t, data) -> batch, e.g. `minibatch(...)`; None: the
      loss makes its data from its key and `batch` is None.
    ema_start: the step the EMA starts at.
  """

  def init(key: jax.Array, *init_args) -> TrainState:
    k_init, k_run = jax.random.split(key)
    return init_state(init_params(k_init, *init_args), tx, k_run)

  def step(state: TrainState, t: jax.Array, data: Any = None):
    if batch_fn is None:
      batch, key = None, jax.random.fold_in(state.key, t)
    else:
      k_batch, k_noise = jax.random.split(state.key)
      batch, key = batch_fn(k_batch, t, data), jax.random.fold_in(k_noise, t)
    grad_fn = jax.value_and_grad(loss_fn, has_aux=has_aux)
    out, g = grad_fn(state.params, batch, key, state.frozen)
    loss, aux = out if has_aux else (out, {})
    updates, opt_state = tx.update(g, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    d = nets.ema_decay_debiased(t - ema_start, ema_decay)
    d = jnp.where(t >= ema_start, d, 1.0)
    ema = nets.ema_update(state.ema, params, d)
    metrics = {'loss': loss, 'grad_norm': optax.tree.norm(g),
               'ema_decay': d, **aux}
    return state._replace(params=params, opt_state=opt_state, ema=ema), metrics

  return init, step


__all__: Sequence[str] = ['BatchFn', 'LossFn', 'TrainState', 'init_state',
                          'make_trainer', 'minibatch', 'optimizer']
