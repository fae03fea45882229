"""Noise schedules as pure functions: VP (VDM scalar gamma), rectified flow.

Forward processes x_t = a(t) x_0 + b(t) eps, eps ~ N(0, I):

* VP, in VDM's log-SNR form (Kingma et al. 2021, "Variational Diffusion
  Models", Sec. 3): gamma(t) = -log SNR(t), alpha_t^2 = sigmoid(-gamma(t)),
  sigma_t^2 = sigmoid(gamma(t)), so alpha^2 + sigma^2 = 1 and
  SNR = alpha^2 / sigma^2 = exp(-gamma). The "learnable_scalar" schedule of
  google-research/vdm `model_vdm.py` (`NoiseSchedule_Scalar`) is linear in t
  with two parameters, gamma(t) = b + |w| t (|w| keeps it increasing), so
  gamma(0) = b = gamma_min and gamma(1) = b + |w| = gamma_max; VDM's CIFAR-10
  config initialises gamma_min = -13.3, gamma_max = 5.
* VE, as QDPM uses (written out in `qdpm`): x_t = x_0 + t eps for t in
  [0, inf), so sigma = t and SNR(t) = t^-2. VDM's continuous-time diffusion
  loss weight -SNR'(t) / 2 is then exactly t^-3.
* Rectified flow: x_t = (1 - t) x_0 + t eps for t in [0, 1], with velocity
  target dx_t/dt = eps - x_0.

Every function broadcasts over leading axes; time arguments broadcast
against the data (pass t[:, None] for a batch of [B, D] data).
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp

# VDM's configs/cifar10.py: gamma_min = -13.3, gamma_max = 5.0.
GAMMA_MIN_INIT = -13.3
GAMMA_MAX_INIT = 5.0

GammaFn = Callable[[jax.Array], jax.Array]


# -- VP: learnable scalar gamma (VDM) -----------------------------------------------
def vp_init(gamma_min: float = GAMMA_MIN_INIT,
            gamma_max: float = GAMMA_MAX_INIT) -> dict[str, jax.Array]:
  """Parameters {'b', 'w'} of gamma(t) = b + |w| t with the given endpoints."""
  if not gamma_max > gamma_min:
    raise ValueError(f'Need gamma_max > gamma_min, got {gamma_min}, '
                     f'{gamma_max}.')
  return {'b': jnp.asarray(gamma_min, jnp.float32),
          'w': jnp.asarray(gamma_max - gamma_min, jnp.float32)}


def vp_gamma(params: dict[str, jax.Array], t: jax.Array) -> jax.Array:
  """gamma(t) = -log SNR(t) = b + |w| t (VDM `NoiseSchedule_Scalar`)."""
  return params['b'] + jnp.abs(params['w']) * t


VP_T_MAX = 0.9946  # alpha_1 = cos(pi/2 VP_T_MAX) ~ 0.0085


def cosine_alpha_sigma(t: jax.Array, t_max: float = VP_T_MAX
                       ) -> tuple[jax.Array, jax.Array]:
  """Cosine VP schedule in time t in [0, 1] (data at t = 0):
  (cos(pi/2 t_max t), sin(pi/2 t_max t)). Not `vp_alpha_sigma`, which
  takes gamma = -log SNR: the two agree at gamma = 2 log tan(pi/2 t_max t)
  (tested)."""
  u = 0.5 * math.pi * t_max * jnp.asarray(t, jnp.float32)
  return jnp.cos(u), jnp.sin(u)


def vp_alpha_sigma(gamma: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(alpha, sigma) with alpha^2 = sigmoid(-gamma), sigma^2 = sigmoid(gamma)."""
  return jnp.sqrt(jax.nn.sigmoid(-gamma)), jnp.sqrt(jax.nn.sigmoid(gamma))


def vp_diffuse(x0: jax.Array, eps: jax.Array, gamma: jax.Array) -> jax.Array:
  """z_t = alpha_t x_0 + sigma_t eps."""
  alpha, sigma = vp_alpha_sigma(gamma)
  return alpha * x0 + sigma * eps


def dgamma_dt(gamma_fn: GammaFn, t: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(gamma(t), gamma'(t)) by forward-mode autodiff (`jax.jvp`), as VDM does.

  Elementwise: `gamma_fn` must map each t independently (any schedule does).
  """
  t = jnp.asarray(t, jnp.float32)
  return jax.jvp(gamma_fn, (t,), (jnp.ones_like(t),))


# -- Rectified flow -----------------------------------------------------------------
def rf_interpolate(x0: jax.Array, eps: jax.Array, t: jax.Array) -> jax.Array:
  """x_t = (1 - t) x_0 + t eps (t = 0: data, t = 1: noise)."""
  return (1.0 - t) * x0 + t * eps


def rf_velocity(x0: jax.Array, eps: jax.Array) -> jax.Array:
  """The velocity target d x_t / dt = eps - x_0 (independent of t)."""
  return eps - x0
