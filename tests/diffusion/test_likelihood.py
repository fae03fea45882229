"""Likelihood estimators: stratified quadrature, u-MC, tails, VDM terms."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from iclrjax.diffusion import likelihood as lik
from iclrjax.diffusion import schedules as sch


@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  """No implicit rank promotion in the library (as in test_nets)."""
  with jax.numpy_rank_promotion('raise'):
    yield


def test_bits_per_dim_and_estimate_algebra():
  np.testing.assert_allclose(lik.bits_per_dim(64 * math.log(2) * 3.0, 64), 3.0,
                             rtol=1e-6)
  a = lik.Estimate(jnp.array([1.0, 2.0]), jnp.array([0.3, 0.0]))
  b = lik.Estimate(jnp.array([0.5, 0.5]), jnp.array([0.4, 0.1]))
  c = a + b
  np.testing.assert_allclose(c.value, [1.5, 2.5])
  np.testing.assert_allclose(c.se, [0.5, 0.1], rtol=1e-6)
  m, se = c.mean()
  np.testing.assert_allclose([m, se], [2.0, math.sqrt(0.26) / 2], rtol=1e-6)
  d = lik.bpd(a, 2)
  np.testing.assert_allclose(d.value, np.array([1.0, 2.0]) / (2 * math.log(2)),
                             rtol=1e-6)


def test_t_u_maps():
  t = jnp.array([0.2, 0.5, 1.0, 3.0])
  np.testing.assert_allclose(lik.t_of_u(lik.u_of_t(t)), t, rtol=1e-5)
  assert float(lik.t_of_u(jnp.float32(0.0))) == 0.0
  assert float(lik.u_of_t(jnp.float32(0.0))) == 0.0
  assert float(lik.u_of_t(jnp.float32(jnp.inf))) == 1.0


def test_stratified_is_unbiased_with_calibrated_se():
  # Per-example integrands c_b exp(-a_b x) + noise on [0, 2]; closed form.
  a = jnp.array([0.5, 1.0, 3.0])
  c = jnp.array([1.0, 2.0, -1.0])
  truth = c / a * (1 - jnp.exp(-2 * a))

  def fn(key, x):
    return c * jnp.exp(-a * x) + 0.3 * jax.random.normal(key, x.shape)

  reps = 400
  est = jax.jit(jax.vmap(
      lambda k: lik.stratified(fn, k, 0.0, 2.0, 16, 3)))(
          jax.random.split(jax.random.key(0), reps))
  sd = est.value.std(0)
  np.testing.assert_array_less(np.abs(est.value.mean(0) - truth),
                               4 * sd / math.sqrt(reps))
  # The collapsed-strata SE is conservative but not by much.
  ratio = est.se.mean(0) / sd
  assert np.all(ratio > 0.85) and np.all(ratio < 1.5), ratio


def test_stratified_log_t_closed_form():
  # int_a^b t^-2 dt = 1/a - 1/b, through the tau = log t substitution.
  est = lik.stratified_log_t(lambda k, t: t ** -2.0, jax.random.key(1), 0.1,
                             50.0, 512, 4)
  np.testing.assert_allclose(est.value, 10.0 - 0.02, rtol=1e-3)
  np.testing.assert_array_less(est.se, 0.02)


def _ve_closed_form_integrand(key, t):
  """e(t) = u t^2 / (1 + t^2) (u = exp(-1/t^2)) times mean-1 noise.

  int_0^inf t^-3 e(t) dt = 1/2 int_0^inf e^-v / (1 + v) dv = e E1(1) / 2
  (v = 1/t^2).
  """
  noise = 1.0 + 0.3 * jax.random.normal(key, t.shape)
  return lik.u_of_t(t) * t ** 2 / (1 + t ** 2) * noise


def test_u_mc_and_quadrature_with_tail_match_closed_form():
  truth = math.e * special.exp1(1.0) / 2.0  # 0.29817...
  b = 8
  umc = jax.jit(lambda k: lik.u_uniform_mc(_ve_closed_form_integrand, k,
                                           4096, b))(jax.random.key(2))

  def weighted(key, tau):
    t = jnp.exp(tau)
    return _ve_closed_form_integrand(key, t) * t ** -2.0

  t_hi = 5.0  # the tail above t_hi is ~0.02, 7% of the total: it must count
  k1, k2 = jax.random.split(jax.random.key(3))
  body = lik.stratified(weighted, k1, math.log(0.05), math.log(t_hi), 256, b)
  tail = lik.ve_upper_tail(_ve_closed_form_integrand, k2, t_hi, 64, b)
  tail_truth = 0.5 * math.e * (special.exp1(1.0)
                               - special.exp1(1.0 + 1 / t_hi ** 2))
  np.testing.assert_allclose(tail.value.mean(), tail_truth, rtol=0.05)
  quad = body + tail
  # Per example (16 comparisons): within 4 SE; pooled over examples: 3 SE.
  for est in (umc, quad):
    np.testing.assert_array_less(np.abs(est.value - truth), 4 * est.se)
    mean, se = est.mean()
    assert abs(mean - truth) < 3 * se, (mean, se, truth)
  both = np.sqrt(umc.se ** 2 + quad.se ** 2)
  np.testing.assert_array_less(np.abs(umc.value - quad.value), 4 * both)
  (m_u, se_u), (m_q, se_q) = umc.mean(), quad.mean()
  assert abs(m_u - m_q) < 3 * math.sqrt(se_u ** 2 + se_q ** 2)
  np.testing.assert_allclose(quad.value.mean(), truth, rtol=0.01)
  np.testing.assert_allclose(umc.value.mean(), truth, rtol=0.02)


def test_grid_decoder_normalises_and_is_the_gaussian_posterior():
  levels = jnp.linspace(-1.0, 1.0, 9)
  z = jnp.array([[-1.3, -0.2, 0.01, 0.7], [0.0, 0.9, 1.4, -0.5]])
  log_var = jnp.float32(-4.0)
  logp = lik.grid_decoder_logprobs(z, log_var, levels)
  assert logp.shape == (2, 4, 9)
  np.testing.assert_allclose(jax.nn.logsumexp(logp, -1), 0.0, atol=1e-5)
  var = math.exp(-4.0)
  z64, levels64 = np.asarray(z, np.float64), np.asarray(levels, np.float64)
  w = np.exp(-(z64[..., None] - levels64) ** 2 / (2 * var))
  np.testing.assert_allclose(np.exp(logp), w / w.sum(-1, keepdims=True),
                             atol=1e-5)
  idx = jnp.array([[0, 3, 4, 7], [4, 8, 8, 2]])
  log_post = np.log(w / w.sum(-1, keepdims=True))
  want = -np.take_along_axis(log_post, np.asarray(idx)[..., None],
                             -1)[..., 0].sum(-1)
  np.testing.assert_allclose(lik.decoder_nll(idx, z, log_var, levels), want,
                             rtol=1e-4)


def test_vp_prior_kl_matches_monte_carlo():
  f = jnp.array([-1.0, 0.3, 0.9])
  g1 = jnp.float32(1.0)
  alpha, sigma = sch.vp_alpha_sigma(g1)
  z = alpha * f[None] + sigma * jax.random.normal(jax.random.key(4),
                                                  (200_000, 3))
  log_q = -0.5 * ((z - alpha * f[None]) / sigma) ** 2 - jnp.log(sigma)
  log_p = -0.5 * z ** 2
  kl_mc = (log_q - log_p).sum(-1)
  np.testing.assert_allclose(lik.vp_prior_kl(f, g1), kl_mc.mean(),
                             atol=4 * float(kl_mc.std()) / math.sqrt(2e5))


def test_vp_diffusion_loss_weight_and_x_form():
  def gamma_fn(t):
    return -8.0 + 10.0 * t + 2.0 * t ** 2

  t = jnp.array([0.1, 0.4, 0.8])
  k1, k2, k3 = jax.random.split(jax.random.key(5), 3)
  eps = jax.random.normal(k1, (3, 6))
  eps_hat = eps + 0.3 * jax.random.normal(k2, (3, 6))
  loss = lik.vp_diffusion_loss(gamma_fn, t, eps, eps_hat)
  h = 1e-2
  fd = (gamma_fn(t + h) - gamma_fn(t - h)) / (2 * h)
  np.testing.assert_allclose(
      loss / (0.5 * jnp.sum((eps - eps_hat) ** 2, -1)), fd, rtol=2e-3)
  # Same loss as -1/2 SNR'(t) ||x - xhat||^2 (VDM Eq. 15) with
  # xhat = (z - sigma eps_hat) / alpha; SNR' by autodiff of exp(-gamma).
  x = jax.random.normal(k3, (3, 6))
  g = gamma_fn(t)[:, None]
  alpha, sigma = sch.vp_alpha_sigma(g)
  z = alpha * x + sigma * eps
  xhat = (z - sigma * eps_hat) / alpha
  dsnr = jax.vmap(jax.grad(lambda s: jnp.exp(-gamma_fn(s))))(t)
  x_form = -0.5 * dsnr * jnp.sum((x - xhat) ** 2, -1)
  np.testing.assert_allclose(loss, x_form, rtol=1e-3)
