"""Guidance watermarking: steer a sampler so a post-hoc decoder reads a message.

Gesny, Giboulot, Furon, Chappelier, "Guidance Watermarking for Diffusion
Models", arXiv 2509.22126 (ICLR 2026); no official code. Equation numbers
are the paper's (Sec. 3); the signs of Eq. 7 and of
the guidance step were re-derived here (the printed ones are inconsistent,
see below).

Watermark statistics. A frozen decoder has an extractor phi: X -> R^M (M raw
logits; decoded bits = [phi > 0]). A message m in {0,1}^M maps to the
antipodal vector u_m = -(-1)^m = 2m - 1, and

  L(x, u_m) = 1 - cos(phi(x), u_m)                                  (Eq. 6)

is the guidance loss. Multi-bit decoding is exact as soon as
L < 1 - sqrt(1 - 1/M): if bit i were wrong, phi_i u_i <= 0 and by
Cauchy-Schwarz cos <= |phi_{-i}| sqrt(M - 1) / (|phi| sqrt(M))
<= sqrt(1 - 1/M) (`exact_decoding_threshold`; sufficient, and tight).
Zero-bit detection tests H0 "x carries no watermark" with the p-value
p = P[cos(U, u) > c] for U uniform on the sphere S^{M-1} (phi(X) isotropic
under H0, which whitening provides). cos^2(U, u) ~ Beta(1/2, (M-1)/2), so
for c >= 0, p = 1/2 P[cos^2 > c^2] = 1/2 (1 - I_{c^2}(1/2, (M-1)/2)), and
for c < 0, p = 1 - 1/2 P[cos^2 > c^2]; together

  p(c) = 1/2 (1 - sgn(c) I_{c^2}(1/2, (M-1)/2))                     (Eq. 7)

(the paper's wording gives the opposite sign; this is the form that is small
for aligned vectors). `p_value` evaluates 1 - I_{c^2}(a, b) as
I_{1-c^2}(b, a), which keeps p accurate far below float32's 1e-7 resolution
of 1 - I. Detection: p < P_FA.

Guidance for rectified flow. `flow.py`'s convention: t = 0 data, t = 1
noise, x_t = (1 - t) x0 + t eps, v = eps - x0, Euler from t = 1 to 0:
x_s = x_t + (s - t) v, s < t. The predicted clean sample (the flow analogue
of Tweedie's estimate; the brief's x1hat = x_t + (1 - t) v in the other time
convention) is

  x0hat = x_t - t v_theta(x_t, t)                              (estimate 'a')

or, in the paper's version, the result of completing the remaining sampling
steps from x_t (forward only; estimate 'b', `complete_x0`). With a set of
augmentations T (identity, Gaussian noise, 1-pixel shifts; all
differentiable) the per-augmentation gradients

  g_T = grad_{x0} log L(T(x0), u_m)   at x0 = x0hat                (Eq. 8)

are taken with respect to the clean estimate itself: the Jacobian of
x0hat w.r.t. x_t is replaced by the identity (the paper's fast version,
Sec. 4.5). They are aggregated by PCGrad (`pcgrad`; Yu et al. 2020, Alg. 1),
clipped element-wise to [-tau, tau] and normalised (Eq. 9):

  g = clip_tau(PCGrad({g_T})),     vhat = v_theta + omega g / max(eta, ||g||).

Sign: x0hat(vhat) = x0hat(v) - t omega g / max(eta, ||g||), a step along
-grad L, so L decreases for omega > 0 (tested). The paper's printed
eps-space form `eps - omega sqrt(1 - abar) grad log L` would move the DDPM
clean estimate (z - sqrt(1 - abar) eps) / sqrt(abar) *up* the gradient; its
descent form is `eps + omega sqrt(1 - abar) grad log L`, which is what the
flow form above is (eps-space and v-space guidance differ only by positive
factors). Guidance runs in the last `guided_steps` steps only (the fast
variant: T_w = T is the full version); per guided step the cost is one
velocity call, |T| decoder gradients and, for estimate 'b', up to T_w - 1
more velocity calls.

The "off-the-shelf" decoder is a HiDDeN-style (Zhu et al. 2018) conv
encoder/decoder pair trained here on real 8x8 digits with only identity +
Gaussian-noise augmentation; its decoder ends in flatten + dense (no global
pooling), so it is not shift-invariant and a 1-pixel shift is an attack it
was never trained for. After training the decoder is frozen and whitened
(ZCA: phi_w = (phi - mu) S^{-1/2}) so that Eq. 7 is calibrated, either on
real digits (`whiten_on='real'`, as Stable Signature whitens on natural
images) or on held-out unguided generations of the same generator
(`whiten_on='generated'`, the default). Measured in the default run: with
real-digit whitening the p-values of generated digits are NOT uniform (KS
p < 1e-4 on 2000 samples; the generator's phi has a mean offset of up to
~1 whitened unit), with generated-digit whitening they are (KS p 0.053,
0.312, 0.309 at 0ce0747), while real digits then are not (KS p 2e-4).

Default run at 0ce0747 (3 seeds, 50 Euler steps, guidance in the last 25,
omega 8, 'complete', Eq. 9's shared budget, box projection): bit accuracy
0.968 (unguided 0.500), detection at P_FA = 1e-3 0.997, same label 0.943;
at matched FD, 1-pixel-shift augmentations raise bit accuracy under a shift
attack by +0.106 over identity guidance, as many non-shift augmentations by
+0.013; FD to real digits +53% (<= 10% only near omega 2); at matched FD
guidance beats post-hoc encoders trained at each strength (0.968 vs 0.680;
under the shift attack 0.683 vs 0.559).

The experiment (runner, sweeps, claims, plots) is `experiments/guidance_wm.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import data as data_lib
from iclrjax.core import distributed
from iclrjax.diffusion import flow
from iclrjax.diffusion import nets
from iclrjax.diffusion import train as train_lib

Phi = Callable[[jax.Array], jax.Array]          # images [B, H, W, C] -> [B, M]
Velocity = flow.Velocity  # (x, t) -> v

# Background value of the digits on the [-1, 1] scale: what a shift brings in.
BACKGROUND = -1.0
# Keeps log L finite if phi were exactly aligned with u (L = 0).
LOG_EPS = 1e-8


# ----------------------------------------------------------------------------
# Watermark statistics (Eqs. 6-7).


def antipodal(bits: jax.Array) -> jax.Array:
  """u_m = -(-1)^m = 2 m - 1 for bits m in {0, 1}: float32 [..., M]."""
  return 2.0 * jnp.asarray(bits, jnp.float32) - 1.0


def decode_bits(phi: jax.Array) -> jax.Array:
  """Decoded bits [phi > 0] (int32)."""
  return (jnp.asarray(phi) > 0).astype(jnp.int32)


def bit_accuracy(phi: jax.Array, bits: jax.Array) -> jax.Array:
  """Fraction of decoded bits equal to `bits`, per row: [...]."""
  return jnp.mean(decode_bits(phi) == jnp.asarray(bits, jnp.int32), -1)


def cosine(a: jax.Array, b: jax.Array) -> jax.Array:
  """cos(a, b) along the last axis (0 where a vector is 0)."""
  num = jnp.sum(a * b, -1)
  den = jnp.linalg.norm(a, axis=-1) * jnp.linalg.norm(b, axis=-1)
  return num / jnp.maximum(den, 1e-30)


def wm_loss(phi: jax.Array, u: jax.Array) -> jax.Array:
  """Eq. 6: L = 1 - cos(phi, u_m), per row."""
  return 1.0 - cosine(phi, u)


def exact_decoding_threshold(num_bits: int) -> float:
  """L below 1 - sqrt(1 - 1/M) decodes every bit correctly."""
  return 1.0 - float(np.sqrt(1.0 - 1.0 / num_bits))


def p_value(c: jax.Array, num_bits: int) -> jax.Array:
  """Eq. 7 (signs derived in the module docstring): P[cos(U, u) > c].

  U is uniform on the sphere in R^M; c = cos(phi(x), u) in [-1, 1].
  """
  c = jnp.clip(jnp.asarray(c, jnp.float32), -1.0, 1.0)
  half_tail = 0.5 * jax.scipy.special.betainc(
      0.5 * (num_bits - 1), 0.5, 1.0 - c * c)  # 1/2 P[cos^2 > c^2]
  return jnp.where(c >= 0, half_tail, 1.0 - half_tail)


# ----------------------------------------------------------------------------
# PCGrad (Yu et al. 2020, "Gradient Surgery for Multi-Task Learning").


def pcgrad(grads: jax.Array, order: jax.Array | None = None) -> jax.Array:
  """Algorithm 1 of Yu et al. (2020): projected, summed task gradients.

  For every task i, g_i^PC starts at g_i and, for each other task j in a
  random order, if g_i^PC . g_j < 0 it is projected onto the normal plane of
  g_j: g_i^PC -= (g_i^PC . g_j) / ||g_j||^2 g_j (against the *original*
  g_j). The update is sum_i g_i^PC. One order is shared by all i (as in the
  authors' TF code, which shuffles the task list once per step). A zero
  gradient (a task switched off) neither projects nor is projected against.

  Args:
    grads: [K, ...] one gradient per task.
    order: a permutation of range(K) (None: 0..K-1).

  Returns:
    [...]: the aggregated gradient.
  """
  k = grads.shape[0]
  g = grads.reshape(k, -1)
  order = jnp.arange(k) if order is None else jnp.asarray(order)
  sq = jnp.sum(g * g, -1)

  def project(i):
    def body(gi, j):
      dot = jnp.dot(gi, g[j])
      hit = (j != i) & (dot < 0) & (sq[j] > 0)
      coef = jnp.where(hit, dot / jnp.where(sq[j] > 0, sq[j], 1.0), 0.0)
      return gi - coef * g[j], None
    return jax.lax.scan(body, g[i], order)[0]

  return jnp.sum(jax.vmap(project)(jnp.arange(k)), 0).reshape(grads.shape[1:])


# ----------------------------------------------------------------------------
# Differentiable augmentations (images [B, H, W, C]).


def shift(x: jax.Array, dy: int, dx: int, fill: float = BACKGROUND
          ) -> jax.Array:
  """Translates images by (dy, dx) pixels (down, right), filling with `fill`.

  Linear in x (a pad and a slice), hence differentiable.
  """
  h, w = x.shape[-3], x.shape[-2]
  pads = [(0, 0)] * (x.ndim - 3) + [(max(dy, 0), max(-dy, 0)),
                                    (max(dx, 0), max(-dx, 0)), (0, 0)]
  y = jnp.pad(x, pads, constant_values=fill)
  y0, x0 = max(-dy, 0), max(-dx, 0)
  return y[..., y0:y0 + h, x0:x0 + w, :]


SHIFTS = {'shift_right': (0, 1), 'shift_left': (0, -1),
          'shift_down': (1, 0), 'shift_up': (-1, 0)}
# Photometric augmentations (no displacement): the control set of the shift
# claim has as many tasks as the shift set, none of them a shift.
BRIGHTNESS = 0.2   # added to every pixel ([-1, 1] scale)
CONTRAST = 0.8     # the image's deviation from its mean is scaled by this
AUGMENTATIONS = ('identity', 'noise', 'brightness', 'contrast',
                 'blur') + tuple(SHIFTS)


def blur3x3(x: jax.Array, fill: float = BACKGROUND) -> jax.Array:
  """3x3 box blur of images [..., H, W, C], padded with `fill` (linear)."""
  h, w = x.shape[-3], x.shape[-2]
  pads = [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)]
  xp = jnp.pad(x, pads, constant_values=fill)
  return sum(xp[..., i:i + h, j:j + w, :] for i in range(3)
             for j in range(3)) / 9.0


def augment(name: str, x: jax.Array, key: jax.Array, noise_std: float,
            noise: jax.Array | None = None, fill: float = BACKGROUND
            ) -> jax.Array:
  """One named augmentation of images [B, H, W, C], each differentiable:
  'identity'; 'noise' (x + noise_std N(0, I); the N(0, I) draw of `key`, or
  `noise` if given); 'brightness' (x + BRIGHTNESS); 'contrast' (mean +
  CONTRAST (x - mean), per image); 'blur' (`blur3x3`); or a 1-pixel shift
  ('shift_right', 'shift_left', 'shift_down', 'shift_up') that brings in
  `fill` (the data's background; -1 for digits on [-1, 1])."""
  if name == 'identity':
    return x
  if name == 'noise':
    if noise is None:
      noise = jax.random.normal(key, x.shape, x.dtype)
    return x + noise_std * noise
  if name == 'brightness':
    return x + BRIGHTNESS
  if name == 'contrast':
    mean = jnp.mean(x, axis=(-3, -2, -1), keepdims=True)
    return mean + CONTRAST * (x - mean)
  if name == 'blur':
    return blur3x3(x, fill)
  if name in SHIFTS:
    return shift(x, *SHIFTS[name], fill=fill)
  raise ValueError(f'unknown augmentation {name!r}; use one of '
                   f'{AUGMENTATIONS}')


Augmentation = str | Callable[[jax.Array, jax.Array], jax.Array]


def check_augs(names: Sequence[Augmentation]) -> tuple[Augmentation, ...]:
  """The augmentation set as a tuple (a static argument), checked: names of
  `AUGMENTATIONS` or a user's own differentiable attacks `fn(x, key) -> x`
  (e.g. a JPEG proxy), which hash as static arguments."""
  names = tuple(names)
  bad = sorted(str(n) for n in names
               if not callable(n) and n not in AUGMENTATIONS)
  if bad or not names:
    raise ValueError(f'unknown or empty augmentations {bad or names}; use '
                     f'a non-empty subset of {AUGMENTATIONS} or callables '
                     'fn(x, key) -> x')
  return names


def shift_attack_bit_accuracy(phi_fn: Phi, x: jax.Array, bits: jax.Array,
                              fill: float = BACKGROUND) -> jax.Array:
  """Bit accuracy per image, averaged over the four 1-pixel shifts
  (bringing in `fill`): [B]."""
  return jnp.mean(jnp.stack([bit_accuracy(phi_fn(shift(x, *d, fill=fill)),
                                          bits)
                             for d in SHIFTS.values()]), 0)


# ----------------------------------------------------------------------------
# The "off-the-shelf" post-hoc watermark: HiDDeN-style encoder / decoder.


def patches3x3(x: jax.Array) -> jax.Array:
  """[B, H, W, C] -> [B, H, W, 9 C]: the zero-padded 3x3 neighbourhoods."""
  h, w = x.shape[-3], x.shape[-2]
  xp = jnp.pad(x, [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)])
  return jnp.concatenate([xp[..., i:i + h, j:j + w, :]
                          for i in range(3) for j in range(3)], -1)


class Conv3x3(nn.Module):
  """A 3x3 'SAME' convolution written as im2col + dense.

  Same function class as nn.Conv(features, (3, 3)), but vmapped over seeds
  it stays a batched matmul; a vmapped nn.Conv becomes a grouped
  convolution, ~10x slower on XLA:CPU (measured).
  """
  features: int

  @nn.compact
  def __call__(self, x):
    return nn.Dense(self.features, name='kernel')(patches3x3(x))


class WMEncoder(nn.Module):
  """(x [B, H, W, 1], bits [B, M]) -> watermarked x + strength tanh(r)."""
  channels: int = 32
  strength: float = 0.2

  @nn.compact
  def __call__(self, x, bits):
    h = x
    for i in range(2):
      h = nn.relu(Conv3x3(self.channels, name=f'conv{i}')(h))
    msg = jnp.broadcast_to(antipodal(bits)[:, None, None, :],
                           x.shape[:-1] + (bits.shape[-1],))
    h = jnp.concatenate([h, x, msg], -1)
    h = nn.relu(Conv3x3(self.channels, name='conv_msg')(h))
    r = nn.Dense(x.shape[-1], name='out')(h)  # 1x1 conv
    return x + self.strength * jnp.tanh(r)


class WMDecoder(nn.Module):
  """x [B, H, W, 1] -> raw logits phi [B, M] (conv stack, flatten, dense).

  Flatten + dense instead of HiDDeN's global average pooling: pooling would
  make the decoder nearly shift-invariant for free, and the experiment needs
  a decoder that is not robust to 1-pixel shifts.
  """
  num_bits: int = 16
  channels: int = 32

  @nn.compact
  def __call__(self, x):
    h = x
    for i in range(3):
      h = nn.relu(Conv3x3(self.channels, name=f'conv{i}')(h))
    return nn.Dense(self.num_bits, name='out')(h.reshape(h.shape[0], -1))


def make_decoder_trainer(train_x: jax.Array, c: Any):
  """(init, step) for the post-hoc watermark (`core.loop` form), on the
  shared diffusion train step (`train.make_trainer`; no EMA: decay 0, so
  the state's `ema` is the parameters).

  Loss per minibatch of cover images x and random bits m:
  BCE(D(A(E(x, m))), m) + image_weight mean (E(x, m) - x)^2, where A is the
  identity or Gaussian noise (std `dec_noise_std`), chosen per image with
  probability 1/2 each (the only augmentations, on purpose).

  c fields: num_bits, dec_channels, enc_strength, dec_noise_std,
  dec_image_weight, dec_batch_size, dec_learning_rate.

  `train_x` [N, 8, 8, 1] gives the shapes only: `step(state, t, train_x)`
  takes the cover images as its `data` argument (`r.train(...,
  data=train_x)`), an input of the compiled loop rather than a constant.
  """
  n = train_x.shape[0]
  # Flax initialises from shapes only: a zero image gives the same params.
  example = jnp.zeros((1, *train_x.shape[1:]),
                      jax.dtypes.canonicalize_dtype(train_x.dtype))
  enc = WMEncoder(c.dec_channels, c.enc_strength)
  dec = WMDecoder(c.num_bits, c.dec_channels)
  b, m = c.dec_batch_size, c.num_bits

  def init_params(key):
    k_e, k_d = jax.random.split(key)
    bits = jnp.zeros((1, m), jnp.int32)
    return {'encoder': enc.init(k_e, example, bits),
            'decoder': dec.init(k_d, example)}

  def batch_fn(key, t, train_x):
    k_idx, k_bits = jax.random.split(key)
    idx = data_lib.batch_indices(k_idx, t, n, b)
    bits = jax.random.bernoulli(jax.random.fold_in(k_bits, t), 0.5,
                                (b, m)).astype(jnp.int32)
    return distributed.shard_batch((train_x[idx], bits))

  def loss_fn(params, batch, key, frozen):
    del frozen
    x, bits = batch
    k_noise, k_pick = jax.random.split(key)
    xw = enc.apply(params['encoder'], x, bits)
    noisy = xw + c.dec_noise_std * jax.random.normal(k_noise, xw.shape)
    pick = jax.random.bernoulli(k_pick, 0.5, (x.shape[0], 1, 1, 1))
    logits = dec.apply(params['decoder'], jnp.where(pick, noisy, xw))
    bce = optax.sigmoid_binary_cross_entropy(logits, bits).mean()
    mse = jnp.mean((xw - x) ** 2)
    acc = jnp.mean(decode_bits(logits) == bits)
    return bce + c.dec_image_weight * mse, {'bce': bce, 'mse': mse,
                                             'bit_acc': acc}

  init, step = train_lib.make_trainer(
      init_params, loss_fn, optax.adam(c.dec_learning_rate), ema_decay=0.0,
      batch_fn=batch_fn, has_aux=True)
  return init, step, enc, dec


class Whitening(NamedTuple):
  """phi_w = (phi - mean) @ matrix (ZCA: matrix = S^{-1/2}, symmetric)."""
  mean: jax.Array     # [M]
  matrix: jax.Array   # [M, M]

  def __call__(self, phi: jax.Array) -> jax.Array:
    return (phi - self.mean) @ self.matrix


def fit_whitening(phi: jax.Array, ridge: float = 1e-6) -> Whitening:
  """ZCA whitening of features [N, M]: empirical mean 0 and covariance I."""
  phi = jnp.asarray(phi, jnp.float32)
  mu = phi.mean(0)
  d = phi - mu
  cov = d.T @ d / (phi.shape[0] - 1)
  w, v = jnp.linalg.eigh(cov)
  inv_sqrt = (v / jnp.sqrt(jnp.maximum(w, 0) + ridge)) @ v.T
  return Whitening(mu, inv_sqrt)


def whitened_phi(dec: WMDecoder, dec_params: Any, white: Whitening) -> Phi:
  return lambda x: white(dec.apply(dec_params, x))


# ----------------------------------------------------------------------------
# The generator: a residual MLP velocity field on flattened 8x8 digits.


class FlatResMLP(nn.Module):
  """`nets.ResMLP` on images: x [B, H, W, C], t [B] -> v [B, H, W, C]."""
  width: int = 256
  blocks: int = 3
  emb_dim: int = 64

  @nn.compact
  def __call__(self, x, t):
    flat = x.reshape(x.shape[0], -1)
    v = nets.ResMLP(flat.shape[-1], self.width, self.blocks, self.emb_dim,
                    name='mlp')(flat, t)
    return v.reshape(x.shape)


# ----------------------------------------------------------------------------
# Guided sampling.


def tweedie_x0(x: jax.Array, v: jax.Array, t: jax.Array) -> jax.Array:
  """Estimate (a): x0hat = x_t - t v (t = 1 noise, t = 0 data)."""
  return x - t * v


def complete_x0(velocity: Velocity, x: jax.Array, v: jax.Array,
                ts: jax.Array, k: jax.Array, horizon: int) -> jax.Array:
  """Estimate (b): the Euler sampler run from step k to the end.

  Step k uses the already computed v; the remaining steps k+1 .. T-1 run
  inside a scan of length `horizon` over steps T - horizon .. T - 1, each
  active only if its index is > k (so `horizon` must be >= T - 1 - k).
  Forward only: the result carries no gradient (identity Jacobian).
  """
  num_steps = ts.shape[0] - 1
  y = flow.euler_update(x, v, ts[k], ts[k + 1])

  def body(y, j):
    y_new = flow.euler_update(y, velocity(y, ts[j]), ts[j], ts[j + 1])
    return jnp.where(j > k, y_new, y), None

  steps = jnp.arange(num_steps - horizon, num_steps)
  return jax.lax.stop_gradient(jax.lax.scan(body, y, steps)[0])


BUDGETS = ('shared', 'per_task')


def project_to_box(g: jax.Array, x0: jax.Array, lo: float = -1.0,
                   hi: float = 1.0) -> jax.Array:
  """Drops the components of the ascent direction g whose descent step -g
  would push a pixel already at a face of the box [lo, hi] further out: the
  projection of -g onto the box's tangent cone at x0 (a clipped pixel cannot
  move further out, so guidance spent there is lost)."""
  out_hi = (x0 >= hi) & (g < 0)  # descent -g > 0 raises a pixel at hi
  out_lo = (x0 <= lo) & (g > 0)
  return jnp.where(out_hi | out_lo, 0.0, g)


def guidance_direction(phi_fn: Phi, x0: jax.Array, u: jax.Array,
                       key: jax.Array, augs: Sequence[str] = ('identity',),
                       *, noise_std: float = 0.1, tau: float = 1.0,
                       eta: float = 1e-3, budget: str = 'shared',
                       box: tuple[float, float] | None = None,
                       fill: float = BACKGROUND, chunk: int = 0
                       ) -> jax.Array:
  """The guidance direction d (the descent step is -d) from the per-
  augmentation gradients g_T = grad log L(T(x0)) at x0.

  budget 'shared' (Eq. 9 as printed): d = g / max(eta, ||g||) with g =
  clip_tau(PCGrad_T(g_T)): one unit of budget for the whole set T, so with
  |T| = 5 tasks the identity task gets about a fifth of what it gets alone.
  'per_task': every task gets its own unit: g_T <- g_T / max(eta, ||g_T||),
  then d = clip_tau(PCGrad_T(g_T)) (||d|| <= |T|; with one task the two
  budgets coincide). box=(lo, hi): x0 is the clipped image and g is first
  projected onto the box (`project_to_box`). The per-image gradients are
  taken `chunk` images at a time (`nets.in_chunks`; 0: all at once), with
  the noise augmentation drawn for the whole batch, so the result does not
  depend on `chunk` (up to float rounding).

  Args:
    phi_fn: images -> whitened logits [B, M].
    x0: clean estimates [B, H, W, C] (the gradient is taken at them).
    u: antipodal messages [B, M].
    key: noise augmentation and PCGrad task orders.
    augs: the augmentation set T (names of `AUGMENTATIONS` or callables
      fn(x, key) -> x; static, see `check_augs`).
    noise_std, tau, eta: noise augmentation std, element-wise clip, norm floor.
    fill: what shifts and the blur bring in at the border (`augment`).

  Returns:
    [B, H, W, C]: the per-image ascent direction d.
  """
  if budget not in BUDGETS:
    raise ValueError(f'budget must be one of {BUDGETS}, got {budget!r}')
  augs = check_augs(augs)
  k_noise, k_order = jax.random.split(key)
  b = x0.shape[0]

  def grad_of(name, x, u, noise):
    def total(x):
      xa = (name(x, k_noise) if callable(name) else
            augment(name, x, k_noise, noise_std, noise, fill))
      return jnp.sum(jnp.log(wm_loss(phi_fn(xa), u) + LOG_EPS))
    return jax.grad(total)(x)  # per-image: images do not interact

  def unit(g):
    return g / jnp.maximum(eta, jnp.sqrt(jnp.sum(g * g, axis=(-3, -2, -1),
                                                 keepdims=True)))

  def per_image(x, u, noise):  # [B', tasks, H, W, C]
    return jnp.stack([grad_of(n, x, u, noise) for n in augs], 1)

  noise = jax.random.normal(k_noise, x0.shape, x0.dtype)
  grads = jnp.moveaxis(nets.in_chunks(per_image, chunk)(x0, u, noise), 1, 0)
  if box is not None:
    grads = project_to_box(grads, x0[None], *box)
  if budget == 'per_task':
    grads = unit(grads)
  orders = jax.vmap(lambda kk: jax.random.permutation(kk, len(augs)))(
      jax.random.split(k_order, b))
  g = jax.vmap(pcgrad, in_axes=(1, 0))(grads, orders)
  g = jnp.clip(g, -tau, tau)
  return unit(g) if budget == 'shared' else g


def guided_sample(velocity: Velocity, phi_fn: Phi, x1: jax.Array,
                  u: jax.Array, key: jax.Array, *, num_steps: int,
                  guided_steps: int, omega: jax.Array | float,
                  augs: Sequence[str] = ('identity',),
                  estimate: str = 'tweedie', noise_std: float = 0.1,
                  tau: float = 1.0, eta: float = 1e-3,
                  clip_x0: bool = False,
                  box: tuple[float, float] = (-1.0, 1.0),
                  fill: float = BACKGROUND, budget: str = 'shared',
                  chunk: int = 0) -> jax.Array:
  """Euler sampling with watermark guidance in the last `guided_steps` steps.

  At a guided step k (t = t_k -> s = t_{k+1}): v = v_theta(x, t); x0hat by
  `estimate` ('tweedie' or 'complete'); vhat = v + omega d
  (`guidance_direction` with the augmentation set `augs`, `budget` and the
  border `fill`); x <- x + (s - t) vhat. With `clip_x0` the decoder sees
  x0hat clipped to the data range `box` (lo, hi) and d is projected onto
  that box. omega = 0 is the unguided sampler. `chunk`: images per
  decoder-gradient call (`guidance_direction`).
  Returns x at t = 0 (unclipped).
  """
  if estimate not in ('tweedie', 'complete'):
    raise ValueError(f"estimate must be 'tweedie' or 'complete', got "
                     f'{estimate!r}')
  if not 0 <= guided_steps <= num_steps:
    raise ValueError(f'guided_steps={guided_steps} must be in [0, '
                     f'{num_steps}]')
  ts = flow.time_grid(num_steps)
  first = num_steps - guided_steps

  def plain(x, k):
    return flow.euler_update(x, velocity(x, ts[k]), ts[k], ts[k + 1]), None

  x = jax.lax.scan(plain, x1, jnp.arange(first))[0]

  def body(x, k):
    t, s = ts[k], ts[k + 1]
    v = velocity(x, t)
    if estimate == 'tweedie':
      x0 = jax.lax.stop_gradient(tweedie_x0(x, v, t))
    else:
      x0 = complete_x0(velocity, x, v, ts, k, max(guided_steps - 1, 0))
    if clip_x0:  # the decoder sees what the user gets (`render`)
      x0 = jnp.clip(x0, *box)
    d = guidance_direction(phi_fn, x0, u, jax.random.fold_in(key, k), augs,
                           noise_std=noise_std, tau=tau, eta=eta,
                           budget=budget, box=box if clip_x0 else None,
                           fill=fill, chunk=chunk)
    return flow.euler_update(x, v + omega * d, t, s), None

  if guided_steps:
    x = jax.lax.scan(body, x, jnp.arange(first, num_steps))[0]
  return x


__all__: Sequence[str] = [
    'AUGMENTATIONS', 'Augmentation', 'BRIGHTNESS', 'BUDGETS', 'CONTRAST', 'FlatResMLP',
    'SHIFTS', 'WMDecoder', 'WMEncoder', 'Whitening', 'antipodal',
    'augment', 'blur3x3', 'check_augs', 'bit_accuracy', 'complete_x0', 'cosine', 'decode_bits',
    'exact_decoding_threshold', 'fit_whitening',
    'guidance_direction', 'guided_sample', 'make_decoder_trainer',
    'p_value', 'pcgrad', 'project_to_box', 'shift',
    'shift_attack_bit_accuracy', 'tweedie_x0', 'wm_loss']
