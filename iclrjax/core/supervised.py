"""Supervised classification from in-memory arrays, as (init, step).

The shared trainer of the experiments that fit a classifier on a small
dataset kept on device: minibatches are `data.batch_indices(key, t, ...)`, a
pure function of (key, step), so a run resumes at its step; the loss is the
mean softmax cross-entropy of integer labels (over every leading axis of the
logits, e.g. batch and sequence position).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclrjax.core import data as data_lib


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
    train_x: jax.Array, train_y: jax.Array,
    tx: optax.GradientTransformation, batch_size: int):
  """init(key) -> TrainState; step(state, t) -> (state, metrics).

  Args:
    init_params: key -> params.
    logits_fn: (params, x [B, ...]) -> logits [B, ..., K].
    train_x, train_y: the whole training split (leading axis = examples).
    tx: the optimizer.
    batch_size: examples per step.
  """
  n = train_x.shape[0]

  def init(key):
    k_init, k_data = jax.random.split(key)
    params = init_params(k_init)
    return TrainState(params, tx.init(params), k_data)

  def loss_fn(params, x, y):
    return cross_entropy(logits_fn(params, x), y)

  def step(state: TrainState, t: jax.Array):
    idx = data_lib.batch_indices(state.key, t, n, batch_size)
    (loss, acc), g = jax.value_and_grad(loss_fn, has_aux=True)(
        state.params, train_x[idx], train_y[idx])
    upd, opt_state = tx.update(g, state.opt_state, state.params)
    return (TrainState(optax.apply_updates(state.params, upd), opt_state,
                       state.key), {'loss': loss, 'accuracy': acc})

  return init, step
