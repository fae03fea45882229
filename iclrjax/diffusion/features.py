"""A digits classifier and the Frechet distance in its feature space.

The realism and "same content" measures of the 8x8-digits experiments
(OFTSR, guidance watermarking): an MLP
classifier trained on the digits train split, its penultimate activations as
features (the FID recipe at toy scale, Heusel et al. 2017), and

  FD(a, b) = ||mu_a - mu_b||^2 + tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2)

(the Frechet / 2-Wasserstein distance between Gaussians fitted to the two
feature sets). The matrix square root uses symmetric eigendecompositions, so
it is exact for PSD covariances; `tests/diffusion/
test_features.py` checks it against scipy.linalg.sqrtm.

Images are [N, 8, 8, 1] (or [N, 64]) floats in [-1, 1], the scale of
`flow.digits`.

For RGB photographs without a trained feature net (no Inception weights can
be downloaded), `RandomConvFeatures` gives a fixed, untrained random conv
net: its FD is a reproducible pixel-statistics distance (local colour,
edge and texture statistics at three scales), not FID, and its values are
not comparable with published FIDs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import data as data_lib
from iclrjax.core import loop
from iclrjax.core import supervised
from iclrjax.diffusion import flow
from iclrjax.diffusion import images
from iclrjax.diffusion import train as train_lib


def digits_labeled(split: str = 'train', data_dir: str | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
  """(`flow.digits(split)`: images [N, 8, 8, 1] in [-1, 1], labels [N] int32)
  of a digits split."""
  labels = data_lib.as_numpy('digits', split, data_dir=data_dir)['label']
  return flow.digits(split, data_dir), np.asarray(labels, np.int32)


class RandomConvFeatures(NamedTuple):
  """A fixed random conv net on images [N, H, W, C] in [-1, 1].

  Layer l: Conv3x3(widths[l], stride 2, He-normal random filters, no bias)
  -> ReLU; the features are the spatial means of every layer's activations,
  concatenated ([N, sum(widths)]), so they summarise colour and texture at
  scales 2, 4, 8, ... pixels. Nothing is trained: the filters are a function
  of `seed` only (`random_conv_features`).
  """
  filters: tuple[Any, ...]
  chunk: int = 64

  def features(self, x: Any) -> jax.Array:
    """x [N, H, W, C] on [-1, 1] (or uint8, see `images.to_signed`; converted
    a chunk at a time) -> [N, sum(widths)]."""
    return jnp.concatenate([
        _random_conv_apply(self.filters, jnp.asarray(
            images.to_signed(x[i:i + self.chunk]), jnp.float32))
        for i in range(0, x.shape[0], self.chunk)])


@jax.jit
def _random_conv_apply(filters, x):
  pooled = []
  h = x
  for w in filters:
    h = jax.nn.relu(jax.lax.conv_general_dilated(
        h, w, (2, 2), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')))
    pooled.append(h.mean(axis=(1, 2)))
  return jnp.concatenate(pooled, axis=-1)


def random_conv_features(seed: int = 0, channels: int = 3,
                         widths: tuple[int, ...] = (16, 32, 64)
                         ) -> RandomConvFeatures:
  """`RandomConvFeatures` with filters drawn by NumPy's default_rng(seed)
(the same on every backend, and nothing to compile)."""
  rng = np.random.default_rng(seed)
  filters, c_in = [], channels
  for c_out in widths:
    std = np.sqrt(2.0 / (9 * c_in))
    filters.append(jnp.asarray(
        std * rng.standard_normal((3, 3, c_in, c_out)), jnp.float32))
    c_in = c_out
  return RandomConvFeatures(tuple(filters))


class DigitsMLP(nn.Module):
  """x [B, H, W, C] (flattened) -> (logits [B, 10], features [B, width])."""
  width: int = 128
  depth: int = 2

  @nn.compact
  def __call__(self, x):
    h = x.reshape(x.shape[0], -1)
    for _ in range(self.depth):
      h = nn.gelu(nn.Dense(self.width)(h))
    return nn.Dense(10)(h), h


class Classifier(NamedTuple):
  """A trained classifier (params of `DigitsMLP(width, depth)`) of images
  with `input_dim` pixels (64: 8x8 digits); inputs of any shape [N, ...]
  with that many values per image."""
  params: Any
  width: int
  depth: int
  test_accuracy: float
  input_dim: int = 64

  @property
  def module(self) -> DigitsMLP:
    return DigitsMLP(self.width, self.depth)

  def _flat(self, x: Any) -> jax.Array:
    return jnp.asarray(x).reshape(-1, self.input_dim)

  def logits(self, x: jax.Array) -> jax.Array:
    return self.module.apply(self.params, self._flat(x))[0]

  def features(self, x: jax.Array) -> jax.Array:
    return self.module.apply(self.params, self._flat(x))[1]

  def predict(self, x: jax.Array) -> jax.Array:
    return jnp.argmax(self.logits(x), -1)


def train_classifier(seed: int = 0, steps: int = 2000, width: int = 128,
                     depth: int = 2, batch_size: int = 128,
                     learning_rate: float = 1e-3, noise: float = 0.1,
                     data_dir: str | None = None,
                     data: tuple[Any, Any, Any, Any] | None = None
                     ) -> Classifier:
  """Fits `DigitsMLP` on the digits train split: AdamW on the cross-entropy,
  the family's training step (`train.make_trainer`, epoch-wise minibatches)
  run by `core.loop.train` (one seed, one compiled chunk).

  `noise` adds Gaussian pixel noise to each minibatch (std on the [-1, 1]
  scale), which keeps the features smooth on generated images. A few
  seconds on CPU; test accuracy ~0.98. `data` = (train images, train
  labels, test images, test labels) (images [N, ...] on [-1, 1], 10
  classes) fits it on another labelled image set instead (e.g. CIFAR-10).
  """
  if data is None:
    x, y = digits_labeled('train', data_dir)
    xt, yt = digits_labeled('test', data_dir)
  else:
    x, y, xt, yt = (jnp.asarray(a) for a in data)
  module = DigitsMLP(width, depth)

  def loss_fn(params, batch, key, frozen):
    del frozen
    xb, yb = batch
    xb = xb + noise * jax.random.normal(key, xb.shape)
    return supervised.cross_entropy(module.apply(params, xb)[0], yb)[0]

  init, step = train_lib.make_trainer(
      lambda key: module.init(key, x[:1]), loss_fn,
      optax.adamw(learning_rate, weight_decay=1e-4),
      ema_decay=0.999,  # the step keeps an EMA; the classifier is `params`
      batch_fn=train_lib.minibatch(None, batch_size))
  # The training split is an argument of the program, not a constant baked
  # into the executable.
  state = loop.train(init, step, seed=seed, num_seeds=1, num_steps=steps,
                     chunk_size=steps, data=(x, y), progress=False).state
  clf = Classifier(jax.tree.map(lambda a: a[0], state.params), width, depth,
                   0.0, int(np.prod(x.shape[1:])))
  acc = float((clf.predict(xt) == jnp.asarray(yt)).mean())
  return clf._replace(test_accuracy=acc)


def gaussian_stats(f: Any) -> tuple[np.ndarray, np.ndarray]:
  """(mean [d], covariance [d, d]) of features [N, d], float64."""
  f = np.asarray(f, np.float64)
  return f.mean(0), np.cov(f, rowvar=False)


def _psd_sqrt(s: np.ndarray) -> np.ndarray:
  w, v = np.linalg.eigh((s + s.T) / 2)
  return (v * np.sqrt(np.clip(w, 0, None))) @ v.T


def frechet_from_stats(mu_a, s_a, mu_b, s_b) -> float:
  """||mu_a - mu_b||^2 + tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2)."""
  r = _psd_sqrt(s_a)
  cross = _psd_sqrt(r @ s_b @ r)
  d = np.asarray(mu_a) - np.asarray(mu_b)
  return float(d @ d + np.trace(s_a) + np.trace(s_b) - 2 * np.trace(cross))


def frechet_distance(f_a: Any, f_b: Any) -> float:
  """Frechet distance between Gaussians fitted to features [N_a, d], [N_b, d]."""
  return frechet_from_stats(*gaussian_stats(f_a), *gaussian_stats(f_b))
