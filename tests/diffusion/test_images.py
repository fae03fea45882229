"""Image data: grids, digits, the known-entropy mixture (exact log p, H)."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.core import data as data_lib
from iclrjax.diffusion import images


@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  """No implicit rank promotion in the library (as in test_nets)."""
  with jax.numpy_rank_promotion('raise'):
    yield


def test_scales_and_grids():
  x = np.arange(17)
  np.testing.assert_array_equal(images.to_scale(x, 'integer'), x)
  g = images.grid(17, '[-1,1]')
  np.testing.assert_allclose(g[[0, 8, 16]], [-1.0, 0.0, 1.0], atol=1e-7)
  np.testing.assert_allclose(np.diff(g), 2 / 16, rtol=1e-5)
  assert images.spacing(17, '[-1,1]') == 2 / 16
  v = images.grid(256, 'vdm')  # VDM's encode: 2 (x + 0.5) / K - 1
  np.testing.assert_allclose(v[[0, 255]], [-1 + 1 / 256, 1 - 1 / 256],
                             rtol=1e-6)
  np.testing.assert_allclose(np.diff(v), images.spacing(256, 'vdm'),
                             rtol=1e-4)
  out = images.to_scale(jnp.arange(5), '[-1,1]', 5)
  assert isinstance(out, type(jnp.zeros(1))) and out.dtype == jnp.float32
  with pytest.raises(ValueError, match='scale'):
    images.to_scale(x, '[0,1]')


def test_digits_loader(tmp_path):
  from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
  raw = sk_datasets.load_digits().images.reshape(-1, 64)
  for split, n in (('train', 1437), ('test', 360)):
    x = images.digits(split, data_dir=tmp_path)
    assert x.shape == (n, 64) and x.dtype == np.float32
    assert x.min() == 0 and x.max() == 16
    np.testing.assert_array_equal(x, np.round(x))
    np.testing.assert_array_equal(x, raw[data_lib.digits_split_indices(split)])


def _brute_logp(x, params):
  """p(x) = sum_m pi_m prod_i kernel[proto_mi, x_i], by loops in float64."""
  kern = np.exp(params['log_kernel'])
  total = 0.0
  for m, proto in enumerate(params['prototypes']):
    prod = math.exp(params['log_pi'][m])
    for i, level in enumerate(proto):
      prod *= kern[level, x[i]]
    total += prod
  return math.log(total)


def test_known_entropy_tiny_normalises_and_mc_entropy_is_exact():
  params = images.known_entropy_params(num_prototypes=3, levels=3, side=2,
                                       noise=0.7, seed=5)
  states = np.array(list(itertools.product(range(3), repeat=4)))  # 81
  logp = np.asarray(images.known_entropy_logp(states, params), np.float64)
  np.testing.assert_allclose(np.exp(logp).sum(), 1.0, atol=1e-5)
  np.testing.assert_allclose(logp, [_brute_logp(s, params) for s in states],
                             atol=1e-5)
  p = np.exp(logp)
  h_exact = -(p * logp).sum() / (4 * math.log(2))
  h_mc, se = images.known_entropy(params, n_mc=40_000, seed=1)
  assert abs(h_mc - h_exact) < 3 * se, (h_mc, se, h_exact)
  assert se < 0.005
  # The sampler draws from p: empirical frequencies match exp(logp).
  x, _ = images.known_entropy_sample(params, np.random.default_rng(2), 40_000)
  codes = (x * 3 ** np.arange(3, -1, -1)).sum(-1)
  freq = np.bincount(codes, minlength=81) / len(codes)
  np.testing.assert_array_less(np.abs(freq - p), 4 * np.sqrt(p / 40_000) + 1e-4)


def test_known_entropy_params_deterministic_and_kernel():
  a = images.known_entropy_params(seed=3)
  b = images.known_entropy_params(seed=3)
  c = images.known_entropy_params(seed=4)
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])
  assert not np.array_equal(a['prototypes'], c['prototypes'])
  assert a['prototypes'].shape == (32, 64)
  assert a['prototypes'].min() >= 0 and a['prototypes'].max() <= 16
  kern = np.exp(a['log_kernel'])
  np.testing.assert_allclose(kern.sum(1), 1.0, atol=1e-12)
  np.testing.assert_array_equal(kern.argmax(1), np.arange(17))
  # Interior row: discretised Gaussian of width 1: p(m+1)/p(m) = e^-1/2.
  np.testing.assert_allclose(kern[8, 9] / kern[8, 8], math.exp(-0.5))


def test_known_entropy_default_is_within_the_mixture_sandwich():
  params = images.known_entropy_params()
  h, se = images.known_entropy(params, n_mc=4000, seed=0)
  assert se < 0.005
  # H(X|M) <= H(X) <= H(X|M) + H(M), per dim in bits.
  kern = np.exp(params['log_kernel'])
  row_h = -(kern * params['log_kernel']).sum(1) / math.log(2)
  h_cond = row_h[params['prototypes']].mean()
  assert h_cond - 3 * se <= h <= h_cond + math.log2(32) / 64 + 3 * se
  # Prototypes differ in ~60 of 64 pixels, so the component is nearly
  # identifiable: H is close to the upper end.
  assert h > h_cond + 0.5 * math.log2(32) / 64


def test_known_entropy_builder(tmp_path):
  kw = dict(num_prototypes=4, levels=5, side=3, noise=0.8, num_train=300,
            num_test=400, seed=7)
  name = images.known_entropy_builder(**kw)
  assert name == images.known_entropy_name(**kw)
  for part in ('m4', 'k5', 's3', 'w0p8', 'n300', 't400', 'seed7'):
    assert part in name
  assert images.known_entropy_builder(**{**kw, 'noise': 0.9}) != name
  x_tr = images.load_images(name, 'train', data_dir=tmp_path)
  x_te = images.load_images(name, 'test', data_dir=tmp_path)
  assert x_tr.shape == (300, 9) and x_te.shape == (400, 9)
  assert x_te.min() >= 0 and x_te.max() <= 4
  raw = data_lib.as_numpy(name, 'test', data_dir=tmp_path)
  assert raw['image'].dtype == np.uint8 and raw['component'].max() <= 3
  # The stored examples come from the stated distribution: their mean
  # -log p matches the Monte Carlo entropy.
  params = images.known_entropy_params(4, 5, 3, 0.8, 7)
  bits = -np.asarray(images.known_entropy_logp(x_te, params)) / (
      9 * math.log(2))
  h, se_h = images.known_entropy(params, n_mc=20_000, seed=0)
  se = math.sqrt(bits.var() / len(bits) + se_h ** 2)
  assert abs(bits.mean() - h) < 4 * se, (bits.mean(), h, se)
  # Reloading gives the same data (it is generated once, deterministically).
  np.testing.assert_array_equal(
      images.load_images(name, 'test', data_dir=tmp_path), x_te)


def test_tile_and_plot_grid(tmp_path):
  x = np.arange(5 * 2 * 3 * 1, dtype=np.float32).reshape(5, 2, 3, 1)
  t = images.tile(x, ncols=2)                    # 3 rows x 2 cols, 1 pad
  assert t.shape == (6, 6, 1)
  np.testing.assert_array_equal(t[:2, :3], x[0])
  np.testing.assert_array_equal(t[:2, 3:], x[1])
  np.testing.assert_array_equal(t[4:, :3], x[4])
  np.testing.assert_array_equal(t[4:, 3:], 0.0)
  np.testing.assert_array_equal(images.tile(x)[:, 6:9], x[2])   # one row
  strips = images.plot_grid({'a': x, 'b': -x}, tmp_path / 's.png')
  grid = images.plot_grid({'a': x, 'b': x, 'c': x}, tmp_path / 'g.png',
                          layout=(2, 2), ncols=2, value_range=None)
  assert strips.stat().st_size > 0 and grid.stat().st_size > 0


def test_psnr_hand_values():
  x = np.zeros((2, 4, 4, 1))
  assert images.psnr(x + 0.2, x) == pytest.approx(10 * np.log10(4 / 0.04))
  y = x.copy()
  y[1] += 0.2
  assert images.psnr(y, x) == pytest.approx(10 * np.log10(4 / 0.02))
  assert images.psnr(y, x, per_image=True) == float('inf')
