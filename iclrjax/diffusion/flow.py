"""Rectified flow (flow matching with straight paths): loss, samplers, trainer.

Convention (ours, shared by the diffusion experiments): t = 0 is data
and t = 1 is noise,

  x_t = (1 - t) x0 + t eps,      eps ~ N(0, I),
  v   = d x_t / d t = eps - x0   (the regression target),

  loss = mean over batch and elements of (v_theta(x_t, t) - v)^2,

with t ~ U(0, 1) or logit-normal (t = sigmoid(m + s n), SD3). Sampling
integrates dx/dt = v_theta(x, t) from t = 1 (noise) down to t = 0 over T
uniform steps t_k = 1 - k / T with Euler (one velocity call per step) or
Heun (two; second order). The samplers take any `velocity(x, t)` with t a
float32 scalar shared by the batch.

For a curved-trajectory comparison (BWCache criterion ii) the module also
has VP models: x_t = alpha_t x0 + sigma_t eps with the cosine schedule
alpha_t = cos(pi/2 * t_max * t), sigma_t = sin(pi/2 * t_max * t) (t_max < 1
keeps alpha_1 > 0), trained either to predict eps ('vp_eps') or the velocity
v = alpha_t eps - sigma_t x0 ('vp_v'; Salimans & Ho 2022, "Progressive
distillation", Sec. 4), and the deterministic DDIM sampler
(x_s = alpha_s x0_hat + sigma_s eps_hat). With eps-prediction
x0_hat = (x - sigma_t eps_hat) / alpha_t divides by alpha_1 ~ 0.0085 at the
first step, so the early steps amplify the net's error ~100x and DDIM needs
hundreds of steps to converge; with v-prediction x0_hat = alpha_t x -
sigma_t v_hat and eps_hat = sigma_t x + alpha_t v_hat divide by nothing.

`make_trainer(model, train_x, c)` returns (init, step) in the form of
`core.loop` (init(key) -> state, step(state, t, train_x) -> (state,
metrics)): AdamW, a bias-corrected EMA of the parameters, minibatches from
`core.data.batch_indices(key, t, n, batch_size)`. The training set is the
step's `data` argument (`r.train(init, step, data=train_x)`), so it is an
input of the compiled loop, split over the mesh's 'data' axis, not a
constant baked into it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.diffusion import images
from iclrjax.diffusion import nets
from iclrjax.diffusion import schedules
from iclrjax.diffusion import train as train_lib

# (x, t) -> velocity: the field every sampler of the family integrates (the
# other modules' `Velocity` is this one).
Velocity = Callable[[jax.Array, jax.Array], jax.Array]

# alpha_1 = cos(pi/2 * VP_T_MAX) ~ 0.0085: the VP chain ends (t = 1) at almost
# pure noise while x0_hat = (x - sigma eps) / alpha stays finite.
VP_T_MAX = schedules.VP_T_MAX


# ----------------------------------------------------------------------------
# Data.


def digits(split: str = 'train', data_dir: str | None = None) -> np.ndarray:
  """sklearn 8x8 digits [n, 8, 8, 1] float32, levels 0..16 mapped to [-1, 1].

  Splits (core.data.Digits): 'train' 1437, 'test' 360 examples.
  """
  x = images.to_scale(images.digits(split, data_dir), '[-1,1]')
  return np.asarray(x, np.float32).reshape(-1, 8, 8, 1)


# ----------------------------------------------------------------------------
# Rectified flow.


def bcast_time(t: jax.Array, x: jax.Array) -> jax.Array:
  """t [B] (or scalar) -> broadcastable against x [B, ...]."""
  t = jnp.asarray(t, x.dtype)
  return t.reshape(t.shape + (1,) * (x.ndim - t.ndim))


def interpolate(x0: jax.Array, eps: jax.Array, t: jax.Array) -> jax.Array:
  """x_t = (1 - t) x0 + t eps (`schedules.rf_interpolate`), t [B] or scalar."""
  return schedules.rf_interpolate(x0, eps, bcast_time(t, x0))


velocity_target = schedules.rf_velocity   # d x_t / d t = eps - x0


def sample_t(key: jax.Array, shape: Sequence[int], dist: str = 'uniform',
             logit_mean: float = 0.0, logit_std: float = 1.0) -> jax.Array:
  """Training times: 'uniform' U(0, 1) or 'logit_normal' sigmoid(N(m, s^2))."""
  if dist == 'uniform':
    return jax.random.uniform(key, tuple(shape))
  if dist == 'logit_normal':
    return jax.nn.sigmoid(logit_mean +
                          logit_std * jax.random.normal(key, tuple(shape)))
  raise ValueError(f"t_dist must be 'uniform' or 'logit_normal', got {dist!r}")


def flow_loss(velocity: Velocity, x0: jax.Array, key: jax.Array,
              t_dist: str = 'uniform', logit_mean: float = 0.0,
              logit_std: float = 1.0) -> jax.Array:
  """Rectified-flow loss mean (v_theta(x_t, t) - (eps - x0))^2.

  Args:
    velocity: (x_t [B, ...], t [B]) -> v [B, ...].
    x0: data batch [B, ...].
    key: draws t [B] and eps.
    t_dist, logit_mean, logit_std: see `sample_t`.

  Returns:
    scalar: the squared error averaged over the batch and all elements.
  """
  k_t, k_eps = jax.random.split(key)
  t = sample_t(k_t, x0.shape[:1], t_dist, logit_mean, logit_std)
  eps = jax.random.normal(k_eps, x0.shape, x0.dtype)
  v = velocity(interpolate(x0, eps, t), t)
  return jnp.mean((v - velocity_target(x0, eps)) ** 2)


def time_grid(num_steps: int, t_start: float = 1.0, t_end: float = 0.0
              ) -> jax.Array:
  """The T + 1 uniform times t_k = t_start + (t_end - t_start) k / T."""
  return jnp.linspace(t_start, t_end, num_steps + 1, dtype=jnp.float32)


def euler_update(x: jax.Array, v: jax.Array, t: jax.Array, s: jax.Array
                 ) -> jax.Array:
  """One Euler step of dx/dt = v from t to s."""
  return x + (s - t) * v


def euler_sample(velocity: Velocity, x1: jax.Array, num_steps: int,
                 t_start: float = 1.0, t_end: float = 0.0) -> jax.Array:
  """Euler from t_start (noise x1) to t_end over `num_steps` uniform steps."""
  ts = time_grid(num_steps, t_start, t_end)

  def body(x, k):
    t, s = ts[k], ts[k + 1]
    return euler_update(x, velocity(x, t), t, s), None

  return jax.lax.scan(body, x1, jnp.arange(num_steps))[0]


def heun_sample(velocity: Velocity, x1: jax.Array, num_steps: int,
                t_start: float = 1.0, t_end: float = 0.0) -> jax.Array:
  """Heun (explicit trapezoid; 2nd order): 2 velocity calls per step.

  x' = x + h v(x, t);  x_next = x + h/2 (v(x, t) + v(x', s)),  h = s - t.
  The corrector also runs on the last step (v is evaluated at t_end).
  """
  ts = time_grid(num_steps, t_start, t_end)

  def body(x, k):
    t, s = ts[k], ts[k + 1]
    v = velocity(x, t)
    x_pred = x + (s - t) * v
    return x + 0.5 * (s - t) * (v + velocity(x_pred, s)), None

  return jax.lax.scan(body, x1, jnp.arange(num_steps))[0]


SAMPLE_METHODS = ('euler', 'heun')


def sample(velocity: Velocity, x_init: jax.Array, num_steps: int, *,
           method: str = 'euler', t_start: float = 1.0, t_end: float = 0.0
           ) -> jax.Array:
  """The ODE sampler of every flow model here, in this module's convention:
  data at t = 0, noise (or the source) at t = 1, integrated from t_start to
  t_end on the uniform grid (`time_grid`); velocity(x, t) with a scalar t.
  Models trained in the opposite convention go through `reverse_time`, and
  nets that take t per example through `batch_time` (OFTSR, Flow2GAN)."""
  if method == 'euler':
    return euler_sample(velocity, x_init, num_steps, t_start, t_end)
  if method == 'heun':
    return heun_sample(velocity, x_init, num_steps, t_start, t_end)
  raise ValueError(f'method must be one of {SAMPLE_METHODS}, got {method!r}')


def reverse_time(velocity: Velocity) -> Velocity:
  """The velocity of a model trained with the source at t = 0 and the data
  at t = 1, in this module's convention: u(x, s) = -v(x, 1 - s)."""
  return lambda x, s: -velocity(x, 1.0 - s)


def batch_time(velocity: Velocity) -> Velocity:
  """velocity(x, t [B]) called with a scalar t (broadcast over x's leading
  axis)."""
  return lambda x, t: velocity(x, jnp.full(x.shape[:1], t, jnp.float32))


# ----------------------------------------------------------------------------
# VP eps-prediction (curved trajectories) and DDIM.


def vp_eps_loss(eps_fn: Velocity, x0: jax.Array, key: jax.Array,
                t_dist: str = 'uniform', logit_mean: float = 0.0,
                logit_std: float = 1.0) -> jax.Array:
  """mean (eps_theta(alpha_t x0 + sigma_t eps, t) - eps)^2."""
  k_t, k_eps = jax.random.split(key)
  t = sample_t(k_t, x0.shape[:1], t_dist, logit_mean, logit_std)
  eps = jax.random.normal(k_eps, x0.shape, x0.dtype)
  a, s = schedules.cosine_alpha_sigma(t)
  x_t = bcast_time(a, x0) * x0 + bcast_time(s, x0) * eps
  return jnp.mean((eps_fn(x_t, t) - eps) ** 2)


def ddim_update(x: jax.Array, eps: jax.Array, t: jax.Array, s: jax.Array
                ) -> jax.Array:
  """Deterministic DDIM step from t to s given the eps prediction."""
  a_t, s_t = schedules.cosine_alpha_sigma(t)
  a_s, s_s = schedules.cosine_alpha_sigma(s)
  x0_hat = (x - s_t * eps) / a_t
  return a_s * x0_hat + s_s * eps


def ddim_sample(eps_fn: Velocity, x1: jax.Array, num_steps: int) -> jax.Array:
  """DDIM (eta = 0) from t = 1 (x1 ~ N(0, I)) to t = 0 over uniform steps."""
  ts = time_grid(num_steps)

  def body(x, k):
    t, s = ts[k], ts[k + 1]
    return ddim_update(x, eps_fn(x, t), t, s), None

  return jax.lax.scan(body, x1, jnp.arange(num_steps))[0]


def vp_v_target(x0: jax.Array, eps: jax.Array, t: jax.Array) -> jax.Array:
  """v = alpha_t eps - sigma_t x0 (t broadcastable against x0)."""
  a, s = schedules.cosine_alpha_sigma(t)
  return a * eps - s * x0


def vp_v_loss(v_fn: Velocity, x0: jax.Array, key: jax.Array,
              t_dist: str = 'uniform', logit_mean: float = 0.0,
              logit_std: float = 1.0) -> jax.Array:
  """mean (v_theta(alpha_t x0 + sigma_t eps, t) - v)^2 with
  v = alpha_t eps - sigma_t x0 (v-prediction; Salimans & Ho 2022, Sec. 4)."""
  k_t, k_eps = jax.random.split(key)
  t = sample_t(k_t, x0.shape[:1], t_dist, logit_mean, logit_std)
  eps = jax.random.normal(k_eps, x0.shape, x0.dtype)
  a, s = schedules.cosine_alpha_sigma(t)
  x_t = bcast_time(a, x0) * x0 + bcast_time(s, x0) * eps
  return jnp.mean((v_fn(x_t, t) - vp_v_target(x0, eps, bcast_time(t, x0)))
                  ** 2)


def ddim_v_update(x: jax.Array, v: jax.Array, t: jax.Array, s: jax.Array
                  ) -> jax.Array:
  """Deterministic DDIM step from t to s given the v prediction:
  x0_hat = alpha_t x - sigma_t v, eps_hat = sigma_t x + alpha_t v
  (alpha^2 + sigma^2 = 1), x_s = alpha_s x0_hat + sigma_s eps_hat."""
  a_t, s_t = schedules.cosine_alpha_sigma(t)
  a_s, s_s = schedules.cosine_alpha_sigma(s)
  return a_s * (a_t * x - s_t * v) + s_s * (s_t * x + a_t * v)


UPDATES = {'euler': euler_update, 'ddim': ddim_update,
           'ddim_v': ddim_v_update}
OBJECTIVES = {'flow': flow_loss, 'vp_eps': vp_eps_loss, 'vp_v': vp_v_loss}


# ----------------------------------------------------------------------------
# Trainer.


TrainState = train_lib.TrainState


def _get(c: Any, name: str, default: Any) -> Any:
  if isinstance(c, dict):
    return c.get(name, default)
  try:
    return getattr(c, name)
  except (AttributeError, KeyError):
    return default


def ema_decay(d: float, t: jax.Array) -> jax.Array:
  """The bias-corrected EMA factor at step index t (`nets.ema_decay_debiased`)."""
  return nets.ema_decay_debiased(t, d)


def make_trainer(model, train_x: jax.Array, c: Any):
  """(init, step) for training `model` (e.g. a DiT) on `train_x`.

  Args:
    model: a flax module called as model.apply(params, x [B, ...], t [B]);
      it predicts the velocity (objective 'flow'), eps ('vp_eps') or the
      VP velocity alpha_t eps - sigma_t x0 ('vp_v').
    train_x: the training set [n, ...] (e.g. `digits()`), or anything with
      its `shape` and `dtype`: only they are used here. Pass the array
      itself to `step` as `data` (`r.train(..., data=train_x)`).
    c: config (ConfigDict, dict or any object with attributes); optional
      fields with defaults: batch_size 128, learning_rate 1e-3,
      weight_decay 0.0, b1 0.9, b2 0.999, warmup_steps 0 (linear LR
      warm-up), grad_clip 1.0 (global norm; 0 disables), ema_decay 0.999,
      objective 'flow' | 'vp_eps' | 'vp_v', t_dist 'uniform' | 'logit_normal',
      logit_mean 0.0, logit_std 1.0, label_dropout 0.1.

  A class-conditional model (`model.num_classes` > 0, e.g. `dit.DiT`) is
  trained on (images, labels): `train_x` and the step's data are the pair
  (x [n, ...], y [n] int), and each label is replaced by the null label
  `model.num_classes` with probability `label_dropout`, so one network is
  both the conditional and the unconditional model of classifier-free
  guidance (Ho & Salimans 2022).

  Returns:
    init(key) -> TrainState and step(state, t, train_x) -> (state, metrics)
    with metrics {'loss', 'grad_norm', 'ema_decay'}; the loss is that of the
    minibatch before the update.
  """
  num_classes = int(getattr(model, 'num_classes', 0) or 0)
  if num_classes:
    if not (isinstance(train_x, (tuple, list)) and len(train_x) == 2):
      raise ValueError('a class-conditional model (num_classes='
                       f'{num_classes}) trains on (images, labels); got '
                       f'{type(train_x).__name__}')
    train_x = train_x[0]
  n = train_x.shape[0]
  # Flax initialises from shapes only, so a zero example gives the same
  # params as a real one without keeping the data in the closure.
  example = jnp.zeros((1, *train_x.shape[1:]),
                      jax.dtypes.canonicalize_dtype(train_x.dtype))
  label_dropout = float(_get(c, 'label_dropout', 0.1))
  batch_size = int(_get(c, 'batch_size', 128))
  tx = train_lib.optimizer(
      float(_get(c, 'learning_rate', 1e-3)),
      warmup_steps=int(_get(c, 'warmup_steps', 0)),
      grad_clip=float(_get(c, 'grad_clip', 1.0)),
      b1=float(_get(c, 'b1', 0.9)), b2=float(_get(c, 'b2', 0.999)),
      weight_decay=float(_get(c, 'weight_decay', 0.0)))
  decay = float(_get(c, 'ema_decay', 0.999))
  objective = str(_get(c, 'objective', 'flow'))
  if objective not in OBJECTIVES:
    raise ValueError(f'objective must be one of {sorted(OBJECTIVES)}, got '
                     f'{objective!r}')
  loss_kwargs = dict(t_dist=str(_get(c, 't_dist', 'uniform')),
                     logit_mean=float(_get(c, 'logit_mean', 0.0)),
                     logit_std=float(_get(c, 'logit_std', 1.0)))
  objective_fn = OBJECTIVES[objective]

  def init_params(key: jax.Array):
    t0 = jnp.zeros((1,), jnp.float32)
    if num_classes:
      return model.init(key, example, t0, jnp.zeros((1,), jnp.int32))
    return model.init(key, example, t0)

  def loss_fn(params, batch, key, frozen):
    del frozen
    if not num_classes:
      return objective_fn(lambda x, t: model.apply(params, x, t), batch, key,
                          **loss_kwargs)
    x0, y = batch
    k_drop, key = jax.random.split(key)
    y = jnp.where(jax.random.bernoulli(k_drop, label_dropout, y.shape),
                  num_classes, y)
    return objective_fn(lambda x, t: model.apply(params, x, t, y), x0, key,
                        **loss_kwargs)

  return train_lib.make_trainer(
      init_params, loss_fn, tx, ema_decay=decay,
      batch_fn=train_lib.minibatch(n, batch_size))


__all__: Sequence[str] = [
    'OBJECTIVES', 'SAMPLE_METHODS', 'TrainState', 'UPDATES', 'VP_T_MAX',
    'batch_time', 'bcast_time', 'ddim_sample', 'reverse_time', 'sample',
    'ddim_update', 'ddim_v_update', 'digits', 'ema_decay', 'euler_sample', 'euler_update',
    'flow_loss', 'heun_sample', 'interpolate', 'make_trainer', 'sample_t',
    'time_grid', 'velocity_target', 'vp_eps_loss', 'vp_v_loss',
    'vp_v_target']
