"""Noise schedules: VP (VDM learnable scalar gamma), rectified flow."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.diffusion import schedules as sch


@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  """No implicit rank promotion in the library (as in test_nets)."""
  with jax.numpy_rank_promotion('raise'):
    yield


def test_vp_learnable_scalar_endpoints_and_identities():
  params = sch.vp_init()
  g0, g1 = sch.vp_gamma(params, 0.0), sch.vp_gamma(params, 1.0)
  np.testing.assert_allclose([g0, g1], [-13.3, 5.0], rtol=1e-6)
  np.testing.assert_allclose(sch.vp_gamma(params, 0.25),
                             -13.3 + 0.25 * 18.3, rtol=1e-6)
  gamma = jnp.linspace(-20.0, 20.0, 81)
  alpha, sigma = sch.vp_alpha_sigma(gamma)
  np.testing.assert_allclose(alpha ** 2 + sigma ** 2, 1.0, atol=1e-6)
  mid = jnp.abs(gamma) <= 10  # where alpha^2/sigma^2 is well resolved
  np.testing.assert_allclose((alpha ** 2 / sigma ** 2)[mid],  # SNR
                             np.exp(-np.asarray(gamma))[mid], rtol=1e-4)
  # |w| keeps gamma increasing whatever the sign of w (VDM's abs).
  flipped = {'b': params['b'], 'w': -params['w']}
  np.testing.assert_allclose(sch.vp_gamma(flipped, 0.7),
                             sch.vp_gamma(params, 0.7), rtol=1e-6)
  # The endpoints are learnable: gamma(t) depends on both parameters.
  grads = jax.grad(lambda p: sch.vp_gamma(p, 0.3))(params)
  np.testing.assert_allclose([grads['b'], grads['w']], [1.0, 0.3], rtol=1e-6)
  x0, eps = jnp.array([0.5, -1.0]), jnp.array([1.0, 2.0])
  a, s = sch.vp_alpha_sigma(jnp.asarray(1.5))
  np.testing.assert_allclose(sch.vp_diffuse(x0, eps, 1.5), a * x0 + s * eps,
                             rtol=1e-6)


def test_dgamma_dt_matches_finite_difference():
  def gamma_fn(t):  # a nonlinear increasing schedule
    return -10.0 + 12.0 * t + 3.0 * jnp.sin(2.0 * t) + t ** 3

  t = jnp.linspace(0.05, 0.95, 7)
  g, dg = sch.dgamma_dt(gamma_fn, t)
  h = 1e-2
  fd = (gamma_fn(t + h) - gamma_fn(t - h)) / (2 * h)
  np.testing.assert_allclose(g, gamma_fn(t), rtol=1e-6)
  np.testing.assert_allclose(dg, fd, rtol=2e-3)
  exact = 12.0 + 6.0 * np.cos(2.0 * np.asarray(t)) + 3 * np.asarray(t) ** 2
  np.testing.assert_allclose(dg, exact, rtol=1e-5)
  params = sch.vp_init(-7.0, 4.0)
  _, dg_lin = sch.dgamma_dt(lambda s: sch.vp_gamma(params, s), t)
  np.testing.assert_allclose(dg_lin, 11.0, rtol=1e-6)


def test_rectified_flow_endpoints_and_velocity():
  x0 = jnp.array([1.0, -2.0, 0.5])
  eps = jnp.array([0.3, 0.1, -1.0])
  np.testing.assert_allclose(sch.rf_interpolate(x0, eps, 0.0), x0)
  np.testing.assert_allclose(sch.rf_interpolate(x0, eps, 1.0), eps)
  _, v = jax.jvp(lambda t: sch.rf_interpolate(x0, eps, t), (0.37,), (1.0,))
  np.testing.assert_allclose(v, sch.rf_velocity(x0, eps), rtol=1e-6)
  np.testing.assert_allclose(sch.rf_velocity(x0, eps), eps - x0)


def test_cosine_schedule_is_the_vp_schedule_at_its_gamma():
  # The time-parametrised cosine VP schedule and the gamma-parametrised one
  # agree at gamma(t) = log(sigma^2 / alpha^2) = 2 log tan(pi/2 t_max t).
  t = jnp.linspace(0.05, 0.95, 7)
  a, s = sch.cosine_alpha_sigma(t)
  gamma = 2.0 * jnp.log(jnp.tan(0.5 * jnp.pi * sch.VP_T_MAX * t))
  a2, s2 = sch.vp_alpha_sigma(gamma)
  np.testing.assert_allclose(a, a2, atol=1e-6)
  np.testing.assert_allclose(s, s2, atol=1e-6)
