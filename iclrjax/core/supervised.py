"""Supervised classification from in-memory arrays, as (init, step).

The shared trainer of the experiments that fit a classifier on a dataset
kept on device: the training split is an argument of the compiled loop
(`r.train(init, step, data=(x, y))`, its examples split over the mesh's
'data' axis), not a constant of the program; minibatches are
`data.batch_indices(key, t, ...)`, a pure function of (key, step), so a run
resumes at its step, and each minibatch is split over 'data'
(`distributed.shard_batch`). The loss is the mean softmax cross-entropy of
integer labels (over every leading axis of the logits, e.g. batch and
sequence position).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclrjax.core import data as data_lib
from iclrjax.core import distributed


class TrainState(NamedTuple):
  params: Any
  opt_state: Any
  key: jax.Array   # The minibatch key (fixed; the step picks the batch).


def cross_entropy(logits: jax.Array, labels: jax.Array
                  ) -> tuple[jax.Array, jax.Array]:
  """(mean cross-entropy, mean accuracy) of logits [..., K], labels [...]."""
  loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
  return loss, (jnp.argmax(logits, -1) == labels).mean()


def make_classifier_trainer(
    init_params: Callable[[jax.Array], Any],
    logits_fn: Callable[[Any, jax.Array], jax.Array],
    tx: optax.GradientTransformation, batch_size: int):
  """init(key) -> TrainState; step(state, t, (x, y)) -> (state, metrics).

  Args:
    init_params: key -> params.
    logits_fn: (params, x [B, ...]) -> logits [B, ..., K].
    tx: the optimizer.
    batch_size: examples per step.
  """

  def init(key):
    k_init, k_data = jax.random.split(key)
    params = init_params(k_init)
    return TrainState(params, tx.init(params), k_data)

  def loss_fn(params, x, y):
    return cross_entropy(logits_fn(params, x), y)

  def step(state: TrainState, t: jax.Array, data: tuple[jax.Array, jax.Array]):
    train_x, train_y = data  # [N, ...], the split passed as `data`
    idx = data_lib.batch_indices(state.key, t, train_x.shape[0], batch_size)
    x_B, y_B = distributed.shard_batch((train_x[idx], train_y[idx]))
    (loss, acc), g = jax.value_and_grad(loss_fn, has_aux=True)(
        state.params, x_B, y_B)
    upd, opt_state = tx.update(g, state.opt_state, state.params)
    return (TrainState(optax.apply_updates(state.params, upd), opt_state,
                       state.key), {'loss': loss, 'accuracy': acc})

  return init, step
