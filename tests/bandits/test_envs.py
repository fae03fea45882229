"""Synthetic multi-user bandit environments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax import kernels
from iclrjax.bandits import envs


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def test_er_graph_is_connected_symmetric_binary():
  for s in range(5):
    W = np.asarray(envs.er_graph(jax.random.PRNGKey(s), 20, 0.1))
    np.testing.assert_array_equal(W, W.T)
    assert set(np.unique(W)) <= {0.0, 1.0} and np.all(np.diag(W) == 0)
    assert bool(envs.is_connected(jnp.asarray(W)))
  two_parts = np.zeros((4, 4))
  two_parts[0, 1] = two_parts[1, 0] = two_parts[2, 3] = two_parts[3, 2] = 1
  assert not bool(envs.is_connected(jnp.asarray(two_parts)))


def test_rbf_graph_weights():
  W = np.asarray(envs.rbf_graph(jax.random.PRNGKey(0), 15, 0.3, 0.2))
  np.testing.assert_allclose(W, W.T)
  assert np.all(np.diag(W) == 0)
  assert np.all((W == 0) | ((W >= 0.2) & (W <= 1)))


def test_gp_draw_has_the_product_kernel_covariance():
  """Empirical covariance of F over draws matches K_G (x) K_x."""
  n, M, d = 4, 5, 2
  W = envs.er_graph(jax.random.PRNGKey(1), n, 0.6)
  arms = jax.random.uniform(jax.random.PRNGKey(2), (M, d), jnp.float64, -1, 1)
  draw = jax.jit(jax.vmap(lambda k: envs.rewards(
      k, 0, W, arms, rho=0.1, arm_lengthscale=1.0, gob_eta=1.0,
      num_anchors=5)))
  F = np.asarray(draw(jax.random.split(jax.random.PRNGKey(3), 20000)))
  emp = np.cov(F.reshape(len(F), -1), rowvar=False)
  K_G = kernels.normalize_mean_diag(kernels.laplacian_kernel(W, 0.1))
  want = np.kron(K_G, kernels.rbf(arms, arms))
  # 20000 draws: standard error of a covariance entry <= ~sqrt(2/20000).
  np.testing.assert_allclose(emp, want, atol=0.05)


def _rewards(seed, regime, n, M, d, num_anchors=5):
  """(arms, F) of one small environment."""
  k_w, k_arms, k_f = jax.random.split(jax.random.PRNGKey(seed), 3)
  W = envs.er_graph(k_w, n, 0.5)
  arms = jax.random.uniform(k_arms, (M, d), jnp.float64, -1, 1)
  F = envs.rewards(k_f, envs.REGIMES.index(regime), W, arms, rho=0.1,
                   arm_lengthscale=1.0, gob_eta=1.0, num_anchors=num_anchors)
  return np.asarray(arms), np.asarray(F)


def test_linear_gob_rewards_are_linear_and_unit_scale():
  arms, F = _rewards(4, 'linear_gob', n=6, M=40, d=3)
  assert abs(F.std() - 1.0) < 1e-9
  theta, *_ = np.linalg.lstsq(arms, F.T, rcond=None)
  np.testing.assert_allclose(arms @ theta, F.T, atol=1e-9)


def test_representer_draw_lies_in_the_kernel_span():
  _, F = _rewards(7, 'representer_draw', n=5, M=30, d=2, num_anchors=3)
  assert abs(F.std() - 1.0) < 1e-9
  # 3 anchors: F is a sum of 3 rank-one (user column x arm row) terms.
  s = np.linalg.svd(F, compute_uv=False)
  assert s[3] < 1e-8 * s[0]


def test_round_context_is_a_pure_function_of_key_and_t():
  key = jax.random.PRNGKey(0)
  a = envs.round_context(key, 7, 20, 50, 10, 0.1)
  b = envs.round_context(key, 7, 20, 50, 10, 0.1)
  c = envs.round_context(key, 8, 20, 50, 10, 0.1)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  assert len(set(np.asarray(a.visible).tolist())) == 10
  assert not np.array_equal(a.visible, c.visible)
  assert 0 <= int(a.user) < 20
