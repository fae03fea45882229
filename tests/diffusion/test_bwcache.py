"""BWCache sampler: indicator, exact schedule rule, equivalence, baselines."""

import collections
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.diffusion import bwcache
from iclrjax.diffusion import dit
from iclrjax.diffusion import flow
from tests.diffusion.conftest import random_params

DEPTH = 2


@pytest.fixture(scope='module')
def setup():
  """A tiny DiT with N(0, 0.1^2) params (its adaLN-zero init outputs 0)."""
  model = dit.DiT(patch=2, width=32, depth=DEPTH, heads=4)
  x1 = jax.random.normal(jax.random.key(0), (8, 8, 8, 1))
  params = random_params(model.init, x1, jnp.zeros(8), seed=1)
  return model, params, x1


def test_indicator_matches_numpy():
  rng = np.random.default_rng(0)
  hs_prev = rng.normal(size=(3, 4, 5, 6)).astype(np.float32)
  hs = hs_prev + 0.1 * rng.normal(size=hs_prev.shape).astype(np.float32)
  per_block = [np.abs(hs[i] - hs_prev[i]).sum() / np.abs(hs_prev[i]).sum()
               for i in range(3)]
  np.testing.assert_allclose(bwcache.rel_l1(hs[1], hs_prev[1]), per_block[1],
                             rtol=1e-5)
  np.testing.assert_allclose(bwcache.indicator(hs, hs_prev),
                             np.mean(per_block), rtol=1e-5)
  np.testing.assert_allclose(bwcache.indicator(hs, hs_prev, blocks=(0, 2)),
                             (per_block[0] + per_block[2]) / 2, rtol=1e-5)
  # Hand-checkable: |1.1 - 1| / |1| = 0.1 and |-3 - (-2)| / |-2| = 0.5.
  np.testing.assert_allclose(
      bwcache.indicator(jnp.array([[1.1, 1.1], [-3.0, -3.0]]),
                        jnp.array([[1.0, 1.0], [-2.0, -2.0]])), 0.3,
      rtol=1e-6)


def test_schedule_rule_in_python():
  """The counting rule (delta = inf) on small cases, by hand."""
  # T = 10, R = 2: trigger at k = 1, horizon e = 1 + (10 - 1 - 1) // 2 = 5;
  # skip 2, 3; compute 4 (trigger); skip 5; 6 is past e: compute 6..9.
  np.testing.assert_array_equal(
      bwcache.expected_computed_steps(10, 2).astype(int),
      [1, 1, 0, 0, 1, 0, 1, 1, 1, 1])
  # R = 3: skip 2, 3, 4; compute 5 (= e, so it cannot trigger); 6..9.
  np.testing.assert_array_equal(
      bwcache.expected_computed_steps(10, 3).astype(int),
      [1, 1, 0, 0, 0, 1, 1, 1, 1, 1])
  # The pilot's T = 50 counts (180 and 204 evals at N = 6).
  assert bwcache.expected_computed_steps(50, 5).sum() == 30
  assert bwcache.expected_computed_steps(50, 2).sum() == 34
  # No trigger before step 4: k = 4, e = 4 + 5 // 2 = 6: skip 5, 6.
  np.testing.assert_array_equal(
      bwcache.expected_computed_steps(10, 2, lambda k: k >= 4).astype(int),
      [1, 1, 1, 1, 1, 0, 0, 1, 1, 1])
  assert bwcache.expected_computed_steps(10, 0).all()  # R = 0: no reuse


def test_delta_zero_equals_uncached(setup):
  model, params, x1 = setup
  T = 10
  ref = bwcache.reference_sample(model, params, x1, T)
  res = bwcache.make_sampler(model, T)(params, x1, 0.0, 2)
  assert int(ref.block_evals) == int(res.block_evals) == T * DEPTH
  assert np.all(np.asarray(res.computed)) and not np.any(res.triggered)
  # Same arithmetic; bitwise equal on the dev machine, but XLA may fuse the
  # cond branch differently from the inlined uncached body, so allow float32
  # rounding (a width-64 model differed by ~1e-7, PSNR 146 dB).
  np.testing.assert_allclose(res.samples, ref.samples, atol=1e-6, rtol=0)
  np.testing.assert_allclose(res.indicator, ref.indicator, rtol=1e-6)
  assert np.isnan(ref.indicator[0]) and np.all(ref.indicator[1:] > 0)
  # And the uncached pieces sampler is plain Euler on model.apply.
  plain = jax.jit(lambda p, x: flow.euler_sample(
      lambda x, t: model.apply(p, x, t), x, T))(params, x1)
  np.testing.assert_allclose(ref.samples, plain, atol=1e-5, rtol=1e-5)
  assert np.abs(np.asarray(ref.samples - x1)).max() > 0.1  # non-trivial


def test_delta_inf_follows_schedule_rule(setup):
  model, params, x1 = setup
  f10 = bwcache.make_sampler(model, 10)
  res = f10(params, x1, jnp.inf, 2)
  np.testing.assert_array_equal(np.asarray(res.computed).astype(int),
                                [1, 1, 0, 0, 1, 0, 1, 1, 1, 1])
  np.testing.assert_array_equal(np.asarray(res.triggered).astype(int),
                                [0, 1, 0, 0, 1, 0, 0, 0, 0, 0])
  assert int(res.block_evals) == 7 * DEPTH
  ind = np.asarray(res.indicator)
  np.testing.assert_array_equal(np.isnan(ind), ~np.asarray(res.computed) |
                                (np.arange(10) == 0))
  for T, f in ((10, f10), (50, bwcache.make_sampler(model, 50))):
    for R in (1, 2, 3, 5):
      res = f(params, x1, jnp.inf, R)
      expected = bwcache.expected_computed_steps(T, R)
      np.testing.assert_array_equal(res.computed, expected)
      assert int(res.block_evals) == expected.sum() * DEPTH
  assert int(f(params, x1, jnp.inf, 5).block_evals) == 30 * DEPTH


def _python_bwcache(model, params, x1, T, delta, R):
  """Independent re-implementation: a Python loop over jitted pieces."""
  embed, block, final = dit.pieces(model, params)
  embed = jax.jit(embed)
  block = jax.jit(block, static_argnums=2)
  final = jax.jit(final, static_argnums=2)
  hwc = x1.shape[-3:]
  ts = np.asarray(flow.time_grid(T))
  x, prev, h_cache = x1, None, None
  skip_left, horizon, first_done = 0, -1, False
  computed, ind_all, evals = [], [], 0
  for s in range(T):
    h, cond = embed(x, ts[s])
    if skip_left > 0 and s <= horizon:  # reuse: blocks skipped
      skip_left -= 1
      out = final(h_cache, cond, hwc)
      computed.append(False)
      ind_all.append(np.nan)
    else:
      hs = []
      for i in range(DEPTH):
        h = block(h, cond, i)
        hs.append(np.asarray(h))
      evals += DEPTH
      ind = np.nan
      if prev is not None:
        ind = np.mean([np.abs(hs[i] - prev[i]).sum() / np.abs(prev[i]).sum()
                       for i in range(DEPTH)])
      e = horizon if first_done else s + (T - 1 - s) // 2
      if prev is not None and ind < delta and s < e:
        horizon, first_done, skip_left = e, True, R
      else:
        skip_left = 0
      prev, h_cache = hs, h
      out = final(h, cond, hwc)
      computed.append(True)
      ind_all.append(ind)
    x = x + (ts[s + 1] - ts[s]) * out
  return np.asarray(x), evals, np.array(computed), np.array(ind_all)


def test_matches_python_loop_with_data_dependent_triggers(setup):
  model, params, x1 = setup
  T, R = 16, 2
  curve = np.asarray(bwcache.reference_sample(model, params, x1,
                                              T).indicator[1:])
  delta = float(np.quantile(curve, 0.4))  # some steps trigger, some not
  x, evals, computed, ind = _python_bwcache(model, params, x1, T, delta, R)
  assert 0 < (~computed).sum() < T // 2  # reuse happened, not always
  ok = ~np.isnan(ind)
  assert np.min(np.abs(ind[ok] - delta)) > 1e-4  # decisions are robust
  res = bwcache.make_sampler(model, T)(params, x1, delta, R)
  np.testing.assert_array_equal(res.computed, computed)
  assert int(res.block_evals) == evals
  np.testing.assert_allclose(res.indicator, ind, rtol=1e-4)
  np.testing.assert_allclose(res.samples, x, atol=1e-5, rtol=1e-5)


def test_ddim_sampler_path(setup):
  model, params, x1 = setup
  T = 10
  f = bwcache.make_sampler(model, T, sampler='ddim', indicator_blocks=(1,))
  res0 = f(params, x1, 0.0, 2)
  plain = jax.jit(lambda p, x: flow.ddim_sample(
      lambda x, t: model.apply(p, x, t), x, T))(params, x1)
  np.testing.assert_allclose(res0.samples, plain, atol=1e-4, rtol=1e-4)
  assert int(res0.block_evals) == T * DEPTH
  assert int(f(params, x1, jnp.inf, 2).block_evals) == 7 * DEPTH


def test_psnr_and_sweep(setup):
  model, params, x1 = setup
  a = np.zeros((2, 4))
  b = a + 0.1  # MSE 0.01 -> 10 log10(4 / 0.01)
  assert bwcache.psnr(a, b) == pytest.approx(10 * np.log10(400.0))
  assert bwcache.psnr(a, b, data_range=1.0) == pytest.approx(20.0)
  b[1] = 0.2  # per-image: mean of 26.02 and 20.0 dB
  assert bwcache.psnr(a, b, per_image=True) == pytest.approx(
      (10 * np.log10(400.0) + 10 * np.log10(100.0)) / 2)
  assert bwcache.psnr(a, a) == np.inf
  assert bwcache.equal_compute_steps(198, 6) == 33
  out = bwcache.delta_sweep(model, params, x1, 10, [0.0, np.inf],
                            reuse_steps=(2,))
  assert out['reference']['block_evals'] == 10 * DEPTH
  assert out['reference']['indicator'].shape == (10,)
  never, always = out['rows']
  assert never['block_evals'] == 10 * DEPTH and never['psnr'] == np.inf
  assert never['uniform_steps'] == 10 and never['uniform_psnr'] == np.inf
  assert always['block_evals'] == 7 * DEPTH
  assert always['speedup'] == pytest.approx(10 / 7)
  assert always['reuse_fraction'] == pytest.approx(0.3)
  assert always['uniform_steps'] == 7
  assert always['uniform_block_evals'] == 7 * DEPTH
  assert np.isfinite(always['psnr']) and np.isfinite(always['uniform_psnr'])


@pytest.fixture(scope='module')
def cond_setup():
  """A tiny class-conditional DiT (3 classes + null), random params."""
  model = dit.DiT(patch=2, width=32, depth=DEPTH, heads=4, num_classes=3)
  x1 = jax.random.normal(jax.random.key(0), (6, 8, 8, 1))
  y = jnp.array([0, 1, 2, 0, 1, 2])
  params = random_params(model.init, x1, jnp.zeros(6), y, seed=2)
  return model, params, x1, y


def test_cfg_sampler_is_guided_euler(cond_setup):
  """Uncached CFG sampling = Euler on out_u + w (out_c - out_u) computed
  with two separate model calls; w = 1 is the conditional model."""
  model, params, x1, y = cond_setup
  T = 6
  f = bwcache.make_sampler(model, T, cache=False)
  for w in (0.0, 1.0, 2.5):
    def vel(x, t, w=w):
      c = model.apply(params, x, t, y)
      u = model.apply(params, x, t, None)  # None: the null label
      return u + w * (c - u)
    plain = jax.jit(lambda x: flow.euler_sample(vel, x, T))(x1)
    res = f(params, x1, 0.0, 0, y, w)
    np.testing.assert_allclose(res.samples, plain, atol=2e-5, rtol=1e-5)
  cond_only = jax.jit(lambda x: flow.euler_sample(
      lambda x, t: model.apply(params, x, t, y), x, T))(x1)
  np.testing.assert_allclose(f(params, x1, 0.0, 0, y, 1.0).samples,
                             cond_only, atol=2e-5, rtol=1e-5)
  # guidance None: the conditional model alone, one pass (no null half).
  np.testing.assert_allclose(f(params, x1, 0.0, 0, y).samples, cond_only,
                             atol=2e-5, rtol=1e-5)
  # The blocks see the doubled batch: caching works on it like on any batch.
  res = bwcache.make_sampler(model, T)(params, x1, jnp.inf, 1, y, 2.0)
  np.testing.assert_array_equal(res.computed,
                                bwcache.expected_computed_steps(T, 1))
  with pytest.raises(ValueError, match='unconditional'):
    bwcache.sample(dit.DiT(patch=2, width=32, depth=DEPTH, heads=4), params,
                   x1, T, labels=y)


def test_max_triggers_gives_the_schedule_only_ablation(setup):
  model, params, x1 = setup
  T, R = 20, 2
  f = bwcache.make_sampler(model, T)
  for n in (0, 1, 2, 3, 100):
    count = [0]

    def first_n(k, n=n):
      del k
      count[0] += 1
      return count[0] <= n  # called once per computed step that may trigger

    # The Python rule with "trigger while fewer than n windows".
    expected = bwcache.expected_computed_steps(T, R, first_n)
    res = f(params, x1, jnp.inf, R, None, 1.0, n)
    np.testing.assert_array_equal(res.computed, expected)
    unlimited = int(np.sum(f(params, x1, jnp.inf, R).triggered))
    assert int(np.sum(res.triggered)) == min(n, unlimited)
  # max_triggers=None: no limit (the plain delta = inf schedule).
  np.testing.assert_array_equal(f(params, x1, jnp.inf, R).computed,
                                bwcache.expected_computed_steps(T, R))


def _opened(T, R, mask):
  """The steps that open a window under the Python schedule rule when a
  window may open only where mask is True."""
  opened = []
  bwcache.expected_computed_steps(
      T, R, lambda k: bool(mask[k]) and (opened.append(k) or True))
  return opened


def test_random_placement_is_uniform_over_the_schedules_placements():
  T, R = 12, 2
  for m in range(4):
    # Every set of m steps that the rule opens exactly (brute force).
    valid = {c for c in itertools.combinations(range(T), m)
             if _opened(T, R, np.isin(np.arange(T), c)) == list(c)}
    assert bwcache.num_placements(T, R, m) == len(valid)
  # T = 50, R = 5 (the default run's (iii)): counted by brute force too.
  assert bwcache.num_placements(50, 5, 2) == sum(
      _opened(50, 5, np.isin(np.arange(50), c)) == list(c)
      for c in itertools.combinations(range(50), 2))
  rng = np.random.default_rng(0)
  draws = collections.Counter(
      tuple(np.flatnonzero(bwcache.random_placement(rng, T, R, 2)))
      for _ in range(4000))
  assert len(draws) == bwcache.num_placements(T, R, 2) == 4
  assert min(draws.values()) > 900  # 1000 each when uniform (SD 27)
  # At most 2 windows fit (delta = inf opens 1 and 4; 7 is past e = 6).
  assert _opened(T, R, np.ones(T, bool)) == [1, 4]
  with pytest.raises(ValueError, match='allows at most 2; lower num_windows'):
    bwcache.random_placement(rng, T, R, 3)


def test_open_at_opens_exactly_the_random_placement(setup):
  model, params, x1 = setup
  T, R = 20, 2
  f = bwcache.make_sampler(model, T)
  rng = np.random.default_rng(1)
  for m in (1, 2, 3):
    mask = bwcache.random_placement(rng, T, R, m)
    res = f(params, x1, jnp.inf, R, None, 1.0, m, mask)
    np.testing.assert_array_equal(res.triggered, mask)
    np.testing.assert_array_equal(
        res.computed, bwcache.expected_computed_steps(
            T, R, lambda k, mask=mask: bool(mask[k])))
    assert int(res.block_evals) == DEPTH * int(np.sum(res.computed))
  with pytest.raises(ValueError, match='open_at must be bool of shape'):
    f(params, x1, jnp.inf, R, None, 1.0, 1, np.ones(T - 1, bool))
  with pytest.raises(ValueError, match='open_at must be bool'):
    f(params, x1, jnp.inf, R, None, 1.0, 1, np.ones(T, np.float32))
  # Matched block evaluations: only the last window can be cut at the
  # horizon, so 2 windows of R = 2 skip 3 or 4 steps; every draw with
  # skipped=3 skips 3, and all such placements are reached.
  cut = {tuple(np.flatnonzero(bwcache.random_placement(rng, T, R, 2,
                                                       skipped=3)))
         for _ in range(300)}
  for c in cut:
    mask = np.isin(np.arange(T), c)
    assert T - bwcache.expected_computed_steps(
        T, R, lambda k, mask=mask: bool(mask[k])).sum() == 3
  assert len(cut) == sum(
      T - bwcache.expected_computed_steps(
          T, R, lambda k, c=c: k in c).sum() == 3
      for c in itertools.combinations(range(T), 2)
      if _opened(T, R, np.isin(np.arange(T), c)) == list(c))
  with pytest.raises(ValueError, match='skipping 5 steps'):
    bwcache.random_placement(rng, T, R, 2, skipped=5, max_tries=50)


def test_converged_reference_and_sweep_scores(setup):
  model, params, x1 = setup
  ref = bwcache.converged_reference(model, params, x1, 40)
  heun = jax.jit(lambda x: flow.sample(
      lambda x, t: model.apply(params, x, t), x, 40, method='heun'))(x1)
  np.testing.assert_allclose(ref, heun, atol=1e-5, rtol=1e-5)
  # reference_error: PSNR of the reference at half its steps against it
  # (Heun's convergence order is tested in test_flow on closed forms).
  half = bwcache.converged_reference(model, params, x1, 20)
  assert bwcache.reference_error(model, params, x1, 40) == pytest.approx(
      bwcache.psnr(half, ref))
  ddim = bwcache.converged_reference(model, params, x1, 12, sampler='ddim')
  np.testing.assert_allclose(
      ddim, bwcache.reference_sample(model, params, x1, 12,
                                     sampler='ddim').samples, atol=1e-6)
  out = bwcache.delta_sweep(
      model, params, x1, 10, [0.0, np.inf], reuse_steps=(2,), reference=ref,
      score_fn=lambda s: {'mean': float(jnp.mean(s))}, schedule_control=True)
  never, always = out['rows']
  assert out['reference']['psnr_ref'] == pytest.approx(
      bwcache.psnr(bwcache.reference_sample(model, params, x1, 10).samples,
                   ref))
  assert never['psnr_ref'] == pytest.approx(out['reference']['psnr_ref'])
  assert never['triggers'] == 0 and never['sched_block_evals'] == 10 * DEPTH
  # delta = inf: the schedule-only control is the same run.
  assert always['triggers'] == 2
  assert always['sched_block_evals'] == always['block_evals']
  assert always['sched_psnr_ref'] == pytest.approx(always['psnr_ref'])
  assert always['sched_mean'] == pytest.approx(always['mean'])
  assert {'uniform_psnr_ref', 'uniform_mean', 'mean'} <= set(always)


# -- the paper variant: CIFAR-10 from a TFDS folder ---------------------------------------
def _tiny_paper_config(data_dir):
  """The paper variant's data path (32x32x3 CIFAR-10, class-conditional
  cfg case, random-conv FD) at a few steps of a tiny DiT."""
  from configs import bwcache as bwcache_config  # pylint: disable=g-import-not-at-top
  c = bwcache_config.get_config('paper')
  c.data_dir, c.num_seeds, c.cases = str(data_dir), 1, ('cfg',)
  c.width, c.depth, c.heads, c.patch = 16, 2, 2, 8
  c.train_steps, c.batch_size, c.steps_per_chunk, c.log_every = 2, 4, 2, 1
  c.num_steps, c.headline_steps = (4,), 4
  c.deltas, c.headline_delta, c.binding_delta = (0.05, 0.15), 0.15, 0.05
  c.reference_steps, c.ddim_reference_steps = 4, 4
  c.timing_repeats, c.num_samples, c.checkpoint_every = 1, 4, 0
  return c


def test_paper_variant_reads_a_fake_cifar10(cifar10_dir):
  from experiments import bwcache as bwcache_exp  # pylint: disable=g-import-not-at-top
  c = _tiny_paper_config(cifar10_dir)
  bwcache_exp.EXPERIMENT.validate(c)
  train_x, train_y, test_x = bwcache_exp.load_data(c)
  assert train_x.shape == (16, 32, 32, 3) and test_x.shape == (8, 32, 32, 3)
  assert float(train_x.min()) >= -1 and float(train_x.max()) <= 1
  assert train_y.dtype == jnp.int32 and int(train_y.max()) < 10


@pytest.mark.slow   # a second smoke run at CIFAR-10's shapes (~15 s)
def test_paper_variant_runs_end_to_end_on_a_fake_cifar10(cifar10_dir,
                                                         tmp_path):
  from experiments import bwcache as bwcache_exp  # pylint: disable=g-import-not-at-top
  c = _tiny_paper_config(cifar10_dir)
  summary = bwcache_exp.EXPERIMENT.execute(c, tmp_path / 'run')
  m = summary['metrics']
  fd = [v['mean'] for k, v in m.items() if k.startswith('fd/')]
  assert fd and np.all(np.isfinite(fd)) and min(fd) > 0
  assert 'classifier_test_accuracy' not in m
  assert not any(k.startswith('acc/') for k in m)   # no CIFAR classifier


def test_paper_variant_names_a_missing_cifar10_before_any_compute(tmp_path):
  from configs import bwcache as bwcache_config  # pylint: disable=g-import-not-at-top
  from experiments import bwcache as bwcache_exp  # pylint: disable=g-import-not-at-top
  from tests.conftest import assert_missing_data_stops_early  # pylint: disable=g-import-not-at-top
  assert_missing_data_stops_early(bwcache_exp.EXPERIMENT,
                                  bwcache_config.get_config('paper'),
                                  tmp_path, 'cifar10')


# -- the claims' rules on made-up metrics ------------------------------------------------
def _metrics_like_the_default_run():
  """Per-seed metrics with every name the default run records (values
  irrelevant until a test sets them): BWCache, uniform, the schedule-only
  and the random placement all 30 dB from converged, FD 1.05."""
  from configs import bwcache as bwcache_config  # pylint: disable=g-import-not-at-top
  from experiments import bwcache as bw_exp  # pylint: disable=g-import-not-at-top
  cfg = bwcache_config.get_config()
  m = {}
  for case in cfg.cases:
    for T in set(cfg.num_steps) | {cfg.headline_steps}:
      tag = bw_exp._tag(case, T)  # pylint: disable=protected-access
      R = bw_exp.reuse_steps(cfg.headline_reuse_fraction, T)
      m.update({f'uncached_psnr_ref/{tag}': np.full(3, 40.0),
                f'uncached_fd/{tag}': np.full(3, 1.0),
                f'maxreuse_speedup/{tag}': np.full(3, 5.0),
                f'maxreuse_fd/{tag}': np.full(3, 3.0)})
      for d in set(cfg.deltas) | {cfg.headline_delta, cfg.binding_delta}:
        key = bw_exp._key(case, T, d, R)  # pylint: disable=protected-access
        evals = 0.6 * T * cfg.depth
        for pre in ('', 'uniform_', 'sched_', 'rand_'):
          m.update({f'{pre}psnr_ref/{key}': np.full(3, 30.0),
                    f'{pre}fd/{key}': np.full(3, 1.05),
                    f'{pre}block_evals/{key}': np.full(3, evals)})
        m.update({f'speedup/{key}': np.full(3, T * cfg.depth / evals),
                  f'rand_psnr_ref_sd/{key}': np.full(3, 0.5),
                  f'uniform_steps/{key}': np.full(3, 0.6 * T),
                  f'triggers/{key}': np.full(3, 2.0 if d == cfg.binding_delta
                                             else 4.0)})
  return cfg, m


def test_claim_rules_and_their_measured_controls():
  from experiments import bwcache as bw_exp  # pylint: disable=g-import-not-at-top
  cfg, m = _metrics_like_the_default_run()
  case, T = cfg.cases[0], cfg.headline_steps
  R = bw_exp.reuse_steps(cfg.headline_reuse_fraction, T)
  key = bw_exp._key(case, T, cfg.headline_delta, R)  # pylint: disable=protected-access

  def claim(prefix):
    (c,) = [c for c in bw_exp.evaluate_claims(cfg, m)
            if c.claim.startswith(prefix)]
    return c

  head = f'[{case}] BWCache at the paper'
  pair = f'[{case}, T = {T}] BWCache'
  # BWCache below uniform on every seed, the schedule-only placement not:
  m[f'uniform_fd/{key}'] = np.array([1.08, 1.09, 1.07])
  m[f'sched_fd/{key}'] = np.array([1.2, 1.1, 1.3])
  m[f'psnr_ref/{key}'] = np.full(3, 31.0)
  m[f'sched_psnr_ref/{key}'] = np.array([29.0, 30.5, 29.5])
  assert claim(head).holds and claim(head).control.endswith('(fails)')
  assert claim(pair).holds and claim(pair).control.endswith('(fails)')
  # The control is measured: the schedule alone doing as well passes it.
  m[f'sched_fd/{key}'] = np.full(3, 1.05)
  m[f'sched_psnr_ref/{key}'] = np.full(3, 31.0)
  assert claim(head).control.endswith('(passes)'), claim(head)
  assert claim(pair).control.endswith('(passes)'), claim(pair)
  # One seed where uniform steps win decides (i) and (ii).
  m[f'uniform_fd/{key}'] = np.array([1.08, 1.0, 1.07])
  m[f'uniform_psnr_ref/{key}'] = np.array([30.0, 31.5, 30.0])
  assert not claim(head).holds and not claim(pair).holds
  # The convergence gate: an unconverged uncached sampler compares nothing.
  m[f'uniform_fd/{key}'] = np.array([1.08, 1.09, 1.07])
  m[f'uniform_psnr_ref/{key}'] = np.full(3, 30.0)
  assert claim(head).holds
  m[f'uncached_psnr_ref/{bw_exp._tag(case, T)}'] = np.array(  # pylint: disable=protected-access
      [40.0, cfg.min_uncached_psnr - 0.1, 40.0])
  assert not claim(head).holds and 'NOT COMPARED' in claim(head).evidence
  assert not claim(pair).holds and claim(pair).control.endswith('(fails)')
  # (iii): fewer windows than the schedule's maximum at (T, R), counted from
  # the schedule rule (4 at T = 50, R = 5), and closer than the schedule-only
  # placement on every seed.
  m[f'uncached_psnr_ref/{bw_exp._tag(case, T)}'] = np.full(3, 40.0)  # pylint: disable=protected-access
  opened = []
  bwcache.expected_computed_steps(T, R, lambda k: opened.append(k) or True)
  assert bw_exp.schedule_max_windows(T, R) == len(opened) == 4
  binds = f'[{case}, T = {T}] delta binds'
  bkey = bw_exp._key(case, T, cfg.binding_delta, R)  # pylint: disable=protected-access
  m[f'psnr_ref/{bkey}'] = np.full(3, 31.0)
  m[f'sched_psnr_ref/{bkey}'] = np.array([30.0, 30.5, 29.5])
  m[f'triggers/{bkey}'] = np.full(3, 2.0)
  assert claim(binds).holds and 'schedule maximum 4)' in claim(binds).evidence
  assert claim(binds).control.endswith('(fails)')
  # The control is measured: random placement beating the schedule-only one
  # on every seed passes it (the indicator would not be what wins).
  m[f'rand_psnr_ref/{bkey}'] = np.array([30.2, 30.6, 29.7])
  assert claim(binds).control.endswith('(passes)'), claim(binds)
  assert 'BWCache minus random per seed [0.8, 0.4, 1.3]' in (
      claim(binds).evidence)
  m[f'triggers/{bkey}'] = np.full(3, 4.0)   # delta does not bind: both fail
  assert not claim(binds).holds and claim(binds).control.endswith('(fails)')
  m[f'triggers/{bkey}'] = np.full(3, 2.0)
  m[f'rand_psnr_ref/{bkey}'] = np.array([30.2, 30.4, 29.7])  # one seed
  assert claim(binds).control.endswith('(fails)')
  m[f'triggers/{bkey}'] = np.full(3, 4.0)       # as many as the schedule
  assert not claim(binds).holds
  m[f'triggers/{bkey}'] = np.full(3, 2.0)
  m[f'sched_psnr_ref/{bkey}'] = np.array([30.0, 31.5, 29.5])  # one seed
  assert not claim(binds).holds
