"""Action distributions as pure functions (categorical, tanh-Gaussian).

Small enough to write out; avoids a distrax/tfp dependency. The tanh-Gaussian
keeps the pre-squash sample `u` so log-probabilities never need atanh.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

_LOG_2PI = math.log(2.0 * math.pi)  # a Python float: no JAX work at import


def categorical_sample(key: jax.Array, logits: jax.Array) -> jax.Array:
  return jax.random.categorical(key, logits)


def categorical_log_prob(logits: jax.Array, action: jax.Array) -> jax.Array:
  """log pi(action), picked with a one-hot product: a gather here would put
  a scatter in every policy-gradient backward pass, a slow op on CPU."""
  logp = jax.nn.log_softmax(logits)
  return jnp.sum(jax.nn.one_hot(action, logits.shape[-1], dtype=logp.dtype)
                 * logp, axis=-1)


def categorical_entropy(logits: jax.Array) -> jax.Array:
  logp = jax.nn.log_softmax(logits)
  return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


def categorical_kl(logits_p: jax.Array, logits_q: jax.Array) -> jax.Array:
  """KL(p || q) of two categorical distributions given by logits."""
  logp, logq = jax.nn.log_softmax(logits_p), jax.nn.log_softmax(logits_q)
  return jnp.sum(jnp.exp(logp) * (logp - logq), axis=-1)


def gaussian_log_prob(u: jax.Array, mean: jax.Array,
                      log_std: jax.Array) -> jax.Array:
  z = (u - mean) * jnp.exp(-log_std)
  return jnp.sum(-0.5 * z**2 - log_std - 0.5 * _LOG_2PI, axis=-1)


def tanh_gaussian_sample(key: jax.Array, mean: jax.Array,
                         log_std: jax.Array) -> jax.Array:
  """A pre-squash sample u; the action is tanh(u)."""
  return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)


def tanh_log_det(u: jax.Array) -> jax.Array:
  """sum log |d tanh(u)/du|, stably: log(1 - tanh^2 u) = 2(log2 - u - softplus(-2u))."""
  return jnp.sum(2.0 * (jnp.log(2.0) - u - jax.nn.softplus(-2.0 * u)),
                 axis=-1)


def tanh_gaussian_log_prob(u: jax.Array, mean: jax.Array,
                           log_std: jax.Array) -> jax.Array:
  """log-density of a = tanh(u) at the pre-squash point u."""
  return gaussian_log_prob(u, mean, log_std) - tanh_log_det(u)


def tanh_gaussian_entropy(u: jax.Array, log_std: jax.Array) -> jax.Array:
  """One-sample estimate of the squashed entropy: H(N) + E[log|tanh'(u)|]."""
  gauss = jnp.sum(log_std + 0.5 * (1.0 + _LOG_2PI), axis=-1)
  return gauss + tanh_log_det(u)


def gaussian_kl(mean_p: jax.Array, log_std_p: jax.Array, mean_q: jax.Array,
                log_std_q: jax.Array) -> jax.Array:
  """KL(p || q) of two diagonal Gaussians (summed over the last axis)."""
  var_p, var_q = jnp.exp(2 * log_std_p), jnp.exp(2 * log_std_q)
  return jnp.sum(log_std_q - log_std_p
                 + (var_p + (mean_p - mean_q)**2) / (2 * var_q) - 0.5, axis=-1)
