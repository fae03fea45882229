"""iclrjax/stats/sgd_llc.py: blackjax SGLD against the exact Gaussian
posterior (with the Euler-Maruyama variance), the LLC estimator against the
closed form of a quadratic and the quadrature of the product model's
tempered posterior, Aoyagi's DLN coefficient against reduced-rank
regression, the displacement fit and the cluster tempering."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from iclrjax.stats import sgd_llc


@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  with jax.numpy_rank_promotion('raise'):
    yield


def _rrr(n_in, h, n_out, r):
  """Aoyagi & Watanabe (2005): reduced-rank regression's coefficient."""
  if n_out + h < n_in + r:
    return (h * n_out - h * r + n_in * r) / 2
  if n_in + h < n_out + r:
    return (h * n_in - h * r + n_out * r) / 2
  if n_out + n_in < h + r:
    return n_out * n_in / 2
  v = 2 * (h + r) * (n_out + n_in) - (n_out - n_in)**2 - (h + r)**2
  return (v + (n_in + n_out + h + r) % 2) / 8


def test_dln_coefficient_is_reduced_rank_regression_for_two_layers():
  for n_in, h, n_out in itertools.product(range(1, 6), repeat=3):
    for r in range(min(n_in, h, n_out) + 1):
      assert sgd_llc.dln_learning_coefficient((n_in, h, n_out), r) == (
          pytest.approx(_rrr(n_in, h, n_out, r))), (n_in, h, n_out, r)


def test_dln_coefficient_of_deeper_networks():
  # full rank square layers: the product's d^2 entries, regular
  assert sgd_llc.dln_learning_coefficient((3, 3, 3, 3), 3) == 4.5
  # rank 0 of a deep net is below the 2-layer bound, above 0
  lam = sgd_llc.dln_learning_coefficient((5, 4, 3, 5), 2)
  assert lam == 9.0 and lam < (20 + 12 + 15) / 2
  with pytest.raises(ValueError, match='rank'):
    sgd_llc.dln_learning_coefficient((3, 2, 3), 3)


def _quadratic(h_D, mu_D):
  """An example loss independent of the example: exact gradients."""
  return lambda w, ex: 0.5 * jnp.sum(h_D * (w - mu_D)**2) + 0.0 * ex[0]


def test_blackjax_sgld_samples_the_gaussian_posterior():
  n, beta, gamma, eps = 100, 0.5, 2.0, 2e-3
  h, mu = jnp.array([1.0, 4.0]), jnp.array([1.0, -2.0])
  w_star = jnp.array([0.5, 0.0])
  grad = sgd_llc.posterior_grad(_quadratic(h, mu), w_star, n, beta, gamma)
  data = jnp.zeros((n, 1))
  step = jax.vmap(lambda k, w: sgd_llc.sgld_step(
      k, w, grad, data, batch_size=4, step_size=eps,
      example_loss=_quadratic(h, mu))[0])

  def body(w, k):
    w = step(jax.random.split(k, 512), w)
    return w, w

  _, ws = jax.lax.scan(body, jnp.zeros((512, 2)),
                       jax.random.split(jax.random.PRNGKey(0), 1500))
  ws = np.asarray(ws[500:]).reshape(-1, 2)
  a = n * beta * h + gamma
  mean = (n * beta * h * mu + gamma * w_star) / a
  var = 1 / (a * (1 - eps * a / 2))            # Euler-Maruyama's stationary
  np.testing.assert_allclose(ws.mean(0), mean, atol=0.01)
  np.testing.assert_allclose(ws.var(0), var, rtol=0.03)
  # the continuous-time variance is measurably smaller: the test can fail
  assert abs(ws.var(0)[1] * a[1] - 1) > 0.1


def test_llc_of_a_quadratic_is_the_closed_form():
  n, gamma, eps = 1000, 10.0, 1e-4
  h = jnp.array([0.2, 1.0, 3.0, 0.05])
  est = sgd_llc.estimate_llc(
      jax.random.PRNGKey(1), _quadratic(h, jnp.zeros(4)), jnp.zeros(4),
      jnp.zeros((n, 1)), num_chains=64, num_steps=4000, num_burnin=1500,
      batch_size=2, step_size=eps, gamma=gamma)
  beta = sgd_llc.default_beta(n)
  exact = sgd_llc.regular_llc(h, n, beta, gamma, eps)
  assert float(est.llc) == pytest.approx(float(exact), rel=0.05)
  # and d/2 = 2 is not it: gamma = 10 flattens the small-h directions
  assert abs(float(exact) - 2.0) > 0.3


def test_llc_of_the_product_model_matches_quadrature():
  """y = a b x at (1, 0): the tempered localised posterior's E[n beta K]
  by quadrature on a grid (below 1/2 at finite n: the singular origin)."""
  n, gamma = 1000, 10.0
  t = n * sgd_llc.default_beta(n)
  a, b = np.meshgrid(np.linspace(-3, 4, 701), np.linspace(-1.5, 1.5, 1501),
                     indexing='ij')
  k = 0.5 * (a * b)**2
  logp = -t * k - gamma / 2 * ((a - 1)**2 + b**2)
  p = np.exp(logp - logp.max())
  exact = float((t * k * p).sum() / p.sum())
  loss = lambda w, ex: 0.5 * (w[0] * w[1])**2 + 0.0 * ex[0]
  est = sgd_llc.estimate_llc(
      jax.random.PRNGKey(3), loss, jnp.array([1.0, 0.0]), jnp.zeros((n, 1)),
      num_chains=64, num_steps=4000, num_burnin=1000, batch_size=2,
      step_size=3e-5, gamma=gamma)
  assert float(est.llc) == pytest.approx(exact, abs=0.03)
  assert abs(exact - 0.44) < 0.01


def test_displacement_exponent_of_a_power_law_and_brownian_motion():
  t = jnp.asarray(sgd_llc.log_times(1, 1000, 30), jnp.float32)
  fit = sgd_llc.displacement_exponent(t, 3.0 * t**0.3)
  assert float(fit.alpha) == pytest.approx(0.3, abs=1e-5)
  assert float(fit.r2) == pytest.approx(1.0, abs=1e-5)
  walk = jnp.cumsum(jax.random.normal(jax.random.PRNGKey(4),
                                      (200, 1000, 50)), axis=1)
  r = jnp.linalg.norm(walk, axis=-1)[:, np.asarray(t, int) - 1]
  alphas = jax.vmap(sgd_llc.displacement_exponent, in_axes=(None, 0))(t, r)
  assert float(jnp.median(alphas.alpha)) == pytest.approx(0.5, abs=0.03)
  assert float(sgd_llc.spectral_dimension(4.0, 0.25)) == 2.0


def test_tempering_kl_and_masses():
  mass = jnp.array([0.6, 0.3, 0.1])
  # lambda_c = d_s: D_xi = xi^0 = 1, so the power is m for every cluster
  q = sgd_llc.temper_masses(mass, jnp.full(3, 2.0), 2.0, 0.7, 1.0)
  np.testing.assert_allclose(q, mass, rtol=1e-6)
  q2 = sgd_llc.temper_masses(mass, jnp.full(3, 2.0), 2.0, 0.7, 2.0)
  np.testing.assert_allclose(q2, mass**2 / jnp.sum(mass**2), rtol=1e-6)
  # a higher-LLC cluster gets a smaller power at xi > 1 (relatively lifted)
  llc = jnp.array([1.0, 1.0, 3.0])
  q3 = sgd_llc.temper_masses(mass, llc, 1.0, 2.0, 1.0)
  d = sgd_llc.diffusion_coefficient(2.0, llc, 1.0)
  np.testing.assert_allclose(d, [1.0, 1.0, 2.0**-4])
  lifted = 0.1**(1 / 16)
  assert float(q3[2]) == pytest.approx(lifted / (0.9 + lifted), rel=1e-5)
  p = jnp.array([0.5, 0.5, 0.0])
  assert float(sgd_llc.kl_divergence(p, mass)) == pytest.approx(
      scipy.stats.entropy(np.asarray(p), np.asarray(mass)), rel=1e-5)
  np.testing.assert_allclose(
      sgd_llc.cluster_masses(jnp.array([0, 0, 1, 0]), 3, pseudo=0.5),
      np.array([3.5, 1.5, 0.5]) / 5.5, rtol=1e-6)


def test_minimise_reaches_least_squares():
  kx, ky = jax.random.split(jax.random.PRNGKey(2))
  x = jax.random.normal(kx, (500, 4))
  y = x @ jnp.ones(4) + jax.random.normal(ky, (500,))
  loss = lambda w, ex: sgd_llc.gaussian_nll(ex[0] @ w, ex[1])
  w_star = sgd_llc.minimise(loss, jnp.zeros(4), (x, y), num_steps=300,
                            lr=0.3)
  np.testing.assert_allclose(w_star, jnp.linalg.lstsq(x, y)[0], atol=1e-4)
