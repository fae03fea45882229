"""Spike datasets: MNIST-1D encoding, synthetic digits, SHD / N-TIDIGITS."""

from __future__ import annotations

import re

import numpy as np
import pytest

from iclrjax.core import data
from iclrjax.snn import datasets
from tests.snn import shd_files

# Small MNIST-1D for the tests: 800 train / 200 test.
N_SMALL = 1000


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  return tmp_path_factory.mktemp('tfds')


@pytest.fixture(scope='module')
def mnist_small(data_dir):
  return datasets.load('mnist1d', data_dir=data_dir, num_samples=N_SMALL)


# -- MNIST-1D ------------------------------------------------------------------
def test_mnist1d_shapes_dtypes_labels(mnist_small):
  d = mnist_small
  assert d.train_x.shape == (800, 80, 32) and d.test_x.shape == (200, 80, 32)
  assert d.train_x.dtype == np.uint8 and d.test_x.dtype == np.uint8
  assert d.train_y.dtype == np.int32 and d.test_y.dtype == np.int32
  assert set(np.unique(d.train_x)) <= {0, 1}
  assert d.num_classes == 10
  raw = datasets.mnist1d_raw(N_SMALL, 0)
  np.testing.assert_array_equal(d.train_y, raw['y'])
  np.testing.assert_array_equal(d.test_y, raw['y_test'])
  assert d.name == datasets.mnist1d_name(num_samples=N_SMALL)


def test_mnist1d_name_has_every_parameter_and_is_snake_case():
  name = datasets.mnist1d_name(6000, 16, 3, 0.75, 1.5, 7)
  assert name == 'spiking_mnist1d_n6000_c16_u3_r0p75_w1p5_s7'
  assert datasets.mnist1d_builder() == (
      'spiking_mnist1d_n6000_c32_u2_r0p8_w1_s0')
  assert re.fullmatch(r'[a-z0-9_]+', datasets.mnist1d_name(
      max_rate=1e-5, width=0.1 + 0.2))
  assert datasets.mnist1d_name(width=0.3) != datasets.mnist1d_name(
      width=0.1 + 0.2)


def test_mnist1d_same_seed_same_data_other_seed_differs(mnist_small,
                                                        tmp_path):
  # A fresh data dir: regenerated from scratch, bit for bit.
  again = datasets.load('mnist1d', data_dir=tmp_path, num_samples=N_SMALL)
  np.testing.assert_array_equal(again.train_x, mnist_small.train_x)
  np.testing.assert_array_equal(again.test_x, mnist_small.test_x)
  other = datasets.load('mnist1d', data_dir=tmp_path, num_samples=N_SMALL,
                        seed=1)
  assert other.name != mnist_small.name
  assert not np.array_equal(other.train_x, mnist_small.train_x)
  assert not np.array_equal(other.train_y, mnist_small.train_y)


def test_mnist1d_firing_probability_matches_receptive_fields(mnist_small):
  """Empirical spike rates vs max_rate * exp(-(x - c)^2 / (2 sigma^2))."""
  raw = datasets.mnist1d_raw(N_SMALL, 0)
  centers, sigma = datasets.receptive_fields(raw['x'], 32, 1.0)
  lo, hi = np.percentile(raw['x'], [0.5, 99.5])
  np.testing.assert_allclose(centers[[0, -1]], [lo, hi])
  np.testing.assert_allclose(sigma, (hi - lo) / 31)
  for x, spikes in ((raw['x'], mnist_small.train_x),
                    (raw['x_test'], mnist_small.test_x)):
    p = datasets.firing_probability(x, centers, sigma, 0.8)  # [N, 40, C]
    p = np.repeat(p, 2, axis=1)  # Each value held for 2 steps.
    s = spikes.astype(np.float64)
    # Per neuron, over all examples and steps.
    n = p.shape[0] * p.shape[1]
    want, got = p.mean((0, 1)), s.mean((0, 1))
    se = np.sqrt((p * (1 - p)).sum((0, 1))) / n
    assert np.all(np.abs(got - want) <= 5 * se + 1e-12), (got - want) / se
    # Calibration: positions grouped by their probability.
    edges = np.array([0.0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.81])
    for a, b in zip(edges[:-1], edges[1:]):
      m = (p >= a) & (p < b)
      se = np.sqrt((p[m] * (1 - p[m])).sum()) / m.sum()
      assert abs(s[m].mean() - p[m].mean()) <= 5 * se + 1e-12, (a, b)
  # Mean input rate (reported in the builder's docstring: 0.062 at 6000).
  assert 0.05 < mnist_small.train_x.mean() < 0.075
  # The two steps of a value are fresh draws, not copies.
  x = mnist_small.train_x
  assert np.mean(x[:, 0::2] != x[:, 1::2]) > 0.03


def test_mnist1d_raw_restores_the_global_random_state():
  np.random.seed(123)
  want = np.random.rand()
  np.random.seed(123)
  datasets.mnist1d_raw(100, 5)
  assert np.random.rand() == want


# -- synthetic digits ----------------------------------------------------------
def test_synthetic_digits_defaults(data_dir, tmp_path):
  d = datasets.load('synthetic_digits', data_dir=data_dir)
  assert d.train_x.shape == (2000, 50, 32) and d.test_x.shape == (500, 50, 32)
  assert d.train_x.dtype == np.uint8 and set(np.unique(d.train_x)) <= {0, 1}
  assert d.train_y.dtype == np.int32 and d.num_classes == 10
  assert d.name == datasets.synthetic_digits_name()
  np.testing.assert_array_equal(np.bincount(d.train_y), np.full(10, 200))
  np.testing.assert_array_equal(np.bincount(d.test_y), np.full(10, 50))
  # Determinism: regenerated elsewhere, identical.
  again = datasets.load('synthetic_digits', data_dir=tmp_path)
  np.testing.assert_array_equal(again.train_x, d.train_x)
  np.testing.assert_array_equal(again.test_y, d.test_y)
  # Learnable but not trivial. Measured (seed 0): mean rate 0.030;
  # nearest-class-mean test accuracy 0.728 on per-neuron spike counts,
  # 0.946 on the whole [T, C] raster (chance 0.1).
  assert 0.02 < d.train_x.mean() < 0.04

  def ncm(a, ya, b, yb):
    means = np.stack([a[ya == k].mean(0) for k in range(10)])
    dist = ((b[:, None] - means[None]) ** 2).sum(-1)
    return np.mean(dist.argmin(1) == yb)

  tx, vx = d.train_x.astype(np.float32), d.test_x.astype(np.float32)
  counts = ncm(tx.sum(1), d.train_y, vx.sum(1), d.test_y)
  full = ncm(tx.reshape(2000, -1), d.train_y, vx.reshape(500, -1), d.test_y)
  assert 0.5 < counts < 0.9, counts
  assert full > counts + 0.1 and full > 0.85, full


def test_synthetic_digits_parameters_and_seed(tmp_path):
  kw = dict(num_classes=4, neurons=8, steps=20, num_train=40, num_test=12,
            jitter=2, bumps=2)
  a = datasets.load('synthetic_digits', data_dir=tmp_path, **kw)
  b = datasets.load('synthetic_digits', data_dir=tmp_path, seed=1, **kw)
  assert a.train_x.shape == (40, 20, 8) and a.test_x.shape == (12, 20, 8)
  assert a.num_classes == 4
  np.testing.assert_array_equal(np.bincount(a.test_y), np.full(4, 3))
  assert a.name != b.name and not np.array_equal(a.train_x, b.train_x)
  assert re.fullmatch(r'[a-z0-9_]+', a.name)
  assert 'k4_c8_t20_n40_m12' in a.name


def test_digit_rate_map_shifts_without_wrapping():
  centers = np.array([[10.0, 4.0]])
  p0 = datasets.digit_rate_map(centers, 40, 8, 0.0, 1.0)
  p3 = datasets.digit_rate_map(centers, 40, 8, 0.0, 1.0, time_shift=3,
                               neuron_shift=1)
  assert np.unravel_index(p0.argmax(), p0.shape) == (10, 4)
  assert np.unravel_index(p3.argmax(), p3.shape) == (13, 5)
  far = datasets.digit_rate_map(centers, 40, 8, 0.02, 1.0, time_shift=100)
  np.testing.assert_allclose(far, 0.02)  # Moved out, not wrapped around.


def test_load_unknown_kind():
  with pytest.raises(ValueError, match='mnist1d.*synthetic_digits.*shd'):
    datasets.load('mnist')
  assert datasets.KINDS == ('mnist1d', 'synthetic_digits', 'shd',
                            'ntidigits')


# -- SHD / N-TIDIGITS ----------------------------------------------------------
def test_shd_binning(tmp_path):
  pytest.importorskip('h5py')
  # Example 0: two spikes of unit 3 in bin 0 (merged), unit 699 in bin 9,
  # and one after max_time (dropped). Example 1: no spikes.
  shd_files.write_shd(tmp_path / 'shd_train.h5',
             times=[[0.01, 0.05, 0.95, 1.2], []],
             units=[[3, 3, 699, 5], []], labels=[7, 19])
  shd_files.write_shd(tmp_path / 'shd_test.h5', times=[[0.5]], units=[[0]],
             labels=[2])
  x, y = datasets.load_shd(tmp_path, 'train', num_steps=10, max_time=1.0)
  assert x.shape == (2, 10, 700) and x.dtype == np.uint8
  np.testing.assert_array_equal(y, [7, 19])
  assert y.dtype == np.int32
  assert x.sum() == 2 and x[0, 0, 3] == 1 and x[0, 9, 699] == 1
  assert x[1].sum() == 0
  # Pooling units: u -> u * num_units // 700.
  xp, _ = datasets.load_shd(tmp_path, 'train', num_steps=10, max_time=1.0,
                            num_units=350)
  assert xp.shape == (2, 10, 350) and xp[0, 0, 1] == 1 and xp[0, 9, 349] == 1
  # Defaults: 100 bins over 1.4 s; t=1.2 is kept now.
  d = datasets.load('shd', data_dir=tmp_path)
  assert d.train_x.shape == (2, 100, 700) and d.test_x.shape == (1, 100, 700)
  assert d.train_x[0, 85, 5] == 1  # floor(1.2 / 0.014) = 85 (float16 time).
  assert d.test_x[0, 35, 0] == 1 and d.num_classes == 20
  assert d.name == 'shd_t100_m1p4_u700'


def _one_line(e):
  msg = str(e.value)
  assert '\n' not in msg, msg
  return msg


def test_shd_missing_file_names_the_file_and_data_dir(tmp_path):
  with pytest.raises(data.DatasetNotFoundError) as e:
    datasets.load_shd(tmp_path, 'train')
  msg = _one_line(e)
  assert msg.startswith(f'dataset shd is not in {tmp_path} (missing '
                        'shd_train.h5 and shd_test.h5)')
  for s in ('--config.data_dir', 'https://zenkelab.org/datasets/', 'gunzip'):
    assert s in msg, s
  (tmp_path / 'shd_test.h5.gz').write_bytes(b'')
  with pytest.raises(data.DatasetNotFoundError, match='shd_train.h5') as e:
    datasets.load('shd', data_dir=tmp_path, num_steps=10)
  msg = _one_line(e)
  assert 'shd_test.h5.gz is there: gunzip it' in msg
  assert 'shd_train.h5.gz is there' not in msg  # Only the test file is gzipped.
  # Once train is there, only the test file is named.
  (tmp_path / 'shd_train.h5').write_bytes(b'')
  with pytest.raises(data.DatasetNotFoundError) as e:
    datasets.load_shd(tmp_path, 'test')
  assert '(missing shd_test.h5; shd_test.h5.gz is there' in _one_line(e)


def test_check_available_reads_and_generates_nothing(tmp_path):
  for kind in ('shd', 'ntidigits'):
    with pytest.raises(data.DatasetNotFoundError) as e:
      datasets.check_available(kind, tmp_path)
    assert _one_line(e).startswith(f'dataset {kind} is not in {tmp_path}')
  (tmp_path / 'shd_train.h5').write_bytes(b'')  # Not HDF5: it is not read.
  with pytest.raises(data.DatasetNotFoundError, match=r'missing shd_test\.h5\)'):
    datasets.check_available('shd', tmp_path)
  (tmp_path / 'shd_test.h5').write_bytes(b'')
  (tmp_path / 'n-tidigits.hdf5').write_bytes(b'')
  for kind in ('shd', 'ntidigits'):
    datasets.check_available(kind, tmp_path)
  for kind in ('mnist1d', 'synthetic_digits'):  # Generated on first use.
    datasets.check_available(kind, tmp_path / 'tfds')
  assert not (tmp_path / 'tfds').exists()  # ... and not by the check.
  with pytest.raises(ValueError, match='mnist1d'):
    datasets.check_available('nope', tmp_path)


def _write_ntidigits(path, split, samples):
  h5py = pytest.importorskip('h5py')
  with h5py.File(path, 'a') as f:
    f.create_dataset(f'{split}_labels',
                     data=np.array([k.encode() for k in samples], 'S'))
    for k, (t, a) in samples.items():
      f.create_dataset(f'{split}_timestamps/{k}',
                       data=np.asarray(t, np.float32))
      f.create_dataset(f'{split}_addresses/{k}',
                       data=np.asarray(a, np.uint8))


def test_ntidigits_binning_and_labels(tmp_path):
  pytest.importorskip('h5py')
  path = tmp_path / 'n-tidigits.hdf5'
  _write_ntidigits(path, 'train', {
      'man-ae-z': ([0.0, 0.31, 0.32], [0, 63, 63]),
      'woman-tk-1o2': ([0.1], [5]),  # Multi-digit: skipped.
      'man-ae-o': ([1.99, 2.5], [10, 11]),
      'boy-xy-5': ([0.5], [7]),
  })
  _write_ntidigits(path, 'test', {'girl-ab-9': ([0.05], [1])})
  x, y = datasets.load_ntidigits(tmp_path, 'train', num_steps=20,
                                 max_time=2.0)
  assert x.shape == (3, 20, 64) and x.dtype == np.uint8
  np.testing.assert_array_equal(y, [0, 10, 5])
  assert x[0, 0, 0] == 1 and x[0, 3, 63] == 1 and x[0].sum() == 2
  assert x[1, 19, 10] == 1 and x[1].sum() == 1  # t = 2.5 dropped.
  assert x[2, 5, 7] == 1 and x.sum() == 4
  d = datasets.load('ntidigits', data_dir=tmp_path, num_steps=20)
  assert d.num_classes == 11 and d.test_x.shape == (1, 20, 64)
  np.testing.assert_array_equal(d.test_y, [9])
  assert d.name == 'ntidigits_t20_m2'
  assert datasets.ntidigits_label('man-ae-z') == 0
  assert datasets.ntidigits_label('man-ae-o') == 10
  assert datasets.ntidigits_label('man-ae-12') is None


def test_ntidigits_missing_file(tmp_path):
  with pytest.raises(data.DatasetNotFoundError) as e:
    datasets.load('ntidigits', data_dir=tmp_path)
  msg = _one_line(e)
  assert msg.startswith(f'dataset ntidigits is not in {tmp_path} (missing '
                        'n-tidigits.hdf5)')
  for s in ('--config.data_dir', 'Anumula'):
    assert s in msg, s


def test_raw_loaders_reject_bad_split(tmp_path):
  with pytest.raises(ValueError, match='split'):
    datasets.load_shd(tmp_path, 'valid')
