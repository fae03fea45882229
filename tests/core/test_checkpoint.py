"""Checkpoints: full-state round trip, keep-last-k, and kill-and-resume."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import checkpoint as ckpt_lib
from iclrjax.core import logging as log_lib
from iclrjax.core import loop
from tests.conftest import run_module


def _state():
  params = {'w': jnp.arange(6.0).reshape(2, 3), 'b': jnp.ones(3)}
  tx = optax.adam(1e-3)
  opt_state = tx.update(jax.tree.map(jnp.ones_like, params),
                        tx.init(params), params)[1]
  return {
      'params': params,
      'opt_state': opt_state,
      'key': jax.random.PRNGKey(3),
      'step': jnp.int32(17),
      'buffer': jnp.arange(40, dtype=jnp.int8).reshape(10, 4),
      'buffer_pos': jnp.int32(4),
      'empty': jnp.zeros((0,), jnp.float32),  # e.g. MJX's `act`, no actuators
      'empty_batched': jnp.zeros((3, 0), jnp.int32),
  }


def test_roundtrip_full_state(tmp_path):
  state = _state()
  ck = ckpt_lib.Checkpointer(tmp_path / 'ck', max_to_keep=2)
  ck.save(10, state, {'note': 'x'})
  ck.wait()
  restored, meta = ck.restore(ckpt_lib.abstract_like(state))
  ck.close()
  assert meta == {'note': 'x', 'step': 10}
  chex_equal = jax.tree.map(lambda a, b: np.array_equal(a, b) and
                            a.dtype == b.dtype and a.shape == b.shape,
                            state, restored)
  assert all(jax.tree.leaves(chex_equal))
  assert jax.tree.structure(state) == jax.tree.structure(restored)


def test_keeps_last_k_and_restores_latest(tmp_path):
  ck = ckpt_lib.Checkpointer(tmp_path / 'ck', max_to_keep=2)
  for s in (1, 2, 3, 4):
    ck.save(s, {'x': jnp.float32(s)})
  ck.wait()
  assert ck.all_steps() == [3, 4]
  assert ck.latest_step() == 4
  state, meta = ck.restore({'x': jax.ShapeDtypeStruct((), jnp.float32)})
  assert float(state['x']) == 4.0 and meta['step'] == 4
  state, _ = ck.restore({'x': jax.ShapeDtypeStruct((), jnp.float32)}, step=3)
  assert float(state['x']) == 3.0
  ck.close()
  # A fresh manager on the same dir sees the same checkpoints.
  ck2 = ckpt_lib.Checkpointer(tmp_path / 'ck', max_to_keep=2)
  assert ck2.latest_step() == 4
  ck2.close()


def test_incomplete_checkpoint_is_ignored(tmp_path):
  ck = ckpt_lib.Checkpointer(tmp_path / 'ck')
  ck.save(1, {'x': jnp.float32(1)})
  ck.close()
  # What a SIGKILL mid-save leaves: orbax's temporary directory.
  (tmp_path / 'ck' / '2.orbax-checkpoint-tmp-123').mkdir()
  ck2 = ckpt_lib.Checkpointer(tmp_path / 'ck')
  assert ck2.latest_step() == 1
  ck2.close()


def test_train_resumes_in_process(tmp_path):
  """Restore + continue gives the same final state as one straight run."""

  def init(key):
    return {'w': jnp.zeros(3), 'key': key}

  def step(s, t):
    g = jax.random.normal(jax.random.fold_in(s['key'], t), (3,))
    w = 0.9 * s['w'] + g
    return {**s, 'w': w}, {'norm': jnp.linalg.norm(w)}

  kw = dict(seed=0, num_seeds=2, chunk_size=5, progress=False)
  straight = loop.train(init, step, num_steps=30, **kw)
  ck = ckpt_lib.Checkpointer(tmp_path / 'ck', async_save=False)
  w = log_lib.MetricWriter(tmp_path, tensorboard=False)
  loop.train(init, step, num_steps=15, writer=w, checkpointer=ck, **kw)
  resumed = loop.train(init, step, num_steps=30, writer=w, checkpointer=ck,
                       **kw)
  ck.close()
  assert resumed.resumed_from == 15
  np.testing.assert_array_equal(straight.state['w'], resumed.state['w'])
  steps = [r['step'] for r in log_lib.read_metrics(tmp_path)]
  assert steps == [5, 10, 15, 20, 25, 30]


def _read(path):
  with open(path) as f:
    return json.load(f)


def test_sigkill_and_restart_gives_identical_summary(tmp_path):
  """A run SIGKILLed mid-way and restarted ends exactly like a clean run.

  The kill lands after step 400 is logged but the last checkpoint is at
  step 300 (checkpoint_every=3 chunks of 50), so the restart must restore
  step 300, drop the rows logged after it, and recompute 350 and 400.
  """
  args = ['--config=configs/linreg.py:smoke', '--config.num_steps=600']
  clean = run_module('experiments.linreg', *args,
                     f'--workdir={tmp_path / "clean"}')
  assert clean.returncode == 0, clean.stderr[-3000:]

  wd = tmp_path / 'killed'
  killed = run_module('experiments.linreg', *args, f'--workdir={wd}',
                      env={loop.FAULT_ENV: '400'})
  assert killed.returncode == -9, killed.stderr[-3000:]
  assert not (wd / 'summary.json').exists()
  logged = [r['step'] for r in log_lib.read_metrics(wd)]
  assert logged[-1] == 400

  again = run_module('experiments.linreg', *args, f'--workdir={wd}')
  assert again.returncode == 0, again.stderr[-3000:]
  assert 'Resuming' in again.stderr

  a, b = _read(tmp_path / 'clean' / 'summary.json'), _read(wd / 'summary.json')
  assert a['metrics'] == b['metrics']
  assert a['claims'] == b['claims']
  assert log_lib.read_metrics(tmp_path / 'clean') == log_lib.read_metrics(wd)


def test_phases_resume_independently(tmp_path):
  """Two phases share metrics.jsonl; resuming one keeps the other's rows."""

  def init(key, scale):
    return {'x': jnp.zeros(()), 'scale': scale, 'key': key}

  def step(s, t):
    x = s['x'] + s['scale'] * jax.random.uniform(
        jax.random.fold_in(s['key'], t))
    return {**s, 'x': x}, {'x': x}

  w = log_lib.MetricWriter(tmp_path, tensorboard=False)
  cks = {p: ckpt_lib.Checkpointer(tmp_path / p, async_save=False)
         for p in ('a', 'b')}
  kw = dict(seed=0, num_seeds=4, chunk_size=5, progress=False, writer=w,
            seed_ids=[0, 1, 0, 1],
            init_args=jnp.array([1.0, 1.0, 10.0, 10.0]))
  a = loop.train(init, step, num_steps=20, phase='a', checkpointer=cks['a'],
                 **kw)
  loop.train(init, step, num_steps=10, phase='b', checkpointer=cks['b'], **kw)
  b = loop.train(init, step, num_steps=20, phase='b', checkpointer=cks['b'],
                 **kw)
  # Sweep points share seeds: point 2 is point 1 scaled by 10.
  np.testing.assert_allclose(a.state['x'][2:], 10 * a.state['x'][:2],
                             rtol=1e-6)
  np.testing.assert_array_equal(a.state['x'], b.state['x'])
  rows = log_lib.read_metrics(tmp_path)
  assert [(r['phase'], r['step']) for r in rows] == (
      [('a', s) for s in (5, 10, 15, 20)] + [('b', s) for s in (5, 10)] +
      [('b', s) for s in (15, 20)])
  assert {k for r in rows for k in r} == {'step', 'phase', 'a/x', 'b/x'}
  # Truncating phase b to step 10 leaves phase a alone.
  w.truncate(10, phase='b')
  rows = log_lib.read_metrics(tmp_path)
  assert sum(r['phase'] == 'a' for r in rows) == 4
  assert max(r['step'] for r in rows if r['phase'] == 'b') == 10
  for c in cks.values():
    c.close()


def test_roundtrip_empty_leaf_on_a_mesh(tmp_path):
  """A zero-size leaf sharded on a mesh comes back with its shape and
  sharding (its placeholder is saved replicated on the same mesh)."""
  mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]), ('data',))
  sharding = jax.sharding.NamedSharding(
      mesh, jax.sharding.PartitionSpec('data'))
  state = {'x': jax.device_put(jnp.arange(4.0), sharding),
           'empty': jax.device_put(jnp.zeros((0,)), sharding)}
  ck = ckpt_lib.Checkpointer(tmp_path / 'ck')
  ck.save(1, state)
  ck.wait()
  restored, _ = ck.restore(ckpt_lib.abstract_like(state))
  ck.close()
  assert restored['empty'].shape == (0,)
  assert restored['empty'].sharding == sharding
  np.testing.assert_array_equal(restored['x'], state['x'])
