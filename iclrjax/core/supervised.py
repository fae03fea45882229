"""Supervised classification from in-memory arrays, as (init, step).

The training split is an argument of the compiled loop (`r.train(init,
step, data=(x, y))`); minibatches are `data.batch_indices(key, t, ...)`, so
a run resumes at its step, and are split over 'data' (`shard_batch`).
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
    logits_fn: Callable[..., jax.Array],
    tx: optax.GradientTransformation, batch_size: int,
    keyed: bool = False):
  """init(key) -> TrainState; step(state, t, (x, y)) -> (state, metrics),
  with `init_params(key)` and `logits_fn(params, x [B, ...]) -> [B, ..., K]`.

  keyed: logits_fn takes a third argument, a key fresh at every step
  (step t's fold_in of a stream split off the state's key, apart from the
  batch's draw), for a stochastic forward pass (e.g. noise in training).
  """

  def init(key):
    k_init, k_data = jax.random.split(key)
    params = init_params(k_init)
    return TrainState(params, tx.init(params), k_data)

  def step(state: TrainState, t: jax.Array, data: tuple[jax.Array, jax.Array]):
    train_x, train_y = data  # [N, ...], the split passed as `data`
    idx = data_lib.batch_indices(state.key, t, train_x.shape[0], batch_size)
    x_B, y_B = distributed.shard_batch((train_x[idx], train_y[idx]))
    extra = ((jax.random.fold_in(jax.random.split(state.key)[1], t),)
             if keyed else ())
    (loss, acc), g = jax.value_and_grad(
        lambda p: cross_entropy(logits_fn(p, x_B, *extra), y_B),
        has_aux=True)(state.params)
    upd, opt_state = tx.update(g, state.opt_state, state.params)
    return (TrainState(optax.apply_updates(state.params, upd), opt_state,
                       state.key), {'loss': loss, 'accuracy': acc})

  return init, step
