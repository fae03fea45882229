"""Spike-train perturbations: statistics, identities, jit / vmap."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.snn import perturb


def _random_spikes(seed: int, shape, rate: float, dtype=np.float32):
  rng = np.random.default_rng(seed)
  return jnp.asarray((rng.random(shape) < rate).astype(dtype))


def test_insert_rate_and_monotone():
  p = 0.07
  zeros = jnp.zeros((64, 50, 32), jnp.float32)
  out = np.asarray(perturb.insert_spikes(jax.random.key(0), zeros, p))
  n = out.size
  assert abs(out.mean() - p) <= 5 * np.sqrt(p * (1 - p) / n)
  x = _random_spikes(1, (64, 50, 32), 0.1)
  y = perturb.insert_spikes(jax.random.key(1), x, p)
  assert bool(jnp.all(y >= x))  # Never removes a spike.
  added = float((y - x).sum() / (1 - x).sum())
  assert abs(added - p) <= 5 * np.sqrt(p * (1 - p) / float((1 - x).sum()))


def test_delete_fraction_and_monotone():
  frac = 0.3
  x = _random_spikes(2, (64, 50, 32), 0.2)
  y = perturb.delete_spikes(jax.random.key(0), x, frac)
  assert bool(jnp.all(y <= x))  # Never adds a spike.
  n = float(x.sum())
  kept = float(y.sum()) / n
  assert abs(kept - (1 - frac)) <= 5 * np.sqrt(frac * (1 - frac) / n)
  ones = jnp.ones((4, 10, 3))
  assert float(perturb.delete_spikes(jax.random.key(1), ones, 1.0).sum()) == 0


def test_jitter_preserves_sparse_spikes_and_shift_std():
  sigma, steps, t0 = 3.0, 101, 50
  # One spike per (example, neuron) column: no collision is possible.
  x = jnp.zeros((64, steps, 64), jnp.float32).at[:, t0, :].set(1.0)
  y = np.asarray(perturb.jitter_spikes(jax.random.key(0), x, sigma))
  assert set(np.unique(y)) <= {0.0, 1.0}
  np.testing.assert_array_equal(y.sum(1), 1.0)  # Count kept per column.
  shift = y.argmax(1) - t0  # [64, 64]
  n = shift.size
  # round(N(0, s^2)) has std sqrt(s^2 + 1/12) ~ 3.014 (SE of std ~0.033).
  assert abs(shift.std() - sigma) < 0.12, shift.std()
  assert abs(shift.mean()) < 5 * sigma / np.sqrt(n)


def test_jitter_clips_and_merges():
  x = _random_spikes(3, (8, 20, 16), 0.5)
  y = perturb.jitter_spikes(jax.random.key(0), x, 50.0)
  assert y.shape == x.shape and y.dtype == x.dtype
  assert set(np.unique(np.asarray(y))) <= {0.0, 1.0}
  # Huge shifts clip onto the edges; collisions merge, never add.
  assert float(y.sum()) < float(x.sum())
  assert float(y[:, 0].mean()) > 0.9 and float(y[:, -1].mean()) > 0.9
  assert float(y[:, 1:-1].sum()) < 0.25 * float(x.sum())


@pytest.mark.parametrize('kind', perturb.PERTURBATIONS)
@pytest.mark.parametrize('dtype', [np.float32, np.uint8, np.int32, np.bool_])
def test_zero_strength_is_identity_and_dtype_kept(kind, dtype):
  x = _random_spikes(4, (3, 30, 7), 0.3, dtype)
  y = perturb.apply(kind, jax.random.key(5), x, 0.0)
  assert y.dtype == x.dtype and y.shape == x.shape
  np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
  z = perturb.apply(kind, jax.random.key(5), x, 0.2)
  assert z.dtype == x.dtype
  assert set(np.unique(np.asarray(z).astype(np.int64))) <= {0, 1}


@pytest.mark.parametrize('kind', perturb.PERTURBATIONS)
def test_one_compile_for_every_strength_and_vmap(kind):
  traces = []

  @jax.jit
  def f(key, x, s):
    traces.append(None)  # Runs once per trace.
    return perturb.apply(kind, key, x, s)

  x = _random_spikes(6, (3, 30, 7), 0.2)
  key = jax.random.key(0)
  outs = [f(key, x, jnp.float32(s)) for s in (0.0, 0.1, 0.5)]
  assert len(traces) == 1
  np.testing.assert_array_equal(outs[0], x)
  strengths = jnp.array([0.0, 0.1, 0.5])
  v = jax.jit(jax.vmap(lambda s: perturb.apply(kind, key, x, s)))(strengths)
  assert v.shape == (3,) + x.shape
  for i in range(3):  # Same key: vmap matches the per-strength calls.
    np.testing.assert_array_equal(v[i], outs[i])
  # Also over keys and inputs at once.
  keys = jax.random.split(key, 3)
  w = jax.jit(jax.vmap(lambda k, s: perturb.apply(kind, k, x, s)))(
      keys, strengths)
  assert w.shape == (3,) + x.shape


def test_monotone_in_strength():
  x = _random_spikes(7, (32, 40, 16), 0.1)
  key = jax.random.key(3)
  s = jnp.array([0.0, 0.05, 0.2, 0.5])
  ins = jax.vmap(lambda p: perturb.insert_spikes(key, x, p))(s).sum((1, 2, 3))
  dele = jax.vmap(lambda p: perturb.delete_spikes(key, x, p))(s).sum(
      (1, 2, 3))
  assert bool(jnp.all(jnp.diff(ins) > 0)) and bool(jnp.all(jnp.diff(dele) < 0))


def test_raw_uint32_keys_work():
  x = _random_spikes(8, (3, 30, 7), 0.5)
  for kind in perturb.PERTURBATIONS:
    y = perturb.apply(kind, jax.random.PRNGKey(0), x, 0.3)
    assert y.shape == x.shape


def test_apply_unknown_kind_and_bad_shape():
  with pytest.raises(ValueError, match='insert.*delete.*jitter'):
    perturb.apply('noise', jax.random.key(0), jnp.zeros((2, 3)), 0.1)
  with pytest.raises(ValueError, match=r'\[\.\.\., T, C\]'):
    perturb.insert_spikes(jax.random.key(0), jnp.zeros((5,)), 0.1)
