"""Incremental GP posterior vs a full refit."""

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


@pytest.fixture(scope='module')
def problem():
  with jax.enable_x64(True):
    rng = np.random.default_rng(0)
    n_users, T, d = 10, 500, 4
    A = np.triu(rng.uniform(size=(n_users, n_users)) < 0.3, 1).astype(float)
    K_users = kernels.normalize_mean_diag(
        kernels.laplacian_kernel(jnp.asarray(A + A.T), 0.1))
    kernel = gp.multi_user_kernel(
        K_users, functools.partial(kernels.rbf, lengthscale=1.0))
    X = jnp.asarray(rng.uniform(-1, 1, (T, d)))
    u = jnp.asarray(rng.integers(0, n_users, T), jnp.int32)
    y = jnp.asarray(np.sin(X.sum(1)) + 0.1 * rng.normal(size=T))
    Xq = jnp.asarray(rng.uniform(-1, 1, (20, d)))
    uq = jnp.asarray(rng.integers(0, n_users, 20), jnp.int32)
    return dict(kernel=kernel, X=X, u=u, y=y, Xq=Xq, uq=uq, T=T)


@pytest.mark.parametrize('t', [100, 300, 500])
def test_incremental_equals_full_refit(problem, t):
  p = problem
  k = p['kernel']

  def incremental(X, u, y, Xq, uq):
    post = gp.init(p['T'], X.shape[1])
    body = lambda s, o: (gp.append(s, *o, kernel=k, noise_var=0.01), None)
    post = jax.lax.scan(body, post, (X, u, y))[0]
    return gp.predict(post, Xq, uq, k)

  mean_i, var_i = jax.jit(incremental)(p['X'][:t], p['u'][:t], p['y'][:t],
                                       p['Xq'], p['uq'])
  mean_f, var_f = gp.full_posterior(p['X'][:t], p['u'][:t], p['y'][:t],
                                    p['Xq'], p['uq'], k, 0.01)
  assert mean_i.dtype == jnp.float64
  np.testing.assert_allclose(mean_i, mean_f, atol=1e-6, rtol=0)
  np.testing.assert_allclose(var_i, var_f, atol=1e-6, rtol=0)
  # Independent reference: numpy's dense inverse.
  K = np.asarray(k(p['X'][:t], p['u'][:t], p['X'][:t], p['u'][:t]))
  Kq = np.asarray(k(p['X'][:t], p['u'][:t], p['Xq'], p['uq']))
  Ainv = np.linalg.inv(K + 0.01 * np.eye(t))
  np.testing.assert_allclose(mean_i, Kq.T @ Ainv @ np.asarray(p['y'][:t]),
                             atol=1e-6)


def test_masked_buffer_matches_exact_size(problem):
  """Capacity beyond t changes nothing: padded rows are inert."""
  p, k = problem, problem['kernel']
  small = gp.from_data(p['X'][:50], p['u'][:50], p['y'][:50], k, 0.01)
  big = gp.from_data(p['X'][:50], p['u'][:50], p['y'][:50], k, 0.01,
                     capacity=200)
  m1, v1 = gp.predict(small, p['Xq'], p['uq'], k)
  m2, v2 = gp.predict(big, p['Xq'], p['uq'], k)
  np.testing.assert_allclose(m1, m2, atol=1e-12)
  np.testing.assert_allclose(v1, v2, atol=1e-12)
  assert int(big.t) == 50


def test_empty_posterior_is_the_prior(problem):
  p, k = problem, problem['kernel']
  post = gp.init(10, p['X'].shape[1])
  mean, var = gp.predict(post, p['Xq'], p['uq'], k)
  np.testing.assert_array_equal(mean, 0.0)
  prior = jax.vmap(lambda x, u: k(x[None], u[None], x[None], u[None])[0, 0])(
      p['Xq'], p['uq'])
  np.testing.assert_allclose(var, prior, rtol=1e-12)


def test_append_from_a_queried_column_equals_append(problem):
  """A bandit appends one of the points it just scored: l = v[:, j] and
  d^2 = var_j + lam give the same state as a fresh append."""
  p, k = problem, problem['kernel']
  post = gp.from_data(p['X'][:60], p['u'][:60], p['y'][:60], k, 0.01,
                      capacity=80)
  _, var, v = gp.predict_v(post, p['Xq'], p['uq'], k)
  j = 3
  fresh = gp.append(post, p['Xq'][j], p['uq'][j], 0.7, k, 0.01)
  reused = gp.append(post, p['Xq'][j], p['uq'][j], 0.7, k, 0.01,
                     l=v[:, j], var=var[j])
  for a, b in zip(fresh, reused):
    if a is not None:
      np.testing.assert_allclose(a, b, atol=1e-10)


def test_rebuild_under_a_new_kernel_equals_a_refit(problem):
  """`rebuild` with another lengthscale and noise equals from_data with
  them, at full capacity and on a static short prefix (size >= t)."""
  p = problem
  k2 = gp.multi_user_kernel(
      jnp.eye(10), functools.partial(kernels.rbf, lengthscale=0.5))
  post = gp.from_data(p['X'][:40], p['u'][:40], p['y'][:40], p['kernel'],
                      0.01, capacity=120)
  want = gp.full_posterior(p['X'][:40], p['u'][:40], p['y'][:40], p['Xq'],
                           p['uq'], k2, 0.05)
  for size in (None, 64):
    got = gp.predict(gp.rebuild(post, k2, 0.05, size=size), p['Xq'], p['uq'],
                     k2)
    np.testing.assert_allclose(got[0], want[0], atol=1e-9)
    np.testing.assert_allclose(got[1], want[1], atol=1e-9)


def test_log_marginal_likelihood_matches_scipy(problem):
  import scipy.stats
  p, k = problem, problem['kernel']
  post = gp.from_data(p['X'][:30], p['u'][:30], p['y'][:30], k, 0.02,
                      capacity=90)
  K = np.asarray(k(p['X'][:30], p['u'][:30], p['X'][:30], p['u'][:30]))
  want = scipy.stats.multivariate_normal(np.zeros(30), K + 0.02 * np.eye(30)
                                         ).logpdf(np.asarray(p['y'][:30]))
  for size in (None, 32):
    got = gp.log_marginal_likelihood(post, k, 0.02, size=size)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_lazy_fit_predicts_and_appends_like_the_eager_one(problem):
  p, k = problem, problem['kernel']
  args = (p['X'][:50], p['u'][:50], p['y'][:50], k, 0.01)
  eager, lazy = gp.from_data(*args, capacity=60), gp.from_data(
      *args, capacity=60, lazy=True)
  assert lazy.C is None and lazy.L is not None
  for a, b in zip(gp.predict(eager, p['Xq'], p['uq'], k),
                  gp.predict(lazy, p['Xq'], p['uq'], k)):
    np.testing.assert_allclose(a, b, atol=1e-10)
  step = lambda s: gp.append(s, p['X'][55], p['u'][55], p['y'][55], k, 0.01)
  e2, l2 = step(eager), step(lazy)
  assert l2.L is None
  np.testing.assert_allclose(e2.C, l2.C, atol=1e-9)
  np.testing.assert_allclose(e2.a, l2.a, atol=1e-9)


def test_append_to_a_full_buffer_raises_under_jit(problem):
  """A full buffer used to drop the point and overwrite the last row of C
  (the posterior mean moved by ~30 with no error)."""
  p, k = problem, problem['kernel']
  full = gp.from_data(p['X'][:4], p['u'][:4], p['y'][:4], k, 0.01)
  step = jax.jit(lambda s: gp.append(s, p['X'][5], p['u'][5], p['y'][5], k,
                                     0.01))
  with pytest.raises(Exception, match='buffer is full'):
    jax.block_until_ready(step(full))
  roomy = gp.from_data(p['X'][:4], p['u'][:4], p['y'][:4], k, 0.01,
                       capacity=5)
  mean = gp.predict(step(roomy), p['Xq'], p['uq'], k)[0]
  want = gp.full_posterior(p['X'][jnp.array([0, 1, 2, 3, 5])],
                           p['u'][jnp.array([0, 1, 2, 3, 5])],
                           p['y'][jnp.array([0, 1, 2, 3, 5])], p['Xq'],
                           p['uq'], k, 0.01)[0]
  np.testing.assert_allclose(mean, want, atol=1e-8)
  with pytest.raises(ValueError, match='capacity=3'):
    gp.from_data(p['X'][:4], p['u'][:4], p['y'][:4], k, 0.01, capacity=3)


def test_float32_factor_stays_close_to_the_float64_posterior(problem):
  """`buffer_dtype=float32` (half the memory of the [T, T] factor): the
  posterior stays float64 and within 1e-3 of the exact one at t = 500;
  a short refit (`rebuild(..., size=)`) keeps the buffer's dtype."""
  p = problem
  k = p['kernel']

  def incremental(X, u, y, Xq, uq):
    post = gp.init(p['T'], X.shape[1], buffer_dtype=jnp.float32)
    body = lambda s, o: (gp.append(s, *o, kernel=k, noise_var=0.01), None)
    post = jax.lax.scan(body, post, (X, u, y))[0]
    return post, gp.predict(post, Xq, uq, k)

  post, (mean, var) = jax.jit(incremental)(p['X'], p['u'], p['y'], p['Xq'],
                                           p['uq'])
  mean_f, var_f = gp.full_posterior(p['X'], p['u'], p['y'], p['Xq'], p['uq'],
                                    k, 0.01)
  assert post.C.dtype == jnp.float32 and mean.dtype == jnp.float64
  np.testing.assert_allclose(mean, mean_f, atol=1e-3, rtol=0)
  np.testing.assert_allclose(var, var_f, atol=1e-4, rtol=0)
  short = gp.rebuild(gp.init(p['T'], 4, buffer_dtype=jnp.float32), k, 0.01,
                     size=16)
  assert short.C.dtype == jnp.float32 and short.a.dtype == jnp.float64
