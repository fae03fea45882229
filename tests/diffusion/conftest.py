"""Fixtures of the diffusion tests: fake LibriTTS and CIFAR-10 folders,
random parameters without a compiled init."""

import functools
import io
import pathlib

import jax
import numpy as np
import pytest

from iclrjax.core import data as data_lib


def random_params(init, *args, scale: float = 0.1, seed: int = 0, **kwargs):
  """N(0, scale^2) numpy parameters of the shapes `init(key, *args,
  **kwargs)` makes, with no initialiser compiled (at the suite's XLA -O0 a
  model's init compiles ~5x slower than its forward pass). Unlike a real
  init, zero-initialised layers (e.g. adaLN-zero) are active."""
  shapes = jax.eval_shape(functools.partial(init, **kwargs),
                          jax.random.key(0), *args)
  rng = np.random.default_rng(seed)
  return jax.tree.map(
      lambda s: (scale * rng.standard_normal(s.shape)).astype(s.dtype),
      shapes)


def write_libritts(root: pathlib.Path, files, sample_rate: int = 8000,
                   seconds: float = 0.5, seed: int = 0) -> list[pathlib.Path]:
  """16-bit PCM WAVs of random tones + noise at
  root/<subset>/<speaker>/<chapter>/<speaker>_<chapter>_<utt>.wav for each
  (subset, speaker, chapter, utt[, seconds]) in `files`."""
  from scipy.io import wavfile  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  paths = []
  for subset, spk, chap, utt, *dur in files:
    n = int(sample_rate * (dur[0] if dur else seconds))
    t = np.arange(n) / sample_rate
    x = sum(rng.uniform(0.1, 0.3) * np.sin(2 * np.pi * rng.uniform(100, 1500)
                                           * t + rng.uniform(0, 6.3))
            for _ in range(3)) + 0.01 * rng.normal(size=n)
    x[n // 3:n // 2] = 0.0  # a pause
    d = root / subset / str(spk) / str(chap)
    d.mkdir(parents=True, exist_ok=True)
    p = d / f'{spk}_{chap}_{utt:06d}.wav'
    wavfile.write(p, sample_rate, np.round(x * 32767).astype(np.int16))
    paths.append(p)
  return paths


# Four training files (one of 0.1 s, shorter than a clip) and two test files.
LIBRITTS_FILES = (
    ('train-clean-100', 19, 198, 1), ('train-clean-100', 19, 198, 2),
    ('train-clean-100', 26, 495, 1), ('train-clean-100', 26, 495, 2, 0.1),
    ('test-clean', 1089, 134686, 1), ('test-clean', 1089, 134686, 2))


@pytest.fixture
def libritts_dir(tmp_path):
  write_libritts(tmp_path / 'LibriTTS', LIBRITTS_FILES)
  return tmp_path / 'LibriTTS'


def write_cifar10(data_dir: pathlib.Path, num_train: int = 16,
                  num_test: int = 8) -> pathlib.Path:
  """A prepared TFDS `cifar10/3.0.2` (array_record) of random images in
  data_dir, the layout `tfds build cifar10 --file_format=array_record`
  writes: tfds's own Cifar10 builder (its features and version), only the
  examples generated here (PNG bytes by PIL, so no TensorFlow is needed)."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  from tensorflow_datasets.image_classification import cifar  # pylint: disable=g-import-not-at-top

  def png(a):
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format='PNG')
    return buf.getvalue()

  # OfflineBuilder first: its `code_path` works for a class defined here.
  class FakeCifar10(data_lib.OfflineBuilder, cifar.Cifar10,
                    skip_registration=True):
    name = 'cifar10'

    def _split_generators(self, dl_manager):
      del dl_manager
      return {'train': self._examples(num_train, 0),
              'test': self._examples(num_test, 1)}

    def _examples(self, n, seed):
      rng = np.random.default_rng(seed)
      for i in range(n):
        yield i, {'id': f'{seed}_{i}', 'label': int(rng.integers(10)),
                  'image': png(rng.integers(0, 256, (32, 32, 3), np.uint8))}

  FakeCifar10(data_dir=str(data_dir),
              file_format='array_record').download_and_prepare()
  return data_dir


@pytest.fixture(scope='session')
def cifar10_dir(tmp_path_factory):
  return write_cifar10(tmp_path_factory.mktemp('tfds'))
