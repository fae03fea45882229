"""Fake Spiking Heidelberg Digits files in the real HDF5 layout.

The SHD files (Cramer et al. 2020) hold, per example, variable-length
'spikes/times' (float16 seconds) and 'spikes/units' (uint16 channel in
[0, 700)), and 'labels' (uint16 in [0, 20)).
"""

from __future__ import annotations

import numpy as np
import pytest


def write_shd(path, times, units, labels) -> None:
  """One SHD split file from per-example spike times, units and labels."""
  h5py = pytest.importorskip('h5py')
  with h5py.File(path, 'w') as f:
    vt = f.create_dataset('spikes/times', (len(times),),
                          dtype=h5py.vlen_dtype(np.float16))
    vu = f.create_dataset('spikes/units', (len(units),),
                          dtype=h5py.vlen_dtype(np.uint16))
    for i, (t, u) in enumerate(zip(times, units)):
      vt[i] = np.asarray(t, np.float16)
      vu[i] = np.asarray(u, np.uint16)
    f.create_dataset('labels', data=np.asarray(labels, np.uint16))


def write_random_shd(root, num_train: int, num_test: int, seed: int = 0,
                     spikes_per_example: int = 300, units: int = 700,
                     classes: int = 20, max_time: float = 1.4) -> None:
  """shd_train.h5 / shd_test.h5 in `root` with random spikes whose channel
  band depends on the label (so a network can learn something)."""
  rng = np.random.default_rng(seed)
  root.mkdir(parents=True, exist_ok=True)
  for name, n in (('shd_train.h5', num_train), ('shd_test.h5', num_test)):
    labels = np.arange(n) % classes
    times, chans = [], []
    for y in labels:
      t = np.sort(rng.uniform(0.0, max_time, spikes_per_example))
      lo = int(y) * (units // classes)
      c = rng.integers(lo, lo + units // classes, spikes_per_example)
      times.append(t)
      chans.append(c)
    write_shd(root / name, times, chans, labels)
