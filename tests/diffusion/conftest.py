"""Fixtures of the diffusion tests: a fake LibriTTS folder."""

import pathlib

import numpy as np
import pytest


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
