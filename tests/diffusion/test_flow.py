"""Rectified flow: loss, Euler/Heun/DDIM samplers, trainer on digits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.diffusion import dit
from iclrjax.diffusion import flow
from iclrjax.diffusion import schedules as sch


def test_interpolation_endpoints_and_target():
  x0 = jnp.arange(6.0).reshape(2, 3)
  eps = -jnp.ones((2, 3))
  np.testing.assert_array_equal(flow.interpolate(x0, eps, jnp.zeros(2)), x0)
  np.testing.assert_array_equal(flow.interpolate(x0, eps, jnp.ones(2)), eps)
  x_t = flow.interpolate(x0, eps, jnp.array([0.25, 0.5]))
  np.testing.assert_allclose(x_t[0], 0.75 * x0[0] + 0.25 * eps[0])
  np.testing.assert_array_equal(flow.velocity_target(x0, eps), eps - x0)


def test_flow_loss_zero_for_exact_velocity_of_point_mass():
  """Data = delta_c: E[eps - x0 | x_t] = (x_t - c) / t, so the loss is 0."""
  c = jnp.array([[0.5, -1.0], [2.0, 0.0]])
  x0 = jnp.broadcast_to(c, (256, 2, 2))

  def exact(x, t):
    return (x - c) / t[:, None, None]

  @jax.jit
  def losses(key):
    zero_field = lambda x, t: jnp.zeros_like(x)
    return (flow.flow_loss(exact, x0, key),
            flow.flow_loss(exact, x0, key, t_dist='logit_normal'),
            flow.flow_loss(zero_field, x0, key))

  uniform, logit_normal, zero = losses(jax.random.key(0))
  assert float(uniform) < 1e-10 and float(logit_normal) < 1e-10
  # Any other field has a positive loss: v = 0 gives E(eps - c)^2.
  assert 1.5 < float(zero) < 2.5  # 1 + mean(c^2) = 2.3125 in expectation


def test_vp_eps_loss_and_ddim_exact_for_point_mass():
  c = jnp.array([0.3, -0.7, 0.9])

  def eps_exact(x, t):
    a, s = sch.cosine_alpha_sigma(t)
    a, s = jnp.reshape(a, jnp.shape(a) + (1,)), jnp.reshape(s, jnp.shape(s) +
                                                           (1,))
    return (x - a * c) / s

  x0 = jnp.broadcast_to(c, (256, 3))
  loss = jax.jit(lambda k: flow.vp_eps_loss(eps_exact, x0, k))(
      jax.random.key(1))
  assert float(loss) < 1e-6
  a1, s1 = sch.cosine_alpha_sigma(1.0)
  a0, s0 = sch.cosine_alpha_sigma(0.0)
  assert float(a0) == 1.0 and float(s0) == 0.0 and 0 < float(a1) < 0.01
  x1 = jax.random.normal(jax.random.key(2), (4, 3))
  for T in (1, 3, 10):  # DDIM with the exact eps lands on c in any T
    np.testing.assert_allclose(
        jax.jit(lambda x, T=T: flow.ddim_sample(eps_exact, x, T))(x1),
                               jnp.broadcast_to(c, (4, 3)), atol=2e-4)


def test_vp_v_loss_and_ddim_v_exact_for_point_mass():
  """v-prediction: for data = delta_c the exact v is (alpha x - c) / sigma
  (from x = alpha c + sigma eps and v = alpha eps - sigma c), its loss is 0
  and DDIM with it lands on c in any number of steps; the v and eps updates
  agree given the same underlying eps."""
  c = jnp.array([0.3, -0.7, 0.9])

  def ab(t):
    a, s = sch.cosine_alpha_sigma(t)
    return jnp.reshape(a, jnp.shape(a) + (1,)), jnp.reshape(s, jnp.shape(s)
                                                            + (1,))

  def v_exact(x, t):
    a, s = ab(t)
    return (a * x - c) / s

  x0 = jnp.broadcast_to(c, (256, 3))
  loss = jax.jit(lambda k: flow.vp_v_loss(v_exact, x0, k))(jax.random.key(1))
  assert float(loss) < 1e-6
  zero = jax.jit(lambda k: flow.vp_v_loss(lambda x, t: jnp.zeros_like(x), x0,
                                          k))(jax.random.key(1))
  assert float(zero) > 0.1
  x1 = jax.random.normal(jax.random.key(2), (4, 3))
  for T in (1, 3, 10):
    ts = flow.time_grid(T)
    x = x1
    for k in range(T):
      x = flow.ddim_v_update(x, v_exact(x, ts[k]), ts[k], ts[k + 1])
    np.testing.assert_allclose(x, jnp.broadcast_to(c, (4, 3)), atol=2e-4)
  # Same step as the eps form: eps = sigma x + alpha v.
  x, v = x1, jax.random.normal(jax.random.key(3), (4, 3))
  t, s = jnp.float32(0.7), jnp.float32(0.4)
  a_t, s_t = sch.cosine_alpha_sigma(t)
  np.testing.assert_allclose(flow.ddim_v_update(x, v, t, s),
                             flow.ddim_update(x, s_t * x + a_t * v, t, s),
                             atol=1e-5)


@pytest.mark.parametrize('T', [5, 20])
def test_euler_and_heun_on_linear_field(T):
  """dx/dt = a x from t = 1 to 0: every step multiplies x by a known factor."""
  a = 0.8
  x1 = jnp.array([1.0, -2.0, 0.5])
  v = lambda x, t: a * x
  h = -1.0 / T
  np.testing.assert_allclose(flow.euler_sample(v, x1, T),
                             x1 * (1 + h * a) ** T, rtol=1e-5)
  np.testing.assert_allclose(flow.heun_sample(v, x1, T),
                             x1 * (1 + h * a + (h * a) ** 2 / 2) ** T,
                             rtol=1e-5)
  # Hence the known global error vs the exact solution x1 exp(-a).
  err = np.asarray(flow.euler_sample(v, x1, T)) - np.exp(-a) * x1
  np.testing.assert_allclose(err, x1 * ((1 + h * a) ** T - np.exp(-a)),
                             rtol=1e-3, atol=1e-6)


def test_heun_is_second_order_euler_first():
  """dx/dt = -x^2 from t = 1 to 0 has x(0) = x1 / (1 - x1).

  Halving the step divides the error by ~4 (Heun) and ~2 (Euler); observed
  errors at T = 8, 16, 32: Euler 0.069, 0.038, 0.020; Heun 3.5e-3, 9.3e-4,
  2.4e-4.
  """
  x1 = jnp.array([0.5, -0.3, 0.2])
  exact = np.asarray(x1) / (1 - np.asarray(x1))
  v = lambda x, t: -x ** 2
  err = {}
  for name, fn in (('euler', flow.euler_sample), ('heun', flow.heun_sample)):
    err[name] = [np.abs(np.asarray(fn(v, x1, T)) - exact).max()
                 for T in (8, 16, 32)]
  r_heun = np.array(err['heun'][:-1]) / np.array(err['heun'][1:])
  r_euler = np.array(err['euler'][:-1]) / np.array(err['euler'][1:])
  assert np.all((r_heun > 3.6) & (r_heun < 4.4)), err
  assert np.all((r_euler > 1.8) & (r_euler < 2.2)), err
  assert err['heun'][-1] < 0.05 * err['euler'][-1]


def test_ema_decay_debiased():
  d = flow.ema_decay(0.999, jnp.arange(3))
  ref = [0.999 * (1 - 0.999 ** k) / (1 - 0.999 ** (k + 1)) for k in range(3)]
  np.testing.assert_allclose(d, ref, rtol=1e-4, atol=1e-7)
  assert float(flow.ema_decay(0.999, 10 ** 6)) == pytest.approx(0.999)


def test_digits_scaling():
  x = flow.digits('train')
  assert x.shape == (1437, 8, 8, 1) and x.dtype == np.float32
  assert x.min() == -1.0 and x.max() == 1.0
  assert len(np.unique(x)) == 17  # 17 gray levels 0..16
  assert flow.digits('test').shape == (360, 8, 8, 1)


def test_tiny_dit_training_reduces_flow_loss():
  train_x = flow.digits('train')
  test_x = jnp.asarray(flow.digits('test')[:256])
  model = dit.DiT(patch=2, width=32, depth=2, heads=4)
  c = dict(batch_size=64, learning_rate=2e-3, ema_decay=0.99)
  init, step = flow.make_trainer(model, train_x, c)
  num_steps = 200

  @jax.jit
  def train_and_eval(key, train_x):
    s0 = init(key)
    s, metrics = jax.lax.scan(lambda s, t: step(s, t, train_x), s0,
                              jnp.arange(num_steps))

    def held_out(params):  # same t and noise for every params
      return flow.flow_loss(lambda x, t: model.apply(params, x, t), test_x,
                            jax.random.key(123))

    return (metrics, held_out(s0.params), held_out(s.params),
            held_out(s.ema), s0, s)

  metrics, l0, l1, l_ema, s0, s = train_and_eval(jax.random.PRNGKey(0),
                                                 train_x)
  loss = np.asarray(metrics['loss'])
  assert np.all(np.isfinite(loss))
  # At init the DiT outputs 0 (adaLN-zero): loss = E|eps - x0|^2 ~ 1 + E x0^2.
  expected0 = 1 + float(jnp.mean(test_x ** 2))
  assert abs(float(l0) - expected0) < 0.1
  assert float(l1) < 0.75 * float(l0), (float(l0), float(l1))
  assert float(l_ema) < 0.8 * float(l0), (float(l0), float(l_ema))
  assert loss[-20:].mean() < 0.8 * loss[:20].mean()
  np.testing.assert_allclose(metrics['ema_decay'][:2],
                             [0.0, 0.99 / 1.99], rtol=1e-5)
  # The EMA is a different (smoothed) copy of the parameters.
  k = s.params['params']['final_layer']['linear']['kernel']
  k_ema = s.ema['params']['final_layer']['linear']['kernel']
  assert 0 < float(jnp.abs(k - k_ema).max())
  assert float(jnp.abs(s0.ema['params']['final_layer']['linear']['kernel'])
               .max()) == 0.0


def test_sample_reverse_time_and_batch_time():
  # A model trained with the source a at t = 0 and the data b at t = 1 on the
  # straight path has velocity b - a; `flow.sample` in this module's
  # convention (source at s = 1) must land on b, Euler and Heun alike, and
  # `batch_time` hands the net a per-example t equal to 1 - s.
  a = jnp.asarray([[1.0, -2.0], [0.5, 3.0]])
  b = jnp.asarray([[0.0, 1.0], [2.0, -1.0]])
  seen = []

  def v(x, t):
    assert t.shape == (2,)
    seen.append(t)
    return b - a

  for method in flow.SAMPLE_METHODS:
    got = flow.sample(flow.reverse_time(flow.batch_time(v)), a, 3,
                      method=method)
    np.testing.assert_allclose(got, b, atol=1e-6)
  with pytest.raises(ValueError, match='method'):
    flow.sample(v, a, 3, method='rk4')


def test_class_conditional_trainer_label_dropout():
  """(images, labels) data; label_dropout = 1 trains only the null label's
  embedding (every other row gets exactly zero gradient), 0 never touches
  it."""
  x = jnp.asarray(flow.digits('train')[:64])
  y = jnp.arange(64, dtype=jnp.int32) % 10
  model = dit.DiT(patch=4, width=16, depth=1, heads=2, num_classes=10)
  with pytest.raises(ValueError, match='images, labels'):
    flow.make_trainer(model, x, {})
  for p_drop in (0.0, 1.0):
    init, step = flow.make_trainer(
        model, (x, y), dict(batch_size=16, label_dropout=p_drop,
                            grad_clip=0.0))
    s0 = init(jax.random.key(0))
    s1 = s0
    for t in range(3):  # adaLN-zero: labels get gradients from step 1 on
      s1, m = jax.jit(step)(s1, jnp.int32(t), (x, y))
      assert np.isfinite(float(m['loss']))
    moved = np.abs(np.asarray(s1.params['params']['y_embed']['embedding']
                              - s0.params['params']['y_embed']['embedding'])
                   ).max(-1) > 0
    if p_drop == 1.0:
      np.testing.assert_array_equal(moved, [False] * 10 + [True])
    else:
      assert not moved[10] and moved[:10].any()
