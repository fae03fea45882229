"""iclrjax/stats/w2s.py: the feature model's moments and risks against Monte
Carlo and algebra, the closed form against simulation, GCE against autodiff,
the entropy subset, the spurious-digits data."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.stats import datasets
from iclrjax.stats import w2s



@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  with jax.numpy_rank_promotion('raise'):
    yield


@pytest.fixture(scope='module')
def geom():
  return w2s.make_geometry(jax.random.PRNGKey(3), 8, 6, 4, 2, mu_t=2.5,
                           mu_s=1.5, align=0.6, sigma_xi=0.8, sigma_y=0.7)


def test_geometry_has_the_prescribed_similarity_and_means(geom):
  t, s = np.asarray(geom.T), np.asarray(geom.S)
  np.testing.assert_allclose(t.T @ t, np.eye(3), atol=1e-5)
  np.testing.assert_allclose(s.T @ s, np.eye(1), atol=1e-5)
  np.testing.assert_allclose(np.sum((t.T @ s)**2), 0.6**2, atol=1e-5)
  np.testing.assert_allclose(t.T @ np.asarray(geom.mu_xi), [0, 0, 2.5],
                             atol=1e-5)
  np.testing.assert_allclose(s.T @ np.asarray(geom.mu_xi), [0.8 * 1.5],
                             atol=1e-5)
  c = w2s.make_geometry(jax.random.PRNGKey(3), 8, 6, 4, 2, mu_t=2.5,
                        align=0.6, align_to='complement')
  assert float(jnp.sum((c.T.T @ c.S)**2)) < 1e-10


def test_second_moment_and_excess_risk_match_monte_carlo(geom):
  eta = 0.3
  d = w2s.sample(jax.random.PRNGKey(0), geom, 400_000, eta)
  v_t, v_s = w2s.group_view(geom.T, d.xi), w2s.group_view(geom.S, d.xi)
  np.testing.assert_allclose(w2s.second_moment(geom, geom.T, geom.S, eta),
                             v_t.T @ v_s / v_t.shape[0], atol=0.02)
  assert abs(float(d.g.mean()) - eta) < 0.005
  w = jax.random.normal(jax.random.PRNGKey(1), (8, 2))
  mc = jnp.mean((w2s.predict(w, d.z, v_s) - d.z @ geom.beta)**2)
  np.testing.assert_allclose(w2s.excess_risk(geom, w, geom.S, eta), mc,
                             rtol=0.02)


def test_ridgeless_fit_is_numpy_least_squares(geom):
  d = w2s.sample(jax.random.PRNGKey(2), geom, 200, 0.2)
  v = w2s.group_view(geom.T, d.xi)
  w = w2s.ridgeless_fit(d.z, v, d.y)
  phi = np.asarray(d.z)[:, :, None] * np.asarray(v)[:, None, :]
  ref = np.linalg.lstsq(phi.reshape(200, -1).astype(np.float64),
                        np.asarray(d.y, np.float64), rcond=None)[0]
  np.testing.assert_allclose(np.asarray(w).ravel(), ref, atol=2e-4)


def test_closed_form_reduces_to_the_shift_law_when_the_student_is_blind():
  # Xi = 0 and mu_S = 0: ER_S bias = c (1 + (eta_u - eta_l)^2 m / (1 +
  # eta_l (1 - eta_l) m)), m = ||mu_T||^2 / sigma^2 (Sherman-Morrison), and
  # ER_T = c (1 + tr(C_l^-1 C_t) + (eta_t - eta_l)^2 mu^T C_l^-1 mu).
  g = w2s.make_geometry(jax.random.PRNGKey(0), 16, 6, 4, 2, mu_t=3.0,
                        sigma_xi=1.0, sigma_y=1.0)
  n, big_n, el, eu, et = 1000, 2**30, 0.1, 0.4, 0.5
  cf = w2s.closed_form(g, n, big_n, el, eu, et)
  c = 16 / (n - 64)
  m = 9.0
  sat = lambda eta: m / (1 + eta * (1 - eta) * m)
  np.testing.assert_allclose(cf.student, c * (1 + (eu - el)**2 * sat(el)),
                             rtol=1e-4)
  tr = 2 + (1 + et * (1 - et) * m) / (1 + el * (1 - el) * m)
  np.testing.assert_allclose(cf.teacher, c * (1 + tr + (et - el)**2 * sat(el)),
                             rtol=1e-4)
  q = w2s.quoted_limit(g, n, el, eu, et)
  np.testing.assert_allclose(q.student, 16 / n * (1 + (eu - el)**2 * m),
                             rtol=1e-5)


def test_simulation_agrees_with_the_closed_form():
  # Small gamma (n = 16 d_T): the finite-n factor is nearly exact.
  g = w2s.make_geometry(jax.random.PRNGKey(1), 8, 6, 4, 2, mu_t=2.0,
                        mu_s=1.0, align=0.5)
  n, big_n = 512, 2048
  keys = jax.random.split(jax.random.PRNGKey(5), 32)
  sim = jax.jit(jax.vmap(
      lambda k: w2s.simulate(k, g, n, big_n, 0.2, 0.4, 0.5)))(keys)
  cf = w2s.closed_form(g, n, big_n, 0.2, 0.4, 0.5)
  np.testing.assert_allclose(sim.teacher.mean(), cf.teacher, rtol=0.1)
  np.testing.assert_allclose(sim.student.mean(), cf.student, rtol=0.1)
  assert float(sim.student.mean()) < float(sim.teacher.mean())


@pytest.mark.parametrize('q', [0.3, 0.7, 1.0])
def test_gce_gradient_matches_its_closed_form(q):
  # d/dz (1 - p_y^q) / q = -p_y^q (onehot(y) - softmax(z)).
  logits = jax.random.normal(jax.random.PRNGKey(0), (6, 4)) * 2
  y = jnp.array([0, 1, 2, 3, 1, 0])
  auto = jax.grad(lambda z: w2s.gce_loss(z, y, q).sum())(logits)
  p = jax.nn.softmax(logits)
  p_y = p[jnp.arange(6), y]
  ref = -(p_y**q)[:, None] * (jax.nn.one_hot(y, 4) - p)
  np.testing.assert_allclose(auto, ref, atol=1e-6)
  np.testing.assert_allclose(w2s.gce_loss(logits, y, q), (1 - p_y**q) / q,
                             rtol=1e-5)


def test_gce_tends_to_cross_entropy_as_q_vanishes():
  logits = jax.random.normal(jax.random.PRNGKey(1), (5, 3))
  y = jnp.array([0, 2, 1, 1, 0])
  ce = -jax.nn.log_softmax(logits)[jnp.arange(5), y]
  np.testing.assert_allclose(w2s.gce_loss(logits, y, 1e-4), ce, rtol=1e-3)


@pytest.mark.parametrize('fraction', [0.1, 0.35, 0.5, 1.0])
def test_confident_subset_keeps_the_lowest_entropy_fraction(fraction):
  logits = jax.random.normal(jax.random.PRNGKey(2), (101, 3)) * 3
  mask = np.asarray(w2s.confident_subset(logits, fraction))
  p = np.asarray(jax.nn.softmax(logits), np.float64)
  ent = -(p * np.log(p)).sum(-1)
  k = round(fraction * 101)
  assert mask.sum() == k
  assert set(np.flatnonzero(mask)) == set(np.argsort(ent, kind='stable')[:k])


@pytest.fixture(scope='module')
def head_setup():
  k = jax.random.PRNGKey(4)
  x = jax.random.normal(k, (300, 5))
  y = (x[:, 0] > 0).astype(jnp.int32)
  fit = jax.jit(functools.partial(
      w2s.fit_head, num_classes=2, steps=200, lr=0.05, batch_size=32))
  return x, y, fit


def test_fit_head_learns_and_uses_only_the_masked_examples(head_setup):
  x, y, fit = head_setup
  everyone = jnp.ones(300, bool)
  head = fit(jax.random.PRNGKey(0), x, y, everyone)
  acc = jnp.mean(jnp.argmax(w2s.head_logits(head, x), -1) == y)
  assert float(acc) > 0.95
  # Flipped labels outside the mask never reach the head.
  mask = jnp.arange(300) < 150
  y_bad = jnp.where(mask, y, 1 - y)
  head = fit(jax.random.PRNGKey(0), x, y_bad, mask)
  acc = jnp.mean(jnp.argmax(w2s.head_logits(head, x), -1) == y)
  assert float(acc) > 0.95


def test_enhanced_w2s_retrains_on_its_own_confident_labels(head_setup):
  x, y, _ = head_setup
  head = w2s.Head(jnp.zeros((5, 2)).at[0, 1].set(1.0), jnp.zeros(2))
  teacher = 1 - y   # all wrong: 'student' labels must ignore them
  kw = dict(fraction=0.5, q=0.7, steps=100, lr=0.05, batch_size=32)
  h = w2s.enhanced_w2s(jax.random.PRNGKey(0), x, head, teacher, **kw)
  acc = jnp.mean(jnp.argmax(w2s.head_logits(h, x), -1) == y)
  assert float(acc) > 0.95
  h_t = w2s.enhanced_w2s(jax.random.PRNGKey(0), x, head, teacher,
                         labels='teacher', **kw)
  acc_t = jnp.mean(jnp.argmax(w2s.head_logits(h_t, x), -1) == y)
  assert float(acc_t) < 0.5
  with pytest.raises(ValueError, match='labels'):
    w2s.enhanced_w2s(jax.random.PRNGKey(0), x, head, teacher, labels='x',
                     **kw)


def test_spurious_digits_render_both_backgrounds(tmp_path):
  d = datasets.load_spurious_digits('test', data_dir=tmp_path)
  assert d.images.shape == (360, 2, datasets.SIDE, datasets.SIDE, 3)
  np.testing.assert_array_equal(d.label, datasets.label_of_digit(d.digit))
  corner = d.images[:, :, 0, 0].astype(float)   # background pixel, RGB
  warm = corner[:, 0, 0] > corner[:, 0, 2]       # red > blue on background 0
  cool = corner[:, 1, 2] > corner[:, 1, 0]
  assert warm.all() and cool.all()
  # The digit's ink is the same on both backgrounds.
  centre = d.images[:, :, 4:8, 4:8].astype(float).mean((2, 3, 4))
  assert np.corrcoef(centre[:, 0], centre[:, 1])[0, 1] > 0.8
