"""np/arbuffer.py: the buffer's masks (against the release in
tests/parity/test_arbuffer.py), one-pass joint density == sequential cached
decode, set invariance, samplers, the mixture head and the GP oracle against
closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from iclrjax.kernels import base as kernels
from iclrjax.neural_process import arbuffer as ab

CFG = ab.Config(d_model=32, num_heads=4, num_layers=2, d_ff=64,
                buffer_size=8, num_components=4)
NC, NT = 8, 12


@pytest.fixture(scope='module')
def setup():
  params = ab.init(jax.random.key(0), CFG)
  x, y, ls, noise = ab.gp_tasks(jax.random.key(1), ab.GPPrior(), 3, NC + NT)
  return params, x[:, :NC], y[:, :NC], x[:, NC:], y[:, NC:], ls, noise


@pytest.mark.parametrize('nc,nb,nt', [(5, 4, 16), (3, 2, 9), (6, 8, 16)])
def test_training_mask_structure(nc, nb, nt):
  """Against the release: tests/parity/test_arbuffer.py (fixture)."""
  m = np.asarray(ab.training_mask(nc, nb, nt))
  assert m[:, :nc].all()                           # everyone sees the context
  assert not m[:, nc + nb:].any()                  # nobody sees a target
  assert not m[:nc, nc:].any()                     # the context is a set
  np.testing.assert_array_equal(m[nc:nc + nb, nc:nc + nb],
                                np.tril(np.ones((nb, nb), bool)))
  seen = m[nc + nb:, nc:nc + nb].sum(1)            # buffer keys per target
  n_ar = (nt // (2 * nb)) * nb
  np.testing.assert_array_equal(seen[:n_ar], np.arange(n_ar) % nb + 1)
  assert not seen[n_ar:].any()


def test_teacher_forcing_and_decode_masks():
  n = 6
  m = np.asarray(ab.teacher_forcing_mask(n))
  np.testing.assert_array_equal(m[:n, :n], np.tril(np.ones((n, n), bool)))
  np.testing.assert_array_equal(m[n:, :n],
                                np.tril(np.ones((n, n), bool), k=-1))
  assert not m[:, n:].any()
  np.testing.assert_array_equal(ab.decode_mask(2), [[True, False],
                                                    [True, False]])
  np.testing.assert_array_equal(ab.decode_mask(1), [[False]])


def test_one_pass_joint_density_equals_sequential_cached_decode(setup):
  """The issue's exactness claim: |diff| < 1e-4 per target, float32,
  random weights."""
  p, xc, yc, xt, yt = setup[:5]
  one = jax.jit(ab.joint_logpdf, static_argnums=1)(p, CFG, xc, yc, xt, yt)
  seq = jax.jit(ab.decode_logpdf, static_argnums=1)(p, CFG, xc, yc, xt, yt)
  assert one.shape == (3, NT)
  np.testing.assert_allclose(one, seq, atol=1e-4, rtol=0)
  # Not equal by construction: a target that also saw its own buffer slot
  # (b_{<=i}, i.e. its own y) gives other values.
  leak = ab.teacher_forcing_mask(NT) | jnp.eye(2 * NT, k=-NT, dtype=bool)
  leaked = ab.mixture_logpdf(
      ab.joint_mixture(p, CFG, xc, yc, xt, yt, mask=leak), yt)
  assert float(jnp.abs(leaked - one).max()) > 1e-3


def test_context_is_a_set_the_buffer_is_not(setup):
  p, xc, yc, xt, yt = setup[:5]
  f = jax.jit(ab.joint_logpdf, static_argnums=1)
  base = f(p, CFG, xc, yc, xt, yt)
  perm = jnp.array([3, 1, 0, 7, 2, 6, 5, 4])
  np.testing.assert_allclose(f(p, CFG, xc[:, perm], yc[:, perm], xt, yt),
                             base, atol=1e-5, rtol=0)
  # The last target sees the other NT - 1 points in the buffer in either
  # order; reordering them changes its prediction (causal, positioned).
  order = jnp.concatenate([jnp.arange(NT - 1)[::-1], jnp.array([NT - 1])])
  moved = f(p, CFG, xc, yc, xt[:, order], yt[:, order])
  assert float(jnp.abs(moved[:, -1] - base[:, -1]).max()) > 1e-4


def test_padded_context_equals_the_unpadded_one(setup):
  p, xc, yc, xt, yt = setup[:5]
  pad = lambda a: jnp.concatenate([a, jnp.full_like(a[:, :3], 7.0)], 1)
  valid = jnp.broadcast_to(jnp.arange(NC + 3) < NC, (3, NC + 3))
  np.testing.assert_allclose(
      ab.joint_logpdf(p, CFG, pad(xc), pad(yc), xt, yt, valid),
      ab.joint_logpdf(p, CFG, xc, yc, xt, yt), atol=1e-5)


def test_reencode_is_set_mode_on_the_grown_context(setup):
  p, xc, yc, xt, yt = setup[:5]
  r = ab.reencode_logpdf(p, CFG, xc, yc, xt, yt)
  m = ab.marginal_logpdf(p, CFG, xc, yc, xt, yt)
  np.testing.assert_allclose(r[:, 0], m[:, 0], atol=1e-5)
  t = 5
  grown = ab.marginal_logpdf(
      p, CFG, jnp.concatenate([xc, xt[:, :t]], 1),
      jnp.concatenate([yc, yt[:, :t]], 1), xt[:, t:t + 1], yt[:, t:t + 1])
  np.testing.assert_allclose(r[:, t], grown[:, 0], atol=1e-5)


def test_cached_sampler_equals_the_uncached_buffer_model(setup):
  """The KV cache changes the cost, not the draws (same keys)."""
  p, xc, yc, xt = setup[:4]
  key = jax.random.key(3)
  s = jax.jit(ab.sample, static_argnums=(1, 6))(p, CFG, key, xc, yc, xt, 4)
  assert s.shape == (3, 4, NT)
  g = ab.grown_sample(p, CFG, key, xc, yc, xt, 4, bucket=5, as_buffer=True)
  np.testing.assert_allclose(s, g, atol=1e-4)
  assert np.isfinite(ab.reencode_sample(p, CFG, key, xc, yc, xt, 4)).all()


def test_mixture_logpdf_and_sampler_against_closed_forms():
  mix = ab.Mixture(mean=jnp.array([-1.0, 0.5, 2.0]),
                   std=jnp.array([0.3, 1.0, 0.5]),
                   log_weight=jnp.log(jnp.array([0.2, 0.5, 0.3])))
  y = jnp.linspace(-3, 3, 7)
  ref = np.log(sum(w * stats.norm.pdf(y, m, s) for m, s, w in
                   zip([-1.0, 0.5, 2.0], [0.3, 1.0, 0.5], [0.2, 0.5, 0.3])))
  np.testing.assert_allclose(ab.mixture_logpdf(mix, y), ref, rtol=1e-5)
  many = jax.tree.map(lambda a: jnp.broadcast_to(a, (200_000, 3)), mix)
  draws = np.asarray(ab.mixture_sample(jax.random.key(0), many))
  w = np.array([0.2, 0.5, 0.3])
  m = np.array([-1.0, 0.5, 2.0])
  s = np.array([0.3, 1.0, 0.5])
  mean = w @ m
  var = w @ (s**2 + m**2) - mean**2
  assert abs(draws.mean() - mean) < 4 * np.sqrt(var / draws.size)
  assert abs(draws.var() / var - 1) < 0.02


def test_head_biases_follow_the_reference():
  p = ab.init(jax.random.key(0), CFG)['head']
  np.testing.assert_allclose(p['mean_bias'], np.linspace(-1, 1, 4), atol=1e-6)
  sp = np.log1p(np.exp(np.asarray(p['std_bias'])))
  np.testing.assert_allclose(sp, 1 / 3, rtol=1e-5)


def test_gp_oracle_against_scipy(setup):
  xc, yc, xt, yt, ls, noise = (a[0] for a in setup[1:])
  x = np.concatenate([xc, xt])
  K = np.asarray(kernels.rbf(x, x, lengthscale=ls), np.float64)
  K += float(noise)**2 * np.eye(NC + NT)
  y = np.concatenate([yc, yt]).astype(np.float64)
  joint = ab.gp_logpdf(xc, yc, xt, yt, ls, noise)
  ref = (stats.multivariate_normal(np.zeros(NC + NT), K).logpdf(y)
         - stats.multivariate_normal(np.zeros(NC), K[:NC, :NC]).logpdf(y[:NC]))
  np.testing.assert_allclose(float(joint.sum()), ref, rtol=1e-4, atol=1e-3)
  marg = ab.gp_logpdf(xc, yc, xt, yt, ls, noise, joint=False)
  sol = np.linalg.solve(K[:NC, :NC], K[:NC, NC:])
  mu = sol.T @ y[:NC]
  var = np.diag(K[NC:, NC:]) - np.sum(K[:NC, NC:] * sol, 0)
  np.testing.assert_allclose(marg, stats.norm.logpdf(y[NC:], mu, np.sqrt(var)),
                             rtol=1e-4, atol=1e-3)


def test_gp_oracle_ignores_padded_context_points(setup):
  xc, yc, xt, yt, ls, noise = (a[0] for a in setup[1:])
  pad = lambda a: jnp.concatenate([a, jnp.full_like(a[:2], 0.3)])
  valid = jnp.arange(NC + 2) < NC
  for joint in (True, False):
    np.testing.assert_allclose(
        ab.gp_logpdf(pad(xc), pad(yc), xt, yt, ls, noise, valid, joint),
        ab.gp_logpdf(xc, yc, xt, yt, ls, noise, joint=joint), atol=1e-4)


def test_bad_config_names_the_field():
  with pytest.raises(ValueError, match='num_components'):
    ab.Config(num_components=1)
