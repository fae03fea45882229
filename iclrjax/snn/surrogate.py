"""Spike nonlinearity with surrogate gradients, as `jax.custom_vjp`.

The forward pass is the exact Heaviside step z = H(v) (v = V - theta, the
membrane potential above threshold; H(0) = 0 here, a spike needs v > 0). The
backward pass replaces dH/dv = delta(v) by a smooth surrogate:

  fast sigmoid (SuperSpike, Zenke & Ganguli 2018): 1 / (1 + k |v|)^2,
  arctan (Fang et al. 2021, PLIF):  (alpha / 2) / (1 + (pi alpha v / 2)^2),

each scaled to peak 1 (fast sigmoid) or alpha / 2 (arctan) at v = 0, as in
the papers. `spike(v, kind, scale)` picks one by name.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

SURROGATES = ('fast_sigmoid', 'arctan')


def surrogate_grad(v: jax.Array, kind: str, scale: float) -> jax.Array:
  """d spike / d v used in the backward pass."""
  if kind == 'fast_sigmoid':
    return 1.0 / (1.0 + scale * jnp.abs(v)) ** 2
  if kind == 'arctan':
    return (scale / 2.0) / (1.0 + (jnp.pi * scale * v / 2.0) ** 2)
  raise ValueError(f'surrogate must be one of {SURROGATES}, got {kind!r}')


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def spike(v: jax.Array, kind: str = 'fast_sigmoid',
          scale: float = 10.0) -> jax.Array:
  """H(v) forward (float, 0 or 1); the surrogate `kind` backward."""
  if kind not in SURROGATES:
    raise ValueError(f'surrogate must be one of {SURROGATES}, got {kind!r}')
  v = jnp.asarray(v)
  return (v > 0).astype(jnp.result_type(v, jnp.float32))


def _spike_fwd(v, kind, scale):
  return spike(v, kind, scale), v


def _spike_bwd(kind, scale, v, g):
  return (g * surrogate_grad(v, kind, scale),)


spike.defvjp(_spike_fwd, _spike_bwd)
