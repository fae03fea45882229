"""iclrjax/stats/fastmix.py: the closed-form outer gradient against jax.grad
through one unrolled SGD step (whole model and output head only), the
softmax Jacobian, search cost, DoReMi's update against its definition, and
RegMix's regressor and simplex search on a known quadratic."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclrjax.stats import fastmix

K, B, D, C, H = 3, 16, 5, 4, 7


@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  with jax.numpy_rank_promotion('raise'):
    yield


def _loss(params, batch):
  x, y = batch
  h = jnp.tanh(x @ params['body']['w'] + params['body']['b'][None])
  logits = h @ params['head']['w'] + params['head']['b'][None]
  return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1)[:, 0]


@pytest.fixture(scope='module')
def problem():
  ks = jax.random.split(jax.random.PRNGKey(0), 6)
  params = {'body': {'w': jax.random.normal(ks[0], (D, H)) / 2,
                     'b': jnp.zeros(H)},
            'head': {'w': jax.random.normal(ks[1], (H, C)) / 2,
                     'b': jnp.zeros(C)}}
  xs = jax.random.normal(ks[2], (K, B, D))
  ys = jax.random.randint(ks[3], (K, B), 0, C)
  val = (jax.random.normal(ks[4], (B, D)), jax.random.randint(ks[5], (B,), 0,
                                                              C))
  return params, (xs, ys), val, jnp.array([0.3, -0.2, 0.5])


def _unrolled_target(z, params, batches, val, *, eta_w, beta, lam, mask):
  """L_target after one SGD step on the alpha-weighted loss, by autodiff."""
  alpha = jax.nn.softmax(z)
  g = jax.grad(lambda p: fastmix.mixed_loss(_loss, p, batches, alpha))(params)
  g = jax.tree.map(lambda x, m: x if m else jnp.zeros_like(x), g, mask)
  w = jax.tree.map(lambda p, gi: p - eta_w * gi, params, g)
  tgt = _loss(w, val).mean() + beta * fastmix.source_losses(
      _loss, w, batches).mean()
  return tgt + lam * jnp.sum(alpha * jnp.log(alpha))


@pytest.mark.parametrize('subset', ['all', 'head'])
@pytest.mark.parametrize('beta,lam', [(0.0, 0.0), (0.2, 1e-2)])
def test_closed_form_outer_gradient_equals_autodiff_through_the_unroll(
    problem, subset, beta, lam):
  with jax.enable_x64(True):
    params, batches, val, z = jax.tree.map(
        lambda x: x.astype(jnp.float64) if x.dtype == jnp.float32 else x,
        problem)
    mask = fastmix.param_mask(params, subset)
    og = jax.jit(functools.partial(
        fastmix.outer_grad, _loss, eta_w=0.3, beta=beta, lam=lam,
        mask=mask))(params, batches, val, z)
    ref = jax.jit(jax.grad(functools.partial(
        _unrolled_target, eta_w=0.3, beta=beta, lam=lam, mask=mask)))(
            z, params, batches, val)
    np.testing.assert_allclose(og.grad_z, ref, rtol=1e-5, atol=1e-10)
    # float32 (what training uses) to 1e-5 absolute as well.
  params, batches, val, z = problem
  mask = fastmix.param_mask(params, subset)
  og32 = jax.jit(functools.partial(
      fastmix.outer_grad, _loss, eta_w=0.3, beta=beta, lam=lam,
      mask=mask))(params, batches, val, z)
  np.testing.assert_allclose(og32.grad_z, np.asarray(ref), atol=1e-5)


def test_val_at_current_takes_the_target_gradient_at_w(problem):
  # The released code's variant (train_fastmix_val.py:381-429): grad T at
  # the current weights, so eta_w only scales the inner-product term.
  params, batches, val, z = problem
  mask = fastmix.param_mask(params, 'head')
  f = jax.jit(functools.partial(fastmix.outer_grad, _loss, mask=mask,
                                val_at='current'), static_argnames='eta_w')
  og1, og2 = f(params, batches, val, z, eta_w=0.3), f(
      params, batches, val, z, eta_w=0.6)
  v = jax.grad(lambda p: _loss(p, val).mean())(params)['head']
  g = [jax.grad(lambda p, b=(batches[0][i], batches[1][i]): _loss(
      p, b).mean())(params)['head'] for i in range(K)]
  inner = [sum(jnp.vdot(v[k], gi[k]) for k in v) for gi in g]
  np.testing.assert_allclose(og1.inner, inner, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(og2.inner, og1.inner, rtol=1e-6)
  np.testing.assert_allclose(og2.grad_z, 2 * og1.grad_z, rtol=1e-5,
                             atol=1e-8)
  np.testing.assert_allclose(og1.val_loss, _loss(params, val).mean(),
                             rtol=1e-6)
  unrolled = fastmix.outer_grad(_loss, params, batches, val, z, eta_w=0.3,
                                mask=mask)
  assert np.abs(unrolled.inner - og1.inner).max() > 1e-4
  with pytest.raises(ValueError, match='val_at'):
    fastmix.outer_grad(_loss, params, batches, val, z, eta_w=0.3,
                       val_at='w')


def test_head_mask_selects_the_output_layer_and_rejects_unknown_names(problem):
  params = problem[0]
  m = fastmix.param_mask(params, 'head')
  assert m == {'body': {'w': False, 'b': False},
               'head': {'w': True, 'b': True}}
  with pytest.raises(ValueError, match='lm_head'):
    fastmix.param_mask(params, 'lm_head')


def test_softmax_vjp_is_the_softmax_jacobian():
  z = jnp.array([0.1, -1.0, 2.0, 0.5])
  g = jnp.array([1.0, -2.0, 0.5, 3.0])
  jac = jax.jacobian(jax.nn.softmax)(z)
  np.testing.assert_allclose(fastmix.softmax_vjp(jax.nn.softmax(z), g),
                             jac.T @ g, rtol=1e-5, atol=1e-6)


def test_outer_gradient_raises_the_weight_of_the_source_aligned_with_val():
  # Linear regression, source 0 = the validation task, source 1 = negated
  # labels: one outer step must move alpha towards source 0.
  key = jax.random.PRNGKey(1)
  x = jax.random.normal(key, (2, 64, 3))
  w_true = jnp.array([1.0, -2.0, 0.5])
  y = jnp.stack([x[0] @ w_true, -(x[1] @ w_true)])
  loss = lambda p, b: (b[0] @ p - b[1]) ** 2
  og = fastmix.outer_grad(loss, jnp.zeros(3), (x, y), (x[0], y[0]),
                          jnp.zeros(2), eta_w=0.1)
  assert og.grad_z[0] < 0 < og.grad_z[1]
  assert og.inner[0] > 0 > og.inner[1]


def test_search_runs_alternating_steps_and_counts_its_cost(problem):
  params, batches, val, _ = problem
  tx, z_tx = optax.sgd(0.1), fastmix.z_optimizer(0.05)
  state = fastmix.init_search(params, tx, z_tx, K)
  step = jax.jit(functools.partial(
      fastmix.search_step, _loss, tx, z_tx, n_inner=3, eta_w=0.1, beta=0.0,
      lam=0.0, mask=None))
  zs = []
  for t in range(6):
    state, m = step(state, t, batches, batches, val)
    zs.append(np.asarray(state.z))
    assert np.isnan(m['val_loss']) == (t % 3 != 2)
  # z moves only on the outer steps (t = 2, 5).
  assert np.all(zs[0] == 1) and np.all(zs[1] == zs[0])
  assert np.any(zs[2] != zs[1]) and np.all(zs[3] == zs[2])
  np.testing.assert_allclose(state.alpha_sum.sum(), 2.0, rtol=1e-6)
  assert fastmix.search_cost(6, 3, K, B, 8, 0.0) == 6 * K * B + 2 * (K + 1) * 8
  assert fastmix.search_cost(6, 3, K, B, 8, 0.2) == (
      6 * K * B + 2 * (2 * K + 1) * 8)


def test_doremi_update_is_exponentiated_gradient_then_smoothing():
  alpha = jnp.array([0.5, 0.3, 0.2])
  lam = jnp.array([0.1, 0.0, 0.4])
  got = fastmix.doremi_update(alpha, lam, eta=1.0, eps=1e-3)
  a = np.asarray(alpha) * np.exp(np.asarray(lam))
  a /= a.sum()
  np.testing.assert_allclose(got, 0.999 * a + 1e-3 / 3, rtol=1e-6)
  np.testing.assert_allclose(got.sum(), 1.0, rtol=1e-6)


def test_excess_losses_clip_per_example_before_averaging():
  loss = lambda p, b: p * b
  b = jnp.array([[1.0, -1.0], [2.0, 2.0]])
  lam = fastmix.excess_losses(loss, 2.0, 1.0, b)
  # per example (2 - 1) * b clipped at 0: source 0 -> mean(1, 0), 1 -> 2.
  np.testing.assert_allclose(lam, [0.5, 2.0])


def test_regmix_finds_the_minimum_of_a_known_loss_surface():
  rng = np.random.default_rng(0)
  best = np.array([0.6, 0.3, 0.1, 0.0])
  mix = rng.dirichlet(np.ones(4), 512)
  losses = ((mix - best) ** 2).sum(1) + 0.002 * rng.normal(size=512)
  reg = fastmix.regmix_fit(mix, losses)
  found = fastmix.regmix_search(reg, 4, num_samples=20_000, top_k=64)
  np.testing.assert_allclose(found.sum(), 1.0, rtol=1e-9)
  assert np.abs(found - best).max() < 0.12, found
