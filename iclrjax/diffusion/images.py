"""Quantised images for likelihood experiments: digits, a known-entropy set.

* `digits(split)`: scikit-learn's 8x8 digits through `core.data` (the
  offline 'digits' TFDS builder), as float integer levels 0..16 flattened to
  D = 64. The builder already has a fixed train/test split (RandomState(0)
  permutation of the 1797 images: 1437 train / 360 test, see
  `core.data.digits_split_indices`), which is used as is.
* `to_scale(x_int, scale, levels)`: levels -> data values on a grid:
  'integer' (x, spacing 1), '[-1,1]' (2x/(K-1) - 1, spacing 2/(K-1): 2/16
  for digits) or 'vdm' (VDM's `EncDec.encode`, bin centres
  2(x + 1/2)/K - 1, spacing 2/K).
* A synthetic set whose entropy is known: a mixture of M random side x side
  prototypes, each pixel independently categorical around its prototype
  level (`known_entropy_builder`, `known_entropy_logp`, `known_entropy`).
* A folder of PNG/JPEG photographs that a user has on disk (FFHQ, DIV2K,
  ...): `image_files` lists them, `load_image_folder` decodes them with PIL
  into size x size RGB crops (uint8, or float32 on [-1, 1]); nothing is
  downloaded, an empty or absent folder is a one-line FileNotFoundError.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Sequence
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow_datasets as tfds

from iclrjax.core import data as data_lib

DIGITS_LEVELS = 17
DIGITS_DIM = 64
SCALES = ('integer', '[-1,1]', 'vdm')


# -- grids ----------------------------------------------------------------------------
def to_scale(x_int: Any, scale: str, levels: int = DIGITS_LEVELS) -> Any:
  """Maps integer levels 0..K-1 to data values on the chosen grid.

  Args:
    x_int: levels (any array; numpy in -> numpy out, jax in -> jax out).
    scale: 'integer' (x), '[-1,1]' (2x/(K-1) - 1) or 'vdm' (2(x+0.5)/K - 1).
    levels: K.

  Returns:
    float32 values.
  """
  xp = jnp if isinstance(x_int, jax.Array) else np
  x = xp.asarray(x_int, dtype=xp.float32)
  if scale == 'integer':
    return x
  if scale == '[-1,1]':
    return x * np.float32(2.0 / (levels - 1)) - np.float32(1.0)
  if scale == 'vdm':
    return (x + np.float32(0.5)) * np.float32(2.0 / levels) - np.float32(1.0)
  raise ValueError(f'Unknown scale {scale!r}; use one of {SCALES}.')


def grid(levels: int, scale: str) -> np.ndarray:
  """The K grid values of `scale`, float32 [K], increasing."""
  return to_scale(np.arange(levels), scale, levels)


def spacing(levels: int, scale: str) -> float:
  """The grid spacing: 1, 2/(K-1) or 2/K."""
  return {'integer': 1.0, '[-1,1]': 2.0 / (levels - 1),
          'vdm': 2.0 / levels}[scale]


# -- digits -----------------------------------------------------------------------------
def digits(split: str, data_dir: str | None = None) -> np.ndarray:
  """sklearn digits as float32 levels 0..16, [N, 64] (train 1437, test 360)."""
  return load_images('digits', split, data_dir)


# -- known-entropy mixture ------------------------------------------------------------
def known_entropy_name(num_prototypes: int = 32, levels: int = 17,
                       side: int = 8, noise: float = 1.0,
                       num_train: int = 5000, num_test: int = 1000,
                       seed: int = 0) -> str:
  """Dataset name of `known_entropy_builder` (every parameter in it)."""
  return (f'known_entropy_m{int(num_prototypes)}_k{int(levels)}'
          f'_s{int(side)}_w{data_lib.name_number(noise)}_n{int(num_train)}'
          f'_t{int(num_test)}_seed{int(seed)}')


def known_entropy_params(num_prototypes: int = 32, levels: int = 17,
                         side: int = 8, noise: float = 1.0,
                         seed: int = 0) -> dict[str, np.ndarray]:
  """The mixture's parameters, a deterministic function of the arguments.

  * prototypes [M, D] (D = side^2): i.i.d. uniform levels 0..K-1, drawn from
    `np.random.default_rng(SeedSequence([seed, 0x9e3779b9]))` (a stream of its
    own, so they do not depend on the split generators).
  * log_pi [M]: uniform mixture weights, log(1/M).
  * log_kernel [K, K]: log p(x_i = k | prototype level m) (row m), a
    discretised Gaussian of width `noise` (in levels) over the K levels,
    proportional to exp(-(k - m)^2 / (2 noise^2)) and normalised per row.

  Returns:
    dict of numpy arrays (float64 / int64).
  """
  if num_prototypes < 1 or levels < 2 or side < 1:
    raise ValueError('Need num_prototypes >= 1, levels >= 2, side >= 1.')
  if levels > 256:
    raise ValueError(f'levels must be <= 256 (stored as uint8), got {levels}.')
  if not noise > 0:
    raise ValueError(f'noise must be > 0, got {noise}.')
  rng = np.random.default_rng(np.random.SeedSequence([seed, 0x9e3779b9]))
  prototypes = rng.integers(0, levels, size=(num_prototypes, side * side))
  k = np.arange(levels, dtype=np.float64)
  logits = -np.square(k[None, :] - k[:, None]) / (2.0 * noise ** 2)
  log_kernel = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
  log_pi = np.full(num_prototypes, -math.log(num_prototypes))
  return {'prototypes': prototypes.astype(np.int64), 'log_pi': log_pi,
          'log_kernel': log_kernel}


def known_entropy_sample(params: dict[str, np.ndarray],
                         rng: np.random.Generator, n: int
                         ) -> tuple[np.ndarray, np.ndarray]:
  """n draws: (x [n, D] int64 levels, component [n] int64)."""
  protos = params['prototypes']
  m = rng.choice(protos.shape[0], size=n, p=np.exp(params['log_pi']))
  cdf = np.cumsum(np.exp(params['log_kernel']), axis=1)  # [K, K]
  cdf[:, -1] = 1.0
  level = protos[m]  # [n, D]
  u = rng.random(level.shape)
  x = (u[..., None] > cdf[level]).sum(-1)
  return x.astype(np.int64), m.astype(np.int64)


def known_entropy_logp(x_int: Any, params: dict[str, Any]) -> jax.Array:
  """Exact log p(x) [N], nats: logsumexp_m [log pi_m + sum_i log K(x_i | m_i)].

  Args:
    x_int: [N, D] integer levels (ints or integer-valued floats).
    params: `known_entropy_params(...)`.
  """
  x = jnp.asarray(x_int).astype(jnp.int32)
  log_kernel = jnp.asarray(params['log_kernel'])
  protos = jnp.asarray(params['prototypes'], jnp.int32)
  # log K(x_i | proto_{m,i}) for every (n, m, i) via one gather: [N, M, D].
  per_pixel = log_kernel[protos[None, :, :], x[:, None, :]]
  comp = jnp.asarray(params['log_pi'])[None, :] + per_pixel.sum(-1)
  return jax.nn.logsumexp(comp, axis=-1)


def known_entropy(params: dict[str, np.ndarray], n_mc: int = 10_000,
                  seed: int = 0, chunk: int = 4096) -> tuple[float, float]:
  """The entropy H in bits/dim by Monte Carlo on exact log p, and its SE.

  H = E_p[-log p(x)] / (D ln 2) over n_mc fresh draws (NumPy generator
  `default_rng(seed)`), SE = std / sqrt(n_mc). The SE is ~0.09 / sqrt(n_mc)
  bpd for the default 8x8, 17-level, noise-1 set (~0.001 at 10^4 draws).
  """
  rng = np.random.default_rng(seed)
  dim = params['prototypes'].shape[1]
  vals = []
  for start in range(0, n_mc, chunk):
    x, _ = known_entropy_sample(params, rng, min(chunk, n_mc - start))
    vals.append(np.asarray(known_entropy_logp(x, params), np.float64))
  bits = -np.concatenate(vals) / (dim * math.log(2.0))
  return float(bits.mean()), float(bits.std(ddof=1) / math.sqrt(n_mc))


def known_entropy_builder(num_prototypes: int = 32, levels: int = 17,
                          side: int = 8, noise: float = 1.0,
                          num_train: int = 5000, num_test: int = 1000,
                          seed: int = 0) -> str:
  """Registers the known-entropy mixture dataset; returns its name.

  Features: 'image' uint8 [side, side, 1] (levels 0..K-1, like 'digits') and
  'component' int64 (the mixture component that generated it). Splits
  'train' / 'test' are i.i.d. draws from the mixture of
  `known_entropy_params(num_prototypes, levels, side, noise, seed)`, whose
  exact log p is `known_entropy_logp` and entropy `known_entropy`.

  Returns:
    The dataset name, for `core.data.as_numpy(name, split)`.
  """
  if num_train < 1 or num_test < 1:
    raise ValueError('num_train and num_test must be >= 1.')
  params = known_entropy_params(num_prototypes, levels, side, noise, seed)
  name = known_entropy_name(num_prototypes, levels, side, noise, num_train,
                            num_test, seed)

  def split_gen(n: int):
    def it(rng: np.random.Generator) -> Iterator[dict[str, Any]]:
      x, m = known_entropy_sample(params, rng, n)
      for xi, mi in zip(x, m):
        yield {'image': xi.reshape(side, side, 1).astype(np.uint8),
               'component': int(mi)}
    return it

  data_lib.synthetic_builder(
      name,
      {'image': tfds.features.Tensor(shape=(side, side, 1), dtype=np.uint8),
       'component': tfds.features.Scalar(dtype=np.int64)},
      {'train': split_gen(num_train), 'test': split_gen(num_test)},
      seed=seed, version='1.0.0',
      description=(
          f'Known-entropy mixture: {num_prototypes} uniform random '
          f'{side}x{side} prototypes over {levels} levels, uniform weights, '
          f'each pixel an independent discretised Gaussian (width {noise} '
          'levels) around its prototype level.'))
  return name


def load_images(name: str, split: str, data_dir: str | None = None
                ) -> np.ndarray:
  """Any of our image builders' split as float32 levels [N, side^2]."""
  img = np.asarray(data_lib.as_numpy(name, split, data_dir=data_dir)['image'])
  return img.reshape(img.shape[0], -1).astype(np.float32)


# -- folders of photographs -----------------------------------------------------------------
IMAGE_SUFFIXES = ('.png', '.jpg', '.jpeg')
CROPS = ('resize', 'random', 'center')


def image_files(root: str | pathlib.Path) -> list[pathlib.Path]:
  """Every PNG/JPEG file under `root` (subfolders included, suffix case
  ignored), sorted by path; [] when `root` is absent."""
  root = pathlib.Path(root)
  if not root.is_dir():
    return []
  return sorted(p for p in root.rglob('*')
                if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


def _crop_box(w: int, h: int, size: int, crop: str,
              rng: np.random.RandomState) -> tuple[int, int, int, int]:
  if crop == 'center':
    left, top = (w - size) // 2, (h - size) // 2
  else:
    left, top = rng.randint(0, w - size + 1), rng.randint(0, h - size + 1)
  return left, top, left + size, top + size


def load_image(path: str | pathlib.Path, size: int, crop: str = 'resize',
               rng: np.random.RandomState | None = None, num_crops: int = 1
               ) -> np.ndarray:
  """`num_crops` crops of one RGB image, uint8 [num_crops, size, size, 3].

  crop='resize': the shorter side is resized to `size` (bicubic) and the
  centre square kept (a no-op on FFHQ-256 at size 256); 'random' / 'center':
  a size x size crop at full resolution (DIV2K's random training patches
  and centred validation crops), after a bicubic upscale of an image whose
  shorter side is below `size`. `rng` draws the random crops (the
  deterministic crops repeat).
  """
  from PIL import Image  # pylint: disable=g-import-not-at-top
  if crop not in CROPS:
    raise ValueError(f'crop={crop!r}: use one of {CROPS}')
  with Image.open(path) as im:
    im = im.convert('RGB')
    w, h = im.size
    if crop == 'resize' or min(w, h) < size:
      scale = size / min(w, h)
      w, h = max(size, round(w * scale)), max(size, round(h * scale))
      im = im.resize((w, h), Image.BICUBIC)
    rng = rng or np.random.RandomState(0)
    mode = 'center' if crop == 'resize' else crop
    return np.stack([np.asarray(im.crop(_crop_box(w, h, size, mode, rng)),
                                np.uint8) for _ in range(num_crops)])


def load_image_folder(root: str | pathlib.Path | Sequence[pathlib.Path],
                      size: int, *, crop: str = 'resize', limit: int = 0,
                      num_crops: int = 1, seed: int = 0,
                      dtype: Any = np.uint8) -> np.ndarray:
  """HR images of a folder (or of a list of files) as [N, size, size, 3]
  (N = files x num_crops, the crops of a file adjacent).

  Args:
    root: a folder (every `image_files` entry, sorted) or a list of files.
    size: side of the square output.
    crop: see `load_image`.
    limit: read only the first `limit` files (0: all).
    num_crops: crops per file (`load_image`).
    seed: seed of the random crops (the same seed gives the same crops).
    dtype: np.uint8 (values 0..255, a quarter of float32's memory; see
      `to_signed`) or a float dtype (values on [-1, 1]).

  Raises:
    FileNotFoundError: (one line) when there are no images.
  """
  files = (image_files(root) if isinstance(root, (str, pathlib.Path))
           else list(root))
  if not files:
    raise FileNotFoundError(f'no PNG/JPEG images under {root}')
  files = files[:limit] if limit else files
  rng = np.random.RandomState(seed)
  x = np.concatenate([load_image(f, size, crop, rng, num_crops)
                      for f in files])
  return x if np.dtype(dtype) == np.uint8 else to_signed(x).astype(dtype)


def to_signed(x: Any) -> Any:
  """uint8 0..255 -> float32 x / 127.5 - 1 on [-1, 1]; float input is
  returned unchanged (numpy in -> numpy out, jax in -> jax out)."""
  xp = jnp if isinstance(x, jax.Array) else np
  if x.dtype != xp.uint8:
    return x
  return x.astype(xp.float32) * np.float32(1 / 127.5) - np.float32(1.0)


# -- metrics and sample grids ---------------------------------------------------------------
def psnr(x: Any, ref: Any, data_range: float = 2.0,
         per_image: bool = False) -> float:
  """10 log10(data_range^2 / MSE) of x against ref (data in [-1, 1]: 2).

  per_image=False: one MSE over the whole batch; True: mean over the
  leading axis of per-image PSNRs.
  """
  x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
  if per_image:
    mse = np.mean((x - ref) ** 2, axis=tuple(range(1, x.ndim)))
  else:
    mse = np.mean((x - ref) ** 2)
  with np.errstate(divide='ignore'):
    val = 10.0 * np.log10(data_range ** 2 / mse)
  return float(np.mean(val))


def tile(x: Any, ncols: int | None = None) -> np.ndarray:
  """Images [n, H, W, C] -> one mosaic [rows H, ncols W, C], row-major,
  padded with zeros; `ncols=None`: a single row."""
  x = np.asarray(x)
  n, h, w, c = x.shape
  ncols = n if ncols is None else ncols
  rows = -(-n // ncols)
  pad = np.zeros((rows * ncols - n, h, w, c), x.dtype)
  x = np.concatenate([x, pad]).reshape(rows, ncols, h, w, c)
  return x.transpose(0, 2, 1, 3, 4).reshape(rows * h, ncols * w, c)


def plot_grid(panels: dict[str, Any], path, *,
              layout: tuple[int, int] | None = None, ncols: int | None = None,
              value_range: tuple[float, float] | None = (-1.0, 1.0),
              title: str = '', dpi: int = 120, panel_size=(8.0, 1.2)):
  """Writes one figure of image panels to `path` and returns it.

  panels: name -> images [n, H, W, C] (C = 1 grey or 3 RGB), each `tile`d
    with `ncols` columns (None: one row).
  layout: None gives one labelled strip per panel, stacked (label on the
    left); (rows, cols) gives a grid with the names as panel titles.
  value_range: the colour range shared by every panel; None scales each
    panel to its own [min, max].
  panel_size: (width, height) in inches of one strip, or of one grid cell.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  rows, cols = layout or (len(panels), 1)
  fig, axes = plt.subplots(rows, cols, squeeze=False, figsize=(
      panel_size[0] * cols, panel_size[1] * rows))
  for ax, (name, x) in zip(axes.reshape(-1), panels.items()):
    img = tile(x, ncols).astype(np.float64)
    lo, hi = value_range or (img.min(), img.max())
    img = np.clip((img - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    ax.imshow(img[..., 0] if img.shape[-1] == 1 else img, cmap='gray',
              vmin=0.0, vmax=1.0)
    if layout is None:
      ax.set_ylabel(name, fontsize=7, rotation=0, ha='right', va='center')
    else:
      ax.set_title(name, fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
  for ax in axes.reshape(-1)[len(panels):]:
    ax.axis('off')
  if title:
    fig.suptitle(title, fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path
