"""Spike-train datasets for spiking networks: generated offline or read locally.

Every dataset is a set of binary spike trains shaped [T, C] per example
(T time steps, C input neurons; stacked: [N, T, C], uint8 in {0, 1}) with an
integer class label. `load(kind, ...)` returns both splits as a `SpikeData`.

* `mnist1d` (the default): MNIST-1D (Greydanus 2020; the `mnist1d` pip
  package makes it procedurally with `make_dataset`, which only calls numpy /
  scipy -- no download; `get_dataset`, which may download, is never used).
  Each of the 40 values is encoded by `neurons` Gaussian receptive fields
  (centres evenly spaced over the 0.5..99.5 percentiles of the *train* split,
  sigma = `width` x centre spacing) firing Bernoulli spikes with probability
  `max_rate * exp(-(x - c_j)^2 / (2 sigma^2))` per step; each value is held
  for `upsample` steps with fresh draws, so T = 40 * upsample.
* `synthetic_digits`: per class a spatio-temporal rate template (a few
  Gaussian bumps in (time, neuron) over a base rate); each example is
  Bernoulli spikes of its class template shifted by a random time (and
  neuron) offset.
* `shd` / `ntidigits`: the Spiking Heidelberg Digits and N-TIDIGITS18 files,
  read from a local folder (never downloaded), binned into T steps.

The two generated sets are offline TFDS builders (`core.data.
synthetic_builder`, written once as array_record and read with
`core.data.as_numpy`); their names hold every parameter, since data on disk
is keyed by name and version.
"""

from __future__ import annotations

import functools
import os
import random
from typing import Any, Iterable, Iterator, NamedTuple

import numpy as np
import tensorflow_datasets as tfds

from iclrjax.core import data as data_lib
from iclrjax.core import extras

KINDS = ('mnist1d', 'synthetic_digits', 'shd', 'ntidigits')

# Percentiles of the train values spanned by the MNIST-1D receptive fields.
MNIST1D_RANGE_PERCENTILES = (0.5, 99.5)
MNIST1D_LENGTH = 40
MNIST1D_CLASSES = 10

SHD_FILES = {'train': 'shd_train.h5', 'test': 'shd_test.h5'}
SHD_UNITS = 700
SHD_CLASSES = 20
SHD_URL = 'https://zenkelab.org/datasets/'

NTIDIGITS_FILE = 'n-tidigits.hdf5'
NTIDIGITS_CHANNELS = 64
# Isolated-digit labels (the last '-' field of a sample id) -> class:
# 'z' (zero) is 0, '1'..'9' are 1..9, 'o' ("oh") is 10.
NTIDIGITS_CLASSES = ('z', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'o')


class SpikeData(NamedTuple):
  """Both splits of a spike dataset, as host numpy arrays."""
  train_x: np.ndarray  # uint8 [N, T, C], values in {0, 1}.
  train_y: np.ndarray  # int32 [N].
  test_x: np.ndarray
  test_y: np.ndarray
  num_classes: int
  name: str


def _labels_feature(num_classes: int) -> tfds.features.ClassLabel:
  return tfds.features.ClassLabel(num_classes=num_classes)


def _spike_features(steps: int, neurons: int,
                    num_classes: int) -> dict[str, Any]:
  return {'spikes': tfds.features.Tensor(shape=(steps, neurons),
                                         dtype=np.uint8),
          'label': _labels_feature(num_classes)}


# -- MNIST-1D ------------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def _mnist1d_cached(num_samples: int, seed: int) -> dict[str, np.ndarray]:
  # Imported here: the package pulls in matplotlib and requests (~1 s).
  mnist1d_data = extras.require('mnist1d.data', 'snn')
  get_dataset_args = mnist1d_data.get_dataset_args
  make_dataset = mnist1d_data.make_dataset
  args = get_dataset_args()
  args.num_samples = int(num_samples)
  args.seed = int(seed)
  # make_dataset reseeds the global `random` / `np.random` state: restore it.
  np_state, py_state = np.random.get_state(), random.getstate()
  try:
    d = make_dataset(args)
  finally:
    np.random.set_state(np_state)
    random.setstate(py_state)
  out = {'x': np.asarray(d['x'], np.float64),
         'y': np.asarray(d['y'], np.int32),
         'x_test': np.asarray(d['x_test'], np.float64),
         'y_test': np.asarray(d['y_test'], np.int32)}
  for v in out.values():
    v.setflags(write=False)
  return out


def mnist1d_raw(num_samples: int = 6000, seed: int = 0
                ) -> dict[str, np.ndarray]:
  """The real-valued MNIST-1D made by `mnist1d.data.make_dataset` (no I/O).

  Args:
    num_samples: total examples (a multiple of 10: make_dataset makes
      num_samples // 10 per class); 80% train, 20% test.
    seed: mnist1d's seed (its default is 42; ours 0). The global `random` and
      `np.random` states, which make_dataset reseeds, are restored.

  Returns:
    Read-only arrays: 'x' float64 [n_train, 40], 'y' int32 [n_train],
    'x_test', 'y_test' (cached per (num_samples, seed)).
  """
  _check_mnist1d_samples(num_samples)
  return _mnist1d_cached(int(num_samples), int(seed))


def _check_mnist1d_samples(num_samples: int) -> None:
  if num_samples < 20 or num_samples % MNIST1D_CLASSES:
    raise ValueError('num_samples must be a multiple of 10 and >= 20, got '
                     f'{num_samples}.')


def receptive_fields(x_train: np.ndarray, neurons: int,
                     width: float) -> tuple[np.ndarray, float]:
  """Gaussian receptive-field centres and width from the train values.

  Args:
    x_train: train values (any shape).
    neurons: number of fields (>= 2).
    width: sigma in units of the centre spacing.

  Returns:
    (centres float64 [neurons], evenly spaced over the
    `MNIST1D_RANGE_PERCENTILES` of x_train; sigma).
  """
  if neurons < 2:
    raise ValueError(f'neurons must be >= 2, got {neurons}.')
  lo, hi = np.percentile(np.asarray(x_train, np.float64),
                         MNIST1D_RANGE_PERCENTILES)
  centers = np.linspace(lo, hi, neurons)
  return centers, float(width * (hi - lo) / (neurons - 1))


def firing_probability(x: np.ndarray, centers: np.ndarray, sigma: float,
                       max_rate: float) -> np.ndarray:
  """Per-step spike probability max_rate * exp(-(x - c)^2 / (2 sigma^2)).

  Args:
    x: values [...].
    centers: field centres [C].
    sigma: field width.
    max_rate: probability at a field's centre.

  Returns:
    float64 [..., C].
  """
  d = np.asarray(x, np.float64)[..., None] - centers
  return max_rate * np.exp(-d * d / (2.0 * sigma * sigma))


def encode_values(rng: np.random.Generator, x: np.ndarray,
                  centers: np.ndarray, sigma: float, max_rate: float,
                  upsample: int) -> np.ndarray:
  """Bernoulli population code of a sequence of values.

  Args:
    rng: numpy generator.
    x: values [L].
    centers, sigma, max_rate: see `firing_probability`.
    upsample: steps per value (fresh draws each step).

  Returns:
    uint8 [L * upsample, C] spikes.
  """
  p = np.repeat(firing_probability(x, centers, sigma, max_rate), upsample,
                axis=-2)
  return (rng.random(p.shape) < p).astype(np.uint8)


def mnist1d_name(num_samples: int = 6000, neurons: int = 32,
                 upsample: int = 2, max_rate: float = 0.8,
                 width: float = 1.0, seed: int = 0) -> str:
  """Dataset name of `mnist1d_builder` (every parameter is in it)."""
  return (f'spiking_mnist1d_n{int(num_samples)}_c{int(neurons)}'
          f'_u{int(upsample)}_r{data_lib.name_number(max_rate)}_w{data_lib.name_number(width)}_s{int(seed)}')


def mnist1d_builder(num_samples: int = 6000, neurons: int = 32,
                    upsample: int = 2, max_rate: float = 0.8,
                    width: float = 1.0, seed: int = 0) -> str:
  """Registers the offline builder of spiking MNIST-1D; returns its name.

  Features: 'spikes' uint8 [40 * upsample, neurons], 'label' ClassLabel(10).
  Splits 'train' (0.8 num_samples) and 'test' (0.2 num_samples), in
  mnist1d's order, so label i of a split is mnist1d's ('y' / 'y_test').

  Defaults: 32 fields of width 1 spacing and peak probability 0.8 give a
  mean input rate of 0.062 spikes per neuron-step (~2 spikes per step in
  the population) and decode each value to ~0.2 data std (population-
  vector estimate from its 2 steps; 0.6% of values give no spike); logistic
  regression on the spike counts gets 0.34 test accuracy, as on the raw
  values (0.33): the code keeps the information.

  Args:
    num_samples: total examples, a multiple of 10 (4800 / 1200 by default).
    neurons: input neurons (receptive fields) per value.
    upsample: steps per value, T = 40 * upsample.
    max_rate: spike probability per step at a field's centre, in (0, 1].
    width: field sigma in units of the centre spacing.
    seed: seeds mnist1d's make_dataset and the spike draws.

  Returns:
    The dataset name, for `core.data.as_numpy(name, split)`.
  """
  _check_mnist1d_samples(num_samples)
  if upsample < 1:
    raise ValueError(f'upsample must be >= 1, got {upsample}.')
  if not 0.0 < max_rate <= 1.0:
    raise ValueError(f'max_rate must be in (0, 1], got {max_rate}.')
  if not width > 0.0:
    raise ValueError(f'width must be > 0, got {width}.')
  if neurons < 2:
    raise ValueError(f'neurons must be >= 2, got {neurons}.')
  name = mnist1d_name(num_samples, neurons, upsample, max_rate, width, seed)

  def split_gen(x_key: str, y_key: str):
    def it(rng: np.random.Generator) -> Iterator[dict[str, Any]]:
      d = mnist1d_raw(num_samples, seed)
      centers, sigma = receptive_fields(d['x'], neurons, width)
      for x, y in zip(d[x_key], d[y_key]):
        yield {'spikes': encode_values(rng, x, centers, sigma, max_rate,
                                       upsample),
               'label': int(y)}
    return it

  data_lib.synthetic_builder(
      name, _spike_features(MNIST1D_LENGTH * upsample, neurons,
                            MNIST1D_CLASSES),
      {'train': split_gen('x', 'y'), 'test': split_gen('x_test', 'y_test')},
      seed=seed, version='1.0.0', supervised_keys=('spikes', 'label'),
      description=(
          f'MNIST-1D (mnist1d.make_dataset, {num_samples} samples, seed '
          f'{seed}), each value encoded by {neurons} Gaussian receptive '
          f'fields (centres over the train {MNIST1D_RANGE_PERCENTILES} '
          f'percentiles, sigma {width} spacings, peak rate {max_rate}), '
          f'Bernoulli spikes, {upsample} steps per value.'))
  return name


# -- synthetic spiking digits --------------------------------------------------
def digit_templates(num_classes: int = 10, neurons: int = 32,
                    steps: int = 50, bumps: int = 4,
                    seed: int = 0) -> np.ndarray:
  """Bump parameters of the class templates of `synthetic_digits_builder`.

  Each class has `bumps` Gaussian bumps with time centre uniform in
  [0.15 T, 0.85 T] and neuron centre uniform in [0, C - 1], drawn from a
  generator seeded by `seed` only (not by the split).

  Args:
    num_classes: classes.
    neurons: C.
    steps: T.
    bumps: bumps per class.
    seed: seed of the templates.

  Returns:
    float64 [num_classes, bumps, 2]: (time centre, neuron centre).
  """
  rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x7e3]))
  t = rng.uniform(0.15 * steps, 0.85 * steps, size=(num_classes, bumps))
  c = rng.uniform(0.0, neurons - 1.0, size=(num_classes, bumps))
  return np.stack([t, c], axis=-1)


def digit_rate_map(centers: np.ndarray, steps: int, neurons: int,
                   base_rate: float, peak_rate: float,
                   time_shift: float = 0.0,
                   neuron_shift: float = 0.0) -> np.ndarray:
  """Spike probability [T, C] of one template, shifted (no wrap-around).

  rate(t, c) = min(1, base_rate + peak_rate * sum_k exp(-(t - t_k - dt)^2 /
  (2 s_t^2) - (c - c_k - dc)^2 / (2 s_c^2))), with s_t = T / 20 and
  s_c = C / 32 (at least 1).

  Args:
    centers: [bumps, 2] (time, neuron) centres of one class.
    steps: T.
    neurons: C.
    base_rate: background probability per step.
    peak_rate: added probability at a bump's centre.
    time_shift: dt.
    neuron_shift: dc.

  Returns:
    float64 [steps, neurons].
  """
  s_t = max(steps / 20.0, 1.0)
  s_c = max(neurons / 32.0, 1.0)
  t = np.arange(steps, dtype=np.float64)[:, None, None]
  c = np.arange(neurons, dtype=np.float64)[None, :, None]
  tk = centers[:, 0] + time_shift
  ck = centers[:, 1] + neuron_shift
  g = np.exp(-(t - tk) ** 2 / (2 * s_t ** 2) - (c - ck) ** 2 / (2 * s_c ** 2))
  return np.minimum(1.0, base_rate + peak_rate * g.sum(-1))


def synthetic_digits_name(num_classes: int = 10, neurons: int = 32,
                          steps: int = 50, num_train: int = 2000,
                          num_test: int = 500, base_rate: float = 0.02,
                          peak_rate: float = 0.25, jitter: int = 4,
                          neuron_jitter: int = 1, bumps: int = 4,
                          seed: int = 0) -> str:
  """Dataset name of `synthetic_digits_builder` (every parameter in it)."""
  return (f'spiking_synth_digits_k{int(num_classes)}_c{int(neurons)}'
          f'_t{int(steps)}_n{int(num_train)}_m{int(num_test)}'
          f'_b{data_lib.name_number(base_rate)}_p{data_lib.name_number(peak_rate)}_j{int(jitter)}'
          f'_nj{int(neuron_jitter)}_nb{int(bumps)}_s{int(seed)}')


def synthetic_digits_builder(num_classes: int = 10, neurons: int = 32,
                             steps: int = 50, num_train: int = 2000,
                             num_test: int = 500, base_rate: float = 0.02,
                             peak_rate: float = 0.25, jitter: int = 4,
                             neuron_jitter: int = 1, bumps: int = 4,
                             seed: int = 0) -> str:
  """Registers the builder of synthetic spiking "digits"; returns its name.

  Class k has a rate template (`digit_templates`, `digit_rate_map`); an
  example of class k is Bernoulli spikes of that template shifted by an
  integer time offset uniform in [-jitter, jitter] and neuron offset uniform
  in [-neuron_jitter, neuron_jitter] (bumps move; nothing wraps around).
  Labels are balanced: each split is `arange(n) % num_classes`, shuffled.

  Defaults (C=32, T=50, 4 bumps per class, base 0.02, peak 0.25, jitter 4,
  neuron jitter 1): mean rate ~0.03 per neuron-step (~47 spikes per example,
  ~15 of them from the bumps). Measured on the default splits (seed 0): a
  nearest-class-mean classifier on per-neuron spike counts gets 0.73 test
  accuracy (chance 0.1), the same on the whole [T, C] raster 0.95:
  learnable, not trivial, and spike timing carries information that counts
  lack.

  Args:
    num_classes: classes (>= 2).
    neurons: C.
    steps: T.
    num_train: train examples.
    num_test: test examples.
    base_rate: background spike probability per step.
    peak_rate: extra probability at a bump centre.
    jitter: max |time shift| per example, in steps.
    neuron_jitter: max |neuron shift| per example.
    bumps: bumps per class template.
    seed: seeds the templates and (per split) the examples.

  Returns:
    The dataset name, for `core.data.as_numpy(name, split)`.
  """
  if num_classes < 2 or neurons < 1 or steps < 1 or bumps < 1:
    raise ValueError('Need num_classes >= 2 and neurons, steps, bumps >= 1.')
  if num_train < 1 or num_test < 1:
    raise ValueError('num_train and num_test must be >= 1.')
  if not (0.0 <= base_rate <= 1.0 and 0.0 <= peak_rate <= 1.0):
    raise ValueError('base_rate and peak_rate must be in [0, 1].')
  if jitter < 0 or neuron_jitter < 0:
    raise ValueError('jitter and neuron_jitter must be >= 0.')
  name = synthetic_digits_name(num_classes, neurons, steps, num_train,
                               num_test, base_rate, peak_rate, jitter,
                               neuron_jitter, bumps, seed)
  templates = digit_templates(num_classes, neurons, steps, bumps, seed)

  def split_gen(n: int):
    def it(rng: np.random.Generator) -> Iterator[dict[str, Any]]:
      labels = rng.permutation(np.arange(n) % num_classes)
      for y in labels:
        dt = rng.integers(-jitter, jitter + 1)
        dc = rng.integers(-neuron_jitter, neuron_jitter + 1)
        p = digit_rate_map(templates[y], steps, neurons, base_rate,
                           peak_rate, dt, dc)
        yield {'spikes': (rng.random(p.shape) < p).astype(np.uint8),
               'label': int(y)}
    return it

  data_lib.synthetic_builder(
      name, _spike_features(steps, neurons, num_classes),
      {'train': split_gen(num_train), 'test': split_gen(num_test)},
      seed=seed, version='1.0.0', supervised_keys=('spikes', 'label'),
      description=(
          f'Synthetic spiking digits: {num_classes} classes, each a template '
          f'of {bumps} Gaussian (time, neuron) bumps (peak {peak_rate}) over '
          f'base rate {base_rate}; examples are Bernoulli spikes of the '
          f'template shifted by up to +-{jitter} steps and '
          f'+-{neuron_jitter} neurons. T={steps}, C={neurons}.'))
  return name


# -- SHD and N-TIDIGITS (local files only) -------------------------------------
def _h5py():
  try:
    h5py = extras.require('h5py', 'snn')
  except ImportError as e:
    raise ImportError('Reading SHD / N-TIDIGITS needs h5py: '
                      '`pip install h5py`.') from e
  return h5py


def _raw_dir(data_dir: data_lib.PathLike | None, kind: str) -> str:
  if data_dir:
    return os.path.abspath(os.fspath(data_dir))
  return os.path.join(data_lib.default_data_dir(), 'raw', kind)


def _check_split(split: str) -> None:
  if split not in ('train', 'test'):
    raise ValueError(f"split must be 'train' or 'test', got {split!r}.")


def _bin_events(example: np.ndarray, times: np.ndarray, channels: np.ndarray,
                num_examples: int, num_steps: int, max_time: float,
                num_channels: int) -> np.ndarray:
  """Binary [N, num_steps, num_channels] raster of events (drops t >= max)."""
  out = np.zeros((num_examples, num_steps, num_channels), np.uint8)
  t = np.asarray(times, np.float64)
  b = np.floor(t * (num_steps / max_time)).astype(np.int64)
  keep = (t >= 0) & (b < num_steps) & (channels >= 0) & (
      channels < num_channels)
  out[example[keep], b[keep], channels[keep]] = 1
  return out


def shd_default_dir() -> str:
  """Default folder of the SHD files: <default data dir>/raw/shd."""
  return _raw_dir(None, 'shd')


def _missing(root: str, files: Iterable[str]) -> list[str]:
  return [f for f in files if not os.path.isfile(os.path.join(root, f))]


def _shd_not_found(root: str) -> str:
  """One line: which SHD files are missing from `root`, and how to get them."""
  missing = _missing(root, SHD_FILES.values())
  gz = [f'{f}.gz' for f in missing
        if os.path.isfile(os.path.join(root, f'{f}.gz'))]
  gunzip = ''
  if gz:
    gunzip = (f'; {" and ".join(gz)} ' +
              ('is there: gunzip it' if len(gz) == 1 else
               'are there: gunzip them'))
  return (
      f'dataset shd is not in {root} (missing {" and ".join(missing)}'
      f'{gunzip}): download shd_train.h5.gz and shd_test.h5.gz from '
      f'{SHD_URL} and gunzip them into {root}, or point --config.data_dir '
      '(data_dir= in code) at the folder that has them; nothing is '
      'downloaded at run time')


def load_shd(data_dir: data_lib.PathLike | None = None, split: str = 'train',
             num_steps: int = 100, max_time: float = 1.4,
             num_units: int = SHD_UNITS) -> tuple[np.ndarray, np.ndarray]:
  """Spiking Heidelberg Digits (Cramer et al. 2020) from local HDF5 files.

  Reads `<data_dir>/shd_<split>.h5` (datasets 'spikes/times', ragged float
  seconds; 'spikes/units', ragged ints in [0, 700); 'labels') and bins the
  spike times into `num_steps` bins of width max_time / num_steps over
  [0, max_time): spikes at t >= max_time are dropped, several spikes of a
  unit in one bin count once. Unit u goes to channel u * num_units // 700,
  so num_units < 700 pools neighbouring units. Memory: N * num_steps *
  num_units bytes (train at the defaults: 8156 x 100 x 700 = 571 MB).

  Args:
    data_dir: folder with the (gunzipped) files; default `shd_default_dir()`.
    split: 'train' or 'test'.
    num_steps: time bins T.
    max_time: seconds covered (SHD digits last under 1.4 s).
    num_units: output channels C (700 keeps every unit).

  Returns:
    (spikes uint8 [N, num_steps, num_units], labels int32 [N], 20 classes).

  Raises:
    data.DatasetNotFoundError: the file is not there.
    ImportError: h5py is not installed.
  """
  _check_split(split)
  if num_steps < 1 or not max_time > 0 or not 1 <= num_units <= SHD_UNITS:
    raise ValueError('Need num_steps >= 1, max_time > 0 and 1 <= num_units '
                     f'<= {SHD_UNITS}.')
  root = _raw_dir(data_dir, 'shd')
  path = os.path.join(root, SHD_FILES[split])
  if not os.path.isfile(path):
    raise data_lib.DatasetNotFoundError(_shd_not_found(root))
  h5py = _h5py()
  with h5py.File(path, 'r') as f:
    times = list(f['spikes']['times'][:])
    units = list(f['spikes']['units'][:])
    labels = np.asarray(f['labels'][:], np.int32)
  n = len(labels)
  if len(times) != n or len(units) != n:
    raise ValueError(f'{path}: {len(times)} times, {len(units)} units, '
                     f'{n} labels.')
  lengths = np.array([len(t) for t in times], np.int64)
  if np.any(lengths != np.array([len(u) for u in units], np.int64)):
    raise ValueError(f'{path}: spike times and units differ in length.')
  example = np.repeat(np.arange(n), lengths)
  t = np.concatenate(times) if n else np.zeros(0)
  u = np.concatenate(units).astype(np.int64) if n else np.zeros(0, np.int64)
  channel = np.where((u >= 0) & (u < SHD_UNITS), u * num_units // SHD_UNITS,
                     -1)
  return (_bin_events(example, t, channel, n, num_steps, max_time,
                      num_units), labels)


def ntidigits_default_dir() -> str:
  """Default folder of the N-TIDIGITS file: <default data dir>/raw/ntidigits."""
  return _raw_dir(None, 'ntidigits')


def _ntidigits_not_found(root: str) -> str:
  """One line: the N-TIDIGITS file is missing from `root`; how to get it."""
  return (
      f'dataset ntidigits is not in {root} (missing {NTIDIGITS_FILE}): put '
      f'the published N-TIDIGITS18 {NTIDIGITS_FILE} (Anumula et al. 2018, '
      'Front. Neurosci. 12:23; linked from the paper and from tonic\'s '
      f'NTIDIGITS18 dataset) in {root}, or point --config.data_dir '
      '(data_dir= in code) at the folder that has it; nothing is downloaded '
      'at run time')


def ntidigits_label(sample_id: str) -> int | None:
  """Class of an N-TIDIGITS sample id ('man-ae-z' -> 0), None if multi-digit.

  The last '-' separated field of the id is the spoken digit sequence; the
  isolated digits ('z', '1'..'9', 'o') map to `NTIDIGITS_CLASSES` indices.
  """
  digits = sample_id.split('-')[-1]
  if len(digits) != 1 or digits not in NTIDIGITS_CLASSES:
    return None
  return NTIDIGITS_CLASSES.index(digits)


def load_ntidigits(data_dir: data_lib.PathLike | None = None,
                   split: str = 'train', num_steps: int = 100,
                   max_time: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
  """N-TIDIGITS18 isolated digits (Anumula et al. 2018) from the local HDF5.

  Reads `<data_dir>/n-tidigits.hdf5`: '<split>_labels' lists the sample ids
  (bytes, e.g. b'man-ae-z'; the last field is the digit sequence), and
  '<split>_timestamps/<id>' (float seconds) and '<split>_addresses/<id>'
  (cochlea channel, 0..63) hold each sample's events. Only isolated digits
  are kept (11 classes, `NTIDIGITS_CLASSES`: z=0, 1..9, o=10), in file
  order. Events are binned as in `load_shd` (binary, t >= max_time dropped).

  Args:
    data_dir: folder with the file; default `ntidigits_default_dir()`.
    split: 'train' or 'test'.
    num_steps: time bins T.
    max_time: seconds covered.

  Returns:
    (spikes uint8 [N, num_steps, 64], labels int32 [N]).

  Raises:
    data.DatasetNotFoundError: the file is not there.
    ImportError: h5py is not installed.
  """
  _check_split(split)
  if num_steps < 1 or not max_time > 0:
    raise ValueError('Need num_steps >= 1 and max_time > 0.')
  root = _raw_dir(data_dir, 'ntidigits')
  path = os.path.join(root, NTIDIGITS_FILE)
  if not os.path.isfile(path):
    raise data_lib.DatasetNotFoundError(_ntidigits_not_found(root))
  h5py = _h5py()
  times, channels, labels = [], [], []
  with h5py.File(path, 'r') as f:
    ts, ads = f[f'{split}_timestamps'], f[f'{split}_addresses']
    for raw in f[f'{split}_labels'][:]:
      sample_id = raw.decode() if isinstance(raw, bytes) else str(raw)
      y = ntidigits_label(sample_id)
      if y is None:
        continue
      times.append(np.asarray(ts[sample_id][:], np.float64))
      channels.append(np.asarray(ads[sample_id][:], np.int64).reshape(-1))
      labels.append(y)
  n = len(labels)
  lengths = np.array([len(t) for t in times], np.int64)
  example = np.repeat(np.arange(n), lengths)
  t = np.concatenate(times) if n else np.zeros(0)
  c = np.concatenate(channels) if n else np.zeros(0, np.int64)
  return (_bin_events(example, t, c, n, num_steps, max_time,
                      NTIDIGITS_CHANNELS), np.asarray(labels, np.int32))


# -- dispatcher ----------------------------------------------------------------
def check_available(kind: str,
                    data_dir: data_lib.PathLike | None = None) -> None:
  """Raises `DatasetNotFoundError` if `load(kind, data_dir)` would not find
  its files; reads and generates nothing (launchers call it before compute).

  'mnist1d' and 'synthetic_digits' are generated on first use and always
  pass; 'shd' needs both split files, 'ntidigits' its one file.

  Args:
    kind: one of `KINDS`.
    data_dir: as in `load`.
  """
  if kind == 'shd':
    root = _raw_dir(data_dir, 'shd')
    if _missing(root, SHD_FILES.values()):
      raise data_lib.DatasetNotFoundError(_shd_not_found(root))
  elif kind == 'ntidigits':
    root = _raw_dir(data_dir, 'ntidigits')
    if _missing(root, [NTIDIGITS_FILE]):
      raise data_lib.DatasetNotFoundError(_ntidigits_not_found(root))
  elif kind not in KINDS:
    raise ValueError(
        f'Unknown spike dataset kind {kind!r}; use one of {KINDS}.')


# SHD's published split sizes (Cramer et al. 2020): examples per split.
SHD_SIZES = {'train': 8156, 'test': 2264}


def shapes(kind: str, **kwargs: Any) -> tuple[int, int, int, int, int]:
  """(num_train, num_test, T, C, num_classes) of `load(kind, **kwargs)`,
  from the arguments alone: nothing is read or generated (for compile-only
  cost estimates). N-TIDIGITS' sizes are only known from its file.
  """
  if kind == 'mnist1d':
    n = int(kwargs.get('num_samples', 6000))
    n_train = int(n * 0.8)  # make_dataset's 80 / 20 split
    return (n_train, n - n_train,
            MNIST1D_LENGTH * int(kwargs.get('upsample', 2)),
            int(kwargs.get('neurons', 32)), MNIST1D_CLASSES)
  if kind == 'synthetic_digits':
    return (int(kwargs.get('num_train', 2000)),
            int(kwargs.get('num_test', 500)), int(kwargs.get('steps', 50)),
            int(kwargs.get('neurons', 32)),
            int(kwargs.get('num_classes', 10)))
  if kind == 'shd':
    return (SHD_SIZES['train'], SHD_SIZES['test'],
            int(kwargs.get('num_steps', 100)),
            int(kwargs.get('num_units', SHD_UNITS)), SHD_CLASSES)
  raise ValueError(f'shapes({kind!r}): its split sizes are only known from '
                   'the data files; use one of mnist1d, synthetic_digits, shd')


def _from_tfds(name: str, data_dir: data_lib.PathLike | None) -> SpikeData:
  splits = {s: data_lib.as_numpy(name, s, data_dir=data_dir)
            for s in ('train', 'test')}
  num_classes = data_lib.prepare(name, data_dir).info.features[
      'label'].num_classes
  return SpikeData(
      train_x=np.asarray(splits['train']['spikes'], np.uint8),
      train_y=np.asarray(splits['train']['label'], np.int32),
      test_x=np.asarray(splits['test']['spikes'], np.uint8),
      test_y=np.asarray(splits['test']['label'], np.int32),
      num_classes=int(num_classes), name=name)


def load(kind: str, data_dir: data_lib.PathLike | None = None,
         **kwargs: Any) -> SpikeData:
  """Both splits of a spike dataset.

  Args:
    kind: one of `KINDS`.
    data_dir: for 'mnist1d' / 'synthetic_digits' the TFDS data folder
      (default `core.data.default_data_dir()`), where they are generated on
      first use; for 'shd' / 'ntidigits' the folder with the raw files
      (default `shd_default_dir()` / `ntidigits_default_dir()`).
    **kwargs: passed to `mnist1d_builder`, `synthetic_digits_builder`,
      `load_shd` or `load_ntidigits` (all but split / data_dir).

  Returns:
    `SpikeData` (train_x / test_x uint8 [N, T, C]; labels int32).

  Raises:
    ValueError: unknown kind.
    data.DatasetNotFoundError: SHD / N-TIDIGITS files are missing.
  """
  if kind == 'mnist1d':
    return _from_tfds(mnist1d_builder(**kwargs), data_dir)
  if kind == 'synthetic_digits':
    return _from_tfds(synthetic_digits_builder(**kwargs), data_dir)
  if kind == 'shd':
    p = {'num_steps': 100, 'max_time': 1.4, 'num_units': SHD_UNITS, **kwargs}
    tr, te = (load_shd(data_dir, s, **p) for s in ('train', 'test'))
    name = (f'shd_t{int(p["num_steps"])}_m{data_lib.name_number(p["max_time"])}'
            f'_u{int(p["num_units"])}')
    return SpikeData(*tr, *te, num_classes=SHD_CLASSES, name=name)
  if kind == 'ntidigits':
    p = {'num_steps': 100, 'max_time': 2.0, **kwargs}
    tr, te = (load_ntidigits(data_dir, s, **p) for s in ('train', 'test'))
    name = f'ntidigits_t{int(p["num_steps"])}_m{data_lib.name_number(p["max_time"])}'
    return SpikeData(*tr, *te, num_classes=len(NTIDIGITS_CLASSES),
                     name=name)
  raise ValueError(f'Unknown spike dataset kind {kind!r}; use one of {KINDS}.')
