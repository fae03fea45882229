"""Base kernels, the Laplacian user kernel and Theorem 2.1 of the LK paper."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax import kernels
from iclrjax.kernels import gp


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _points(seed, n, d=3):
  return np.random.default_rng(seed).uniform(-1, 1, size=(n, d))


def test_base_kernels_closed_forms():
  X1, X2 = _points(0, 4), _points(1, 5)
  r = np.linalg.norm(X1[:, None] - X2[None], axis=-1)
  l, v = 0.7, 1.3
  np.testing.assert_allclose(kernels.rbf(X1, X2, l, v),
                             v * np.exp(-r**2 / (2 * l**2)), rtol=1e-12)
  s = np.sqrt(5) * r / l
  np.testing.assert_allclose(kernels.matern52(X1, X2, l, v),
                             v * (1 + s + s**2 / 3) * np.exp(-s), rtol=1e-12)
  np.testing.assert_allclose(kernels.linear(X1, X2, 2.0, 0.5),
                             2.0 * X1 @ X2.T + 0.5, rtol=1e-12)
  # Matern's derivative at r = 0 is finite (no NaN from sqrt).
  g = jax.grad(lambda x: kernels.matern52(x[None], x[None])[0, 0])(X1[0])
  assert np.all(np.isfinite(g))


@pytest.mark.parametrize('name', ['rbf', 'matern52', 'linear'])
def test_base_kernels_are_psd(name):
  X = _points(2, 30)
  K = np.asarray(kernels.get(name)(X, X))
  np.testing.assert_allclose(K, K.T, atol=1e-12)
  assert np.linalg.eigvalsh(K).min() > -1e-9


def _er_graph(seed, n, p=0.3):
  rng = np.random.default_rng(seed)
  A = np.triu((rng.uniform(size=(n, n)) < p) * rng.uniform(0.5, 2, (n, n)), 1)
  return A + A.T


def test_laplacian_kernel_is_inverse():
  W = _er_graph(0, 8)
  rho = 0.3
  L = np.diag(W.sum(1)) - W
  np.testing.assert_allclose(kernels.laplacian(W), L)
  np.testing.assert_allclose(kernels.laplacian_kernel(W, rho),
                             np.linalg.inv(L + rho * np.eye(8)), rtol=1e-10)


def test_multi_user_gram_matches_definition():
  rng = np.random.default_rng(3)
  K_users = kernels.laplacian_kernel(_er_graph(1, 5), 0.2)
  X1, X2 = _points(4, 6), _points(5, 7)
  u1, u2 = rng.integers(0, 5, 6), rng.integers(0, 5, 7)
  base = functools.partial(kernels.rbf, lengthscale=0.8)
  G = kernels.multi_user_gram(K_users, X1, u1, X2, u2, base)
  for i in range(6):
    for j in range(7):
      want = K_users[u1[i], u2[j]] * base(X1[i:i + 1], X2[j:j + 1])[0, 0]
      assert abs(G[i, j] - want) < 1e-12
  # The joint-kernel form used by the GP posterior agrees.
  k = gp.multi_user_kernel(K_users, base)
  np.testing.assert_allclose(k(X1, u1, X2, u2), G, rtol=1e-12)


@pytest.mark.parametrize('seed', [0, 1, 2])
@pytest.mark.parametrize('base_name', ['rbf', 'linear'])
def test_theorem_2_1_joint_penalty_is_rkhs_norm(seed, base_name):
  """PEN(f; rho) of f = sum_j alpha_j K((x_j,u_j), .) equals alpha^T K alpha.

  Each user's function is f_i = sum_j alpha_j [L_rho^{-1}]_{u_j i}
  K_x(x_j, .), so <f_i, f_k>_{H_x} = (C^T K_x C)_{ik} with
  C_ji = alpha_j [L_rho^{-1}]_{u_j i} (reproducing property). The penalty is
  then evaluated term by term (graph smoothness + roughness), independently
  of the Laplacian identity.
  """
  rng = np.random.default_rng(seed)
  n, J, rho = 7, 12, 0.15
  W = _er_graph(seed + 10, n)
  X, u = _points(seed + 20, J), rng.integers(0, n, J)
  alpha = rng.normal(size=J)
  base = kernels.get(base_name)
  K_users = kernels.laplacian_kernel(W, rho)
  K = kernels.multi_user_gram(K_users, X, u, X, u, base)
  rkhs_norm2 = alpha @ K @ alpha
  C = alpha[:, None] * np.asarray(K_users)[u, :]        # [J, n]
  G = C.T @ np.asarray(base(X, X)) @ C                  # <f_i, f_k>
  pen = kernels.joint_penalty(W, rho, G)
  assert rkhs_norm2 > 0
  np.testing.assert_allclose(pen, rkhs_norm2, rtol=1e-9)
  # A different user kernel breaks the identity (the test can fail).
  wrong = kernels.multi_user_gram(np.eye(n), X, u, X, u, base)
  C_wrong = alpha[:, None] * np.eye(n)[u, :]
  G_wrong = C_wrong.T @ np.asarray(base(X, X)) @ C_wrong
  assert abs(kernels.joint_penalty(W, rho, G_wrong) - alpha @ wrong @ alpha
             ) > 1e-3 * abs(rkhs_norm2)
