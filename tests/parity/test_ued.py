"""The PLR / ACCEL level buffer against jaxued's `LevelSampler` (fixture:
generate/ued.py; the FGE release's ACCEL runs the same class).

`curricula.plr_replay_probs`, which PLR and ACCEL sample replays from, gives
jaxued's `level_weights` (rank prioritisation, staleness, the uniform
staleness of an all-fresh buffer) on the same scores and staleness (our
iteration clock t - last = jaxued's episode_count - timestamps), and the slot
`curricula.plr_insert` fills in a buffer with room is jaxued's. Deliberate:
in a full buffer ours evicts the lowest score, jaxued the lowest replay
weight (the same slot without staleness, asserted; not the same in the
fixture's full buffer with staleness 0.3).

The fixture needs no jaxued; `test_weights_match_jaxued_live` runs the
installed jaxued (`pip install --no-deps jaxued==0.0.1`, not a project
dependency) on fresh draws and is skipped without it.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.rl import curricula
from tests.parity import common

PAPER = 'PLR / ACCEL level buffer (arXiv 2010.03934, 2203.01302)'
FIXTURE = 'ued'
TOL = 1e-6  # float32 weights in [0, 1]


@functools.cache
def _fixture():
  return common.load(FIXTURE)[0]


def _state(scores, stamps, size):
  C = scores.shape[-1]
  return curricula.PLRState(
      jnp.arange(C, dtype=jnp.float32)[:, None], scores, stamps,
      jnp.arange(C) < size, jax.random.key(0))


@jax.jit
@functools.partial(jax.vmap, in_axes=(0, 0, 0, 0, 0, 0))
def _probs_and_slot(scores, stamps, count, size, temperature, staleness):
  """Per case: `plr_replay_probs`, and the slot `plr_insert` writes a new
  theta with a winning score into."""
  s = _state(scores, stamps, size)
  probs = curricula.plr_replay_probs(s, count, temperature, staleness)
  new = curricula.plr_insert(s, jnp.full((1, 1), -1.0), jnp.full((1,), 1e9),
                             jnp.ones((1,), bool), jnp.int32(0))
  return probs, jnp.argmax(new.theta[:, 0] == -1.0)


def _ours(scores, stamps, count, size, temperature, staleness):
  n = len(scores)
  col = lambda v, dt: jnp.broadcast_to(jnp.asarray(v, dt), (n,))
  probs, slot = _probs_and_slot(
      jnp.asarray(scores, jnp.float32), jnp.asarray(stamps, jnp.int32),
      col(count, jnp.int32), col(size, jnp.int32),
      col(temperature, jnp.float32), col(staleness, jnp.float32))
  return np.asarray(probs), np.asarray(slot)


def checks() -> list[common.Check]:
  f = _fixture()
  args = (f['scores'], f['timestamps'], f['episode_count'], f['size'],
          f['temperature'])
  probs, slots = _ours(*args, f['staleness'])
  out = [common.check('replay probabilities (level_weights)', probs,
                      f['level_weights'], TOL),
         common.check('rank weights (score_weights)', _ours(*args, 0.0)[0],
                      f['score_weights'], TOL),
         common.check('staleness weights (staleness_weights)',
                      _ours(*args, 1.0)[0], f['staleness_weights'], TOL)]
  room = f['size'] < f['scores'].shape[1]
  same = room | (f['staleness'] == 0)
  out.append(common.check('insert slot (room, or full without staleness)',
                          slots[same], f['next_idx'][same], 0))
  # Full buffers with staleness: ours the lowest score, jaxued the lowest
  # replay weight, a different slot in the fixture.
  full = ~same
  out.append(common.check(
      'deliberate: a full buffer evicts the lowest score (jaxued: the lowest '
      'replay weight)', slots[full], np.argmin(f['scores'][full], 1), 0))
  out.append(common.check(
      "deliberate: so the slot differs from jaxued's in the fixture's full "
      'buffers with staleness (diff 1 if any agrees)',
      float(np.any(slots[full] == f['next_idx'][full])), 0.0, 0))
  return out


def test_plr_buffer_matches_jaxued():
  failed = [c for c in checks() if not c.ok]
  assert not failed, failed


def _jaxued_level_sampler():
  """jaxued's level_sampler.py alone: the package's __init__ imports its
  environments (~3 s); the module needs only their `Level` type."""
  spec = importlib.util.find_spec('jaxued')
  if spec is None or not spec.submodule_search_locations:
    pytest.skip('jaxued is not installed (pip install --no-deps '
                'jaxued==0.0.1)')
  path = pathlib.Path(spec.submodule_search_locations[0]) / 'level_sampler.py'
  env = types.ModuleType('jaxued.environments.underspecified_env')
  env.Level = object
  names = ('jaxued', 'jaxued.environments',
           'jaxued.environments.underspecified_env')
  saved = {n: sys.modules.get(n) for n in names}
  sys.modules.update({'jaxued': types.ModuleType('jaxued'),
                      'jaxued.environments': types.ModuleType('e'),
                      names[2]: env})
  try:
    mod_spec = importlib.util.spec_from_file_location('_jaxued_ls', path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
  finally:
    for n, m in saved.items():
      if m is None:
        sys.modules.pop(n, None)
      else:
        sys.modules[n] = m
  return mod


def test_weights_match_jaxued_live():
  """Fresh draws through the installed jaxued (skipped without it), at
  ACCEL's settings (temperature 0.3, staleness 0.3)."""
  level_sampler = _jaxued_level_sampler()
  rng = np.random.default_rng(0)
  # The fixture's shapes (8 slots, 7 cases): `_probs_and_slot` compiles once.
  C, n = 8, 7
  size = np.array([3, 5, 8, 8, 1, 7, 8])
  count = rng.integers(40, 100, size=n).astype(np.int32)
  scores = rng.normal(size=(n, C)).astype(np.float32)
  stamps = (count[:, None] * rng.random((n, C))).astype(np.int32)
  ours = _ours(scores, stamps, count, size, 0.3, 0.3)[0]
  ls = level_sampler.LevelSampler(C, staleness_coeff=0.3,
                                  prioritization_params={'temperature': 0.3})
  theirs = jax.jit(jax.vmap(lambda sc, st, sz, ct: ls.level_weights(
      {'scores': sc, 'timestamps': st, 'size': sz, 'episode_count': ct})))(
          scores, stamps, size, count)
  np.testing.assert_allclose(ours, np.asarray(theirs), atol=TOL)
