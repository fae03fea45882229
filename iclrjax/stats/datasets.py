"""Offline datasets of the statistical-learning papers.

`spurious_digits`: a group-imbalanced spurious-correlation benchmark built
from scikit-learn's 8x8 digits (the W2S paper's Waterbirds / BFFHQ analogue,
arXiv 2509.24005). The label is a property of the digit's shape, y =
1{digit >= 5}; the spurious attribute is the background: every digit is
rendered on both backgrounds, so an experiment picks, per example, the
background that agrees with the label (majority group, a = y) or not
(minority group, a = 1 - y) with probability eta -- D(eta) for any eta from
one stored dataset. The two backgrounds differ in colour and texture
(warm horizontal stripes vs cool vertical stripes, with per-example
brightness, phase and pixel noise), a cue far easier than the digit's shape
(as water / land backgrounds are for bird species).

Stored as an offline TFDS builder (`core.data.synthetic_builder`: written once
as array_record, read with `core.data.as_numpy`); splits follow `core.data`'s
digits split (1437 train / 360 test digits).
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple

import numpy as np
import tensorflow_datasets as tfds

from iclrjax.core import data as data_lib

SPURIOUS_DIGITS = 'spurious_digits'
SIDE = 12           # 8x8 digit centred on a 12x12 background
_PAD = (SIDE - 8) // 2
# Background base colours (RGB in [0, 1]): 0 warm, 1 cool.
_COLOURS = np.array([[0.85, 0.45, 0.2], [0.2, 0.5, 0.85]])


def label_of_digit(digit: np.ndarray) -> np.ndarray:
  """The task's label: 1{digit >= 5}."""
  return (np.asarray(digit) >= 5).astype(np.int64)


def render(digit_image: np.ndarray, background: int,
           rng: np.random.Generator) -> np.ndarray:
  """One 8x8 digit (values 0..16) on a SIDE x SIDE background, uint8 RGB.

  Background 0: warm colour with horizontal stripes; 1: cool colour with
  vertical stripes; brightness, stripe phase and pixel noise drawn from rng.
  The digit's strokes are blended towards white by their ink level.
  """
  coords = np.arange(SIDE)
  phase = rng.integers(0, 3)
  axis = coords[:, None] if background == 0 else coords[None, :]
  stripes = 0.75 + 0.25 * (((axis + phase) // 2) % 2)
  base = _COLOURS[background] * rng.uniform(0.7, 1.0)
  bg = (np.broadcast_to(stripes, (SIDE, SIDE))[..., None] * base
        + rng.normal(0.0, 0.05, (SIDE, SIDE, 3)))
  ink = np.zeros((SIDE, SIDE, 1))
  ink[_PAD:_PAD + 8, _PAD:_PAD + 8, 0] = digit_image / 16.0
  img = (1.0 - ink) * bg + ink * 1.0
  return np.clip(np.round(img * 255.0), 0, 255).astype(np.uint8)


def spurious_digits_builder(seed: int = 0) -> str:
  """Registers the `spurious_digits` builder; returns its name.

  Features: image0 / image1 (uint8 [SIDE, SIDE, 3], the digit on background
  0 / 1), digit (0..9), label (1{digit >= 5}), index (row of
  `sklearn.datasets.load_digits()`).
  """
  name = SPURIOUS_DIGITS if seed == 0 else f'{SPURIOUS_DIGITS}_s{seed}'

  def split_gen(split: str):
    def it(rng: np.random.Generator) -> Iterator[dict[str, Any]]:
      from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
      digits = sk_datasets.load_digits()
      for i in data_lib.digits_split_indices(split):
        d = int(digits.target[i])
        yield {'image0': render(digits.images[i], 0, rng),
               'image1': render(digits.images[i], 1, rng),
               'digit': d, 'label': int(label_of_digit(d)), 'index': int(i)}
    return it

  image = tfds.features.Tensor(shape=(SIDE, SIDE, 3), dtype=np.uint8)
  data_lib.synthetic_builder(
      name,
      {'image0': image, 'image1': image,
       'digit': tfds.features.Scalar(dtype=np.int64),
       'label': tfds.features.Scalar(dtype=np.int64),
       'index': tfds.features.Scalar(dtype=np.int64)},
      {'train': split_gen('train'), 'test': split_gen('test')},
      seed=seed, version='1.0.0',
      description=(
          'scikit-learn digits, label 1{digit >= 5}, each digit rendered on '
          'a warm horizontal-striped (0) and a cool vertical-striped (1) '
          f'{SIDE}x{SIDE} background; pick image_a with a = label (majority) '
          'or 1 - label (minority, fraction eta) for D(eta).'))
  return name


class SpuriousDigits(NamedTuple):
  """One split on the host: both renders of every digit."""
  images: np.ndarray   # uint8 [n, 2, SIDE, SIDE, 3]: background 0, 1
  digit: np.ndarray    # int [n]
  label: np.ndarray    # int [n]


def load_spurious_digits(split: str, data_dir: data_lib.PathLike | None = None,
                         seed: int = 0) -> SpuriousDigits:
  """A split of `spurious_digits` (generated on first use)."""
  d = data_lib.as_numpy(spurious_digits_builder(seed), split,
                        data_dir=data_dir)
  return SpuriousDigits(np.stack([d['image0'], d['image1']], axis=1),
                        np.asarray(d['digit']), np.asarray(d['label']))
