"""The shared classifier trainer."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclrjax.core import loop
from iclrjax.core import supervised


def test_cross_entropy_matches_formula():
  logits = jnp.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.5]])
  labels = jnp.array([0, 2])
  loss, acc = supervised.cross_entropy(logits, labels)
  logp = np.asarray(jax.nn.log_softmax(logits))
  assert float(loss) == pytest.approx(-(logp[0, 0] + logp[1, 2]) / 2)
  assert float(acc) == 0.5


def test_logistic_regression_fits_separable_data():
  rng = np.random.default_rng(0)
  w_true = rng.normal(size=(5, 3))
  x = rng.normal(size=(512, 5)).astype(np.float32)
  y = np.argmax(x @ w_true, -1).astype(np.int32)
  init, step = supervised.make_classifier_trainer(
      lambda k: {'w': jnp.zeros((5, 3))}, lambda p, xb: xb @ p['w'],
      optax.adam(0.05), batch_size=64)
  out = loop.train(init, step, seed=0, num_seeds=2, num_steps=400,
                   chunk_size=400, progress=False, data=(x, y))
  w = out.state.params['w']  # [2, 5, 3]
  acc = (np.argmax(np.einsum('nd,sdk->snk', x, w), -1) == y).mean(1)
  assert acc.min() > 0.95, acc


def test_keyed_trainer_draws_a_fresh_key_per_step():
  """keyed=True: logits_fn gets a third argument, a key that changes with
  the step; the same step gives the same key (a resumed run draws the same
  noise). Every row is the same, so only the key moves the loss."""

  def logits_fn(p, x, key):
    return x @ p + jax.random.normal(key, (x.shape[0], 2))

  init, step = supervised.make_classifier_trainer(
      lambda k: jnp.zeros((3, 2)), logits_fn, optax.sgd(0.1), 4,
      keyed=True)
  state = init(jax.random.key(0))
  data = (jnp.ones((8, 3)), jnp.zeros(8, jnp.int32))
  step = jax.jit(step)
  loss = [float(step(state, jnp.int32(t), data)[1]['loss']) for t in (0, 1, 0)]
  assert loss[0] != loss[1] and loss[0] == loss[2], loss
  # Unkeyed, the same logits_fn signature is refused (two arguments only).
  _, plain = supervised.make_classifier_trainer(
      lambda k: jnp.zeros((3, 2)), lambda p, x: x @ p, optax.sgd(0.1), 4)
  assert float(jax.jit(plain)(state, jnp.int32(0), data)[1]['loss']) == (
      pytest.approx(np.log(2.0)))
