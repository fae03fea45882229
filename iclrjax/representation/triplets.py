"""Intervention pairs (before, after, action) from scikit-learn's digits on
textured scenes: a small offline stand-in for the Causal Triplet benchmark
(Liu et al., CLeaR 2023), built as a pure, seeded NumPy function.

An object (an 8 x 8 digit, scaled by `contrast`) sits on a `size` x `size`
scene: oriented stripes whose orientation is the scene's style (one style
per action), amplitude `texture`, a random phase, plus a fixed noise field
(`scene_noise`). The action changes the object only:

  0 shift-left, 1 shift-right, 2 shift-up  (by 1 px for even digits, 2 px
      for odd ones: an object-dependent effect),
  3 rotate-90, 4 flip left-right;

the scene is the same in both images and each image gets its own sensor
noise (`pixel_noise`). Splits:

  train   each action with `digits_per_action` of the 10 digit classes
          (a different window per action), scene style = action with
          probability `spurious` (the spurious scene-action correlation),
          digit images from the first `train_frac` of the dataset;
  id      the same (action, digit) pairs and correlation, held-out images;
  ood     the unseen (action, digit) pairs, styles drawn uniformly
          (decorrelated), held-out images (the compositional shift).
"""

from __future__ import annotations

import dataclasses

import numpy as np

ACTIONS = ('shift-left', 'shift-right', 'shift-up', 'rotate-90', 'flip')
NUM_ACTIONS = len(ACTIONS)
OPPOSING = (0, 1)        # shift-left / shift-right
NON_OPPOSING = (0, 2)    # shift-left / shift-up (orthogonal moves)


@dataclasses.dataclass(frozen=True)
class Spec:
  """The scenes (size, object contrast, texture, noise), the style-action
  correlation `spurious` and which (action, digit) pairs training sees."""

  size: int = 16
  contrast: float = 0.5
  texture: float = 1.0
  scene_noise: float = 0.3
  pixel_noise: float = 0.05
  spurious: float = 0.9
  digits_per_action: int = 5
  train_frac: float = 0.7


def train_digits(action: int, spec: Spec) -> np.ndarray:
  """The digit classes seen with `action` in training (a window of
  `digits_per_action` classes starting at 2 * action)."""
  return (2 * action + np.arange(spec.digits_per_action)) % 10


def seen_pair_mask(spec: Spec) -> np.ndarray:
  """[actions, 10] bool: (action, digit) pairs in the training split."""
  m = np.zeros((NUM_ACTIONS, 10), bool)
  for a in range(NUM_ACTIONS):
    m[a, train_digits(a, spec)] = True
  return m


def _digits():
  from sklearn import datasets as sk_data  # pylint: disable=g-import-not-at-top
  d = sk_data.load_digits()
  return d.images.astype(np.float32) / 16.0, d.target.astype(np.int32)


def apply_action(obj_8x8: np.ndarray, action: int, digit: int
                 ) -> tuple[np.ndarray, int, int]:
  """(new object, row shift, col shift) of one action on one object."""
  s = 1 + digit % 2
  if action == 0:
    return obj_8x8, 0, -s
  if action == 1:
    return obj_8x8, 0, s
  if action == 2:
    return obj_8x8, -s, 0
  if action == 3:
    return np.rot90(obj_8x8), 0, 0
  return obj_8x8[:, ::-1], 0, 0


def scene(rng: np.random.Generator, style: int, spec: Spec) -> np.ndarray:
  """Oriented stripes (orientation = style) with a random phase, plus a
  fixed noise field."""
  n = spec.size
  theta = np.pi * style / NUM_ACTIONS
  yy, xx = np.mgrid[0:n, 0:n].astype(np.float32)
  phase = rng.uniform(0, 2 * np.pi)
  freq = 2 * np.pi / 4.0
  stripes = np.sin(freq * (np.cos(theta) * xx + np.sin(theta) * yy) + phase)
  return (spec.texture * stripes
          + spec.scene_noise * rng.standard_normal((n, n))).astype(np.float32)


def _paste(canvas: np.ndarray, obj: np.ndarray, r: int, c: int,
           contrast: float) -> np.ndarray:
  out = canvas.copy()
  out[r:r + 8, c:c + 8] += contrast * obj
  return out


def make_split(split: str, n: int, seed: int, spec: Spec = Spec()
               ) -> dict[str, np.ndarray]:
  """n pairs of `split` ('train', 'id', 'ood'): x [n, H, W], x_after,
  action, digit, style (int32)."""
  if split not in ('train', 'id', 'ood'):
    raise ValueError(f'split {split!r}: use train, id or ood')
  rng = np.random.default_rng(np.random.SeedSequence(
      [seed, ('train', 'id', 'ood').index(split)]))
  images, targets = _digits()
  cut = int(spec.train_frac * len(targets))
  pool = np.arange(cut) if split == 'train' else np.arange(cut, len(targets))
  by_digit = [pool[targets[pool] == d] for d in range(10)]
  seen = seen_pair_mask(spec)
  margin = 2
  hi = spec.size - 8 - margin
  xs = np.empty((n, spec.size, spec.size), np.float32)
  xa = np.empty_like(xs)
  act = np.empty(n, np.int32)
  dig = np.empty(n, np.int32)
  sty = np.empty(n, np.int32)
  for i in range(n):
    a = int(rng.integers(NUM_ACTIONS))
    allowed = np.flatnonzero(seen[a] if split != 'ood' else ~seen[a])
    d = int(rng.choice(allowed))
    obj = images[rng.choice(by_digit[d])]
    if split == 'ood' or rng.uniform() >= spec.spurious:
      s = int(rng.integers(NUM_ACTIONS))
    else:
      s = a
    bg = scene(rng, s, spec)
    r, c = (int(v) for v in rng.integers(margin, hi + 1, size=2))
    new, dr, dc = apply_action(obj, a, d)
    noise = lambda: spec.pixel_noise * rng.standard_normal(bg.shape)
    xs[i] = _paste(bg, obj, r, c, spec.contrast) + noise()
    xa[i] = _paste(bg, new, r + dr, c + dc, spec.contrast) + noise()
    act[i], dig[i], sty[i] = a, d, s
  return {'x': xs, 'x_after': xa, 'action': act, 'digit': dig, 'style': sty}
