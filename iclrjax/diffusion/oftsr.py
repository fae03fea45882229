"""OFTSR: one-step flow super-resolution with a tunable fidelity-realism knob.

Zhu, Wang, Lu, Li, Yan, Zhang, "OFTSR: One-Step Flow for Image
Super-Resolution with Tunable Fidelity-Realism Trade-offs", arXiv 2412.09465
(ICLR 2026). The teacher loss, the one-step sample, the teacher's RK2 rule
and the SR operators match the released code (yuanzhi-zhu/OFTSR at 003b6f4:
`fm/flow_matching.py`, `fm/sampling.py`, `fm/measurements.py`), and the
student's losses match its `distill_fm.py` (at commit 81730f3, not an
ancestor of 003b6f4: the training step's distillation block,
distill_fm.py:383-456), all checked by tests/parity/test_oftsr.py. The
equation names are the paper's Sec. 3 quantities (numbers not checked
against the PDF). Deliberate: `euler_sample` steps by (T - eps) / N
on its grid, where the release's Euler sampler steps by 1 / N on a grid
spaced (T - eps) / N (`fm/sampling.py:80, 103, 119`); the teacher of the
distillation runs without dropout (see `distill_losses`).

Time convention (OFTSR's own, the OPPOSITE of `flow.py`): t = 0 is the
source -- the noise-augmented, upsampled low-resolution image -- and t = 1
the target (the high-resolution image):

  x_t = t x_1 + (1 - t) x_0,        d x_t / d t = x_1 - x_0.

Degradation (`fm/measurements.py`, operator 'sr_avp' + 'gaussian' noise): the
LR measurement is y_LR = AvgPool_f(x_1) + sigma_y n (noise in LR space) and
the condition is its nearest-neighbour upsampling y = Up_f(y_LR) (A^T up to
a factor f^2; `avg_pool(upsample(y)) == y`).

Teacher: noise-augmented conditional rectified flow.
  source  x_0 = sqrt(1 - sigma_p^2) y + sigma_p eps   ('gaussian_VP' noiser),
  loss    L_flow = E || v_theta(x_t, y, t) - (x_1 - x_0) ||_1
          (l1 as in the released FFHQ checkpoint's name and the DIV2K /
          ImageNet configs; configs/ir_fm_ffhq.yml at 003b6f4 says l2),
          t ~ U[eps_t, T]  (eps_t = 1e-3, T = 1),
  the network sees concat(x_t, y) and the time t * 999 (`SRVelocity`).
sigma_p = 0 is InDI (the source is y itself), sigma_p = 1 is SR3.
Sampling: Euler on t_k = eps_t + k (T - eps_t) / N from x_0 (`euler_sample`).

Student v_phi (initialised from the teacher; teacher frozen). Its one-step
output at the knob t is

  xhat_1^t = x_0 + (T - eps_t) v_phi(x_0, y, t)                   (one-step)

(`one_step`); t -> 0 fidelity (MMSE-like), t -> 1 realism. Distillation with
t ~ U[t_min, t_max], s = min(t + dt, t_max) (`sample_times`):

  implicit state   x_t = x_0 + t SG[v_phi(x_0, t)]
  teacher (RK2)    v1 = v_theta(x_t, t),
                   v2 = v_theta(x_t + r (s - t) v1, t + r (s - t)),
                   v_T = v1 + (v2 - v1) / (2 r)        (r = 1/2: midpoint)
  L_distill = || v_phi(x_0, s) - SG[v_phi(x_0, t) + ((s - t) / s)
                                     (v_T - v_phi(x_0, t))] ||^2   ('v_boot')
  L_align   = (1 - t)^2 || v_phi(x_0, t) - v_T ||^2
  L_BC      = || v_phi(x_0, t_min) - v_theta(x_0, t_min) ||^2
  L = 1.0 L_distill + 0.1 L_BC + 0.01 L_align

(`distill_losses`, `student_loss`; distill_fm.py:385-453 at 81730f3, weights
and times from configs/dis_fm_*.yml `boot`). ||.||^2 is the mean over
elements (torch `mse_loss`); L_align averages per example, weights by
(1 - t)^2, then averages over the batch, as the official code does
(distill_fm.py:446-448). dt = 0.05, [t_min, t_max] = [0.01, 0.99].

Paper scale (`configs/oftsr.py:paper`): 4x SR of RGB photographs (FFHQ
256x256 or DIV2K crops, read from a local folder by `images.
load_image_folder`), bicubic degradation ('sr_interp', `degrade(...,
mode='bicubic')`), and the backbone `SRUNet`: `nets.UNet` on concat(x, y)
with the official guided-diffusion UNet's sizes (`configs/dis_fm_ffhq.yml`).

Toy task of the CPU reproduction: 2x super-resolution of the
8x8 sklearn digits in [-1, 1] from 4x4 (2x2 average pool, nearest upsample,
sigma_y = 0.3), a `nets.ResMLP` backbone on the flattened concat(x, y) with
sinusoidal time features, realism = Frechet distance in the features of the
digits classifier of `features.py`. Data augmentation (x/y flips in the
paper's distillation) is left out: flipping a digit changes what digit it
is, and the photograph path keeps the same losses for comparability. The
experiment (runner, evaluation, claims, plots) is `experiments/oftsr.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.diffusion import flow
from iclrjax.diffusion import images
from iclrjax.diffusion import nets
from iclrjax.diffusion import train as train_lib

# (x [B, H, W, C], t [B]) -> velocity [B, H, W, C]; the condition y is bound
# (see `bind`: x may stack k copies of the batch, k B rows).
Velocity = flow.Velocity

T_END = 1.0      # T: the target time
DEGRADATIONS = ('avgpool', 'bicubic')
EPS_T = 1e-3     # eps: the source time of sampling / the one-step jump
TIME_SCALE = 999.0  # the network sees t * 999 (`model_forward_wrapper`)


# ----------------------------------------------------------------------------
# Degradation and the noise-augmented source.


def avg_pool(x: jax.Array, factor: int) -> jax.Array:
  """Mean over factor x factor blocks: x [..., H, W, C] -> [..., H/f, W/f, C]."""
  *lead, h, w, c = x.shape
  if h % factor or w % factor:
    raise ValueError(f'factor {factor} must divide H={h} and W={w}')
  x = x.reshape(*lead, h // factor, factor, w // factor, factor, c)
  return x.mean(axis=(-4, -2))


def upsample(y: jax.Array, factor: int) -> jax.Array:
  """Nearest-neighbour upsampling (`MeanUpsample`): [..., h, w, C] -> [..., fh, fw, C]."""
  return jnp.repeat(jnp.repeat(y, factor, axis=-3), factor, axis=-2)


def _keys_cubic(x: np.ndarray, a: float = -0.5) -> np.ndarray:
  """Keys' cubic convolution kernel at |offset| x (jax.image's a = -0.5)."""
  near = ((a + 2) * x - (a + 3)) * x * x + 1
  far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
  return np.where(x < 1, near, np.where(x < 2, far, 0.0))


@functools.lru_cache(maxsize=None)
def resize_matrix(n_in: int, n_out: int) -> np.ndarray:
  """[n_out, n_in] weights of antialiased bicubic resizing along one axis,
  the map of `jax.image.resize(..., 'bicubic', antialias=True)`: output
  pixel i samples the input at (i + 1/2) n_in / n_out - 1/2 with the Keys
  kernel widened by n_in / n_out when shrinking, its weights normalised to
  sum to 1. Built in NumPy: a constant of the traced graph."""
  inv = n_in / n_out
  width = max(inv, 1.0)
  src = (np.arange(n_out) + 0.5) * inv - 0.5
  w = _keys_cubic(np.abs(src[:, None] - np.arange(n_in)[None, :]) / width)
  w = w / w.sum(axis=1, keepdims=True)
  return w.astype(np.float32)


def _resize(x: jax.Array, h: int, w: int) -> jax.Array:
  # Two small matmuls with constant weights: the same map as
  # jax.image.resize up to float rounding, and cheaper to compile.
  *_, h_in, w_in, _ = x.shape
  return jnp.einsum('ih,...hwc,jw->...ijc', resize_matrix(h_in, h), x,
                    resize_matrix(w_in, w))


def bicubic_down(x: jax.Array, factor: int) -> jax.Array:
  """Antialiased bicubic downsampling by `factor` ('sr_interp' forward,
  torch `F.interpolate(..., 'bicubic', antialias=True)`, whose antialiased
  path uses the same a = -0.5 Keys kernel: equal to float rounding, as is
  `bicubic_up`; torch's a = -0.75 is only its non-antialiased bicubic)."""
  h, w = x.shape[-3:-1]
  if h % factor or w % factor:
    raise ValueError(f'factor {factor} must divide H={h} and W={w}')
  return _resize(x, h // factor, w // factor)


def bicubic_up(y: jax.Array, factor: int) -> jax.Array:
  """Bicubic upsampling by `factor` ('sr_interp' transpose)."""
  h, w = y.shape[-3:-1]
  return _resize(y, h * factor, w * factor)


def degrade(x1: jax.Array, key: jax.Array, sigma_y: float | jax.Array,
            factor: int = 2, mode: str = 'avgpool'
            ) -> tuple[jax.Array, jax.Array]:
  """(y_LR, y): y_LR = Down_f(x1) + sigma_y n, y = Up_f(y_LR) (HR-sized).

  mode='avgpool': Down = AvgPool, Up = nearest ('sr_avp'); 'bicubic':
  antialiased bicubic both ways ('sr_interp', the paper's FFHQ / DIV2K
  setting).
  """
  if mode not in DEGRADATIONS:
    raise ValueError(f'mode={mode!r}: use one of {DEGRADATIONS}')
  down, up = ((avg_pool, upsample) if mode == 'avgpool'
              else (bicubic_down, bicubic_up))
  lr = down(x1, factor)
  y_lr = lr + sigma_y * jax.random.normal(key, lr.shape, lr.dtype)
  return y_lr, up(y_lr, factor)


def perturb(y: jax.Array, key: jax.Array, sigma_p: float | jax.Array
            ) -> jax.Array:
  """The teacher's source x_0 = sqrt(1 - sigma_p^2) y + sigma_p eps."""
  sigma_p = jnp.asarray(sigma_p, y.dtype)
  return (jnp.sqrt(1.0 - sigma_p ** 2) * y
          + sigma_p * jax.random.normal(key, y.shape, y.dtype))


def interpolate(x0: jax.Array, x1: jax.Array, t: jax.Array) -> jax.Array:
  """x_t = t x_1 + (1 - t) x_0 (OFTSR convention: t = 1 is the HR image):
  the straight path of `flow.interpolate` from x_0 to x_1."""
  return flow.interpolate(x0, x1, t)


# ----------------------------------------------------------------------------
# Losses.


def teacher_loss(velocity: Velocity, x0: jax.Array, x1: jax.Array,
                 t: jax.Array) -> jax.Array:
  """L_flow = mean |v_theta(x_t, t) - (x_1 - x_0)| (l1, `get_flow_loss_fn`)."""
  return jnp.mean(jnp.abs(velocity(interpolate(x0, x1, t), t) - (x1 - x0)))


def sample_teacher_times(key: jax.Array, n: int) -> jax.Array:
  """t ~ U[eps, T] (`flow_t_schedule='uniform'`)."""
  return jax.random.uniform(key, (n,)) * (T_END - EPS_T) + EPS_T


def rk2_velocity(teacher: Velocity, x_t: jax.Array, t: jax.Array,
                 s: jax.Array, r: float = 0.5,
                 v1: jax.Array | None = None) -> jax.Array:
  """Teacher velocity over [t, s] by the generic RK2 rule (r = 1/2 midpoint).

  v1 = v(x_t, t), v2 = v(x_t + r (s - t) v1, t + r (s - t)),
  v_T = v1 + (v2 - v1) / (2 r); x_t + (s - t) v_T is then one RK2 step.
  `v1` may be passed when already computed.
  """
  h = s - t
  if v1 is None:
    v1 = teacher(x_t, t)
  v2 = teacher(x_t + r * flow.bcast_time(h, x_t) * v1, t + r * h)
  return v1 + (v2 - v1) / (2.0 * r)


def sample_times(key: jax.Array, n: int, t_min: float = 0.01,
                 t_max: float = 0.99, dt: float = 0.05
                 ) -> tuple[jax.Array, jax.Array]:
  """t ~ U[t_min, t_max], s = min(t + dt, t_max)."""
  t = jax.random.uniform(key, (n,)) * (t_max - t_min) + t_min
  return t, jnp.minimum(t + dt, t_max)


def distill_losses(student: Velocity, teacher: Velocity, x0: jax.Array,
                   t: jax.Array, s: jax.Array, t_min: float = 0.01,
                   r: float = 0.5) -> dict[str, jax.Array]:
  """The three student losses of OFTSR ('v_boot', RK2 teacher), as the
  release's `distill_fm.py` computes them (commit 81730f3,
  distill_fm.py:383-456: x_t at 396, the RK2 teacher with t_2 = r s +
  (1 - r) t at 400-409, L_distill with (s - t)/s at 422-423, L_BC at
  435-438, L_align at 446-448; tests/parity/test_oftsr.py). Our t + r (s - t)
  equals their r s + (1 - r) t up to float32 rounding. Deliberate: the
  release's teacher is a deep copy of the student network (distill_fm.py:241)
  that is never put in eval mode (only the student's mode is set, 259, 502,
  508), so with the U-Net's dropout 0.1 (configs/dis_fm_*.yml,
  models/unet.py:230) its calls apply dropout; `make_student_trainer`
  binds the teacher without dropout (a frozen, deterministic target). The
  ResMLP of the digits runs has no dropout, so only the `paper` variant is
  concerned.

  Args:
    student: v_phi(x, t) with the condition y bound (differentiated). It is
      called ONCE on 3B rows: x = concat(x_0, x_0, x_0), t = concat(t, s,
      t_min), so it must tile y to match (`bind` does: k = rows / B copies);
      a closure that just concatenates x with a [B, ...] y fails.
    teacher: v_theta(x, t) with y bound (never differentiated). Called on
      2B rows (concat(x_t, x_0) at concat(t, t_min)), then on B rows (the
      RK2 midpoint state): the same tiling contract as `student`.
    x0: source x_0 [B, ...].
    t, s: [B] times (`sample_times`).
    t_min: the boundary time of L_BC.
    r: RK2 parameter of the teacher step.

  Returns:
    {'distill', 'boundary', 'align'}: scalars; gradients flow only through
    v_phi(x_0, s) in 'distill', v_phi(x_0, t) in 'align' and
    v_phi(x_0, t_min) in 'boundary' (x_t uses SG[v_phi(x_0, t)]).
  """
  sg = jax.lax.stop_gradient
  b = x0.shape[0]
  t0 = jnp.full_like(t, t_min)
  # The three student calls (and two of the three teacher calls) share one
  # batched forward pass: the networks act per example, so this is exact
  # and cheaper on small matrices.
  v_all = student(jnp.concatenate([x0, x0, x0]), jnp.concatenate([t, s, t0]))
  v_t, v_s, v_t0 = v_all[:b], v_all[b:2 * b], v_all[2 * b:]
  x_t = x0 + flow.bcast_time(t, x0) * sg(v_t)
  # RK2 (`rk2_velocity`) with its first evaluation batched with L_BC's.
  v1_all = sg(teacher(jnp.concatenate([x_t, x0]), jnp.concatenate([t, t0])))
  v1, teacher_t0 = v1_all[:b], v1_all[b:]
  v_teacher = sg(rk2_velocity(teacher, x_t, t, s, r, v1=v1))
  lam = flow.bcast_time((s - t) / s, x0)
  target = sg(v_t + lam * (v_teacher - v_t))
  distill = jnp.mean((v_s - target) ** 2)
  boundary = jnp.mean((v_t0 - teacher_t0) ** 2)
  per_ex = jnp.mean((v_t - v_teacher) ** 2, axis=tuple(range(1, x0.ndim)))
  align = jnp.mean((1.0 - t) ** 2 * per_ex)
  return {'distill': distill, 'boundary': boundary, 'align': align}


def student_loss(losses: dict[str, jax.Array], lambda_distill: float = 1.0,
                 lambda_boundary: float = 0.1, lambda_align: float = 0.01
                 ) -> jax.Array:
  """L = lambda_distill L_distill + lambda_BC L_BC + lambda_align L_align."""
  return (lambda_distill * losses['distill']
          + lambda_boundary * losses['boundary']
          + lambda_align * losses['align'])


# ----------------------------------------------------------------------------
# Samplers.


def one_step(velocity: Velocity, x0: jax.Array, t: float | jax.Array
             ) -> jax.Array:
  """xhat_1^t = x_0 + (T - eps) v(x_0, t): one network call at the knob t."""
  t = jnp.broadcast_to(jnp.asarray(t, jnp.float32), x0.shape[:1])
  return x0 + (T_END - EPS_T) * velocity(x0, t)


def euler_sample(velocity: Velocity, x0: jax.Array, num_steps: int
                 ) -> jax.Array:
  """Euler from t = eps (x_0) to t = T on the uniform grid t_k (N steps):
  `flow.sample` in its convention (s = 1 - t; equal up to float32 rounding
  of the grid).

  `num_steps=1` is the undistilled teacher's one-step jump `one_step(v, x0,
  eps)` (fm/sampling.py one_step_sampler). Deliberate: the reference's
  euler_sampler steps by dt = 1/N on this same grid (fm/sampling.py:80,
  103, 119 at 003b6f4), covering T instead of T - eps, so its x_N - x_0 is
  ours / (T - eps).
  """
  return flow.sample(flow.reverse_time(flow.batch_time(velocity)), x0,
                     num_steps, t_start=T_END - EPS_T, t_end=0.0)


# ----------------------------------------------------------------------------
# Network and trainers.


class SRVelocity(nn.Module):
  """v(x, y, t): `nets.ResMLP` on the flattened concat(x, y).

  x, y [B, H, W, C]; t [B] (or a scalar), embedded as sinusoids of t * 999
  -> MLP, FiLM in every residual block. The output layer starts at zero.
  """

  width: int = 256
  blocks: int = 4
  emb_dim: int = 64
  hidden_mult: int = 1

  @nn.compact
  def __call__(self, x: jax.Array, y: jax.Array, t: jax.Array) -> jax.Array:
    lead = x.shape[:-3]
    d = int(np.prod(x.shape[-3:]))
    h = jnp.concatenate([x.reshape(*lead, d), y.reshape(*lead, d)], axis=-1)
    v = nets.ResMLP(out_dim=d, width=self.width, blocks=self.blocks,
                    emb_dim=self.emb_dim, emb_scale=TIME_SCALE,
                    hidden_mult=self.hidden_mult, name='mlp')(h, t)
    return v.reshape(x.shape)


class SRUNet(nn.Module):
  """v(x, y, t): `nets.UNet` on concat(x, y) along channels (`use_cond`).

  x, y [B, H, W, C]; t [B] (or a scalar), embedded as sinusoids of t * 999.
  The paper's sizes (guided-diffusion UNet of `configs/dis_fm_ffhq.yml`):
  128 channels, multipliers (1, 1, 2, 2, 4, 4), one ResBlock per level,
  self-attention at 16x16, dropout 0.1, time embedding 4 x 128. nets.UNet
  differs from that net in form, not size: single-head attention (the
  official uses 64-channel heads), stride-2 convs / nearest+conv instead of
  ResBlock up/down-sampling, and mid-block attention only when the coarsest
  level has it. `deterministic=False` applies dropout (a 'dropout' rng).
  """

  channels: int = 128
  channel_mults: tuple[int, ...] = (1, 1, 2, 2, 4, 4)
  num_res_blocks: int = 1
  attention_levels: tuple[int, ...] = (4,)
  emb_dim: int = 128
  dropout: float = 0.0

  @nn.compact
  def __call__(self, x: jax.Array, y: jax.Array, t: jax.Array,
               deterministic: bool = True) -> jax.Array:
    return nets.UNet(
        out_channels=x.shape[-1], channels=self.channels,
        channel_mults=tuple(self.channel_mults),
        num_res_blocks=self.num_res_blocks, emb_dim=self.emb_dim,
        emb_scale=TIME_SCALE, attention_levels=tuple(self.attention_levels),
        dropout=self.dropout, name='unet')(
            jnp.concatenate([x, y], axis=-1), t, deterministic)


def bind(net: SRVelocity | SRUNet, params: Any, y: jax.Array,
         dropout_key: jax.Array | None = None) -> Velocity:
  """v(x, t) = net(params, x, y, t); for x with k B rows (k stacked batches,
  as `distill_losses` passes them) y is tiled k times. With `dropout_key`
  (an `SRUNet` with dropout, in training) dropout is on."""

  def velocity(x, t):
    k = x.shape[0] // y.shape[0]
    yk = y if k == 1 else jnp.tile(y, (k,) + (1,) * (y.ndim - 1))
    if dropout_key is None:
      return net.apply(params, x, yk, t)
    return net.apply(params, x, yk, t, False, rngs={'dropout': dropout_key})

  return velocity


def attention_levels(hr_size: int, attention_res: Sequence[int],
                     num_levels: int) -> tuple[int, ...]:
  """UNet levels whose resolution hr_size / 2^l is in `attention_res` (the
  official `attention_resolutions`, e.g. 16 at 256 -> level 4)."""
  return tuple(l for l in range(num_levels)
               if hr_size // 2 ** l in tuple(attention_res))


def make_net(c: Any) -> SRVelocity | SRUNet:
  """c.net: 'resmlp' (`SRVelocity`: width, blocks, emb_dim, hidden_mult) or
  'unet' (`SRUNet`: channels, channel_mults, num_res_blocks, attention_res,
  emb_dim, dropout, hr_size)."""
  if c.net == 'unet':
    mults = tuple(c.channel_mults)
    return SRUNet(channels=c.channels, channel_mults=mults,
                  num_res_blocks=c.num_res_blocks,
                  attention_levels=attention_levels(
                      c.hr_size, c.attention_res, len(mults)),
                  emb_dim=c.emb_dim, dropout=c.dropout)
  return SRVelocity(width=c.width, blocks=c.blocks, emb_dim=c.emb_dim,
                    hidden_mult=c.hidden_mult)


def _dropout_key(net: SRVelocity | SRUNet, key: jax.Array
                 ) -> jax.Array | None:
  """The training dropout key (a stream of its own: the other draws of the
  step are unchanged), or None for a net without dropout."""
  return (jax.random.fold_in(key, 1) if getattr(net, 'dropout', 0.0) > 0
          else None)


TeacherState = train_lib.TrainState
# The student's state: its frozen teacher params are `frozen`.
StudentState = train_lib.TrainState


def make_inputs(x1: jax.Array, key: jax.Array, sigma_y: float,
                sigma_p: float, factor: int, mode: str = 'avgpool'
                ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """(x_1 HR, y condition, x_0 source, a fresh key) of a minibatch x_1 (split
  over the mesh's 'data' axis by `train.minibatch`; y, x_0 follow it as
  per-image maps of x_1). uint8 images become [-1, 1] floats
  (`images.to_signed`); `mode` is `degrade`'s."""
  x1 = images.to_signed(x1)
  k_y, k_p, k_rest = jax.random.split(key, 3)
  _, y = degrade(x1, k_y, sigma_y, factor, mode)
  return x1, y, perturb(y, k_p, sigma_p), k_rest


def make_teacher_trainer(net: SRVelocity, train_x: jax.Array, c: Any,
                         sigma_p: float):
  """(init, step) for the conditional rectified-flow teacher (`core.loop`).

  c: batch_size, teacher_lr, warmup_steps, grad_clip, ema_decay, sigma_y,
  factor, degradation. Metrics: 'loss' (L_flow of the minibatch before the update),
  'grad_norm'. `train_x` [N, H, W, C] gives the shapes only:
  `step(state, t, train_x)` takes the HR images as its `data` argument
  (`r.train(..., data=train_x)`), an input of the compiled loop rather than
  a constant of it. uint8 images (`images.load_image_folder`) are
  converted per minibatch.
  """
  tx = train_lib.optimizer(c.teacher_lr, warmup_steps=c.warmup_steps,
                           grad_clip=c.grad_clip)
  # Flax initialises from shapes only: a zero image gives the same params.
  example = images.to_signed(jnp.zeros(
      (1, *train_x.shape[1:]), jax.dtypes.canonicalize_dtype(train_x.dtype)))

  def init_params(key):
    return net.init(key, example, example, jnp.zeros((1,)))

  def loss_fn(p, x1, key, frozen):
    del frozen
    x1, y, x0, k = make_inputs(x1, key, c.sigma_y, sigma_p, c.factor,
                               c.degradation)
    return teacher_loss(bind(net, p, y, _dropout_key(net, key)), x0, x1,
                        sample_teacher_times(k, x1.shape[0]))

  return train_lib.make_trainer(
      init_params, loss_fn, tx, ema_decay=c.ema_decay,
      batch_fn=train_lib.minibatch(train_x.shape[0], c.batch_size))


def make_student_trainer(net: SRVelocity, c: Any, sigma_p: float):
  """(init, step) for the one-step student; init(key, teacher_params).

  The student starts as a copy of the teacher. c: batch_size, student_lr,
  warmup_steps, grad_clip, ema_decay, sigma_y, factor, degradation, t_min,
  t_max, dt,
  rk2_r, lambda_distill, lambda_boundary, lambda_align. Metrics: 'loss',
  'distill', 'boundary', 'align', 'grad_norm'. As for the teacher,
  `step(state, t, train_x)` takes the HR images as its `data` argument.
  """
  tx = train_lib.optimizer(c.student_lr, warmup_steps=c.warmup_steps,
                           grad_clip=c.grad_clip)

  def loss_fn(p, x1, key, teacher_params):
    x1, y, x0, k = make_inputs(x1, key, c.sigma_y, sigma_p, c.factor,
                               c.degradation)
    ts, ss = sample_times(k, x1.shape[0], c.t_min, c.t_max, c.dt)
    # Dropout (if any) on the student only: the teacher is frozen.
    parts = distill_losses(bind(net, p, y, _dropout_key(net, key)),
                           bind(net, teacher_params, y), x0,
                           ts, ss, c.t_min, c.rk2_r)
    return student_loss(parts, c.lambda_distill, c.lambda_boundary,
                        c.lambda_align), parts

  _, step = train_lib.make_trainer(
      lambda key: None, loss_fn, tx, ema_decay=c.ema_decay, has_aux=True,
      batch_fn=train_lib.minibatch(None, c.batch_size))

  def init(key, teacher_params):
    # The run key is the seed key itself (no split), as before.
    return train_lib.init_state(teacher_params, tx, key,
                                frozen=teacher_params)

  return init, step


# ----------------------------------------------------------------------------
# Evaluation.


psnr = images.psnr  # kept as oftsr.psnr for callers


def eval_inputs(x1: jax.Array, key: jax.Array, draws: int, sigma_y: float,
                sigma_p: float, factor: int, mode: str = 'avgpool'
                ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """`draws` degradations of every HR test image: (x_1, y, x_0), each
  [draws * N, ...] (x_1 on [-1, 1]). The same key gives the same y and eps
  for any sigma_p (common random numbers across teachers)."""
  x1 = jnp.tile(images.to_signed(jnp.asarray(x1)), (draws, 1, 1, 1))
  k_y, k_p = jax.random.split(key)
  _, y = degrade(x1, k_y, sigma_y, factor, mode)
  return x1, y, perturb(y, k_p, sigma_p)


__all__: Sequence[str] = [
    'DEGRADATIONS', 'SRUNet', 'SRVelocity', 'StudentState', 'TeacherState',
    'attention_levels', 'avg_pool', 'bicubic_down', 'bicubic_up', 'bind',
    'degrade',
    'distill_losses', 'euler_sample', 'eval_inputs', 'interpolate',
    'make_inputs', 'make_net',
    'make_student_trainer', 'make_teacher_trainer', 'one_step', 'perturb',
    'psnr', 'resize_matrix', 'rk2_velocity', 'sample_teacher_times', 'sample_times',
    'student_loss', 'teacher_loss', 'upsample']
