"""The spike function: exact step forward, surrogate derivative backward."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.snn import surrogate


@pytest.mark.parametrize('kind', surrogate.SURROGATES)
def test_forward_is_the_exact_step_and_backward_the_surrogate(kind):
  v = jnp.linspace(-2.0, 2.0, 41)
  z = surrogate.spike(v, kind, 5.0)
  np.testing.assert_array_equal(z, (np.asarray(v) > 0).astype(np.float32))
  g = jax.vmap(jax.grad(lambda x: surrogate.spike(x, kind, 5.0)))(v)
  if kind == 'fast_sigmoid':
    want = 1.0 / (1.0 + 5.0 * np.abs(np.asarray(v))) ** 2
  else:
    want = 2.5 / (1.0 + (np.pi * 5.0 * np.asarray(v) / 2.0) ** 2)
  np.testing.assert_allclose(g, want, rtol=1e-6)
  # The surrogate is a smooth bump centred on the threshold.
  assert np.argmax(np.asarray(g)) == 20


def test_arctan_surrogate_is_the_derivative_of_its_smooth_step():
  """arctan: the surrogate integrates the smooth step 1/pi atan(pi a v/2)."""
  a = 3.0
  smooth = lambda v: jnp.arctan(jnp.pi * a * v / 2.0) / jnp.pi + 0.5
  v = jnp.linspace(-1.0, 1.0, 21)
  np.testing.assert_allclose(jax.vmap(jax.grad(smooth))(v),
                             surrogate.surrogate_grad(v, 'arctan', a),
                             rtol=1e-5)


def test_chain_rule_through_spikes():
  w = jnp.array([0.5, -1.0, 2.0])
  f = lambda w: jnp.sum(surrogate.spike(w * 0.3 - 0.1) * jnp.arange(3.0))
  g = jax.grad(f)(w)
  v = np.asarray(w) * 0.3 - 0.1
  want = np.arange(3.0) * 0.3 / (1.0 + 10.0 * np.abs(v)) ** 2
  np.testing.assert_allclose(g, want, rtol=1e-6)


def test_unknown_surrogate_is_a_clear_error():
  with pytest.raises(ValueError, match='surrogate must be one of'):
    jax.grad(lambda v: surrogate.spike(v, 'relu', 1.0))(0.3)
