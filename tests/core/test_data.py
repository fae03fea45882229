"""Tests for iclrjax.core.data: offline TFDS builders, loading, batching."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import zlib

from absl import logging as absl_logging
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import datasets as sk_datasets
import tensorflow_datasets as tfds

from iclrjax.core import data

_REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run_python(code: str, *args: str,
                **popen_kwargs) -> subprocess.Popen[str]:
  env = dict(os.environ)
  env['PYTHONPATH'] = os.pathsep.join(
      [str(_REPO_ROOT)] + ([env['PYTHONPATH']] if env.get('PYTHONPATH')
                           else []))
  env['JAX_PLATFORMS'] = 'cpu'
  return subprocess.Popen(
      [sys.executable, '-c', textwrap.dedent(code), *args], env=env,
      cwd=_REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, **popen_kwargs)


# ----------------------------------------------------------------------------
# Digits.


def test_digits_round_trip(tmp_path):
  digits = sk_datasets.load_digits()
  sizes = {}
  for split in ('train', 'test'):
    arrays = data.as_numpy('digits', split, data_dir=tmp_path)
    idx = data.digits_split_indices(split)
    sizes[split] = len(idx)
    assert set(arrays) == {'image', 'label', 'index'}
    assert arrays['image'].shape == (len(idx), 8, 8, 1)
    assert arrays['image'].dtype == np.uint8
    np.testing.assert_array_equal(arrays['index'], idx)
    np.testing.assert_array_equal(arrays['image'][..., 0], digits.images[idx])
    np.testing.assert_array_equal(arrays['label'], digits.target[idx])
  assert sizes == {'train': 1437, 'test': 360}
  train, test = (data.digits_split_indices(s) for s in ('train', 'test'))
  assert not set(train) & set(test)
  np.testing.assert_array_equal(np.sort(np.concatenate([train, test])),
                                np.arange(1797))
  # Files are where they should be, as array_record.
  version_dir = tmp_path / 'digits' / '1.0.0'
  assert sorted(p.name for p in version_dir.glob('*.array_record*')) == [
      'digits-test.array_record-00000-of-00001',
      'digits-train.array_record-00000-of-00001']


def test_digits_has_17_gray_levels(tmp_path):
  images = np.concatenate([
      data.as_numpy('digits', s, data_dir=tmp_path)['image']
      for s in ('train', 'test')])
  np.testing.assert_array_equal(np.unique(images), np.arange(17))


def test_digits_deterministic_across_prepares(tmp_path):
  dirs = [tmp_path / 'a', tmp_path / 'b']
  outs = [data.as_numpy('digits', 'train', data_dir=d) for d in dirs]
  for k in outs[0]:
    np.testing.assert_array_equal(outs[0][k], outs[1][k])
  name = 'digits-train.array_record-00000-of-00001'
  assert ((dirs[0] / 'digits/1.0.0' / name).read_bytes() ==
          (dirs[1] / 'digits/1.0.0' / name).read_bytes())


def test_load_is_random_access(tmp_path):
  source = data.load('digits', 'test', data_dir=tmp_path)
  assert len(source) == 360
  idx = data.digits_split_indices('test')
  ex = source[7]
  assert int(ex['index']) == idx[7]
  batch = source.__getitems__([3, 1])
  assert [int(e['index']) for e in batch] == [idx[3], idx[1]]
  assert len(data.load('digits', 'test[:10]', data_dir=tmp_path)) == 10
  assert set(data.load('digits', data_dir=tmp_path)) == {'train', 'test'}
  builder = data.prepare('digits', data_dir=tmp_path)
  assert builder.info.splits['train'].num_examples == 1437
  assert builder.info.file_format.value == 'array_record'


def test_default_data_dir_uses_env(tmp_path, monkeypatch):
  monkeypatch.setenv('TFDS_DATA_DIR', str(tmp_path / 'env'))
  assert data.default_data_dir() == str(tmp_path / 'env')
  assert len(data.load('digits', 'test')) == 360
  assert (tmp_path / 'env' / 'digits' / '1.0.0').is_dir()
  monkeypatch.delenv('TFDS_DATA_DIR')
  assert data.default_data_dir() == os.path.expanduser('~/tensorflow_datasets')


def test_stale_incomplete_dir_is_removed(tmp_path):
  stale = tmp_path / 'digits' / 'incomplete.abc123_1.0.0'
  stale.mkdir(parents=True)
  (stale / 'junk').write_text('x')
  data.prepare('digits', data_dir=tmp_path)
  assert not stale.exists()
  assert (tmp_path / 'digits' / '1.0.0' / 'dataset_info.json').exists()


# ----------------------------------------------------------------------------
# Synthetic builders.

_FEATURES = {
    'x': tfds.features.Tensor(shape=(4,), dtype=np.int32),
    'y': tfds.features.Tensor(shape=(4,), dtype=np.int64),
    'label': tfds.features.ClassLabel(num_classes=5),
}


def _gen(rng: np.random.Generator, n: int):
  for _ in range(n):
    x = rng.integers(0, 5, size=4).astype(np.int32)
    y = np.cumsum(x) % 5
    yield {'x': x, 'y': y, 'label': int(y[-1])}


def _make(name: str, seed: int = 0, version: str = '1.0.0'):
  return data.synthetic_builder(
      name, _FEATURES,
      {'train': lambda rng: _gen(rng, 7), 'test': lambda rng: _gen(rng, 3)},
      seed=seed, version=version, description='cumulative sums mod 5')


def _expected(seed: int, split: str, n: int) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(
      np.random.SeedSequence([seed, zlib.crc32(split.encode())]))
  examples = list(_gen(rng, n))
  return {k: np.stack([np.asarray(e[k]) for e in examples])
          for k in examples[0]}


def test_synthetic_round_trip(tmp_path):
  cls = _make('test_synth_roundtrip', seed=3)
  assert cls.name == 'test_synth_roundtrip'
  assert 'test_synth_roundtrip' in data.registered_names()
  for split, n in (('train', 7), ('test', 3)):
    arrays = data.as_numpy('test_synth_roundtrip', split, data_dir=tmp_path)
    expected = _expected(3, split, n)
    assert set(arrays) == set(expected)
    for k in expected:
      np.testing.assert_array_equal(arrays[k], expected[k])
    assert arrays['x'].dtype == np.int32
  builder = cls(data_dir=tmp_path)
  assert builder.info.splits['train'].num_examples == 7
  assert builder.info.description == 'cumulative sums mod 5'


def test_synthetic_recreate_same_name_does_not_crash(tmp_path):
  first = _make('test_synth_recreate')
  a = data.as_numpy('test_synth_recreate', 'train', data_dir=tmp_path)
  second = _make('test_synth_recreate')  # Same name again: no error.
  assert second is not first
  b = data.as_numpy('test_synth_recreate', 'train', data_dir=tmp_path)
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])
  # A different definition under the same name and version is refused ...
  _make('test_synth_recreate', seed=1)
  with pytest.raises(ValueError, match='different definition'):
    data.as_numpy('test_synth_recreate', 'train', data_dir=tmp_path)
  # ... and generated afresh with a new version.
  _make('test_synth_recreate', seed=1, version='1.0.1')
  c = data.as_numpy('test_synth_recreate', 'train', data_dir=tmp_path)
  np.testing.assert_array_equal(c['x'], _expected(1, 'train', 7)['x'])


def test_synthetic_deterministic_across_prepares(tmp_path):
  _make('test_synth_det', seed=5)
  a = data.as_numpy('test_synth_det', 'train', data_dir=tmp_path / 'a')
  b = data.as_numpy('test_synth_det', 'train', data_dir=tmp_path / 'b')
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])


def test_prepared_by_another_process_after_construction(tmp_path,
                                                         monkeypatch):
  # The race CI once hit: our builder is constructed (no files yet, so its
  # info says TFRECORD), then another process finishes preparing before our
  # `is_prepared()` check. The builder we return must read the files' info.
  cls = _make('test_synth_race', seed=2)
  original = cls.is_prepared
  calls = []

  def is_prepared_after_other_process(self):
    if not calls:  # The first check: "another process" prepares it now.
      calls.append(1)
      other = cls(data_dir=str(tmp_path))
      other.download_and_prepare(
          file_format='array_record',
          download_config=tfds.download.DownloadConfig(
              try_download_gcs=False))
    return original(self)

  monkeypatch.setattr(cls, 'is_prepared', is_prepared_after_other_process)
  arrays = data.as_numpy('test_synth_race', 'train', data_dir=tmp_path)
  assert calls
  np.testing.assert_array_equal(arrays['x'], _expected(2, 'train', 7)['x'])


def test_synthetic_rejects_bad_names():
  with pytest.raises(ValueError, match='snake_case'):
    data.synthetic_builder('Bad Name', _FEATURES,
                           {'train': lambda rng: _gen(rng, 1)})


# ----------------------------------------------------------------------------
# Datasets we do not generate.


def test_missing_standard_dataset_raises(tmp_path):
  for name in ('cifar10', 'mnist', 'no_such_dataset_xyz'):
    for fn in (lambda: data.load(name, 'train', data_dir=tmp_path),
               lambda: data.prepare(name, data_dir=tmp_path),
               lambda: data.check_available(name, tmp_path)):
      with pytest.raises(data.DatasetNotFoundError) as info:
        fn()
      assert isinstance(info.value, FileNotFoundError)
      msg = str(info.value)
      # One line: the dataset, the folder searched, the fix.
      assert '\n' not in msg, msg
      assert msg.startswith(f'dataset {name} is not prepared in {tmp_path} (')
      assert f'tfds build {name}' in msg
      assert '--file_format=array_record' in msg
      assert f'copy /tmp/tfds/{name} to {tmp_path / name}' in msg
      assert '--config.data_dir' in msg
  msg = str(pytest.raises(data.DatasetNotFoundError, data.check_available,
                          'cifar10', tmp_path).value)
  assert '(no cifar10/3.0.2)' in msg  # What exactly is missing.
  # Nothing was downloaded or created for them.
  assert not (tmp_path / 'cifar10').exists()
  assert not (tmp_path / 'downloads').exists()


def test_probing_a_missing_dataset_leaves_absl_logging_as_it_was(tmp_path):
  # The probe hides tfds's warnings; afterwards absl INFO lines (progress
  # logs) must still reach the handlers.
  absl_logger = absl_logging.get_absl_logger()
  before = absl_logger.level
  with pytest.raises(data.DatasetNotFoundError):
    data.check_available('cifar10', tmp_path)
  assert absl_logger.level == before


def test_check_available_generates_nothing(tmp_path):
  data.check_available('digits', tmp_path)  # Ours: generated on first use.
  _make('test_synth_unprepared')
  data.check_available('test_synth_unprepared', tmp_path)
  assert not list(tmp_path.iterdir())


def test_prepared_dataset_we_do_not_own_is_read_from_files(tmp_path,
                                                          monkeypatch):
  # Prepare a dataset, then forget its code: it is now like `mnist` copied in
  # from another machine, and must be read from the files alone.
  _make('test_synth_foreign', seed=2)
  expected = data.as_numpy('test_synth_foreign', 'train', data_dir=tmp_path)
  monkeypatch.delitem(data._REGISTRY, 'test_synth_foreign')
  assert 'test_synth_foreign' not in data.registered_names()
  source = data.load('test_synth_foreign', 'train', data_dir=tmp_path)
  assert len(source) == 7
  got = data.as_numpy('test_synth_foreign', 'train', data_dir=tmp_path)
  for k in expected:
    np.testing.assert_array_equal(got[k], expected[k])
  data.check_available('test_synth_foreign', tmp_path)
  with pytest.raises(data.DatasetNotFoundError):
    data.load('test_synth_foreign', 'train', data_dir=tmp_path / 'other')
  with pytest.raises(data.DatasetNotFoundError, match='test_synth_foreign'):
    data.check_available('test_synth_foreign', tmp_path / 'other')


# ----------------------------------------------------------------------------
# No TensorFlow; concurrent preparation.

_WORKER = """
import importlib.abc, importlib.machinery, sys

attempts = []


class PoisonedTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  # Finds `tensorflow` (as if installed) but records and fails any import.

  def find_spec(self, name, path=None, target=None):
    if name == 'tensorflow' or name.startswith('tensorflow.'):
      return importlib.machinery.ModuleSpec(name, self)
    return None

  def create_module(self, spec):
    attempts.append(spec.name)
    raise ImportError(f'test forbids importing {spec.name}')

  def exec_module(self, module):
    pass


data_dir, poison = sys.argv[1], sys.argv[2] == 'poison'
if poison:  # Even where TensorFlow is installed, nothing may import it.
  sys.meta_path.insert(0, PoisonedTensorFlow())

import hashlib
import numpy as np
import tensorflow_datasets as tfds
from iclrjax.core import data

assert 'tensorflow' not in sys.modules, 'import pulled in tensorflow'
arrays = data.as_numpy('digits', 'train', data_dir=data_dir)
h = hashlib.sha256()
for k in sorted(arrays):
  h.update(arrays[k].tobytes())
data.synthetic_builder(
    'no_tf', {'x': tfds.features.Tensor(shape=(2,), dtype=np.float32),
              'c': tfds.features.ClassLabel(names=['a', 'b']),
              's': tfds.features.Text()},
    {'train': lambda rng: ({'x': rng.normal(size=2).astype(np.float32),
                            'c': 'b', 's': 'hi'} for _ in range(3))})
a = data.as_numpy('no_tf', 'train', data_dir=data_dir)
assert a['x'].shape == (3, 2) and list(a['c']) == [1, 1, 1], a
assert list(a['s']) == [b'hi'] * 3, a
assert not attempts, f'tried to import {attempts}'
assert 'tensorflow' not in sys.modules, 'loading pulled in tensorflow'
print('DIGEST', h.hexdigest(), len(arrays['label']))
"""


def test_no_tensorflow_and_concurrent_prepare(tmp_path):
  # Processes prepare the same datasets at once (as pytest-xdist workers
  # would): one writes under the lock, the others wait and read. None of them
  # imports TensorFlow; one fails any attempt to, as if it were installed.
  procs = [_run_python(_WORKER, str(tmp_path), mode)
           for mode in ('plain', 'poison', 'plain')]
  outs = [p.communicate(timeout=120) for p in procs]
  for p, (out, err) in zip(procs, outs):
    assert p.returncode == 0, err[-3000:]
  digests = {line for out, _ in outs for line in out.splitlines()
             if line.startswith('DIGEST')}
  assert len(digests) == 1, digests
  assert digests.pop().endswith(' 1437')
  for name in ('digits', 'no_tf'):
    assert (tmp_path / name / '1.0.0' / 'dataset_info.json').exists()
    assert not list((tmp_path / name).glob('incomplete*'))
  assert 'tensorflow' not in sys.modules


# ----------------------------------------------------------------------------
# batch_indices.


@pytest.mark.parametrize('n,b', [(10, 3), (10, 10), (4, 10), (7, 1)])
def test_batch_indices_cover_each_example_once_per_epoch(n, b):
  key = jax.random.key(42)
  num_epochs = 4
  steps = -(-num_epochs * n // b)
  stream = np.asarray(jax.vmap(lambda t: data.batch_indices(key, t, n, b))(
      jnp.arange(steps))).reshape(-1)
  for e in range(num_epochs):
    epoch = stream[e * n:(e + 1) * n]
    np.testing.assert_array_equal(np.sort(epoch), np.arange(n))
    np.testing.assert_array_equal(
        epoch, np.asarray(data.epoch_permutation(key, e, n)))


def test_batch_indices_deterministic_and_jittable():
  key = jax.random.key(0)
  eager = [np.asarray(data.batch_indices(key, t, 10, 4)) for t in range(6)]
  again = [np.asarray(data.batch_indices(key, t, 10, 4)) for t in range(6)]
  jitted = jax.jit(data.batch_indices, static_argnums=(2, 3))
  traced = [np.asarray(jitted(key, jnp.int32(t), 10, 4)) for t in range(6)]
  for a, b, c in zip(eager, again, traced):
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert a.dtype == np.int32 and a.shape == (4,)
  # Epochs are reshuffled, and other keys give other orders.
  assert not np.array_equal(data.epoch_permutation(key, 0, 50),
                            data.epoch_permutation(key, 1, 50))
  assert not np.array_equal(data.batch_indices(key, 0, 50, 8),
                            data.batch_indices(jax.random.key(1), 0, 50, 8))
  # Int seeds, typed keys and raw uint32 keys agree.
  np.testing.assert_array_equal(data.batch_indices(0, 3, 10, 4), eager[3])
  np.testing.assert_array_equal(
      data.batch_indices(jax.random.PRNGKey(0), 3, 10, 4), eager[3])


def test_batch_indices_under_vmap_and_scan():
  keys = jax.random.split(jax.random.PRNGKey(0), 3)  # Raw uint32 keys.

  def body(carry, t):
    return carry, jax.vmap(lambda k: data.batch_indices(k, t, 9, 4))(keys)

  _, idx = jax.lax.scan(body, 0, jnp.arange(5))
  assert idx.shape == (5, 3, 4)
  for s, t in ((0, 0), (1, 3), (2, 4)):
    np.testing.assert_array_equal(
        idx[t, s], data.batch_indices(keys[s], t, 9, 4))


def test_batch_indices_large_step_no_overflow():
  n, b, step = 1000, 512, 10**8  # step * b overflows int32.
  got = np.asarray(data.batch_indices(3, step, n, b))
  pos = step * b + np.arange(b, dtype=np.int64)
  epochs, offsets = pos // n, pos % n
  perms = {int(e): np.asarray(data.epoch_permutation(3, int(e), n))
           for e in np.unique(epochs)}
  expected = np.array([perms[int(e)][o] for e, o in zip(epochs, offsets)])
  np.testing.assert_array_equal(got, expected)
