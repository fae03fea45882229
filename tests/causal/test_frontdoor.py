"""Front-door learners (arXiv 2509.22531): DGP, true nuisances, estimators."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.causal import frontdoor as fd

jax.config.update('jax_enable_x64', False)


@pytest.fixture(scope='module')
def big_md():
  """10^6 draws of the md DGP (d = 10), its exact nuisances."""
  data = fd.simulate(jax.random.key(0), 10**6, 10, 'md')
  return data, fd.true_nuisances(data.params, data.c, data.x)


def test_pseudo_outcome_with_true_nuisances_is_unbiased_for_tau(big_md):
  data, nu = big_md
  psi = fd.fd_pseudo_outcome(nu, data.x, data.z, data.y)
  # E[phi_1 - phi_0 | C] = tau(C): the means agree (SE ~ 0.003 here).
  assert abs(float(psi.mean() - data.tau.mean())) < 0.005
  # E[psi | C] = tau(C), so regressing psi on [1, C] converges to the same
  # linear projection as regressing tau (coefficient SE ~ 0.005 here).
  feats = fd.linear_features(data.c, fd.zscore_stats(data.c))
  np.testing.assert_allclose(fd.ridge(feats, psi), fd.ridge(feats, data.tau),
                             atol=0.025)


def test_plug_in_with_true_nuisances_is_tau_exactly(big_md):
  data, nu = big_md
  np.testing.assert_allclose(fd.fd_pi(nu), data.tau, atol=1e-5)


def test_true_nuisances_match_the_sample(big_md):
  data, nu = big_md
  x, z, y = (np.asarray(a) for a in (data.x, data.z, data.y))
  # P(X = 1) and E[Y | Z, X] cells: quadrature nuisances vs the draws.
  assert abs(float(nu.e1.mean()) - x.mean()) < 3e-3
  m_obs = np.asarray(jnp.where(data.z > 0,
                               jnp.where(data.x > 0, nu.m11, nu.m10),
                               jnp.where(data.x > 0, nu.m01, nu.m00)))
  for zz in (0, 1):
    for xx in (0, 1):
      cell = (z == zz) & (x == xx)
      assert abs(y[cell].mean() - m_obs[cell].mean()) < 0.02, (zz, xx)
  assert abs(float((y - np.asarray(nu.m_y)).mean())) < 0.01
  assert abs(float((z - np.asarray(nu.m_z)).mean())) < 3e-3


def test_md_dgp_has_the_observational_paradox():
  data = fd.simulate(jax.random.key(3), 20000, 10, 'md')
  x, y = np.asarray(data.x), np.asarray(data.y)
  assert y[x == 1].mean() - y[x == 0].mean() < 0      # confounded contrast
  assert float(data.tau.mean()) > 0                   # the effect is positive


def test_weak_overlap_propensities_grow_extreme_with_kappa():
  frac = {}
  for kappa in (2.0, 10.0):
    data = fd.simulate(jax.random.key(4), 20000, 10, 'weak_overlap', kappa)
    e1 = np.asarray(fd.true_nuisances(data.params, data.c, data.x).e1)
    frac[kappa] = np.mean((e1 < 0.05) | (e1 > 0.95))
  # e1(C) = E_U[s(kappa (.) )] is smoothed by U, so fewer units than the
  # conditional propensity suggests; still many more at kappa = 10.
  assert frac[10.0] > 0.1 and frac[10.0] > 2 * frac[2.0], frac  # 0.16, 0.07


def test_pseudo_outcome_is_robust_to_a_wrong_m(big_md):
  """Bias is a product of errors: a wrong m alone (e and q right, so xi and
  pi are right) leaves the mean of phi_1 - phi_0 at tau."""
  data, nu = big_md
  target = float(data.tau.mean())
  wrong_m = nu._replace(m00=nu.m00 + 0.5, m01=nu.m01 - 0.3,
                        m10=nu.m10 + 0.2, m11=nu.m11 + 0.7)
  psi = fd.fd_pseudo_outcome(wrong_m, data.x, data.z, data.y)
  assert abs(float(psi.mean()) - target) < 0.01
  assert abs(float(fd.fd_pi(wrong_m).mean()) - target) > 0.05  # PI biased


def test_pseudo_outcome_is_robust_to_a_wrong_q(big_md):
  """m and e right, q wrong: the q-weighted terms are corrected by the
  back-door AIPW term only when r_me(z, C) = sum_x m(z, x, C) e_x(C) pairs
  each z with its own outcome cells (Def. 2). Swapping m(0, 1) and m(1, 0)
  in r_me (the bug fixed at cbaf734) moved the bias to ~+0.7 at n = 4e5."""
  data, nu = big_md
  target = float(data.tau.mean())
  logit = lambda p: jnp.log(p) - jnp.log1p(-p)
  wrong_q = nu._replace(q1_1=jax.nn.sigmoid(logit(nu.q1_1) - 0.8),
                        q1_0=jax.nn.sigmoid(logit(nu.q1_0) + 0.8))
  psi = fd.fd_pseudo_outcome(wrong_q, data.x, data.z, data.y, den=nu)
  assert abs(float(psi.mean()) - target) < 0.01
  assert abs(float(fd.fd_pi(wrong_q).mean()) - target) > 0.05  # PI biased
  psi = fd.fd_pseudo_outcome(wrong_q, data.x, data.z, data.y)
  assert abs(float(psi.mean()) - target) < 0.01   # q wrong where it divides


def test_structural_noise_is_not_centred_and_spares_denominators():
  n = 10000
  nu = fd.Nuisances(*(jnp.full((n,), 0.5) for _ in range(9)))
  out = fd.perturb_nuisances(jax.random.key(0), nu, 0.5, n)
  mean, sd = n ** -0.25, n ** -0.125
  d = np.asarray(out.m11 - nu.m11)
  assert abs(d.mean() - 0.5 * mean) < 4 * 0.5 * sd / np.sqrt(n)
  assert abs(d.std() - 0.5 * sd) < 0.02
  np.testing.assert_array_equal(out.m_y, nu.m_y)   # residual baselines kept
  np.testing.assert_array_equal(out.m_z, nu.m_z)


def test_zeta_averages_to_gamma():
  # E[zeta | C] = E[g(X, C) | C] for X ~ Bern(e) even with a wrong e used
  # only at first order: exact mean when e is right.
  k = jax.random.split(jax.random.key(1), 3)
  e = jax.random.uniform(k[0], (200000,), minval=0.2, maxval=0.8)
  x = jax.random.bernoulli(k[1], e).astype(jnp.float32)
  g1, g0 = 1.0 + e, -0.5 * e
  gamma = e * g1 + (1 - e) * g0
  z = fd.zeta(e, g1, g0, x)
  assert abs(float((z - gamma).mean())) < 5e-3


def test_ridge_and_logistic_against_numpy_and_sklearn():
  from sklearn.linear_model import LogisticRegression  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  a = rng.normal(size=(500, 4)).astype(np.float32)
  w = rng.normal(size=4).astype(np.float32)
  y = a @ w + 0.1 * rng.normal(size=500).astype(np.float32)
  weights = rng.uniform(0.5, 2.0, 500).astype(np.float32)
  want = np.linalg.solve(a.T @ (weights[:, None] * a) + 0.3 * np.eye(4),
                         a.T @ (weights * y))
  np.testing.assert_allclose(fd.ridge(a, y, 0.3, weights), want, rtol=1e-4)
  lab = (rng.random(500) < 1 / (1 + np.exp(-a @ w))).astype(np.float32)
  sk = LogisticRegression(C=1 / 1e-4, fit_intercept=False, tol=1e-10,
                          max_iter=1000).fit(a, lab)
  np.testing.assert_allclose(fd.logistic(jnp.asarray(a), jnp.asarray(lab)),
                             sk.coef_[0], rtol=2e-3, atol=2e-3)


@pytest.fixture(scope='module')
def estimates():
  """Cross-fitted estimates at n = 20000, delta = 0 and 0.5 (md, d = 10)."""
  data = fd.simulate(jax.random.key(7), 20000, 10, 'md')
  run = jax.jit(lambda k, dl: {**fd.estimate_two_fold(k, data, dl),
                               'fd_r3': fd.estimate_fd_r3(k, data, dl)})
  return data, {dl: run(jax.random.key(8), dl) for dl in (0.0, 0.5)}


def test_cross_fitted_estimates_recover_tau(estimates):
  data, est = estimates
  for name, tau in est[0.0].items():
    err = float(fd.rmse(tau, data.tau))
    assert err < 0.15, (name, err)   # |tau| ~ 0.3-0.4; linear nuisances


def test_structural_noise_biases_the_plug_in_most(estimates):
  # A 5-seed pilot (n = 20000, delta = 0.5): PI .276,
  # DR .085, R .086. Here: one seed, the same ordering.
  data, est = estimates
  err = {k: float(fd.rmse(v, data.tau)) for k, v in est[0.5].items()}
  assert err['fd_dr'] < err['fd_pi'] and err['fd_r'] < err['fd_pi'], err


def test_cross_fitting_uses_only_the_other_half():
  """Changing the outcomes of one half leaves the nuisances fitted on the
  other half, hence FD-PI on the first half, unchanged."""
  data = fd.simulate(jax.random.key(9), 2000, 10, 'md')
  key = jax.random.key(1)
  n = data.x.shape[0]
  perm = jax.random.permutation(jax.random.split(key)[0], n)
  first, second = perm[: n // 2], perm[n // 2:]
  a = fd.estimate_two_fold(key, data)['fd_pi']
  # A larger effect of Z on Y in the first half only.
  changed = data._replace(y=data.y.at[first].add(2.0 * data.z[first]))
  b = fd.estimate_two_fold(key, changed)['fd_pi']
  np.testing.assert_allclose(a[first], b[first], atol=1e-5)  # nuisances of
  assert float(jnp.abs(a[second] - b[second]).max()) > 1e-3  # `second` moved
