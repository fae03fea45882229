"""QDPM: softround, the bound and its estimators, the loss, solvers, baselines.

Reference facts used below (derived in `qdpm`'s docstring):
* softround is the posterior mean of x_0 under a uniform grid prior;
* the continuous VE ELBO with an exact posterior-mean denoiser is tight per
  example: bound(x_0) = -log p(x_0); so the softround-only model's bound is
  log2 K bits/dim for every image and at every data scale;
* a point mass stays exactly N(x*, t^2) under a Solver-1/2 step.
"""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import qdpm as qdpm_config
from experiments import qdpm as qdpm_launcher
from iclrjax.core import config as cfg_lib
from iclrjax.core import data
from iclrjax.diffusion import images
from iclrjax.diffusion import likelihood as lik
from iclrjax.diffusion import qdpm
from iclrjax.diffusion import schedules as sch
from tests.conftest import assert_missing_data_stops_early
from tests.conftest import jit_optimized


@pytest.fixture(autouse=True)
def _strict_rank_promotion():
  """No implicit rank promotion in the library (as in test_nets)."""
  with jax.numpy_rank_promotion('raise'):
    yield


LOG2_17 = math.log2(17)
P5 = np.array([0.5, 0.05, 0.2, 0.15, 0.1])  # a non-uniform 5-level law
H5 = float(-(P5 * np.log(P5)).sum())  # nats


def zero_net(params, x, c):
  del params, c
  return jnp.zeros_like(x)


def closed_net(params, x, c):
  """A fixed non-trivial 'network' with parameters."""
  return params['a'] * jnp.tanh(x) + params['b'] * c


CLOSED_PARAMS = {'a': jnp.float32(0.7), 'b': jnp.float32(-0.4)}


class TinyMLP(nn.Module):
  """x [D], c scalar -> [D]; zero-initialised output."""
  width: int = 64

  @nn.compact
  def __call__(self, x, c):
    freqs = jnp.array([1.0, 3.0, 9.0])
    feats = jnp.concatenate([x, c * freqs, jnp.sin(c * freqs),
                             jnp.cos(c * freqs)])
    h = nn.silu(nn.Dense(self.width)(feats))
    h = nn.silu(nn.Dense(self.width)(h))
    return nn.Dense(x.shape[-1], kernel_init=nn.initializers.zeros)(h)


def mlp_net(dim, key, width=64):
  model = TinyMLP(width)
  params = model.init(key, jnp.zeros(dim), jnp.float32(0.5))
  return (lambda p, x, c: model.apply(p, x, c)), params


def _np_softround(x, t, levels, log_prior=None):
  x = np.asarray(x, np.float64)[..., None]
  g = np.asarray(levels, np.float64)
  logw = -(x - g) ** 2 / (2 * np.asarray(t, np.float64)[..., None] ** 2)
  if log_prior is not None:
    logw = logw + log_prior
  w = np.exp(logw - logw.max(-1, keepdims=True))
  return (w * g).sum(-1) / w.sum(-1)


# -- softround ----------------------------------------------------------------------
def test_softround_is_the_bruteforce_posterior_mean():
  rng = np.random.default_rng(0)
  for scale in ('integer', '[-1,1]'):
    levels = images.grid(17, scale)
    s = images.spacing(17, scale)
    x = rng.uniform(levels[0] - 3 * s, levels[-1] + 3 * s, size=(50, 8))
    t = s * np.exp(rng.uniform(np.log(0.05), np.log(30.0), size=(50, 1)))
    got = qdpm.softround(jnp.asarray(x, jnp.float32), t, levels)
    np.testing.assert_allclose(got, _np_softround(x, t, levels),
                               atol=2e-5 * 16 * s)
    log_prior = np.log(rng.dirichlet(np.ones(17)))
    got = qdpm.softround(jnp.asarray(x, jnp.float32), t, levels,
                         log_prior=jnp.asarray(log_prior, jnp.float32))
    np.testing.assert_allclose(got, _np_softround(x, t, levels, log_prior),
                               atol=2e-5 * 16 * s)


def test_softround_and_xhat_limits():
  levels = images.grid(17, '[-1,1]')
  x = jnp.array([-1.3, -0.52, 0.04, 0.3, 0.99, 2.0])
  rounded = qdpm.round_to_grid(x, levels)
  np.testing.assert_allclose(rounded, [-1.0, -0.5, 0.0, 0.25, 1.0, 1.0],
                             atol=1e-6)
  for t in (0.0, 1e-4, 1e-30):
    np.testing.assert_allclose(qdpm.softround(x, t, levels), rounded,
                               atol=1e-6)
  for t in (1e5, 1e30, np.inf):
    np.testing.assert_allclose(qdpm.softround(x, t, levels), 0.0, atol=1e-4)
  # xhat: exactly round at t = 0 even if the network output is huge;
  # finite at extreme t.
  big_net = lambda p, xin, c: 1e6 * jnp.ones_like(xin)  # noqa: E731
  np.testing.assert_allclose(qdpm.xhat(big_net, None, x, 0.0, levels),
                             rounded, atol=1e-6)
  for t in (1e-3, 0.3, 3.0, 1e8, 1e20):
    out = qdpm.xhat(closed_net, CLOSED_PARAMS, x * max(t, 1.0), t, levels)
    assert np.all(np.isfinite(out)), t
  np.testing.assert_allclose(qdpm.input_scale(jnp.array([0.0, 1.0, 1e25])),
                             [1.0, 2 ** -0.5, 1e-25], rtol=1e-5)


# -- the bound ----------------------------------------------------------------------
@jit_optimized
def _softround_only_bound(x0, levels, t_lo, t_hi, key):
  """The QDPM bound with deltahat = 0 by quadrature (levels and the range
  are traced, so one compilation serves every scale)."""
  quad = qdpm.ve_bound_quadrature(
      qdpm.xhat_batch(zero_net, None, levels, unit=1.0), x0, key, t_lo, t_hi,
      256)
  return lik.bpd(quad, x0.shape[1])


def test_softround_only_bound_is_log2k_at_every_scale():
  x_int = np.random.default_rng(1).integers(0, 17, size=(64, 64))
  x_int[:8] = 0  # edge levels too: the bound is log2 K for every image
  est = {}
  for scale in ('integer', '[-1,1]'):
    levels = images.grid(17, scale)
    t_lo, t_hi = qdpm.default_t_range(levels)
    est[scale] = _softround_only_bound(
        images.to_scale(x_int, scale), levels, t_lo, t_hi, jax.random.key(0))
  # Scale invariance (common random numbers): identical to 1e-3 bpd.
  np.testing.assert_allclose(est['integer'].value, est['[-1,1]'].value,
                             atol=1e-3)
  for e in est.values():
    mean, se = e.mean()
    assert abs(mean - LOG2_17) < 3 * se, (mean, se)
    assert se < 0.02
    # ... per image as well (within 4 SE for 64 images).
    np.testing.assert_array_less(np.abs(e.value - LOG2_17), 4 * e.se)
  # (The paper's u-MC estimator of the same bound is biased low at the
  # [-1,1] scale: test_u_mc_counts_the_bound_above_its_float32_floor.)
  # The tail above t_hi is included exactly: with t_hi = 2 grid steps (the
  # tail is then ~half of the bound) the answer is the same.
  s = images.spacing(17, '[-1,1]')
  short = _softround_only_bound(
      images.to_scale(x_int, '[-1,1]'), images.grid(17, '[-1,1]'), 1e-2 * s,
      2.0 * s, jax.random.key(1))
  mean, se = short.mean()
  assert abs(mean - LOG2_17) < 3 * se, (mean, se)
  # The neglected part below t_lo: the integrand is exactly 0 at t_lo for any
  # network output (u = exp(-1/t_lo^2) underflows; softround = x0 unless
  # |eps| > 50).
  @jax.jit
  def sq_err_at(x0, levels, t):
    return qdpm.sq_err_fn(qdpm.xhat_batch(closed_net, CLOSED_PARAMS, levels,
                                          unit=1.0),
                          x0)(jax.random.key(2), jnp.full((64,), t))

  for scale in ('integer', '[-1,1]'):
    levels = images.grid(17, scale)
    t_lo = qdpm.default_t_range(levels)[0]
    e = sq_err_at(images.to_scale(x_int, scale), levels, t_lo)
    assert float(e.max()) == 0.0


def test_grid_gate_is_the_integer_data_model_on_any_scale():
  """With u = exp(-(s/t)^2) (s the grid spacing), QDPM on [-1, 1] data is the
  integer-data model in other units: a network output scaled by s gives the
  same xhat / s, loss terms and bounds (the bound is scale-free), while the
  literal exp(-1/t^2) gate does not."""
  x_int = np.random.default_rng(3).integers(0, 17, size=(32, 16))
  s = images.spacing(17, '[-1,1]')
  net = lambda p, x, c: p * jnp.cos(7.0 * c) * jnp.ones_like(x)  # noqa: E731

  @jax.jit
  def terms(x0, levels, amp, unit):
    key = jax.random.key(4)
    loss, aux = qdpm.loss(net, amp, x0, key, levels, time_sampling='u',
                          unit=unit)
    quad = qdpm.bound_quadrature(net, amp, x0, key, levels, 64,
                                 t_range=(0.01 * unit, 100.0 * unit),
                                 unit=unit)
    umc = qdpm.bound_u_mc(net, amp, x0, key, levels, 64, unit=unit)
    return aux['bound_term'], aux['t'], quad.value, umc.value

  lv_i, lv_s = images.grid(17, 'integer'), images.grid(17, '[-1,1]')
  ref = terms(jnp.asarray(x_int, jnp.float32), lv_i, 0.8, 1.0)
  grid = terms(jnp.asarray(images.to_scale(x_int, '[-1,1]'), jnp.float32),
               lv_s, 0.8 * s, qdpm.gate_unit(lv_s, 'grid'))
  assert qdpm.gate_unit(lv_s, 'grid') == pytest.approx(s)
  np.testing.assert_allclose(grid[1], s * ref[1], rtol=1e-5)  # t = s tau
  for a, b in zip(grid[:1] + grid[2:], ref[:1] + ref[2:]):
    np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-3)
  absolute = terms(jnp.asarray(images.to_scale(x_int, '[-1,1]'),
                               jnp.float32), lv_s, 0.8 * s,
                   qdpm.gate_unit(lv_s, 'absolute'))
  assert not np.allclose(absolute[2], ref[2], rtol=0.05)
  with pytest.raises(ValueError, match='gate must be one of'):
    qdpm.gate_unit(lv_s, 'pixels')


def test_u_estimator_typical_value_is_low_in_float64_too():
  """In float32 the paper's u ~ U(0,1) estimator cannot visit t below
  `u_mc_floor` (0.2505 units: u = 2^-23), so it is biased low. In float64
  (u down to 2^-52) it is unbiased, but its variance is infinite: t < 0.25
  units needs u < exp(-16) ~ 1.1e-7 (a few draws in a million), so the
  typical estimate of 1024 draws of the softround-only bound (exactly
  log2 17 bits) is still far below it, while the quadrature is exact."""
  x_int = np.random.default_rng(1).integers(0, 17, size=(8, 64))
  levels = images.grid(17, '[-1,1]')  # gate exp(-1/t^2): unit 1
  with jax.enable_x64(True):
    x0 = jnp.asarray(images.to_scale(x_int, '[-1,1]'))
    for dtype in (jnp.float32, jnp.float64):
      e = jit_optimized(lambda x, k, dt=dtype: qdpm.bound_u_mc(
          zero_net, None, x, k, levels, 1024, draws_per_call=256, dtype=dt,
          unit=1.0))(x0, jax.random.key(2))
      mean, _ = lik.bpd(e, 64).mean()
      assert float(mean) < 0.5 * LOG2_17, (dtype, mean)
  assert math.exp(-16.0) == pytest.approx(1.125e-7, rel=1e-3)


def test_unit_defaults_to_the_grid_gate():
  levels = images.grid(17, '[-1,1]')
  assert qdpm.resolve_unit(None, levels) == pytest.approx(1 / 8)
  assert qdpm.resolve_unit(1.0, levels) == 1.0
  x = jnp.zeros((2, 3))
  # The default equals passing the grid gate, and differs from the literal one.
  np.testing.assert_array_equal(
      qdpm.xhat_batch(closed_net, CLOSED_PARAMS, levels)(x, jnp.full(2, 0.2)),
      qdpm.xhat_batch(closed_net, CLOSED_PARAMS, levels, unit=0.125)(
          x, jnp.full(2, 0.2)))
  with pytest.raises(ValueError, match='concrete levels'):
    jax.jit(lambda lv: qdpm.xhat_batch(closed_net, CLOSED_PARAMS, lv)(
        x, jnp.full(2, 0.2)))(jnp.asarray(levels))


def test_u_mc_counts_the_bound_above_its_float32_floor():
  """float32 u ~ U(0,1) draws are multiples of 2^-23, so the u-MC estimate
  is the bound restricted to t >= u_mc_floor(unit) = unit / sqrt(23 ln 2):
  for the softround-only model with the literal gate on [-1, 1] digits it
  agrees with quadrature over [floor, inf) (paired, within 3 SE) and misses
  the mass below, most of the log2 17 bits."""
  assert lik.u_mc_floor(1.0) == pytest.approx(1 / np.sqrt(23 * np.log(2)))
  assert float(lik.t_of_u(jnp.float32(2.0 ** -23))) == pytest.approx(
      lik.u_mc_floor(1.0), rel=1e-6)
  x_int = np.random.default_rng(1).integers(0, 17, size=(64, 64))
  levels = images.grid(17, '[-1,1]')
  x0 = jnp.asarray(images.to_scale(x_int, '[-1,1]'), jnp.float32)
  floor = lik.u_mc_floor(1.0)

  @jit_optimized
  def both(key):
    k1, k2 = jax.random.split(key)
    umc = qdpm.bound_u_mc(zero_net, None, x0, k1, levels, 2048,
                          draws_per_call=512, unit=1.0)
    above = qdpm.bound_quadrature(zero_net, None, x0, k2, levels, 128,
                                  t_range=(floor, 50.0), unit=1.0)
    return lik.bpd(umc, 64).value, lik.bpd(above, 64).value

  u, a = (np.asarray(v, np.float64) for v in both(jax.random.key(0)))
  d = u - a
  se = d.std(ddof=1) / np.sqrt(d.size)
  assert abs(d.mean()) < 3 * se, (d.mean(), se)
  assert a.mean() < 0.5 * LOG2_17  # most of the bits lie below the floor


def test_the_mass_below_u_mc_floors_is_the_softround_terms():
  """What float32 u-MC cannot reach on QDPM with the grid gate, the bound
  below t = 0.2505 grid steps, is the softround term's: a network with
  outputs of 100 leaves it unchanged (it is gated off by u < 2^-23), and it
  equals the softround-only model's closed form (I-MMSE,
  `qdpm.softround_bound_below`): 0.176 bits at an interior level, 0.167 on
  the known-entropy set (trained QDPM in the default run: 0.174). Below
  float64's floor (0.1666 steps) it is 16x smaller. Hence no claim rests on
  it (`experiments.qdpm.evaluate_claims`)."""
  c = qdpm_config.get_config()
  k = c.known_entropy
  x_int, _ = images.known_entropy_sample(images.known_entropy_params(
      num_prototypes=k.num_prototypes, noise=k.noise, seed=c.seed),
                                         np.random.default_rng(0), 32)
  levels = jnp.asarray(images.grid(17, '[-1,1]'), jnp.float32)
  x0 = jnp.asarray(images.to_scale(x_int, '[-1,1]', 17), jnp.float32)
  unit = qdpm.gate_unit(levels, 'grid')
  lo = qdpm.default_t_range(levels)[0]
  big_net = lambda p, x, c: jnp.full_like(x, 100.0)
  bits = lambda nats: nats / (x0.shape[1] * np.log(2))

  @jit_optimized
  def below(key, floor):  # int_lo^floor t^-3 e(t) dt, per example
    out = []
    for net in (zero_net, big_net):
      e = qdpm.sq_err_fn(qdpm.xhat_batch(net, None, levels, unit), x0)
      out.append(lik.stratified_log_t(lambda k, t, e=e: e(k, t) * t ** -3,
                                      key, lo, floor, 64, x0.shape[0]))
    return out

  exact = {}
  for dt in (jnp.float32, jnp.float64):
    floor = lik.u_mc_floor(unit, dt)
    zero, big = below(jax.random.key(0), floor)
    np.testing.assert_allclose(big.value, zero.value, rtol=1e-3)
    per_level = qdpm.softround_bound_below(floor / unit, 17)
    exact[dt] = bits(per_level[x_int].sum(-1).mean())
    se = bits(float(jnp.sqrt(jnp.sum(zero.se ** 2))) / x0.shape[0])
    assert abs(bits(float(zero.value.mean())) - exact[dt]) < 4 * se, (
        dt, bits(float(zero.value.mean())), exact[dt], se)
  assert 0.15 < exact[jnp.float32] < 0.19, exact
  assert exact[jnp.float32] > 10 * exact[jnp.float64], exact


def test_u_mc_draws_per_call_changes_memory_not_numbers():
  """The paper variant's `umc_draws_per_call` (draws vmapped per lax.map
  step) gives the same estimate as one draw at a time and as all at once."""
  x0 = jnp.asarray(images.to_scale(
      np.random.default_rng(3).integers(0, 17, size=(3, 4)), '[-1,1]', 17),
      jnp.float32)
  levels = jnp.asarray(images.grid(17, '[-1,1]'), jnp.float32)
  ests = [qdpm.bound_u_mc(closed_net, CLOSED_PARAMS, x0, jax.random.key(5),
                          levels, 16, draws_per_call=n, unit=0.125)
          for n in (None, 4, 16)]
  for e in ests[1:]:
    np.testing.assert_allclose(e.value, ests[0].value, rtol=1e-5)
    np.testing.assert_allclose(e.se, ests[0].se, rtol=1e-4)
  c = qdpm_config.get_config('smoke')
  assert qdpm_launcher.umc_chunk(c) == 16   # min(256, umc_draws): as before
  c.umc_draws_per_call = 3
  with pytest.raises(cfg_lib.ConfigError,
                     match='umc_draws_per_call'):
    qdpm_launcher.check_config(c)


def _exact_denoiser(levels, log_prior):
  return lambda x, t: qdpm.softround(x, t[:, None], levels,
                                     log_prior=log_prior)


def _per_state(est, reps):
  """Per-state means of an estimate over `reps` copies, and their SEs."""
  v = est.value.reshape(-1, reps)
  se = jnp.sqrt(jnp.sum(est.se.reshape(-1, reps) ** 2, 1)) / reps
  return v.mean(1), se


def test_bound_is_tight_for_the_exact_denoiser_and_valid_otherwise():
  levels = jnp.asarray(images.grid(5, '[-1,1]'))
  reps = 120
  x0 = jnp.repeat(levels, reps)[:, None]  # D = 1, every state reps times
  t_lo, t_hi = qdpm.default_t_range(levels)

  @jax.jit
  def bound(log_prior, amp, key):
    """Posterior mean under log_prior, plus amp x a smooth perturbation."""
    def fn(x, t):
      return (_exact_denoiser(levels, log_prior)(x, t)
              + amp * jnp.sin(3 * x) * jnp.exp(-t[:, None]))
    return _per_state(qdpm.ve_bound_quadrature(fn, x0, key, t_lo, t_hi, 256),
                      reps)

  q = np.array([0.3, 0.2, 0.2, 0.2, 0.1])
  key = jax.random.key(5)
  # Tight per state for the exact posterior mean: bound = -log p(x0).
  v, se = bound(jnp.log(P5), 0.0, key)
  np.testing.assert_array_less(np.abs(v + np.log(P5)), 3.5 * se)
  # A posterior mean under the wrong prior q is exact for the model q:
  # bound = -log q(x0); in expectation over p it exceeds H(p).
  v, se = bound(jnp.log(q), 0.0, key)
  np.testing.assert_array_less(np.abs(v + np.log(q)), 3.5 * se)
  assert (P5 * v).sum() > H5 + 0.05
  # Any other denoiser: E_p[bound] >= H(p), here strictly.
  v, se = bound(jnp.log(P5), 0.2, key)
  assert (P5 * v).sum() > H5 + 0.05


# -- the loss -----------------------------------------------------------------------
def test_loss_plus_constant_is_the_bound_integrand():
  levels = images.grid(17, 'integer')
  x0 = jnp.asarray(np.random.default_rng(6).integers(0, 17, (64, 16)),
                   jnp.float32)
  t_lo, t_hi = qdpm.default_t_range(levels)

  def xhat_of(p, x_t, t):
    return jax.vmap(lambda x, s: qdpm.xhat(closed_net, p, x, s, levels))(
        x_t, t)

  def run(mode, p):
    def theta_loss(q):
      loss, aux = qdpm.loss(closed_net, q, x0, jax.random.key(7), levels,
                            time_sampling=mode, antithetic=False)
      return loss.sum(), (loss, aux)
    g_loss, (loss, aux) = jax.grad(theta_loss, has_aux=True)(p)
    t, x_t = aux['t'], aux['x_t']
    # The full bound term, recomputed from xhat with the loss's (t, x_t).
    if mode == 'u':
      weight = 0.5 / lik.u_of_t(t)
    else:
      weight = (math.log(t_hi) - math.log(t_lo)) / t ** 2
    full = lambda q: jnp.sum(  # noqa: E731
        weight * jnp.sum((x0 - xhat_of(q, x_t, t)) ** 2, -1))
    return loss, aux, xhat_of(p, x_t, t), g_loss, jax.grad(full)(p)

  both = jax.jit(lambda p: {m: run(m, p) for m in ('u', 'log_t')})(
      CLOSED_PARAMS)
  for mode in ('u', 'log_t'):
    loss, aux, xh, g_loss, g_full = both[mode]
    t = np.asarray(aux['t'], np.float64)
    sq = np.sum(np.asarray(x0 - xh, np.float64) ** 2, -1)
    if mode == 'u':
      weight = 1.0 / (2.0 * np.exp(-1.0 / t ** 2))
      assert t.min() > 0.2  # float32 u never reaches t < ~0.25
    else:
      weight = (math.log(t_hi) - math.log(t_lo)) / t ** 2
    np.testing.assert_allclose(aux['bound_term'], weight * sq, rtol=2e-3,
                               atol=1e-4)
    np.testing.assert_allclose(loss + aux['const'], aux['bound_term'])
    # The constant does not depend on theta: same gradient as the full term.
    for k in g_loss:
      np.testing.assert_allclose(g_loss[k], g_full[k], rtol=2e-3)


def test_log_t_loss_is_unbiased_for_the_bound_and_constant_is_dlnk():
  levels = images.grid(17, '[-1,1]')
  x0 = jnp.asarray(images.to_scale(
      np.random.default_rng(8).integers(0, 17, (16, 8)), '[-1,1]'))
  draws = 400

  @jax.jit
  def run(key):
    def one(k):
      _, aux = qdpm.loss(closed_net, CLOSED_PARAMS, x0, k, levels)
      return aux['bound_term'], aux['const']
    k1, k2 = jax.random.split(key)
    quad = qdpm.bound_quadrature(closed_net, CLOSED_PARAMS, x0, k2, levels,
                                 128)
    return jax.lax.map(one, jax.random.split(k1, draws)), quad

  (bound_terms, consts), quad = run(jax.random.key(9))
  # c of Eq. 22 (= the softround-only bound) is D ln K per example.
  c_mean = consts.mean()
  c_se = consts.mean(1).std() / math.sqrt(draws)
  assert abs(c_mean - 8 * math.log(17)) < 3 * c_se + 1e-3, (c_mean, c_se)
  # loss + c averages to the bound (estimator (b)) for the same network.
  q_mean, q_se = quad.mean()
  b_mean = bound_terms.mean()
  b_se = bound_terms.mean(1).std() / math.sqrt(draws)
  assert abs(b_mean - q_mean) < 3 * math.hypot(b_se, q_se), (b_mean, q_mean)


def test_training_with_log_t_loss_lowers_the_bound():
  """A tiny MLP learns a skewed per-pixel law: H < bound < log2 K."""
  levels = images.grid(17, 'integer')
  p = np.exp(-np.arange(17) / 1.5)
  p /= p.sum()
  h_bits = float(-(p * np.log2(p)).sum())
  dim = 8
  sample = lambda rng, n: jnp.asarray(  # noqa: E731
      rng.choice(17, size=(n, dim), p=p), jnp.float32)
  rng = np.random.default_rng(11)
  train, test = sample(rng, 4096), sample(rng, 128)
  net, params = mlp_net(dim, jax.random.key(12), width=32)
  tx = optax.adam(3e-3)

  @jax.jit
  def train_and_evaluate(params, key):
    def step(carry, k):
      params, opt = carry
      k_b, k_l = jax.random.split(k)
      xb = train[jax.random.randint(k_b, (64,), 0, train.shape[0])]
      g = jax.grad(lambda q: qdpm.loss(net, q, xb, k_l, levels)[0].mean())(
          params)
      upd, opt = tx.update(g, opt)
      return (optax.apply_updates(params, upd), opt), None
    k_train, k_eval = jax.random.split(key)
    (params, _), _ = jax.lax.scan(step, (params, tx.init(params)),
                                  jax.random.split(k_train, 150))
    return qdpm.bound_quadrature(net, params, test, k_eval, levels, 64)

  est = train_and_evaluate(params, jax.random.key(13))
  mean, se = lik.bpd(est, dim).mean()
  # Sampling error of the test set, on top of the MC error.
  spread = float(lik.bpd(est, dim).value.std()) / math.sqrt(128)
  assert mean > h_bits - 3 * math.hypot(se, spread), (mean, h_bits)
  assert mean < LOG2_17 - 1.0, (mean, h_bits)


# -- solvers ---------------------------------------------------------------------------
def test_solver_step_mean_and_variance_match_closed_form():
  levels = images.grid(17, 'integer')
  x_s = np.array([3.3, 7.9, 12.5])
  s, t, n = 0.8, 0.5, 40_000
  xs = jnp.asarray(np.tile(x_s, (n, 1)), jnp.float32)
  fn = qdpm.xhat_batch(closed_net, CLOSED_PARAMS, levels)
  out = np.asarray(jax.jit(lambda k: qdpm.solver_step(fn, xs, s, t, k))(
      jax.random.key(15)), np.float64)
  u = math.exp(-1 / s ** 2)
  xh = _np_softround(x_s, np.full(3, s), levels) + u * (
      0.7 * np.tanh(x_s / math.sqrt(1 + s ** 2)) - 0.4 * u)
  r = t ** 2 / s ** 2
  mean, var = r * x_s + (1 - r) * xh, t ** 2 * (1 - r)
  np.testing.assert_array_less(np.abs(out.mean(0) - mean),
                               4 * math.sqrt(var / n))
  np.testing.assert_allclose(out.var(0), var, rtol=4 * math.sqrt(2 / n))


def test_point_mass_marginal_is_preserved_by_both_solvers():
  levels = jnp.asarray(images.grid(5, 'integer'))
  log_prior = jnp.where(jnp.arange(5) == 3, 0.0, -1e9)
  fn = _exact_denoiser(levels, log_prior)  # xhat = 3 everywhere
  s, t, n = 2.0, 0.7, 40_000
  x_s = 3.0 + s * jax.random.normal(jax.random.key(16), (n, 1))
  outs = jax.jit(lambda k: [qdpm.solver_step(fn, x_s, s, t, k, o)
                            for o in (1, 2)])(jax.random.key(17))
  for out in outs:
    out = np.asarray(out)
    assert abs(out.mean() - 3.0) < 4 * t / math.sqrt(n)
    np.testing.assert_allclose(out.var(), t ** 2, rtol=4 * math.sqrt(2 / n))


def _tv(samples, levels, p):
  freq = np.array([(np.asarray(samples) == float(g)).mean() for g in levels])
  return 0.5 * np.abs(freq - p).sum()


def test_solver2_is_more_accurate_than_solver1_with_the_exact_denoiser():
  levels = jnp.asarray(images.grid(5, '[-1,1]'))
  fn = _exact_denoiser(levels, jnp.log(P5))
  ts = qdpm.time_grid(32, 200.0, 'log_t', t_min=0.05 * 0.5)
  both = jax.jit(lambda k: [qdpm.ve_sample(fn, k, 40_000, 1, levels, ts, o)
                            for o in (1, 2)])(jax.random.key(18))
  tv = {o: _tv(x, levels, P5) for o, x in zip((1, 2), both)}
  # Measured: 0.045 (Solver-1) vs 0.008 (Solver-2); sampling noise ~0.005.
  assert tv[2] < 0.02 and tv[1] > tv[2] + 0.015, tv


def test_samplers_land_exactly_on_the_grid():
  dim = 6
  net, params = closed_net, CLOSED_PARAMS  # any non-zero network
  integer = jnp.asarray(images.grid(17, 'integer'))
  unit = jnp.asarray(images.grid(17, '[-1,1]'))

  @jax.jit
  def run(key):
    return [
        qdpm.sample(net, params, key, 64, dim, integer, num_steps=8, order=1,
                    kind='u'),
        qdpm.sample(net, params, key, 64, dim, unit, num_steps=8, order=2,
                    kind='log_t'),
        qdpm.plain_sample(net, params, key, 64, dim, unit, num_steps=8)]

  for x, levels in zip(run(jax.random.key(20)), (integer, unit, unit)):
    assert x.shape == (64, dim)
    d = np.abs(np.asarray(x)[..., None] - np.asarray(levels)).min(-1)
    assert d.max() < 1e-4
  grid = qdpm.time_grid(64, 1600.0, unit=1.0)
  assert grid[0] == 1600.0 and grid[-1] == 0.0 and np.all(np.diff(grid) < 0)
  u = np.exp(-1.0 / grid[1:-1].astype(np.float64) ** 2)
  np.testing.assert_allclose(np.diff(u), -np.exp(-1 / 1600.0 ** 2) / 64,
                             rtol=1e-3)


# -- baselines ------------------------------------------------------------------------
G0, G1 = sch.GAMMA_MIN_INIT, sch.GAMMA_MAX_INIT


def _vdm_exact_eps_net(levels, log_prior):
  """epshat = (z - alpha E[x | z]) / sigma for the discrete prior."""
  def net(params, z, c):
    del params
    alpha, sigma = sch.vp_alpha_sigma(G0 + c * (G1 - G0))
    xh = qdpm.softround(z / alpha, sigma / alpha, levels, log_prior=log_prior)
    return (z - alpha * xh) / sigma
  return net


def test_vdm_nll_is_tight_with_the_exact_denoiser_samples_and_loss():
  levels = jnp.asarray(images.grid(5, '[-1,1]'))
  reps = 200
  x0 = jnp.repeat(levels, reps)[:, None]
  exact = _vdm_exact_eps_net(levels, jnp.log(P5))

  def net(params, z, c):  # exact when params['a'] = 0
    return exact(None, z, c) + params['a'] * jnp.tanh(z)

  @jit_optimized
  def run(key, params):
    k1, k2, k3 = jax.random.split(key, 3)

    def mean_loss(p):
      total, aux = qdpm.vdm_loss(net, p, x0, k3, levels)
      return total.mean(), (total, aux)
    return (qdpm.vdm_nll(net, params, x0, k1, levels, 256, skip=False),
            qdpm.vdm_sample(net, params, k2, 20_000, 1, levels,
                            num_steps=128, skip=False),
            jax.grad(mean_loss, has_aux=True)(
                qdpm.vdm_init({'a': jnp.float32(0.1)})))

  (est, parts), (x, z0), (grads, (total, aux)) = run(
      jax.random.key(22), qdpm.vdm_init({'a': jnp.float32(0.0)}))
  v, se = _per_state(est, reps)
  klz = _per_state(parts['klz'], reps)[0]
  # Tight up to the prior KL at gamma_max = 5 (<= 0.004 nats) and the
  # decoder at gamma_min = -13.3 (~0).
  np.testing.assert_array_less(np.abs(v + np.log(P5) - klz), 3.5 * se)
  assert np.all(klz < 0.004)
  np.testing.assert_allclose(_per_state(parts['recon'], reps)[0], 0.0,
                             atol=1e-4)
  # Ancestral sampling reproduces the law; z_0 is continuous before decoding.
  assert _tv(x, levels, P5) < 0.025
  assert np.abs(np.asarray(z0) - np.asarray(x)).max() > 1e-4
  # The training loss: its parts add up, and gradients reach the network
  # and both endpoints of the learnable gamma.
  # (to float32 rounding, 1e-5 of the terms' size: XLA may recompute a term
  # inside the sum's fusion, with its own log/exp rounding)
  terms = np.abs(aux['recon']) + np.abs(aux['klz']) + np.abs(aux['diff'])
  np.testing.assert_array_less(
      np.abs(total - (aux['recon'] + aux['klz'] + aux['diff'])),
      1e-5 * terms + 1e-30)
  assert np.all(np.isfinite(total)) and np.all(aux['diff'] >= 0)
  for leaf in jax.tree.leaves(grads):
    assert np.all(np.isfinite(leaf)) and abs(float(leaf)) > 0


def test_plain_ve_nll_with_exact_denoiser_is_near_entropy():
  levels = jnp.asarray(images.grid(5, '[-1,1]'))
  reps = 200
  x0 = jnp.repeat(levels, reps)[:, None]
  log_prior = jnp.log(P5)

  def net(params, x_in, c):  # plain x-pred: inputs x_t/sqrt(1+t^2), log t
    del params
    t = jnp.exp(c)
    return qdpm.softround(x_in / qdpm.input_scale(t), t, levels,
                          log_prior=log_prior)

  @jax.jit
  def run(key):
    k1, k2 = jax.random.split(key)
    return (qdpm.plain_nll(net, None, x0, k1, levels, num_strata=256),
            qdpm.plain_loss(net, None, x0, k2, levels))

  (est, parts), loss = run(jax.random.key(27))
  v, se = _per_state(est, reps)
  e_p = float((P5 * v).sum())
  e_se = float(np.sqrt((P5 ** 2 * se ** 2).sum()))
  # Valid (>= H) and nearly tight: the only gap is the uniform-prior decoder
  # at t_min = 0.2 spacing (mis-decodes ~1% of pixels).
  assert H5 - 3 * e_se <= e_p <= H5 + 0.05, (e_p, H5)
  recon = _per_state(parts['recon'], reps)[0]
  assert np.all(recon > 0) and np.all(recon < 0.05)
  assert loss.shape == (5 * reps,) and np.all(np.isfinite(loss))


def test_preflight_names_a_missing_cifar10_before_any_compute(tmp_path):
  c = qdpm_config.get_config('paper')
  c.data_dir = str(tmp_path)
  with pytest.raises(data.DatasetNotFoundError) as e:
    qdpm_launcher.preflight(c)
  msg = str(e.value)
  assert '\n' not in msg
  assert msg.startswith(f'dataset cifar10 is not prepared in {tmp_path} '
                        '(no cifar10/3.0.2)')
  assert 'tfds build cifar10' in msg and '--config.data_dir' in msg
  assert not list(tmp_path.iterdir())
  c = qdpm_config.get_config(None)  # digits and known_entropy: generated.
  c.data_dir = str(tmp_path / 'tfds')
  qdpm_launcher.preflight(c)
  assert not (tmp_path / 'tfds').exists()


def test_launcher_checks_cifar10_before_it_creates_the_workdir(tmp_path):
  assert_missing_data_stops_early(qdpm_launcher.EXPERIMENT,
                                  qdpm_config.get_config('paper'), tmp_path,
                                  'cifar10')


def _tiny_paper_config(data_dir, net='resmlp', models=('qdpm', 'vdm')):
  """The paper variant (CIFAR-10 from a TFDS folder, 256 levels) with a few
  steps; net 'resmlp' keeps it seconds on CPU, 'unet' is the paper's (the
  smoke launcher test covers VDM's path on the flat net)."""
  c = qdpm_config.get_config('paper')
  c.data_dir, c.net, c.num_seeds = str(data_dir), net, 1
  c.models = tuple(models)
  c.width, c.blocks, c.train_steps, c.batch_size = 16, 1, 2, 4
  c.eval_examples, c.num_strata, c.umc_examples, c.umc_draws = 4, 4, 2, 8
  c.num_samples, c.sample_steps = 2, 2
  c.steps_per_chunk, c.log_every, c.checkpoint_every = 2, 1, 0
  return c


def _check_cifar_run(summary, wd, models=('qdpm', 'vdm')):
  m = summary['metrics']
  for kind in models:
    nll = m[f'nll/cifar10_{kind}']['mean']
    # An untrained model on random 8-bit pixels: a finite bound above the
    # 8 bits of a uniform pixel law, not a tautology of the sampler.
    assert np.isfinite(nll) and nll > 7.0, (kind, nll)
  assert np.isfinite(m['umc_vs_above/cifar10_qdpm']['mean'])
  assert (wd / 'summary.json').exists()


def test_paper_variant_reads_a_fake_cifar10_folder(cifar10_dir):
  c = _tiny_paper_config(cifar10_dir)
  qdpm_launcher.preflight(c)
  train, test, entropy = qdpm_launcher.load_dataset('cifar10', c)
  assert train.shape == (16, 32 * 32 * 3) and test.shape == (8, 3072)
  assert entropy is None and train.min() >= 0 and train.max() <= 255
  assert np.array_equal(train, np.round(train))  # integer levels


@pytest.mark.slow   # a second smoke run at CIFAR-10's shapes (~18 s)
def test_paper_variant_runs_end_to_end_on_a_fake_cifar10(cifar10_dir,
                                                         tmp_path):
  c = _tiny_paper_config(cifar10_dir, models=('qdpm',))
  _check_cifar_run(qdpm_launcher.EXPERIMENT.execute(c, tmp_path / 'run'),
                   tmp_path / 'run', models=('qdpm',))


@pytest.mark.slow
def test_paper_variant_with_its_unet_on_a_fake_cifar10(cifar10_dir, tmp_path):
  c = _tiny_paper_config(cifar10_dir, net='unet')
  _check_cifar_run(qdpm_launcher.EXPERIMENT.execute(c, tmp_path / 'run'),
                   tmp_path / 'run')
