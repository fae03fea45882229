"""The digits classifier and the Frechet distance."""

import numpy as np
import pytest
import scipy.linalg

from iclrjax.diffusion import features


@pytest.fixture(scope='module')
def clf():
  return features.train_classifier(steps=600)


def test_classifier_is_accurate(clf):
  assert clf.test_accuracy >= 0.93
  x, _ = features.digits_labeled('test')
  assert clf.features(x[:5]).shape == (5, clf.width)


def test_frechet_matches_scipy_sqrtm():
  rng = np.random.default_rng(0)
  a = rng.normal(size=(400, 6)) @ rng.normal(size=(6, 6))
  b = rng.normal(size=(300, 6)) @ rng.normal(size=(6, 6)) + 0.5
  mu_a, s_a = a.mean(0), np.cov(a, rowvar=False)
  mu_b, s_b = b.mean(0), np.cov(b, rowvar=False)
  ref = (np.sum((mu_a - mu_b) ** 2) + np.trace(s_a + s_b)
         - 2 * np.trace(scipy.linalg.sqrtm(s_a @ s_b).real))
  np.testing.assert_allclose(features.frechet_distance(a, b), ref, rtol=1e-6)
  assert abs(features.frechet_distance(a, a)) < 1e-8


def test_frechet_closed_form_for_isotropic_gaussians():
  # N(0, I) vs N(m, s^2 I) in d dims: |m|^2 + d (1 - s)^2.
  d, m, s = 3, np.array([1.0, -2.0, 0.5]), 2.0
  got = features.frechet_from_stats(np.zeros(d), np.eye(d), m, s**2 * np.eye(d))
  np.testing.assert_allclose(got, m @ m + d * (1 - s) ** 2, rtol=1e-12)


def test_real_test_digits_are_closer_than_noise(clf):
  x, _ = features.digits_labeled('train')
  xt, _ = features.digits_labeled('test')
  noise = np.random.default_rng(0).uniform(-1, 1, xt.shape).astype(np.float32)
  f_ref = clf.features(x)
  assert (features.frechet_distance(clf.features(xt), f_ref)
          < 0.2 * features.frechet_distance(clf.features(noise), f_ref))
