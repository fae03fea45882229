"""Short versions of the QDPM and BWCache claims (the full runs are `slow`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import bwcache as bwcache_config
from configs import qdpm as qdpm_config
from experiments import qdpm as qdpm_exp
from iclrjax.core import loop
from iclrjax.diffusion import bwcache
from iclrjax.diffusion import dit
from iclrjax.diffusion import flow
from tests.conftest import OPTIMIZED
from tests.conftest import find_claim
from tests.conftest import smoke_summary


def test_bpd_standard_error_is_sd_over_root_n():
  import scipy.stats  # pylint: disable=g-import-not-at-top
  from iclrjax.diffusion import likelihood  # pylint: disable=g-import-not-at-top
  nats = np.random.default_rng(0).normal(100.0, 5.0, size=50)
  m, se = qdpm_exp._bpd(likelihood.Estimate(nats, None), 64)  # pylint: disable=protected-access
  bits = nats / (64 * np.log(2.0))
  np.testing.assert_allclose([m, se], [bits.mean(), scipy.stats.sem(bits)],
                             rtol=1e-12)
  assert qdpm_exp._bpd(likelihood.Estimate(nats[:1], None), 64)[1] == 0.0  # pylint: disable=protected-access


def test_qdpm_below_vdm_in_the_smoke_run():
  """The first claim in small, as the experiment judges it: the launcher's
  smoke run (the shared run of tests/test_launchers.py; 10 steps of a
  32-wide MLP, 16 known-entropy test images) measured QDPM 3.75 (SE 0.23)
  vs VDM 11.03 (SE 0.19) bpd. QDPM starts at the softround bound log2 17 =
  4.09 bpd; VDM must learn the rounding posterior itself (at 100 steps of a
  128-wide MLP on digits: 2.91 vs 9.47). At this size the claim's control
  passes too (the softround-only model, 4.09, beats the untrained VDM); it
  fails only once VDM has trained (the 8000-step default run, where the
  control is the literal gate: 3.29 / 3.53 vs VDM 2.87 / 2.97,
  test_qdpm_default_claims)."""
  s = smoke_summary('qdpm')
  c = find_claim(s, 'QDPM with our grid gate exp(-(s/t)^2), s the grid '
                 'spacing: test NLL below')
  assert c['holds'], c
  m = {k: v['mean'] for k, v in s['metrics'].items()}
  q, q_se = m['nll/known_entropy_qdpm'], m['nll_se/known_entropy_qdpm']
  v, v_se = m['nll/known_entropy_vdm'], m['nll_se/known_entropy_vdm']
  assert q + 3 * q_se < v - 3 * v_se, (q, q_se, v, v_se)
  assert q > 1.0, q  # Below ~1 bpd would refute the evaluation.


@pytest.fixture(scope='module')
def small_flow_dit():
  model = dit.DiT(patch=2, width=32, depth=4, heads=4)
  c = dict(batch_size=32, learning_rate=1e-3, ema_decay=0.999,
           objective='flow')
  train_x = flow.digits('train')
  init, step = flow.make_trainer(model, train_x, c)
  res = loop.train(init, step, seed=0, num_seeds=1, num_steps=200,
                   chunk_size=200, progress=False, data=train_x,
                   compiler_options=OPTIMIZED)
  return model, jax.tree.map(lambda a: a[0], res.state.ema)


def test_bwcache_claims_in_small(small_flow_dit):
  """Claims (i)-(ii) in small (a 32-wide DiT, 200 steps at batch 32, 32
  noises), scored against the converged solution (200 Heun steps, 89 dB
  from 100 when measured; not re-checked here: the run records it as
  `ref_convergence_db`). The uncached 50-step sampler passes the run's convergence
  gate (>= 30 dB; 50 dB); the paper's defaults (delta 0.15, R = 10% of T
  = 50) save >= 1.5x block evaluations (1.67x); the maximal-reuse schedule
  (delta inf, R = T; 1.92x) loses far more than BWCache (33 vs 42 dB); and
  fewer uniform steps at BWCache's budget beat it (49 dB), as in the
  default run (flow, T = 50: 39.9 vs 33.8 dB). At batch 64: 54 dB, 1.67x,
  26 vs 41 dB, 49 dB; at 300 steps (64 noises): 51 dB, 1.61x, 24 vs 38 dB,
  46 dB."""
  model, params = small_flow_dit
  noise = jax.random.normal(jax.random.key(1), (32, 8, 8, 1))
  ref = bwcache.converged_reference(model, params, noise, 200)
  out = bwcache.delta_sweep(model, params, noise, 50, deltas=(0.15,),
                            reuse_steps=(5,), reference=ref)
  head, uncached = out['rows'][0], out['reference']['psnr_ref']
  assert uncached >= bwcache_config.get_config().min_uncached_psnr, uncached
  assert head['speedup'] >= 1.5, head
  ctl = bwcache.make_sampler(model, 50)(params, noise, jnp.inf, 50)
  ctl_psnr = bwcache.psnr(ctl.samples, ref)
  assert 50 * model.depth / int(ctl.block_evals) > head['speedup']
  assert ctl_psnr < head['psnr_ref'] - 5, (ctl_psnr, head)
  assert head['uniform_psnr_ref'] > head['psnr_ref'] + 2, head


# -- full default runs (slow) --------------------------------------------------------
def _by_prefix(summary, prefix):
  hits = [c for c in summary['claims'] if c['claim'].startswith(prefix)]
  assert len(hits) == 1, (prefix, [c['claim'] for c in summary['claims']])
  return hits[0]


@pytest.fixture(scope='module')
def qdpm_default(tmp_path_factory):
  from experiments.qdpm import EXPERIMENT  # pylint: disable=g-import-not-at-top
  return EXPERIMENT.execute(qdpm_config.get_config(),
                            tmp_path_factory.mktemp('qdpm') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('prefix', [
    'QDPM with our grid gate exp(-(s/t)^2), s the grid spacing: test NLL '
    'below', 'QDPM with our grid gate exp(-(s/t)^2), s the grid spacing: test '
    'NLL on the known-entropy', 'Estimator sanity'])
def test_qdpm_default_claims(qdpm_default, prefix):
  # Measured (default config at a4e85c9, 2 seeds, 8000 steps): test NLL
  # digits QDPM (grid gate) 2.132 < VDM 2.868, known-entropy set (H = 2.012)
  # 2.269 (gap +0.257 <= 0.3) < VDM 2.969; all >= H - 3 SE. Controls: the
  # literal gate 3.291 / 3.529 (fails both), Eq. 22 without its constant
  # -1.819 bpd (below H: fails).
  c = _by_prefix(qdpm_default, prefix)
  assert c['holds'], c
  assert '(fails)' in c['control'], c


@pytest.mark.slow
def test_qdpm_default_mass_below_the_u_mc_floor(qdpm_default):
  # Not a claim (it holds by construction, test_qdpm.py), but the run's u-MC
  # numbers rest on it: the trained model's bound below float32's floor is
  # the softround-only model's closed form on the same examples (0.167 bpd;
  # the run at a4e85c9: 0.176 / 0.171); float64's floor loses 16x less
  # (0.010; the run: 0.011 / 0.017).
  from iclrjax.diffusion import likelihood as lik  # pylint: disable=g-import-not-at-top
  from iclrjax.diffusion import qdpm  # pylint: disable=g-import-not-at-top
  cfg = qdpm_config.get_config()
  x = qdpm_exp.load_dataset('known_entropy', cfg)[1][:cfg.umc_examples].astype(
      int)
  exact = qdpm.softround_bound_below(lik.u_mc_floor(1.0), 17)[x].sum(-1).mean(
  ) / (x.shape[1] * np.log(2))
  m = qdpm_default['metrics']
  per_seed = lambda k: np.asarray(m[f'{k}/known_entropy_qdpm']['per_seed'])
  above32, above64 = per_seed('quad_above'), per_seed('quad_above64')
  lost32 = per_seed('quad_sub') - above32
  assert np.all(np.abs(lost32 - exact) < 0.03), (lost32, exact)
  assert np.all(above64 - above32 > 0.1), (above32, above64)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'QDPM with the literal gate exp(-1/t^2) on [-1, 1] data (default config '
    'at a4e85c9): digits 3.291 vs VDM 2.868, known-entropy 3.529 vs 2.969 '
    'bpd: the gate keeps the correction off below ~3 grid steps'))
def test_qdpm_default_literal_gate_beats_vdm(qdpm_default):
  c = _by_prefix(qdpm_default, 'QDPM as the paper writes it')
  assert '(fails)' in c['control'], c
  assert c['holds'], c


@pytest.fixture(scope='module')
def bwcache_default(tmp_path_factory):
  from experiments.bwcache import EXPERIMENT  # pylint: disable=g-import-not-at-top
  return EXPERIMENT.execute(bwcache_config.get_config(),
                            tmp_path_factory.mktemp('bwcache') / 'run')


def _xf(reason):
  return pytest.mark.xfail(strict=True, reason=reason)


# Measured: default config at 9890ce9 (3 seeds; results/bwcache, 52 min):
# 0 of 12 hold, every control fails (the "delta binds" rows' control is the
# random placement with BWCache's windows and block evaluations). Decisive failures (every seed the same sign, pinned as strict
# xfails); marginal ones (vp_v T = 20, the cfg and vp_v "delta binds" rows)
# are not pinned: only their controls are checked.
_BWCACHE_ALL = [f'[{c}] BWCache at' for c in ('flow', 'cfg', 'vp_v')] + [
    f'[{c}, T = {t}] BWCache' for c in ('flow', 'cfg', 'vp_v')
    for t in (20, 50)] + [f'[{c}, T = 50] delta binds'
                          for c in ('flow', 'cfg', 'vp_v')]


@pytest.mark.slow
@pytest.mark.parametrize('prefix', _BWCACHE_ALL)
def test_bwcache_default_controls_fail(bwcache_default, prefix):
  c = _by_prefix(bwcache_default, prefix)
  assert c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.parametrize('prefix', [
    pytest.param('[flow] BWCache at', marks=_xf(
        'FD 18.08 vs uniform 30 steps 15.91 (seeds 16.97/18.35/18.91 vs '
        '14.76/16.10/16.85) and +17.1% over uncached')),
    pytest.param('[cfg] BWCache at', marks=_xf(
        'FD 13.80 vs uniform 30 steps 13.41 on every seed (13.39/13.62/14.38 '
        'vs 13.00/13.08/14.15)')),
    pytest.param('[vp_v] BWCache at', marks=_xf(
        'FD 16.93 vs uniform 31 steps 15.46 on every seed; +11.9% over '
        'uncached')),
    pytest.param('[flow, T = 20]', marks=_xf(
        'per seed -2.31, -2.92, -2.54 dB vs 14 uniform steps')),
    pytest.param('[flow, T = 50] BWCache', marks=_xf(
        'per seed -6.20, -6.42, -6.03 dB vs 30 uniform steps')),
    pytest.param('[cfg, T = 20]', marks=_xf(
        'per seed -1.10, -1.23, -0.57 dB vs 14 uniform steps')),
    pytest.param('[cfg, T = 50] BWCache', marks=_xf(
        'per seed -3.99, -4.91, -3.36 dB vs 30 uniform steps')),
    pytest.param('[vp_v, T = 50] BWCache', marks=_xf(
        'per seed -3.28, -4.21, -4.52 dB vs 31 uniform steps')),
    pytest.param('[flow, T = 50] delta binds', marks=_xf(
        'schedule-only placement better: per seed -2.37, -1.57, -1.11 dB')),
])
def test_bwcache_default_claims(bwcache_default, prefix):
  c = _by_prefix(bwcache_default, prefix)
  assert c['holds'], c
