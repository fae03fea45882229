"""Guidance watermarking: Eq. 7 by Monte Carlo, PCGrad, guidance sign, claims."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special as sp_special
from scipy import stats

from configs import guidance_wm as gwm_config
from experiments import guidance_wm as gwm_exp
from iclrjax.core import config as cfg_lib
from iclrjax.core import loop
from iclrjax.diffusion import flow
from iclrjax.diffusion import guidance_wm as gwm
from tests.conftest import find_claim as _claim
from tests.diffusion.conftest import random_params


# ---------------------------------------------------------------------------
# Statistics (Eqs. 6-7).


def test_antipodal_and_decoding():
  bits = jnp.array([[0, 1, 1, 0]])
  u = gwm.antipodal(bits)
  np.testing.assert_array_equal(u, [[-1.0, 1.0, 1.0, -1.0]])
  np.testing.assert_array_equal(gwm.decode_bits(u), bits)
  np.testing.assert_allclose(gwm.wm_loss(3.0 * u, u), [0.0], atol=1e-6)
  np.testing.assert_allclose(gwm.wm_loss(-u, u), [2.0], atol=1e-6)
  np.testing.assert_allclose(gwm.bit_accuracy(u * jnp.array([1, 1, -1, 1]),
                                              bits), [0.75])


def test_exact_decoding_threshold_is_sufficient_and_tight():
  m = 16
  thr = gwm.exact_decoding_threshold(m)
  rng = np.random.default_rng(0)
  bits = rng.integers(0, 2, (20000, m))
  u = np.asarray(gwm.antipodal(bits))
  phi = u + rng.normal(size=u.shape) * rng.uniform(0.1, 1.5, (20000, 1))
  loss = np.asarray(gwm.wm_loss(jnp.asarray(phi), jnp.asarray(u)))
  ok = np.all(np.asarray(gwm.decode_bits(jnp.asarray(phi))) == bits, -1)
  assert (loss < thr).sum() > 1000
  assert ok[loss < thr].all()
  # Tight: u with one coordinate set to 0 sits exactly on the boundary.
  edge = u[:1].copy()
  edge[0, 0] = 0.0
  np.testing.assert_allclose(gwm.wm_loss(jnp.asarray(edge), jnp.asarray(u[:1])),
                             [thr], rtol=1e-5)


def test_p_value_matches_monte_carlo_and_scipy():
  """P[cos(U, u) > c] for U uniform on S^{M-1} (Monte Carlo and scipy, M=16)."""
  m = 16
  z = jax.random.normal(jax.random.key(0), (400_000, m))
  u = gwm.antipodal(jax.random.bernoulli(jax.random.key(1), 0.5, (m,)))
  cos = np.asarray(gwm.cosine(z, u))
  cs = np.array([0.1, 0.3, 0.5, -0.3, 0.0, 0.7], np.float32)
  p = np.asarray(gwm.p_value(jnp.asarray(cs), m))
  emp = (cos[:, None] > cs).mean(0)
  se = np.sqrt(emp * (1 - emp) / cos.shape[0])
  np.testing.assert_array_less(np.abs(p - emp), 4 * se + 1e-5)
  np.testing.assert_allclose(p[:4], [0.3513, 0.1210, 0.0205, 0.8790],
                             atol=1e-4)
  # Independent reference: cos^2 ~ Beta(1/2, (M-1)/2) by scipy.
  ref = np.where(cs >= 0, 0.5 * stats.beta.sf(cs ** 2, 0.5, (m - 1) / 2),
                 1 - 0.5 * stats.beta.sf(cs ** 2, 0.5, (m - 1) / 2))
  np.testing.assert_allclose(p, ref, rtol=1e-4, atol=1e-7)
  # The complement form keeps tiny p-values accurate (1 - I underflows).
  c_big = np.float32(0.95)
  tiny = float(gwm.p_value(jnp.asarray(c_big), m))
  exact = 0.5 * sp_special.betainc((m - 1) / 2, 0.5, 1 - np.float64(c_big) ** 2)
  assert 0 < exact < 1e-8
  np.testing.assert_allclose(tiny, exact, rtol=1e-3)


def test_p_values_uniform_for_isotropic_features():
  """Under H0 (phi isotropic) Eq. 7 gives uniform p-values for any fixed u."""
  m = 16
  phi = jax.random.normal(jax.random.key(2), (20000, m)) * 3.0
  u = gwm.antipodal(jnp.arange(m) % 2)
  p = np.asarray(gwm.p_value(gwm.cosine(phi, u), m))
  assert stats.kstest(p, 'uniform').pvalue > 1e-3
  assert 0.008 < (p < 0.01).mean() < 0.012


# ---------------------------------------------------------------------------
# PCGrad.


def _pcgrad_numpy(g, order):
  g = np.asarray(g, np.float64)
  out = []
  for i in range(len(g)):
    gi = g[i].copy()
    for j in order:
      if j == i:
        continue
      d = gi @ g[j]
      if d < 0:
        gi = gi - d / (g[j] @ g[j]) * g[j]
    out.append(gi)
  return np.sum(out, 0)


def test_pcgrad_hand_made_conflict():
  g = jnp.array([[1.0, 0.0], [-1.0, 1.0]])
  # g1.g2 = -1: g1 -> g1 + g2/2 = (0.5, 0.5); g2 -> g2 + g1 = (0, 1).
  np.testing.assert_allclose(gwm.pcgrad(g), [0.5, 1.5], atol=1e-6)
  # Each projected gradient no longer conflicts with the other task.
  np.testing.assert_allclose(jnp.dot(jnp.array([0.5, 0.5]), g[1]), 0.0)
  # No conflict: the plain sum.
  h = jnp.array([[1.0, 2.0], [0.5, -0.1]])
  np.testing.assert_allclose(gwm.pcgrad(h), h.sum(0), atol=1e-6)
  # Exactly opposite gradients cancel to zero (both get projected away).
  np.testing.assert_allclose(gwm.pcgrad(jnp.array([[1.0, 2.0], [-1.0, -2.0]])),
                             [0.0, 0.0], atol=1e-6)


def test_pcgrad_matches_numpy_for_every_order():
  rng = np.random.default_rng(3)
  g = rng.normal(size=(4, 5)).astype(np.float32)
  g[3] = -0.8 * g[0] + 0.1 * rng.normal(size=5)  # a strong conflict
  results = []
  for order in itertools.permutations(range(4)):
    got = np.asarray(gwm.pcgrad(jnp.asarray(g), jnp.asarray(order)))
    np.testing.assert_allclose(got, _pcgrad_numpy(g, order), rtol=1e-4,
                               atol=1e-5)
    results.append(got)
  # With three or more tasks the order matters (why PCGrad randomises it).
  assert np.ptp(np.stack(results), 0).max() > 1e-3
  # A zeroed task (a zero gradient) changes nothing.
  g0 = np.concatenate([g[:2], np.zeros((1, 5), np.float32)])
  np.testing.assert_allclose(gwm.pcgrad(jnp.asarray(g0)),
                             _pcgrad_numpy(g[:2], (0, 1)), rtol=1e-5,
                             atol=1e-6)


# ---------------------------------------------------------------------------
# Augmentations, whitening, x0 estimates.


def test_shift_matches_numpy_and_is_linear():
  x = jnp.arange(2 * 3 * 4, dtype=jnp.float32).reshape(2, 3, 4, 1)
  y = np.asarray(gwm.shift(x, 0, 1, fill=-1.0))
  ref = np.full((2, 3, 4, 1), -1.0, np.float32)
  ref[:, :, 1:] = np.asarray(x)[:, :, :-1]
  np.testing.assert_array_equal(y, ref)
  y = np.asarray(gwm.shift(x, -1, 0, fill=-1.0))
  ref = np.full((2, 3, 4, 1), -1.0, np.float32)
  ref[:, :-1] = np.asarray(x)[:, 1:]
  np.testing.assert_array_equal(y, ref)
  # The gradient of <w, shift(x)> is the opposite shift of w (zero-filled).
  w = jax.random.normal(jax.random.key(0), x.shape)
  gx = jax.grad(lambda z: jnp.sum(w * gwm.shift(z, 1, -1)))(x)
  np.testing.assert_allclose(gx, gwm.shift(w, -1, 1, fill=0.0), atol=1e-6)
  with pytest.raises(ValueError, match='unknown or empty augmentations'):
    gwm.check_augs(['rotate'])


def test_photometric_augmentations_closed_form():
  x = jax.random.uniform(jax.random.key(0), (2, 4, 5, 1), minval=-1.0,
                         maxval=1.0)
  key = jax.random.key(1)
  np.testing.assert_allclose(gwm.augment('brightness', x, key, 0.1),
                             x + gwm.BRIGHTNESS, atol=1e-6)
  c = gwm.augment('contrast', x, key, 0.1)
  mean = np.asarray(x).mean(axis=(1, 2, 3), keepdims=True)
  np.testing.assert_allclose(c, mean + gwm.CONTRAST * (np.asarray(x) - mean),
                             atol=1e-6)
  b = np.asarray(gwm.augment('blur', x, key, 0.1, fill=-1.0))
  xp = np.pad(np.asarray(x), ((0, 0), (1, 1), (1, 1), (0, 0)),
              constant_values=-1.0)
  ref = np.mean([xp[:, i:i + 4, j:j + 5] for i in range(3) for j in range(3)],
                0)
  np.testing.assert_allclose(b, ref, atol=1e-6)
  # The shift's fill is an argument.
  s = np.asarray(gwm.augment('shift_right', x, key, 0.1, fill=0.5))
  np.testing.assert_array_equal(s[:, :, 0], 0.5)
  # A user's own attack is a callable in the set: guiding with
  # x -> shift(x, 0, 1) is guiding with the named shift.
  phi_fn = lambda z: z.reshape(z.shape[0], -1)[:, :6]
  u = gwm.antipodal(jax.random.bernoulli(key, 0.5, (2, 6)))
  own = lambda z, k: gwm.shift(z, 0, 1)
  a, b = (gwm.guidance_direction(phi_fn, x, u, key, (name,), tau=1e9,
                                 eta=1e-6) for name in (own, 'shift_right'))
  np.testing.assert_allclose(a, b, atol=1e-6)
  assert gwm.check_augs([own, 'identity'])[0] is own


def test_whitening_gives_zero_mean_identity_covariance():
  rng = np.random.default_rng(0)
  a = rng.normal(size=(6, 6))
  phi = rng.normal(size=(3000, 6)) @ a + 5.0
  w = gwm.fit_whitening(jnp.asarray(phi, jnp.float32))
  z = np.asarray(w(jnp.asarray(phi, jnp.float32)), np.float64)
  np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-3)
  np.testing.assert_allclose(np.cov(z, rowvar=False), np.eye(6), atol=2e-3)
  np.testing.assert_allclose(w.matrix, w.matrix.T, atol=1e-5)  # ZCA


def _point_mass_velocity(target):
  # The exact rectified-flow velocity when the data is one point `target`:
  # x_t = (1 - t) target + t eps, v = eps - target = (x - target) / t.
  return lambda x, t: (x - target) / t


def test_x0_estimates_are_exact_for_a_point_mass():
  target = jax.random.normal(jax.random.key(0), (3, 8, 8, 1))
  vel = _point_mass_velocity(target)
  x1 = jax.random.normal(jax.random.key(1), target.shape)
  ts = flow.time_grid(10)
  x = flow.euler_sample(vel, x1, 6, 1.0, float(ts[6]))
  v = vel(x, ts[6])
  np.testing.assert_allclose(gwm.tweedie_x0(x, v, ts[6]), target, atol=1e-5)
  np.testing.assert_allclose(gwm.complete_x0(vel, x, v, ts, 6, 4), target,
                             atol=1e-5)


def test_complete_x0_equals_running_the_remaining_steps():
  w = jax.random.normal(jax.random.key(2), (64, 64)) / 8
  vel = lambda x, t: jnp.tanh(x.reshape(x.shape[0], -1) @ w).reshape(
      x.shape) * (1 + t)
  x = jax.random.normal(jax.random.key(3), (4, 8, 8, 1))
  ts = flow.time_grid(12)
  for k in (7, 9, 11):
    ref = flow.euler_sample(vel, x, 12 - k, float(ts[k]), 0.0)
    got = gwm.complete_x0(vel, x, vel(x, ts[k]), ts, k, 5)
    np.testing.assert_allclose(got, ref, atol=1e-5)


# ---------------------------------------------------------------------------
# Guidance: sign and effect, with a random decoder.


@pytest.fixture(scope='module')
def random_decoder():
  dec = gwm.WMDecoder(num_bits=16, channels=8)
  x = jnp.asarray(flow.digits('train'))[:512]
  params = jax.jit(dec.init)(jax.random.key(0), x[:1])
  white = gwm.fit_whitening(dec.apply(params, x))
  return gwm.whitened_phi(dec, params, white), x


def test_decoding_in_chunks_gives_the_same_numbers():
  """`decode_batch` (the paper variant's images per decoder call) changes
  memory, not results: the whitening fit, the whitened logits and the
  shift-attack accuracy, chunked and all at once."""
  dec = gwm.WMDecoder(num_bits=8, channels=4)
  x = jnp.asarray(flow.digits('train'))[:12]
  dp = random_params(lambda k, x1: jax.vmap(lambda kk: dec.init(kk, x1))(
      jax.random.split(k, 2)), x[:1])           # two decoders
  fit = lambda n: jax.jit(jax.vmap(gwm_exp.whitening_fn(dec, n),
                                   in_axes=(0, None)))(dp, x)
  xs = jnp.stack([x, x[::-1]])
  bits = jax.random.bernoulli(jax.random.key(1), 0.5, (2, 12, 8))
  white = fit(0)
  for a, b in zip(fit(4), white):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(
      gwm_exp._phi_all_fn(dec, 4)(dp, white, xs),
      gwm_exp._phi_all_fn(dec, 0)(dp, white, xs), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(
      gwm_exp._shift_acc_fn(dec, 4)(dp, white, xs, bits),
      gwm_exp._shift_acc_fn(dec, 0)(dp, white, xs, bits), atol=1e-6)
  first = lambda t: jax.tree.map(lambda a: a[0], t)
  phi_fn = gwm.whitened_phi(dec, first(dp), first(white))
  direction = jax.jit(lambda n: gwm.guidance_direction(
      phi_fn, x, gwm.antipodal(bits[0]), jax.random.key(2),
      gwm.AUGMENTATIONS, noise_std=0.1, tau=1.0, eta=1e-3,
      budget='per_task', box=(-1.0, 1.0), chunk=n), static_argnums=0)
  np.testing.assert_allclose(direction(4), direction(0), rtol=1e-4,
                             atol=1e-5)
  c = gwm_config.get_config('smoke')
  assert c.decode_batch == 0
  c.decode_batch = 7
  with pytest.raises(cfg_lib.ConfigError, match='decode_batch'):
    gwm_exp.check_config(c)


def test_one_guided_step_decreases_the_loss(random_decoder):
  phi_fn, x = random_decoder
  x0 = x[:64]
  eps = jax.random.normal(jax.random.key(1), x0.shape)
  t = jnp.float32(0.3)
  xt = flow.interpolate(x0, eps, t)
  v = eps - x0 + 0.1 * jax.random.normal(jax.random.key(2), x0.shape)
  bits = jax.random.bernoulli(jax.random.key(3), 0.5, (64, 16))
  u = gwm.antipodal(bits)
  x0hat = gwm.tweedie_x0(xt, v, t)
  direction = jax.jit(lambda x, augs: gwm.guidance_direction(
      phi_fn, x, u, jax.random.key(4), augs, noise_std=0.1, tau=1e9,
      eta=1e-6), static_argnums=1)
  for augs in (('identity',), gwm.AUGMENTATIONS):
    d = direction(x0hat, augs)
    norms = jnp.sqrt(jnp.sum(d ** 2, axis=(1, 2, 3)))
    np.testing.assert_allclose(norms, 1.0, rtol=1e-4)  # Eq. 9, ||g|| > eta
    after = gwm.tweedie_x0(xt, v + 0.05 * d, t)  # omega = 0.05
    l0 = gwm.wm_loss(phi_fn(x0hat), u)
    l1 = gwm.wm_loss(phi_fn(after), u)
    if augs == ('identity',):
      assert (l1 < l0).all(), (l0, l1)
    else:  # PCGrad over all augmentations: still a descent for most images
      assert (l1 < l0).mean() > 0.9
  # The opposite sign (the paper's printed form) increases it.
  d = direction(x0hat, ('identity',))
  worse = gwm.wm_loss(phi_fn(gwm.tweedie_x0(xt, v - 0.05 * d, t)), u)
  assert (worse > gwm.wm_loss(phi_fn(x0hat), u)).all()


def test_project_to_box_closed_form():
  x0 = jnp.array([1.0, 1.0, -1.0, -1.0, 0.3, 0.3])
  g = jnp.array([-2.0, 2.0, 3.0, -3.0, 4.0, -4.0])
  # Descent is -g: keep moves into the box (or from the interior), drop the
  # outward ones at the faces.
  np.testing.assert_array_equal(gwm.project_to_box(g, x0),
                                [0.0, 2.0, 0.0, -3.0, 4.0, -4.0])


def test_per_task_budget_and_box_projection(random_decoder):
  phi_fn, x = random_decoder
  x0 = jnp.clip(1.3 * x[:16], -1, 1)  # many pixels on the faces of the box
  u = gwm.antipodal(jax.random.bernoulli(jax.random.key(3), 0.5, (16, 16)))
  f = jax.jit(lambda augs, budget, box: gwm.guidance_direction(
      phi_fn, x0, u, jax.random.key(4), augs, noise_std=0.1, tau=1e9,
      eta=1e-6, budget=budget, box=box), static_argnums=(0, 1, 2))
  one = ('identity',)
  # One task: the two budgets coincide (a unit direction).
  np.testing.assert_allclose(f(one, 'per_task', None),
                             f(one, 'shared', None), rtol=1e-5, atol=1e-6)
  # Five tasks: shared is unit norm, per-task is the PCGrad sum of five unit
  # task gradients (norm between 1 and 5), each task keeping its budget.
  five = ('identity', 'shift_right', 'shift_left', 'shift_down', 'shift_up')
  n_shared = jnp.sqrt(jnp.sum(f(five, 'shared', None) ** 2, (1, 2, 3)))
  n_task = jnp.sqrt(jnp.sum(f(five, 'per_task', None) ** 2, (1, 2, 3)))
  np.testing.assert_allclose(n_shared, 1.0, rtol=1e-4)
  assert (n_task > 1.5).all() and (n_task <= 5.0 + 1e-4).all(), n_task
  # Box: no component pushes a clipped pixel further out.
  d = f(one, 'shared', (-1.0, 1.0))
  assert not bool(jnp.any((x0 >= 1) & (d < 0) | (x0 <= -1) & (d > 0)))
  assert bool(jnp.any((x0 >= 1) & (f(one, 'shared', None) < 0)))
  with pytest.raises(ValueError, match='budget'):
    gwm.guidance_direction(phi_fn, x0, u, jax.random.key(0), one,
                           noise_std=0.1, tau=1.0, eta=1e-6, budget='bad')


def test_guided_sampler_embeds_the_message(random_decoder):
  phi_fn, x = random_decoder
  target = x[:32]
  x1 = jax.random.normal(jax.random.key(5), target.shape)
  # A constant velocity x1 - target: the unguided Euler path ends at target
  # and (unlike the point-mass field) it does not undo the guidance steps.
  vel = lambda z, t: jnp.broadcast_to(x1 - target, z.shape)
  bits = jax.random.bernoulli(jax.random.key(6), 0.5, (32, 16))
  u = gwm.antipodal(bits)
  sample = jax.jit(
      lambda omega, est: gwm.guided_sample(
          vel, phi_fn, x1, u, jax.random.key(7), num_steps=20,
          guided_steps=10, omega=omega, augs=('identity',), estimate=est),
      static_argnums=1)
  plain = sample(0.0, 'tweedie')
  np.testing.assert_allclose(plain, target, atol=1e-4)  # exact Euler
  assert float(gwm.bit_accuracy(phi_fn(plain), bits).mean()) < 0.75
  for est in ('tweedie', 'complete'):
    x0 = sample(6.0, est)
    assert float(gwm.bit_accuracy(phi_fn(x0), bits).mean()) > 0.9, est
    # Displacement bounded by the normalised steps: sum of dt omega = 3.
    rms = jnp.sqrt(jnp.sum((x0 - plain) ** 2, axis=(1, 2, 3)))
    assert float(rms.max()) <= 3.0 + 1e-4


# ---------------------------------------------------------------------------
# A small end-to-end pipeline.


@pytest.mark.slow
def test_decoder_trainer_learns_and_is_not_shift_robust():
  c = gwm_config.get_config()
  x = jnp.asarray(flow.digits('train'))
  init, step, enc, dec = gwm.make_decoder_trainer(x, c)
  res = loop.train(init, step, seed=0, num_seeds=1,
                   num_steps=c.dec_train_steps, chunk_size=c.dec_train_steps,
                   progress=False, data=x)
  params = jax.tree.map(lambda a: a[0], res.state.params)
  test = jnp.asarray(flow.digits('test'))
  bits = jax.random.bernoulli(jax.random.key(0), 0.5, (test.shape[0], 16))
  xw = enc.apply(params['encoder'], test, bits)
  raw = lambda z: dec.apply(params['decoder'], z)
  acc = float(gwm.bit_accuracy(raw(xw), bits).mean())
  shifted = float(gwm.shift_attack_bit_accuracy(raw, xw, bits).mean())
  assert acc > 0.95, acc
  assert shifted < acc - 0.15, (acc, shifted)


def _synthetic_metrics(cfg, shift_gain: float, control_gain: float,
                       robust_fd: float = 12.0):
  """Per-seed metrics for every key `evaluate_claims` reads: identity
  guidance with FD and shift accuracy rising in omega, the shift and the
  non-shift sets at `robust_fd`, whose shift accuracy is identity's at that
  FD plus the given gains."""
  S = 3
  full = lambda v: np.full(S, float(v))
  m = {'fd_real/unguided': full(6.0), 'bit_acc/unguided': full(0.5),
       'bit_acc_shift/unguided': full(0.5), 'label_same/other_noise':
       full(0.1), 'posthoc_bit_acc/shift': full(0.6)}
  for pre in ('calibration/white_generated_', 'calibration/white_real_'):
    ok = pre.endswith('generated_')
    m[pre + 'ks_pvalue'] = full(0.3 if ok else 0.0)
    m[pre + 'fpr@0.01'] = full(0.01 if ok else 0.001)
    m[pre + 'fpr@0.001'] = full(0.001)
  fd_of = lambda o: 6.0 + 0.5 * o                  # identity: FD rises
  acc_shift_of = lambda fd: 0.5 + 0.01 * (fd - 6.0)
  for name, est, o, w, b in gwm_exp.sweep_points(cfg):
    tag = gwm_exp._tag(name, est, o, w, b)  # pylint: disable=protected-access
    fd = fd_of(o) if name == 'base' else robust_fd
    gain = {'base': 0.0, 'robust': shift_gain, 'nonshift': control_gain}[name]
    m[f'fd_real/{tag}'] = full(fd)
    m[f'fd_increase/{tag}'] = full(fd / 6.0 - 1)
    m[f'bit_acc/{tag}'] = full(0.97)
    m[f'bit_acc_shift/{tag}'] = full(acc_shift_of(fd) + gain)
    m[f'exact_decode/{tag}'] = full(0.1)
    m[f'detect@1e-3/{tag}'] = full(0.99)
    m[f'label_same/{tag}'] = full(0.95)
  for x in cfg.posthoc_strengths:
    m[f'fd_real/posthoc_s{x:g}'] = full(6.0 + 40 * x)
    m[f'bit_acc/posthoc_s{x:g}'] = full(0.6 + 0.3 * x)
    m[f'bit_acc_shift/posthoc_s{x:g}'] = full(0.55)
  return m


def test_shift_claim_at_matched_fd_can_hold_and_fail():
  cfg = gwm_config.get_config()
  # Interpolation: identity's shift accuracy at FD 12 is 0.56 by construction.
  gain, where = gwm_exp.shift_gain_at_matched_fd(
      _synthetic_metrics(cfg, 0.1, 0.0), cfg, 'robust')
  np.testing.assert_allclose(gain, 0.1, atol=1e-9)
  assert where == 'inside'
  claim = lambda m: next(c for c in gwm_exp.evaluate_claims(cfg, m)
                         if c.claim.startswith('Adding 1-pixel shifts'))
  good = claim(_synthetic_metrics(cfg, 0.1, 0.0))
  assert good.holds and good.control.endswith('(fails)'), good
  weak = claim(_synthetic_metrics(cfg, 0.02, 0.0))
  assert not weak.holds, weak
  # A control set that gains as much passes: the claim would not discriminate.
  both = claim(_synthetic_metrics(cfg, 0.1, 0.1))
  assert both.control.endswith('(passes)'), both
  # Beyond identity guidance's strongest FD there is no matched comparison.
  far = _synthetic_metrics(cfg, 0.1, 0.0, robust_fd=1e3)
  assert gwm_exp.shift_gain_at_matched_fd(far, cfg, 'robust')[1] == 'above'
  assert not claim(far).holds
  # The post-hoc baseline interpolated in FD, and where the FD lies.
  m = _synthetic_metrics(cfg, 0.1, 0.0)
  val, pos = gwm_exp.posthoc_at(m, cfg, 6.0 + 40 * 0.15)
  assert pos == 'inside' and val == pytest.approx(0.6 + 0.3 * 0.15)
  assert gwm_exp.posthoc_at(m, cfg, 1.0)[1] == 'below'
  assert gwm_exp.posthoc_at(m, cfg, 1e4)[1] == 'above'


@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  """The full default run (~10-15 min on 2 cores), once for the claims."""
  from experiments.guidance_wm import EXPERIMENT  # pylint: disable=g-import-not-at-top
  summary = EXPERIMENT.execute(gwm_config.get_config(),
                               tmp_path_factory.mktemp('guidance_wm') / 'run')
  return summary, {k: v['mean'] for k, v in summary['metrics'].items()}


# Measured: default config at 0ce0747 (3 seeds; results/guidance_wm). The
# pinned claims hold with a clear margin: shift gain at matched FD +0.106
# (seeds 0.096-0.113; control +0.013); labels 0.943 (seeds >= 0.932); guided
# vs post-hoc 0.968 vs 0.680 (per seed 0.61-0.77), under shift 0.683 vs
# 0.559. Not pinned (margins inside seed noise): the calibration claim (seed
# 2's FPR@1e-2 0.006 against a floor of 0.005) and bit accuracy >= 0.95
# (0.968, seeds 0.952-0.978); `test_default_marginal_claims` checks only
# that their controls fail.
@pytest.mark.slow
@pytest.mark.parametrize('start', [
    'Adding 1-pixel shifts', 'Guidance keeps the semantics',
    'Under no attack', 'Under a 1-pixel shift attack',
    pytest.param('Guidance costs little realism', marks=pytest.mark.xfail(
        strict=True, reason=(
            'FD to real digits +53% at omega 8, last 25 (bit acc 0.968); '
            '+10% only at omega 2 (bit acc 0.888)'))),
])
def test_default_claims(default_run, start):
  c = _claim(default_run[0], start)
  assert c['control'].endswith('(fails)'), c
  assert c['holds'], c


@pytest.mark.slow
@pytest.mark.parametrize('start', ['Zero-bit p-values',
                                   'Guidance (augmentation'])
def test_default_marginal_claims(default_run, start):
  c = _claim(default_run[0], start)
  assert c['control'].endswith('(fails)'), c


@pytest.mark.slow
def test_default_posthoc_reference(default_run):
  _, m = default_run
  assert m['posthoc_bit_acc/identity'] > 0.95, m
  assert m['posthoc_bit_acc/shift'] < m['posthoc_bit_acc/identity'] - 0.15, m


# -- the paper variant: CIFAR-10 from a TFDS folder ---------------------------------------
def _tiny_paper_config(cifar10_dir):
  """The paper variant's data path (32x32x3 images, a classifier fitted on
  them, M = 48 bits) at a few steps of tiny nets."""
  from configs import guidance_wm as gwm_config  # pylint: disable=g-import-not-at-top
  c = gwm_config.get_config('paper')
  c.data_dir, c.num_seeds = str(cifar10_dir), 1
  c.gen_width, c.gen_blocks, c.gen_emb_dim = 16, 1, 8
  c.gen_train_steps, c.gen_batch_size = 2, 4
  c.dec_channels, c.dec_train_steps, c.dec_batch_size = 4, 2, 4
  c.classifier_steps, c.num_steps = 2, 4
  c.windows, c.headline_window, c.estimates = (2,), 2, ('tweedie',)
  c.headline_estimate, c.omegas, c.headline_omega = 'tweedie', (8.0,), 8.0
  c.posthoc_strengths = (0.1, 0.2)
  c.num_calibration, c.num_guided = 16, 4
  c.steps_per_chunk, c.log_every, c.checkpoint_every = 2, 1, 0
  return c


def test_paper_variant_reads_a_fake_cifar10(cifar10_dir):
  c = _tiny_paper_config(cifar10_dir)
  gwm_exp.EXPERIMENT.validate(c)
  train_x, test_x, clf_data = gwm_exp.load_data(c)
  assert train_x.shape == (16, 32, 32, 3) and test_x.shape == (8, 32, 32, 3)
  assert clf_data[1].shape == (16,) and int(clf_data[1].max()) < 10


@pytest.mark.slow   # a second smoke run at CIFAR-10's shapes (~35 s)
def test_paper_variant_runs_end_to_end_on_a_fake_cifar10(cifar10_dir,
                                                         tmp_path):
  c = _tiny_paper_config(cifar10_dir)
  summary = gwm_exp.EXPERIMENT.execute(c, tmp_path / 'run')
  m = summary['metrics']
  acc = m['bit_acc/unguided']['mean']
  assert 0.0 <= acc <= 1.0
  assert any('CIFAR-10' in cl['claim'] for cl in summary['claims'])
  assert all(np.isfinite(v['mean']) for k, v in m.items()
             if k.startswith(('bit_acc/', 'label_same/')))


def test_paper_variant_names_a_missing_cifar10_before_any_compute(tmp_path):
  from configs import guidance_wm as gwm_config  # pylint: disable=g-import-not-at-top
  from tests.conftest import assert_missing_data_stops_early  # pylint: disable=g-import-not-at-top
  assert_missing_data_stops_early(gwm_exp.EXPERIMENT,
                                  gwm_config.get_config('paper'), tmp_path,
                                  'cifar10')
