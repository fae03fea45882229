"""Evaluation-time perturbations of input spike trains (pure JAX).

Each function takes a PRNG key, spikes shaped [..., T, C] (time, then input
neuron; any float, integer or bool dtype, values read as spike = nonzero) and
a strength, and returns binary spikes of the same shape and dtype:

* `insert_spikes(key, spikes, p)`: every (t, c) without a spike gets one with
  probability p (spikes OR Bernoulli(p)).
* `delete_spikes(key, spikes, frac)`: every spike is removed independently
  with probability frac.
* `jitter_spikes(key, spikes, sigma)`: every spike moves in time by
  round(N(0, sigma^2)) steps, clipped to [0, T - 1]; spikes that land on the
  same (t, c) merge into one.

Strength 0 is the identity (exactly, for every function). The strength may
be a traced scalar: one `jax.jit`-compiled function serves every level, and
`jax.vmap` over strengths (and keys) evaluates a whole sweep at once.

Gaussian current noise is not here: the network adds it to the membrane
potential (it is a perturbation of the neuron, not of the input spikes).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

PERTURBATIONS = ('insert', 'delete', 'jitter')

Strength = float | jax.Array


def _check_shape(spikes: jax.Array) -> None:
  if spikes.ndim < 2:
    raise ValueError('spikes must be [..., T, C], got shape '
                     f'{spikes.shape}.')


def insert_spikes(key: jax.Array, spikes: jax.Array,
                  p: Strength) -> jax.Array:
  """Adds a spike at each empty (t, c) with probability p.

  Args:
    key: PRNG key.
    spikes: [..., T, C] spikes (nonzero = spike).
    p: insertion probability in [0, 1] (may be traced).

  Returns:
    spikes OR Bernoulli(p), same shape and dtype, values in {0, 1}.
  """
  spikes = jnp.asarray(spikes)
  _check_shape(spikes)
  u = jax.random.uniform(key, spikes.shape)
  return ((spikes != 0) | (u < p)).astype(spikes.dtype)


def delete_spikes(key: jax.Array, spikes: jax.Array,
                  frac: Strength) -> jax.Array:
  """Removes each spike independently with probability frac.

  Args:
    key: PRNG key.
    spikes: [..., T, C] spikes (nonzero = spike).
    frac: deletion probability in [0, 1] (may be traced).

  Returns:
    The surviving spikes, same shape and dtype, values in {0, 1}.
  """
  spikes = jnp.asarray(spikes)
  _check_shape(spikes)
  u = jax.random.uniform(key, spikes.shape)  # In [0, 1): u >= 0 always.
  return ((spikes != 0) & (u >= frac)).astype(spikes.dtype)


def jitter_spikes(key: jax.Array, spikes: jax.Array,
                  sigma: Strength) -> jax.Array:
  """Moves each spike in time by round(N(0, sigma^2)) steps.

  Shifted times are clipped to [0, T - 1]; spikes landing on the same
  (t, c) merge (the result stays binary, so collisions lose spikes). One
  scatter-max over all positions, no loop over time.

  Args:
    key: PRNG key.
    spikes: [..., T, C] spikes (nonzero = spike).
    sigma: standard deviation of the shift, in steps (>= 0; may be traced).
      sigma = 0 returns the input (binarised) exactly.

  Returns:
    The jittered spikes, same shape and dtype, values in {0, 1}.
  """
  spikes = jnp.asarray(spikes)
  _check_shape(spikes)
  shape, dtype = spikes.shape, spikes.dtype
  num_steps, num_neurons = shape[-2], shape[-1]
  x = (spikes != 0).reshape(-1, num_steps, num_neurons).astype(jnp.uint8)
  shift = jnp.round(sigma * jax.random.normal(key, x.shape)).astype(jnp.int32)
  t = jnp.arange(num_steps, dtype=jnp.int32)[None, :, None]
  new_t = jnp.clip(t + shift, 0, num_steps - 1)
  b = jnp.arange(x.shape[0], dtype=jnp.int32)[:, None, None]
  c = jnp.arange(num_neurons, dtype=jnp.int32)[None, None, :]
  out = jnp.zeros_like(x).at[b, new_t, c].max(x)
  return out.reshape(shape).astype(dtype)


_FUNCTIONS: dict[str, Callable[[jax.Array, jax.Array, Strength],
                               jax.Array]] = {
    'insert': insert_spikes,
    'delete': delete_spikes,
    'jitter': jitter_spikes,
}


def apply(kind: str, key: jax.Array, spikes: jax.Array,
          strength: Strength) -> jax.Array:
  """Applies perturbation `kind` (one of `PERTURBATIONS`; static).

  Args:
    kind: 'insert' (strength = p), 'delete' (strength = frac) or 'jitter'
      (strength = sigma in steps).
    key: PRNG key.
    spikes: [..., T, C] spikes.
    strength: the perturbation's strength (may be traced).

  Returns:
    Perturbed spikes, same shape and dtype.

  Raises:
    ValueError: unknown kind.
  """
  if kind not in _FUNCTIONS:
    raise ValueError(f'Unknown perturbation {kind!r}; use one of '
                     f'{PERTURBATIONS}.')
  return _FUNCTIONS[kind](key, spikes, strength)
