"""The shared diffusion training step (`diffusion.train`)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import data as data_lib
from iclrjax.diffusion import nets
from iclrjax.diffusion import train


def _quadratic():
  # loss(p; batch) = 0.5 mean_b ||p - x_b||^2 -> gradient p - mean(batch).
  def loss_fn(p, batch, key, frozen):
    del key, frozen
    return 0.5 * jnp.mean(jnp.sum((p['w'] - batch) ** 2, -1))

  return loss_fn


def test_step_is_sgd_on_the_minibatch_with_the_ema_by_hand():
  data = jnp.asarray(np.random.default_rng(0).normal(size=(10, 3)),
                     jnp.float32)
  lr, d = 0.1, 0.9
  init, step = train.make_trainer(
      lambda k: {'w': jnp.zeros(3)}, _quadratic(), optax.sgd(lr),
      ema_decay=d, batch_fn=train.minibatch(10, 4))
  state = init(jax.random.key(0))
  p = np.zeros(3)
  ema = np.zeros(3)
  for t in range(3):
    k_batch, _ = jax.random.split(state.key)
    idx = np.asarray(data_lib.batch_indices(k_batch, t, 10, 4))
    new, m = step(state, jnp.int32(t), data)
    grad = p - np.asarray(data)[idx].mean(0)
    p = p - lr * grad
    dt = d * (1 - d ** t) / (1 - d ** (t + 1))   # debiased EMA
    ema = dt * ema + (1 - dt) * p
    np.testing.assert_allclose(new.params['w'], p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new.ema['w'], ema, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m['ema_decay'], dt, rtol=1e-6)
    np.testing.assert_allclose(m['grad_norm'], np.linalg.norm(grad),
                               rtol=1e-5)
    assert new.key is state.key or np.array_equal(
        jax.random.key_data(new.key), jax.random.key_data(state.key))
    state = new


def test_step_randomness_depends_on_seed_and_step_only():
  # The loss sees fold_in(k_noise, t): the same (state key, t) gives the
  # same draw whatever came before (a resumed run draws what an unbroken
  # one does); without a batch_fn the key is fold_in(key, t).
  seen = {}

  def loss_fn(p, batch, key, frozen):
    del batch, frozen
    return jnp.sum(p * jax.random.normal(key, p.shape))

  for batch_fn, data in ((train.minibatch(None, 2), jnp.zeros((4, 1))),
                         (None, None)):
    init, step = train.make_trainer(lambda k: jnp.ones(2), loss_fn,
                                    optax.sgd(0.0), ema_decay=0.5,
                                    batch_fn=batch_fn)
    s0 = init(jax.random.key(7))
    _, a = step(s0, jnp.int32(5), data)
    s1, _ = step(s0, jnp.int32(0), data)
    _, b = step(s1, jnp.int32(5), data)
    np.testing.assert_array_equal(a['loss'], b['loss'])
    seen[batch_fn is None] = float(a['loss'])
  assert seen[True] != seen[False]


def test_ema_start_holds_the_ema_and_aux_is_logged():
  def loss_fn(p, batch, key, frozen):
    del batch, key
    v = jnp.sum((p - frozen) ** 2)
    return v, {'half': 0.5 * v}

  init, step = train.make_trainer(lambda k: jnp.ones(2), loss_fn,
                                  optax.sgd(0.1), ema_decay=0.5,
                                  has_aux=True, ema_start=2)
  state = train.init_state(jnp.ones(2), optax.sgd(0.1), jax.random.key(0),
                           frozen=jnp.zeros(2))
  del init
  for t in range(2):
    state, m = step(state, jnp.int32(t))
    np.testing.assert_array_equal(state.ema, jnp.ones(2))   # held
    assert float(m['ema_decay']) == 1.0
    np.testing.assert_allclose(m['half'], 0.5 * m['loss'])
  state, m = step(state, jnp.int32(2))
  # The first EMA update after ema_start takes the parameters (d_0 = 0),
  # the next weights them 1 : d (the debiased EMA of the configured d).
  np.testing.assert_allclose(m['ema_decay'], 0.0)
  np.testing.assert_allclose(state.ema, state.params, rtol=1e-6)
  p2 = state.params
  state, m = step(state, jnp.int32(3))
  np.testing.assert_allclose(m['ema_decay'], 0.5 / 1.5, rtol=1e-6)
  np.testing.assert_allclose(state.ema, (0.5 * p2 + state.params) / 1.5,
                             rtol=1e-6)
  np.testing.assert_array_equal(state.frozen, jnp.zeros(2))


def _step_sizes(tx, num_steps):
  """|update| of a 1-d parameter under unit gradients: Adam's step is the
  learning rate (up to eps and float32 rounding), so this reads off the
  schedule."""
  p = jnp.zeros(1)
  state, sizes = tx.init(p), []
  for _ in range(num_steps):
    u, state = tx.update(jnp.ones(1), state, p)
    sizes.append(float(jnp.abs(u[0])))
  return np.array(sizes)


def test_optimizer_schedules_clipping_and_weight_decay():
  lr = 0.01
  # Constant: a float learning rate, no schedule state.
  np.testing.assert_allclose(_step_sizes(train.optimizer(lr), 3), lr,
                             rtol=1e-4)
  # Linear warm-up over 4 steps, then constant.
  np.testing.assert_allclose(
      _step_sizes(train.optimizer(lr, warmup_steps=4), 6),
      lr * np.array([0, 0.25, 0.5, 0.75, 1, 1]), rtol=1e-4, atol=1e-9)
  # Warm-up + cosine to end_factor * lr at cosine_steps.
  sizes = _step_sizes(train.optimizer(lr, warmup_steps=2, cosine_steps=6,
                                      end_factor=0.1), 8)
  np.testing.assert_allclose(sizes[[0, 2, 6, 7]], lr * np.array(
      [0, 1, 0.1, 0.1]), rtol=1e-4, atol=1e-9)
  # Clipping is a transform of the chain only for grad_clip > 0; Adam's
  # state vs AdamW's.
  assert len(train.optimizer(lr, grad_clip=1.0).init(jnp.zeros(1))) == 2
  assert (jax.tree.structure(train.optimizer(lr).init(jnp.zeros(1)))
          == jax.tree.structure(optax.adam(lr).init(jnp.zeros(1))))
  assert (jax.tree.structure(
      train.optimizer(lr, weight_decay=0.0).init(jnp.zeros(1)))
          == jax.tree.structure(optax.adamw(lr).init(jnp.zeros(1))))


def test_flat_optimizer_gives_the_same_updates():
  """flatten=True runs the chain on one raveled vector: the same updates as
  per leaf (clipping active: the global norm is summed in another order)
  and one moment vector per moment instead of one per leaf."""
  params = {'w': jnp.ones((3, 4)), 'b': [jnp.zeros(2), jnp.full((5,), 0.5)]}
  kw = dict(warmup_steps=2, cosine_steps=5, grad_clip=0.5, weight_decay=0.0)
  tree, flat = train.optimizer(0.1, **kw), train.optimizer(0.1, **kw,
                                                           flatten=True)
  st_t, st_f = tree.init(params), flat.init(params)
  assert len(jax.tree.leaves(st_f)) < len(jax.tree.leaves(st_t))
  up_t, up_f = jax.jit(tree.update), jax.jit(flat.update)
  for i in range(4):
    g = jax.tree.map(lambda p, i=i: jnp.sin(p + i) * (i + 1.0), params)
    u_t, st_t = up_t(g, st_t, params)
    u_f, st_f = up_f(g, st_f, params)
    assert optax.global_norm(g) > 0.5  # the clip binds
    jax.tree.map(functools.partial(np.testing.assert_allclose, rtol=1e-6,
                                   atol=1e-9), u_f, u_t)
