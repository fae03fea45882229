"""iclrjax/timeseries/tsfm_knobs.py: CRPS against the Gaussian closed form
and a numerical integral, MASE and the losses against NumPy, the tokeniser,
instance normalisation's equivariances through the whole forecaster, the
band geometry against a NumPy reference, and the data generators."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats

from iclrjax.timeseries import tsfm_knobs as tk

TINY = dict(context=16, horizon=4, d_model=16, num_heads=2, num_layers=1,
            d_ff=16, mlp_hidden=8, num_bins=16, token_bins=16, token_dim=2)


@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  with jax.numpy_rank_promotion('raise'):
    yield


def test_crps_forms_match_the_gaussian_closed_form():
  mu, sigma, y = 0.3, 1.7, np.array([-2.0, 0.1, 0.3, 2.5])
  exact = np.asarray(tk.gaussian_crps(jnp.float32(mu), jnp.float32(sigma),
                                      jnp.asarray(y)))
  # independent reference: int (F(x) - 1[x >= y])^2 dx by quadrature
  xs = np.linspace(mu - 12 * sigma, mu + 12 * sigma, 200_001)
  F = scipy.stats.norm.cdf(xs, mu, sigma)
  quad = [np.trapezoid((F - (xs >= v))**2, xs) for v in y]
  np.testing.assert_allclose(exact, quad, rtol=1e-4)
  Q = 999
  taus = (np.arange(Q) + 0.5) / Q
  q = scipy.stats.norm.ppf(taus, mu, sigma)
  from_q = tk.crps_quantiles(jnp.asarray(np.broadcast_to(q, (4, 1, Q))),
                             jnp.asarray(taus), jnp.asarray(y)[:, None])
  np.testing.assert_allclose(np.asarray(from_q)[:, 0], exact, rtol=2e-3)
  x = mu + sigma * jax.random.normal(jax.random.PRNGKey(0), (4000, 4, 1))
  from_s = tk.crps_samples(x, jnp.asarray(y, jnp.float32)[:, None])
  np.testing.assert_allclose(np.asarray(from_s)[:, 0], exact, rtol=0.03)


def test_crps_of_a_point_forecast_is_the_absolute_error():
  taus = jnp.asarray((np.arange(9) + 0.5) / 9)
  q = jnp.full((2, 3, 9), 1.5)
  y = jnp.array([[0.0, 1.5, 4.0], [2.0, -1.0, 1.0]])
  np.testing.assert_allclose(tk.crps_quantiles(q, taus, y),
                             np.abs(np.asarray(y) - 1.5), rtol=1e-6)
  np.testing.assert_allclose(tk.crps_samples(q[None, ..., 0], y),
                             np.abs(np.asarray(y) - 1.5), rtol=1e-6)


def test_mase_against_numpy():
  rng = np.random.default_rng(0)
  ctx, y, yhat = rng.normal(size=(3, 20)), rng.normal(size=(3, 5)), (
      rng.normal(size=(3, 5)))
  for lag in (1, 4):
    naive = np.mean(np.abs(ctx[:, lag:] - ctx[:, :-lag]), 1)
    ref = np.mean(np.abs(y - yhat), 1) / naive
    np.testing.assert_allclose(tk.mase(jnp.asarray(y), jnp.asarray(yhat),
                                       jnp.asarray(ctx), lag), ref,
                               rtol=1e-4)


def test_losses_against_numpy():
  rng = np.random.default_rng(1)
  y = rng.normal(size=(2, 4)).astype(np.float32)
  cfg = tk.ForecasterConfig(**TINY, loss='mse')
  out = rng.normal(size=(2, 4, 1)).astype(np.float32)
  assert float(tk.loss_fn(cfg, jnp.asarray(out), jnp.asarray(y))) == (
      pytest.approx(np.mean((out[..., 0] - y)**2), rel=1e-5))
  cfg = tk.ForecasterConfig(**TINY, loss='pinball')
  taus = np.asarray(cfg.quantiles)
  out = rng.normal(size=(2, 4, len(taus))).astype(np.float32)
  u = y[..., None] - out
  ref = np.mean(np.sum(np.maximum(taus * u, (taus - 1) * u), -1))
  assert float(tk.loss_fn(cfg, jnp.asarray(out), jnp.asarray(y))) == (
      pytest.approx(ref, rel=1e-5))
  cfg = tk.ForecasterConfig(**TINY, loss='ce')
  out = rng.normal(size=(2, 4, cfg.num_bins)).astype(np.float32)
  edges = np.linspace(-cfg.bin_range, cfg.bin_range, cfg.num_bins + 1)
  idx = np.clip(np.digitize(y, edges) - 1, 0, cfg.num_bins - 1)
  logp = out - scipy.special.logsumexp(out, -1, keepdims=True)
  ref = -np.mean(np.take_along_axis(logp, idx[..., None], -1))
  assert float(tk.loss_fn(cfg, jnp.asarray(out), jnp.asarray(y))) == (
      pytest.approx(ref, rel=1e-5))


def test_tokeniser_uniform_bins():
  c = tk.bin_centres(8, 2.0)
  np.testing.assert_allclose(c, np.linspace(-1.75, 1.75, 8), atol=1e-6)
  np.testing.assert_array_equal(tk.tokenise(c, 8, 2.0), np.arange(8))
  z = jnp.linspace(-1.99, 1.99, 101)
  err = jnp.abs(c[tk.tokenise(z, 8, 2.0)] - z)
  assert float(err.max()) <= 0.25 + 1e-6          # half a bin width
  np.testing.assert_array_equal(tk.tokenise(jnp.array([-9.0, 9.0]), 8, 2.0),
                                [0, 7])


def test_instance_normalisation():
  x = jnp.array([[1.0, 3.0, 5.0, 7.0], [-2.0, -2.0, 2.0, 2.0]])
  loc, scale = tk.normalise(x, 'zscore')
  z = (x - loc) / scale
  np.testing.assert_allclose(z.mean(1), 0, atol=1e-5)
  np.testing.assert_allclose(z.std(1), 1, atol=1e-4)
  loc, scale = tk.normalise(x, 'meanabs')
  np.testing.assert_array_equal(loc, 0)
  np.testing.assert_allclose(jnp.abs(x / scale).mean(1), 1, atol=1e-4)


class _Jitted:
  """A forecaster whose apply is jitted (one compile, not one per op)."""

  def __init__(self, cfg):
    self.net = tk.PatchForecaster(cfg)
    self.apply = jax.jit(self.net.apply, static_argnames='method')


def _init(cfg, key=0):
  net = _Jitted(cfg)
  params = jax.jit(net.net.init)(jax.random.PRNGKey(key),
                                 jnp.zeros((1, cfg.context)))['params']
  return net, params


def test_forecaster_heads_and_the_lm_substrate():
  x = jax.random.normal(jax.random.PRNGKey(1), (3, 16))
  for patch, embed, loss in ((4, 'continuous', 'mse'),
                             (8, 'quantised', 'mse'),
                             (16, 'continuous', 'pinball'),
                             (4, 'continuous', 'ce')):
    cfg = tk.ForecasterConfig(**TINY, patch=patch, embed=embed, loss=loss)
    net, params = _init(cfg)
    assert 'decoder' in params and 'head' in params
    out, (loc, scale) = net.apply({'params': params}, x)
    assert out.shape == (3, 4, cfg.out_per_step)
    assert loc.shape == scale.shape == (3, 1)
    q = tk.forecast_quantiles(cfg, out)
    assert q.shape == (3, 4, len(cfg.quantiles))
    assert bool(jnp.all(jnp.diff(q, axis=-1) >= 0))
    assert tk.point_forecast(cfg, out).shape == (3, 4)
  with pytest.raises(ValueError, match='patch=5'):
    tk.ForecasterConfig(**TINY, patch=5)
  with pytest.raises(ValueError, match='loss'):
    tk.ForecasterConfig(**TINY, loss='mae')


def _forecast(net, params, cfg, x):
  out, (loc, scale) = net.apply({'params': params}, x)
  return loc + scale * tk.point_forecast(cfg, out)


def test_zscore_forecaster_is_affine_equivariant_meanabs_only_scale():
  x = jax.random.normal(jax.random.PRNGKey(2), (2, 16))
  cfg = tk.ForecasterConfig(**TINY, patch=4)
  net, params = _init(cfg)
  f = _forecast(net, params, cfg, x)
  np.testing.assert_allclose(_forecast(net, params, cfg, 3.0 * x + 5.0),
                             3.0 * f + 5.0, rtol=1e-4, atol=1e-4)
  cfg = tk.ForecasterConfig(**TINY, patch=4, norm='meanabs')
  net, params = _init(cfg)
  f = _forecast(net, params, cfg, x)
  np.testing.assert_allclose(_forecast(net, params, cfg, 3.0 * x),
                             3.0 * f, rtol=1e-4, atol=1e-4)
  shifted = _forecast(net, params, cfg, x + 5.0)
  assert float(jnp.max(jnp.abs(shifted - (f + 5.0)))) > 1e-2


def test_quantised_embedding_is_piecewise_constant():
  cfg = tk.ForecasterConfig(**TINY, patch=8, embed='quantised',
                            norm='meanabs')
  net, params = _init(cfg)
  z = jnp.full((1, 2, 8), 0.1)
  emb = lambda z: net.apply({'params': params}, z,
                            method=tk.PatchForecaster.embed_patches)
  width = 2 * cfg.token_range / cfg.token_bins
  np.testing.assert_array_equal(emb(z), emb(z + 0.2 * width))
  assert float(jnp.max(jnp.abs(emb(z) - emb(z + 3 * width)))) > 0
  cont = tk.ForecasterConfig(**TINY, patch=8)
  net_c, params_c = _init(cont)
  g = jax.grad(lambda x: jnp.sum(_forecast(net_c, params_c, cont, x)))(
      jax.random.normal(jax.random.PRNGKey(3), (1, 16)))
  assert float(jnp.abs(g[0, 0])) > 0        # the first value reaches the head


def test_residual_mlp_is_the_formula():
  mlp = tk.ResidualMLP(hidden=5, out=3)
  x = jax.random.normal(jax.random.PRNGKey(4), (2, 4))
  p = mlp.init(jax.random.PRNGKey(5), x)['params']
  x, p = np.asarray(x), jax.tree.map(np.asarray, p)
  h = np.maximum(x @ p['hidden']['kernel'] + p['hidden']['bias'], 0)
  ref = (h @ p['output']['kernel'] + p['output']['bias']
         + x @ p['skip']['kernel'])
  np.testing.assert_allclose(mlp.apply({'params': p}, x), ref, rtol=1e-5,
                             atol=1e-6)


def test_ce_head_point_quantiles_and_samples():
  cfg = tk.ForecasterConfig(**TINY, loss='ce')
  centres = np.asarray(tk.bin_centres(cfg.num_bins, cfg.bin_range))
  logits = np.full((1, 1, cfg.num_bins), -1e9, np.float32)
  logits[..., [3, 12]] = 0.0                  # two equal modes
  out = jnp.asarray(logits)
  assert float(tk.point_forecast(cfg, out)[0, 0]) == pytest.approx(
      (centres[3] + centres[12]) / 2, abs=1e-5)
  q = np.asarray(tk.forecast_quantiles(cfg, out))[0, 0]
  taus = np.asarray(cfg.quantiles)
  np.testing.assert_allclose(q, np.where(taus <= 0.5, centres[3],
                                         centres[12]))
  s = np.asarray(tk.sample_forecasts(cfg, jax.random.PRNGKey(0), out,
                                     2000))[:, 0, 0]
  assert set(np.round(s, 5)) == {round(float(centres[3]), 5),
                                 round(float(centres[12]), 5)}
  assert abs(np.mean(s == centres[3]) - 0.5) < 0.05
  mse = tk.ForecasterConfig(**TINY)
  p = tk.sample_forecasts(mse, jax.random.PRNGKey(0), jnp.ones((1, 1, 1)), 3)
  np.testing.assert_array_equal(p, np.ones((3, 1, 1)))


def test_band_cosines_against_numpy():
  rng = np.random.default_rng(2)
  emb = rng.normal(size=(12, 5)).astype(np.float32)
  band = np.repeat(np.arange(3), 4)
  same, cross = tk.band_cosines(jnp.asarray(emb), jnp.asarray(band), 3)
  e = emb - emb.mean(0)
  e /= np.linalg.norm(e, axis=1, keepdims=True)
  cos = np.abs(e @ e.T)
  s = [cos[i, j] for i in range(12) for j in range(12)
       if i != j and band[i] == band[j]]
  c = [cos[i, j] for i in range(12) for j in range(12) if band[i] != band[j]]
  assert float(same) == pytest.approx(np.mean(s), rel=1e-4)
  assert float(cross) == pytest.approx(np.mean(c), rel=1e-4)
  # orthogonal band subspaces: cross ~ 0 after centring on 4 symmetric bands
  basis = np.eye(4, dtype=np.float32)
  orth = np.concatenate([np.outer([1, -1], basis[b]) for b in range(4)])
  same, cross = tk.band_cosines(jnp.asarray(orth), jnp.repeat(jnp.arange(4),
                                                              2), 4)
  assert float(same) == pytest.approx(1.0, abs=1e-4)
  assert float(cross) == pytest.approx(0.0, abs=1e-4)


def test_stable_rank():
  v = jnp.asarray(np.random.default_rng(3).normal(size=(8, 1)))
  assert float(tk.stable_rank(v @ jnp.ones((1, 6)))) == pytest.approx(
      1.0, abs=1e-4)
  iso = jnp.concatenate([jnp.eye(4), -jnp.eye(4)])
  assert float(tk.stable_rank(iso)) == pytest.approx(4.0, rel=1e-4)


def test_synthetic_series_and_jumps():
  c = tk.SeriesConfig(max_components=1, trend_scale=0.0, level_scale=0.0,
                      noise_max=0.0, shift_prob=0.0)
  x = np.asarray(jax.jit(lambda k: tk.synthetic_series(k, 4096, c))(
      jax.random.PRNGKey(7)))
  spec = np.abs(np.fft.rfft(x))
  peak_period = 4096 / np.argmax(spec)
  assert c.period_min <= peak_period <= c.period_max * 1.05
  p = tk.log_uniform(jax.random.PRNGKey(8), (20000,), 4.0, 128.0)
  assert 4.0 <= float(p.min()) and float(p.max()) <= 128.0
  # log-uniform: the median is the geometric mean of the ends
  assert float(jnp.median(p)) == pytest.approx(np.sqrt(4 * 128), rel=0.05)
  xs, signs = jax.jit(jax.vmap(lambda k: tk.jump_series(k, 32, 8, 2.0,
                                                        0.1)))(
      jax.random.split(jax.random.PRNGKey(9), 2000))
  fut = np.asarray(xs[:, 32:].mean(1))
  np.testing.assert_allclose(fut, 2.0 * np.asarray(signs), atol=0.2)
  assert abs(float(signs.mean())) < 0.1
  assert abs(float(np.corrcoef(xs[:, :32].mean(1), signs)[0, 1])) < 0.1
  batch = jax.jit(lambda k: tk.training_batch(k, 64, 40, 8,
                                              tk.SeriesConfig()))(
      jax.random.PRNGKey(10))
  assert batch.shape == (64, 40) and bool(jnp.all(jnp.isfinite(batch)))
