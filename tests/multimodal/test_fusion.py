"""multimodal/fusion.py: sliced Wasserstein against exact 1-D W_p (sorted
samples, scipy) and Gaussian closed forms, the informatic constraint's
math, LF additivity, IF mixing, the RIP projection."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from iclrjax.multimodal import fusion


def test_1d_w1_matches_scipy():
  rng = np.random.default_rng(0)
  u, v = rng.normal(size=300), rng.gamma(2.0, size=300) - 1.0
  got = float(fusion.wasserstein_1d_pp(jnp.asarray(u), jnp.asarray(v), 1.0))
  assert got == pytest.approx(stats.wasserstein_distance(u, v), rel=1e-4)


def test_1d_w2_is_the_sorted_coupling_and_minimal():
  rng = np.random.default_rng(1)
  u, v = rng.normal(size=64), rng.normal(2.0, 0.5, size=64)
  got = float(fusion.wasserstein_1d_pp(jnp.asarray(u), jnp.asarray(v), 2.0))
  ref = np.mean((np.sort(u) - np.sort(v)) ** 2)
  assert got == pytest.approx(ref, rel=1e-5)
  for _ in range(20):   # no other coupling (permutation) is cheaper
    assert np.mean((u - v[rng.permutation(64)]) ** 2) >= ref - 1e-9


def test_sliced_equals_1d_along_one_direction():
  rng = np.random.default_rng(2)
  x, y = rng.normal(size=(100, 3)), rng.normal(size=(100, 3)) * 2
  e = jnp.array([[0.0, 1.0, 0.0]])
  got = float(fusion.sliced_wasserstein(jnp.asarray(x), jnp.asarray(y), e,
                                        1.0))
  assert got == pytest.approx(stats.wasserstein_distance(x[:, 1], y[:, 1]),
                              rel=1e-4)


def test_sliced_w2_gaussian_closed_forms():
  """N(m1, I) vs N(m2, I) in D dims: SW_2^2 = |m1 - m2|^2 / D; N(0, s1^2 I)
  vs N(0, s2^2 I): SW_2^2 = (s1 - s2)^2."""
  D, N = 4, 4000
  k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
  theta = fusion.random_directions(k3, 256, D)
  x = jax.random.normal(k1, (N, D))
  y = jax.random.normal(k2, (N, D))
  m = jnp.array([2.0, -1.0, 0.5, 1.0])
  got = float(fusion.sliced_wasserstein_pp(x, y + m, theta))
  assert got == pytest.approx(float(m @ m) / D, rel=0.1)
  got = float(fusion.sliced_wasserstein_pp(0.5 * x, 3.0 * y, theta))
  assert got == pytest.approx(2.5**2, rel=0.05)
  assert float(fusion.sliced_wasserstein_pp(x, x, theta)) == 0.0


def test_directions_are_unit_and_rip_keeps_norms():
  th = fusion.random_directions(jax.random.key(1), 50, 7)
  np.testing.assert_allclose(jnp.linalg.norm(th, axis=-1), 1.0, rtol=1e-5)
  R = fusion.rip_projection(jax.random.key(2), 512, 256)
  x = jax.random.normal(jax.random.key(3), (200, 512))
  ratio = jnp.linalg.norm(x @ R, axis=-1) / jnp.linalg.norm(x, axis=-1)
  assert float(jnp.abs(ratio - 1).max()) < 0.25


def test_sizes_must_match():
  with pytest.raises(ValueError, match='equal sample sizes'):
    fusion.wasserstein_1d_pp(jnp.zeros(3), jnp.zeros(4))


def test_informatic_constraint():
  """0 for uncorrelated dimensions, 1 for identical ones, scale-free."""
  h = jax.random.normal(jax.random.key(0), (50_000, 6))
  assert float(fusion.informatic_constraint(h)) < 1e-3
  same = jnp.tile(h[:, :1], (1, 6))
  assert float(fusion.informatic_constraint(same)) == pytest.approx(1.0,
                                                                    rel=1e-3)
  # two perfectly correlated columns among 4: 2 of 12 off-diagonal entries
  h4 = jnp.concatenate([h[:, :3], -3.0 * h[:, :1]], axis=1)
  assert float(fusion.informatic_constraint(h4)) == pytest.approx(
      2 / 12, abs=2e-3)
  assert float(fusion.informatic_constraint(h4 * 7.0 + 2.0)) == pytest.approx(
      float(fusion.informatic_constraint(h4)), rel=1e-4)


def test_late_fusion_is_additive_and_intermediate_fusion_is_not():
  k = jax.random.split(jax.random.key(0), 4)
  a, a2 = jax.random.normal(k[0], (5, 3)), jax.random.normal(k[1], (5, 3))
  b, b2 = jax.random.normal(k[2], (5, 4)), jax.random.normal(k[3], (5, 4))
  lf = fusion.LateFusion(hidden=16, num_classes=2)
  p = lf.init(jax.random.key(1), a, b)
  f = lambda x, y: lf.apply(p, x, y)
  np.testing.assert_allclose(f(a, b) + f(a2, b2), f(a, b2) + f(a2, b),
                             atol=1e-5)
  mf = fusion.IntermediateFusion(hidden=16, latent=4, num_classes=2)
  q = mf.init(jax.random.key(1), a, b)
  g = lambda x, y: mf.apply(q, x, y).logits
  assert float(jnp.abs(g(a, b) + g(a2, b2) - g(a, b2) - g(a2, b)).max()) > 1e-3
  out = mf.apply(q, a, b)
  assert out.za.shape == (5, 4) and out.h.shape == (5, 16)


def test_iid_loss_with_zero_weights_is_cross_entropy():
  mf = fusion.IntermediateFusion(hidden=8, latent=4, num_classes=3)
  a = jax.random.normal(jax.random.key(0), (10, 3))
  q = mf.init(jax.random.key(1), a, a)
  out = mf.apply(q, a, a + 1.0)
  y = jnp.arange(10) % 3
  R = fusion.rip_projection(jax.random.key(2), 4, 2)
  th = fusion.random_directions(jax.random.key(3), 8, 2)
  total, parts = fusion.iid_loss(out, y, R, th, 0.0, 0.0)
  ref = -np.mean(np.asarray(jax.nn.log_softmax(out.logits))[np.arange(10), y])
  assert float(total) == pytest.approx(ref, rel=1e-5)
  total, _ = fusion.iid_loss(out, y, R, th, 0.5, 2.0)
  assert float(total) == pytest.approx(
      ref + 0.5 * float(parts['informatic']) + 2.0 * float(parts['cohering']),
      rel=1e-5)
  assert float(parts['cohering']) > 0.0
