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
