"""Offline datasets: TFDS builders written to array_record, read without TF.

Everything here works offline and without TensorFlow. Datasets are TFDS
builders whose examples are written once to `array_record` files under a data
directory and then read back with random access (`builder.as_data_source` /
`tfds.data_source`), never through `tf.data`.

* Our own builders -- `Digits` (scikit-learn's 8x8 digits) and the synthetic
  sets made with `synthetic_builder` -- are generated into the data directory
  on first use (`prepare`, `load`, `as_numpy`), under an `fcntl` file lock so
  that concurrent processes (pytest-xdist, several runs on one machine) do not
  race: the first one writes (TFDS writes into `incomplete.*` and renames the
  folder when done), the others wait and then just read.
* Any other name (`mnist`, `cifar10`, ...) is only *read*: it must already be
  prepared, as array_record, under the data directory. Nothing is ever
  downloaded; if it is missing, `DatasetNotFoundError` says where it looked
  and how to put it there.

The data directory is `data_dir` if given, else `$TFDS_DATA_DIR` if set, else
`~/tensorflow_datasets` (resolved at call time).

Our datasets are small, so training keeps whole splits on device as arrays
(`as_numpy`) and draws minibatches with `batch_indices(key, step, ...)`, a pure
function of (key, step): the data position of a training loop is its step.

Notes on TFDS without TensorFlow (tfds 4.9):

* `GeneratorBasedBuilder.download_and_prepare(file_format='array_record')`
  needs no TF as long as every feature can be encoded without it: `Tensor`,
  `Scalar`, `ClassLabel`, `Text` work; `Image` needs TF to PNG-encode a numpy
  array (it works if you hand it already-encoded PNG bytes/file objects, and
  decoding uses PIL). `Digits` therefore stores images as a uint8 `Tensor`.
* Build `DatasetInfo` directly (`tfds.core.DatasetInfo(builder=self, ...)`):
  `self.dataset_info_from_configs` reads metadata files (README.md,
  CITATIONS.bib, TAGS.txt) from the folder of the builder's module, and fails
  outright for a builder defined in a script.
* tfds 4.9.10's `DatasetBuilder.code_path` touches the `importlib_resources`
  backport, which neither tfds (on Python >= 3.9) nor etils 1.15 install, for
  any builder class defined inside a package; `download_and_prepare` then
  fails with ModuleNotFoundError. `OfflineBuilder` overrides `code_path` with
  tfds's own plain-file fallback.
* Builders are declared with `skip_registration=True`: TFDS's global registry
  rejects a second class with the same name, and our own registry (below)
  resolves names instead.
* `disable_shuffling=True` keeps records in generation order (otherwise TFDS
  orders them by a hash of the example key).
"""

from __future__ import annotations

import collections.abc
import contextlib
import copy
import functools
import hashlib
import inspect
import json
import logging as std_logging
import math
import os
import pathlib
import re
import shutil
import types
import zlib
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from absl import logging
from etils import epath
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow_datasets as tfds

try:
  import fcntl  # POSIX only.
except ImportError:  # pragma: no cover
  fcntl = None

PathLike = str | os.PathLike
Example = Mapping[str, Any]
SplitGenerator = Callable[[np.random.Generator], Iterable[Example]]

_LOCK_DIRNAME = '.iclrjax_locks'
_FINGERPRINT_KEY = 'iclrjax_fingerprint'


class DatasetNotFoundError(FileNotFoundError):
  """A dataset that we cannot generate is not prepared in the data dir."""


# ----------------------------------------------------------------------------
# Registry of our own (generatable) builders.


class _ClassProperty:
  """A read-only property computed from the class."""

  def __init__(self, fget: Callable[[type[Any]], Any]):
    self._fget = fget

  def __get__(self, obj: Any, objtype: type[Any] | None = None) -> Any:
    return self._fget(objtype if objtype is not None else type(obj))


def _code_path(cls: type[Any]) -> epath.Path | None:
  try:
    return epath.Path(inspect.getfile(cls))
  except (TypeError, OSError):
    return None


class OfflineBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Base class of builders that generate their data offline.

  Subclass it with `skip_registration=True` (TFDS's global registry refuses a
  second class with the same name) and decorate with `register_builder`.
  Build the info with `tfds.core.DatasetInfo(builder=self, ...)` (not
  `dataset_info_from_configs`, which reads metadata files next to the module),
  with `disable_shuffling=True` to store examples in generation order, and
  use features that encode without TensorFlow (see the module docstring).
  """

  # tfds 4.9.10's `code_path` needs the `importlib_resources` backport (not
  # installed by tfds on Python >= 3.9 nor by etils 1.15) for any builder
  # defined inside a package; this is tfds's own plain-file fallback. It is
  # only used to look for a checksums file.
  code_path = _ClassProperty(_code_path)


_REGISTRY: dict[str, type[OfflineBuilder]] = {}


def register_builder(cls: type[OfflineBuilder]) -> type[OfflineBuilder]:
  """Registers a builder class under `cls.name`; usable as a decorator.

  Registering a name again replaces the previous class (so re-running a cell
  or re-creating a synthetic builder does not fail). The on-disk data is keyed
  by (name, version): change the version when the examples change.

  Args:
    cls: an `OfflineBuilder` subclass, declared with `skip_registration=True`
      to keep it out of TFDS's global registry, which refuses duplicate names.

  Returns:
    `cls`, unchanged.
  """
  if not (isinstance(cls, type) and issubclass(cls, OfflineBuilder)):
    raise TypeError(f'Expected an OfflineBuilder subclass, got {cls!r}.')
  _REGISTRY[cls.name] = cls
  return cls


def registered_names() -> list[str]:
  """Names of the builders that this module can generate offline."""
  return sorted(_REGISTRY)


def default_data_dir() -> str:
  """`$TFDS_DATA_DIR` if set, else `~/tensorflow_datasets`."""
  return os.environ.get('TFDS_DATA_DIR') or os.path.expanduser(
      '~/tensorflow_datasets')


def _resolve_data_dir(data_dir: PathLike | None) -> str:
  return os.path.abspath(os.fspath(data_dir) if data_dir else
                         default_data_dir())


# ----------------------------------------------------------------------------
# Digits (scikit-learn, bundled with the package: no download).

DIGITS_NUM_EXAMPLES = 1797
DIGITS_NUM_TRAIN = 1437
DIGITS_SPLIT_SEED = 0


def digits_split_indices(split: str) -> np.ndarray:
  """Indices into `sklearn.datasets.load_digits()` of a `Digits` split.

  The split is a fixed permutation, `np.random.RandomState(0)` (a legacy
  generator whose stream NumPy keeps stable across versions), of the 1797
  examples: the first 1437 are `train`, the last 360 `test`. Each split is
  stored in increasing index order, so record `i` of a split is example
  `digits_split_indices(split)[i]` (also stored as the `index` feature).

  Args:
    split: 'train' or 'test'.

  Returns:
    int64 array of sorted indices.
  """
  perm = np.random.RandomState(DIGITS_SPLIT_SEED).permutation(
      DIGITS_NUM_EXAMPLES)
  if split == 'train':
    idx = perm[:DIGITS_NUM_TRAIN]
  elif split == 'test':
    idx = perm[DIGITS_NUM_TRAIN:]
  else:
    raise ValueError(f"Unknown digits split {split!r}; use 'train' or 'test'.")
  return np.sort(idx).astype(np.int64)


@register_builder
class Digits(OfflineBuilder, skip_registration=True):
  """scikit-learn's 8x8 handwritten digits (UCI optdigits test set).

  Features:
    image: uint8 `Tensor` of shape (8, 8, 1), values 0..16 (17 gray levels;
      not rescaled). A `Tensor` rather than `tfds.features.Image` because
      encoding an `Image` from an array needs TensorFlow.
    label: `ClassLabel(num_classes=10)`, the digit.
    index: int64, the example's row in `sklearn.datasets.load_digits()`.

  Splits: train (1437) / test (360), see `digits_split_indices`.
  """

  name = 'digits'
  VERSION = tfds.core.Version('1.0.0')
  RELEASE_NOTES = {'1.0.0': 'Initial release.'}

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description=('8x8 images of handwritten digits, values 0..16, from '
                     'scikit-learn (UCI ML optdigits test set). Fixed split: '
                     'RandomState(0) permutation, 1437 train / 360 test.'),
        features=tfds.features.FeaturesDict({
            'image': tfds.features.Tensor(shape=(8, 8, 1), dtype=np.uint8),
            'label': tfds.features.ClassLabel(num_classes=10),
            'index': tfds.features.Scalar(dtype=np.int64),
        }),
        supervised_keys=('image', 'label'),
        homepage=('https://archive.ics.uci.edu/dataset/80/optical+recognition'
                  '+of+handwritten+digits'),
        disable_shuffling=True,
    )

  def _split_generators(self, dl_manager: Any) -> dict[str, Iterator[Any]]:
    del dl_manager  # Nothing to download.
    return {split: self._generate_examples(split)
            for split in ('train', 'test')}

  def _generate_examples(self, split: str) -> Iterator[tuple[int, Example]]:
    # Imported here: sklearn takes about a second to import.
    from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
    digits = sk_datasets.load_digits()
    for i in digits_split_indices(split):
      image = digits.images[i].astype(np.uint8)[..., None]
      yield int(i), {'image': image, 'label': int(digits.target[i]),
                     'index': int(i)}


# ----------------------------------------------------------------------------
# Synthetic builders.

_CLASS_NAME_SANITIZER = re.compile(r'[^0-9a-zA-Z]+')


def _class_label_names(feature: Any, prefix: str = '') -> dict[str, Any]:
  """ClassLabel names by feature path (`to_json` leaves them out)."""
  if isinstance(feature, tfds.features.ClassLabel):
    return {prefix: list(feature.names)}
  out = {}
  if isinstance(feature, tfds.features.FeaturesDict):
    for k, v in feature.items():
      out.update(_class_label_names(v, f'{prefix}/{k}'))
  elif isinstance(feature, tfds.features.Sequence):
    out.update(_class_label_names(feature.feature, f'{prefix}[]'))
  return out


def _split_seed(seed: int, split: str) -> np.random.SeedSequence:
  return np.random.SeedSequence([seed, zlib.crc32(split.encode('utf-8'))])


def name_number(x: float) -> str:
  """A number as a dataset-name fragment in [a-z0-9]: 0.8 -> '0p8', 1e-05 ->
  '1em05', 3.0 -> '3' (dataset names carry their generation parameters)."""
  x = float(x)
  if not math.isfinite(x):
    raise ValueError(f'Expected a finite number, got {x}.')
  s = str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)
  return s.replace('-', 'm').replace('.', 'p').replace('+', '')


def synthetic_builder(
    name: str,
    features: tfds.features.FeaturesDict | Mapping[str, Any],
    splits: Mapping[str, SplitGenerator],
    *,
    seed: int = 0,
    version: str = '1.0.0',
    description: str = '',
    supervised_keys: tuple[str, str] | None = None,
) -> type[OfflineBuilder]:
  """Creates and registers a builder for a generated (synthetic) dataset.

  Example:

    def gen(rng, n):
      for _ in range(n):
        x = rng.integers(0, 5, size=16).astype(np.int32)
        yield {'x': x, 'y': np.cumsum(x) % 5}

    data.synthetic_builder(
        'cyclic_z5', {'x': tfds.features.Tensor(shape=(16,), dtype=np.int32),
                      'y': tfds.features.Tensor(shape=(16,), dtype=np.int64)},
        {'train': lambda rng: gen(rng, 10_000),
         'test': lambda rng: gen(rng, 1_000)})
    arrays = data.as_numpy('cyclic_z5', 'train')

  Each split generator is called with its own `np.random.Generator`, seeded
  from `(seed, crc32(split))`, so the examples are a deterministic function of
  the definition. They are stored in the order generated.

  The data on disk is keyed by (name, version) and generated once. A
  fingerprint of (name, version, seed, features, split names) is saved with
  it, and `prepare` refuses data whose fingerprint differs; the generator
  *code* cannot be fingerprinted, so bump `version` when it changes.

  Calling this again with the same name replaces the registered builder (no
  error), and TFDS's own registry is bypassed.

  Args:
    name: dataset name (snake_case), used by `load(name, ...)` and as folder.
    features: a `tfds.features.FeaturesDict` or a dict that can make one. Use
      features that encode without TensorFlow (`Tensor`, `Scalar`,
      `ClassLabel`, `Text`, nested dicts of those).
    splits: split name -> function(rng) returning a non-empty iterable of
      examples (dicts matching `features`); TFDS refuses empty splits.
    seed: base seed of the split generators.
    version: dataset version, 'x.y.z'.
    description: free text stored in the dataset info.
    supervised_keys: optional (input, target) feature names.

  Returns:
    The builder class (an `OfflineBuilder` subclass); make an
    instance with `cls(data_dir=...)`, or just use `load`/`as_numpy`/`prepare`.
  """
  if not re.fullmatch(r'[a-z][a-z0-9_]*', name):
    raise ValueError(f'Dataset name must be snake_case, got {name!r}.')
  if not splits:
    raise ValueError('`splits` must name at least one split.')
  for split in splits:
    if not re.fullmatch(r'\w+', split):
      raise ValueError(f'Split names must be \\w+, got {split!r}.')
  if not isinstance(features, tfds.features.FeaturesDict):
    features = tfds.features.FeaturesDict(dict(features))
  splits = dict(splits)
  fingerprint = hashlib.sha256(json.dumps(
      {'name': name, 'version': str(version), 'seed': int(seed),
       'splits': sorted(splits), 'features': features.to_json(),
       'class_names': _class_label_names(features)},
      sort_keys=True).encode('utf-8')).hexdigest()

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description=description,
        # A copy: features hold state (e.g. ClassLabel names, which their
        # JSON form lacks) that DatasetInfo may set when reading from disk.
        features=copy.deepcopy(features),
        supervised_keys=supervised_keys,
        disable_shuffling=True,
        metadata=tfds.core.MetadataDict({_FINGERPRINT_KEY: fingerprint}),
    )

  def _split_generators(self, dl_manager):
    del dl_manager
    return {split: self._generate_examples(split) for split in splits}

  def _generate_examples(self, split):
    rng = np.random.default_rng(_split_seed(seed, split))
    for i, example in enumerate(splits[split](rng)):
      yield i, example

  def body(ns: dict[str, Any]) -> None:
    ns.update(
        name=name,
        VERSION=tfds.core.Version(version),
        RELEASE_NOTES={str(version): 'Synthetic.'},
        _iclrjax_fingerprint=fingerprint,
        _info=_info,
        _split_generators=_split_generators,
        _generate_examples=_generate_examples,
        __module__=__name__,
        __doc__=description or f'Synthetic dataset {name!r}.',
    )

  class_name = ''.join(
      p.capitalize() for p in _CLASS_NAME_SANITIZER.split(name) if p)
  cls = types.new_class(class_name, (OfflineBuilder,),
                        {'skip_registration': True}, body)
  return register_builder(cls)


# ----------------------------------------------------------------------------
# Preparation (our builders) and lookup (anything else).


@contextlib.contextmanager
def _file_lock(path: pathlib.Path) -> Iterator[None]:
  """Exclusive `fcntl.flock` on `path` (a no-op where fcntl is missing)."""
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, 'a+') as f:
    if fcntl is not None:
      fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    try:
      yield
    finally:
      if fcntl is not None:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _split_name_version(name: str) -> tuple[str, str | None]:
  base, _, version = name.partition(':')
  return base, (version or None)


def _check_fingerprint(builder: tfds.core.DatasetBuilder) -> None:
  expected = getattr(type(builder), '_iclrjax_fingerprint', None)
  if expected is None:
    return
  found = builder.info.metadata.get(_FINGERPRINT_KEY) if (
      builder.info.metadata is not None) else None
  if found != expected:
    raise ValueError(
        f'Dataset {builder.name!r} {builder.version} at {builder.data_dir} '
        'was generated from a different definition (seed, features or '
        'splits; fingerprint ' f'{found} != {expected}). Bump `version` in '
        'synthetic_builder(...) or delete that folder.')


def _remove_stale_incomplete_dirs(builder: tfds.core.DatasetBuilder) -> None:
  """Removes `incomplete.*_<version>` folders left by killed processes.

  Only called while holding the preparation lock, so no live writer owns them.

  Args:
    builder: the builder whose dataset folder to clean.
  """
  parent = pathlib.Path(builder.data_dir).parent
  if not parent.is_dir():
    return
  for p in parent.glob(f'incomplete.*_{builder.version}'):
    logging.warning('Removing stale partial dataset folder %s', p)
    shutil.rmtree(p, ignore_errors=True)


def _prepare_ours(cls: type[OfflineBuilder], data_dir: str,
                  version: str | None) -> tfds.core.DatasetBuilder:
  builder = cls(data_dir=data_dir, version=version)
  if not builder.is_prepared():
    lock = pathlib.Path(data_dir) / _LOCK_DIRNAME / (
        f'{builder.name}-{builder.version}.lock')
    with _file_lock(lock):
      # Re-create: another process may have prepared it while we waited, and
      # a builder reads its on-disk info only at construction.
      builder = cls(data_dir=data_dir, version=version)
      if not builder.is_prepared():
        _remove_stale_incomplete_dirs(builder)
        builder.download_and_prepare(
            file_format='array_record',
            download_config=tfds.download.DownloadConfig(
                try_download_gcs=False),
        )
  # Always re-create: a builder reads its on-disk info (file format, splits)
  # only at construction, and another process may have finished preparing
  # between our first construction and the `is_prepared()` check above.
  builder = cls(data_dir=data_dir, version=version)
  _check_fingerprint(builder)
  return builder


def _not_found_message(name: str, data_dir: str, detail: str) -> str:
  """One line: the dataset, the folder searched, what is missing, the fix."""
  base = _split_name_version(name)[0].split('/')[0]
  detail = ' '.join(detail.split())
  return (
      f'dataset {name} is not prepared in {data_dir} ({detail}): run '
      f'`tfds build {name} --data_dir=/tmp/tfds --file_format=array_record` '
      'on a machine with network and TensorFlow, copy /tmp/tfds/'
      f'{base} to {os.path.join(data_dir, base)}, or point '
      '--config.data_dir (or $TFDS_DATA_DIR) at a folder that has it; '
      'nothing is downloaded at run time')


@contextlib.contextmanager
def _absl_errors_only() -> Iterator[None]:
  """Hides tfds's warnings about the folders it probes (the error says it).

  Saves and restores the absl logger's own level: restoring absl's
  verbosity instead (-1 by default) would leave the logger at WARNING, not
  unset, and silence every later absl INFO line in the process.
  """
  absl_logger = logging.get_absl_logger()
  old = absl_logger.level
  absl_logger.setLevel(std_logging.ERROR)
  try:
    yield
  finally:
    absl_logger.setLevel(old)


def _standard_builder(name: str, data_dir: str) -> tfds.core.DatasetBuilder:
  """A builder for an already-prepared dataset that we cannot generate.

  Reads only the dataset's metadata (dataset_info.json), never its records.
  """
  with _absl_errors_only():
    try:
      builder = tfds.builder(name, data_dir=data_dir, try_gcs=False)
    except tfds.core.DatasetNotFoundError as e:
      raise DatasetNotFoundError(_not_found_message(
          name, data_dir, 'not a TFDS dataset name and no prepared files; '
          'check the name')) from e
    prepared = builder.is_prepared()
  if not prepared:
    missing = os.path.relpath(os.fspath(builder.data_path), data_dir)
    raise DatasetNotFoundError(_not_found_message(
        name, data_dir, f'no {missing}'))
  formats = builder.info.available_file_formats()
  if formats and tfds.core.FileFormat.ARRAY_RECORD not in formats:
    found = ', '.join(sorted(f.value for f in formats))
    raise DatasetNotFoundError(_not_found_message(
        name, data_dir, f'it is there as {found}, not array_record'))
  return builder


def check_available(name: str, data_dir: PathLike | None = None) -> None:
  """Raises `DatasetNotFoundError` unless `load(name)` can work offline.

  Cheap: reads no records and generates nothing (launchers call it before
  any compute). Our own datasets (`registered_names()`) always pass, since
  they are generated on first use; any other must be prepared in `data_dir`
  as array_record.

  Args:
    name: dataset name, see `prepare`.
    data_dir: root data folder; default `default_data_dir()`.
  """
  data_dir = _resolve_data_dir(data_dir)
  if _split_name_version(name)[0] not in _REGISTRY:
    _standard_builder(name, data_dir)


def prepare(name: str, data_dir: PathLike | None = None
            ) -> tfds.core.DatasetBuilder:
  """Returns a prepared builder, generating our own datasets on first use.

  Args:
    name: a registered name (`registered_names()`, optionally 'name:x.y.z'),
      which is generated offline into `data_dir` if not there yet; or any
      other TFDS name ('mnist', 'cifar10:3.0.2', 'ds/config'), which must
      already be prepared there.
    data_dir: root data folder; default `default_data_dir()`.

  Returns:
    The `tfds.core.DatasetBuilder`, whose data is on disk.

  Raises:
    DatasetNotFoundError: `name` is not ours and is not prepared in data_dir.
    ValueError: a synthetic dataset on disk was made from another definition.
  """
  data_dir = _resolve_data_dir(data_dir)
  base, version = _split_name_version(name)
  if base in _REGISTRY:
    return _prepare_ours(_REGISTRY[base], data_dir, version)
  return _standard_builder(name, data_dir)


def load(name: str, split: str | None = None, *,
         data_dir: PathLike | None = None,
         decoders: Any = None) -> Any:
  """Random-access data source(s) of a dataset (see `prepare`).

  Args:
    name: dataset name, see `prepare`.
    split: split, with TFDS slicing ('train', 'train[:10%]'); None: all.
    data_dir: root data folder; default `default_data_dir()`.
    decoders: optional TFDS decoders (e.g. `tfds.decode.SkipDecoding()`).

  Returns:
    An `ArrayRecordDataSource` (a `Sequence` of example dicts of numpy
    values, supporting `len`, `ds[i]` and `ds.__getitems__(indices)`), or a
    dict split -> source when `split` is None.

  Raises:
    DatasetNotFoundError: as in `prepare`, or if a standard dataset is
      prepared but not in a random-access format (array_record).
  """
  data_dir = _resolve_data_dir(data_dir)
  base, _ = _split_name_version(name)
  if base in _REGISTRY:
    builder = prepare(name, data_dir)
    return builder.as_data_source(split=split, decoders=decoders)
  _standard_builder(name, data_dir)  # Clear error if missing.
  try:
    return tfds.data_source(name, split=split, data_dir=data_dir,
                            download=False, decoders=decoders, try_gcs=False)
  except NotImplementedError as e:  # Prepared, but e.g. as tfrecord.
    raise DatasetNotFoundError(_not_found_message(
        name, data_dir, f'it is there, but not as array_record: {e}')) from e


def _stack(examples: Sequence[Any]) -> Any:
  first = examples[0]
  if isinstance(first, collections.abc.Mapping):
    return {k: _stack([e[k] for e in examples]) for k in first}
  return np.stack([np.asarray(e) for e in examples])


def as_numpy(name: str, split: str, *, data_dir: PathLike | None = None,
             chunk_size: int = 8192) -> dict[str, Any]:
  """A whole split as a dict of stacked numpy arrays (nested dicts kept).

  Meant for our small datasets: put them on device once and index them with
  `batch_indices` under jit. Row `i` is record `i` of the split. Features
  must have fixed shapes (they are stacked with `np.stack`).

  Args:
    name: dataset name, see `prepare`.
    split: split, with TFDS slicing ('train', 'train[:10%]').
    data_dir: root data folder; default `default_data_dir()`.
    chunk_size: records read per batched read.

  Returns:
    feature name -> array with a leading axis of length `len(split)`.
  """
  source = load(name, split, data_dir=data_dir)
  n = len(source)
  examples = []
  for start in range(0, n, chunk_size):
    examples.extend(source.__getitems__(
        list(range(start, min(start + chunk_size, n)))))
  return _stack(examples)


# ----------------------------------------------------------------------------
# Minibatches as a pure function of (key, step).


def _as_key(key: jax.Array | int) -> jax.Array:
  if isinstance(key, (int, np.integer)):
    return jax.random.key(int(key))
  return key


def epoch_permutation(key: jax.Array | int, epoch: int | jax.Array,
                      num_examples: int) -> jax.Array:
  """The order of the examples in `epoch`: a permutation of range(n).

  Args:
    key: a PRNG key (typed or raw uint32) or an int seed.
    epoch: epoch number (may be traced).
    num_examples: n (static).

  Returns:
    int32 [num_examples] permutation.
  """
  key = jax.random.fold_in(_as_key(key), epoch)
  return jax.random.permutation(key, num_examples).astype(jnp.int32)


def batch_indices(key: jax.Array | int, step: int | jax.Array,
                  num_examples: int, batch_size: int) -> jax.Array:
  """Example indices of minibatch `step`, a pure function of (key, step).

  The data stream is the concatenation of per-epoch permutations,
  `epoch_permutation(key, 0, n) ++ epoch_permutation(key, 1, n) ++ ...`, and
  batch `step` is its positions `[step * batch_size, (step + 1) * batch_size)`.
  So every example is seen exactly once per epoch (of n stream positions;
  batches may straddle two epochs, nothing is dropped), and resuming a run at
  step t continues the exact same stream. Works under jit/vmap/scan with a
  traced `step` (and a traced/vmapped key); `num_examples` and `batch_size`
  are static. Positions are computed without forming `step * batch_size`, so
  int32 overflows only past ~2^31 epochs or when n * batch_size >= 2^31.

  Args:
    key: a PRNG key (typed or raw uint32) or an int seed.
    step: the step (int or int scalar array).
    num_examples: n, the dataset size.
    batch_size: examples per batch (may exceed n).

  Returns:
    int32 [batch_size] indices into the dataset.
  """
  if num_examples < 1 or batch_size < 1:
    raise ValueError(f'Need num_examples >= 1 and batch_size >= 1, got '
                     f'{num_examples}, {batch_size}.')
  return _batch_indices(_as_key(key), step, int(num_examples), int(batch_size))


@functools.partial(jax.jit, static_argnums=(2, 3))
def _batch_indices(key: jax.Array, step: jax.Array, n: int, b: int
                   ) -> jax.Array:
  """`batch_indices` (jitted; nested in an outer jit it is simply inlined)."""
  step = jnp.asarray(step, dtype=jnp.int32)
  # step * b = (q * n + r) * b  ->  epoch q * b + (r * b + j) // n.
  q, r = step // n, step % n
  pos = r * b + jnp.arange(b, dtype=jnp.int32)
  epoch = q * b + pos // n
  offset = pos % n
  # A batch spans at most this many consecutive epochs (static).
  num_epochs = (n + b - 2) // n + 1
  first = epoch[0]
  perms = jax.vmap(lambda e: epoch_permutation(key, e, n))(
      first + jnp.arange(num_epochs, dtype=jnp.int32))
  return perms[epoch - first, offset]
