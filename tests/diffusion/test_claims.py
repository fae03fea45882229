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
from iclrjax.diffusion import images


def _train_qdpm_vdm(steps: int):
  c = qdpm_config.get_config()
  c.width, c.train_steps = 128, steps
  levels = jnp.asarray(images.grid(17, c.scale), jnp.float32)
  train = jnp.asarray(images.to_scale(images.digits('train'), c.scale),
                      jnp.float32)
  test = jnp.asarray(images.to_scale(images.digits('test')[:96], c.scale),
                     jnp.float32)
  out = {}
  for kind in ('qdpm', 'qdpm_absolute', 'vdm'):
    init, step, net = qdpm_exp.make_trainer(kind, c, train, levels)
    res = loop.train(init, step, seed=0, num_seeds=1, num_steps=steps,
                     chunk_size=steps, progress=False, data=train)
    ema = jax.tree.map(lambda a: a[0], res.state.ema)
    est = jax.jit(lambda p, x, k, kind=kind, net=net: qdpm_exp._nll(  # pylint: disable=protected-access
        kind, net, p, x, k, levels, c))(ema, test, jax.random.key(0))
    out[kind] = qdpm_exp._bpd(est, 64)  # pylint: disable=protected-access
  return out


def test_qdpm_below_vdm_on_digits_at_equal_steps():
  # 300 steps of the same 128-wide residual MLP, 96 test digits, 256-stratum
  # quadrature (measured: QDPM 2.75, literal gate 3.57, VDM 8.02 bpd). QDPM
  # starts at the softround bound log2 17 = 4.09 bpd; VDM must learn the
  # rounding posterior itself. The claim's control, the gate exp(-1/t^2)
  # taken literally on [-1, 1] data, loses most of QDPM's gain here; it
  # falls behind VDM only once VDM has trained (the 8000-step default run:
  # 3.29 vs 2.86, test_qdpm_default_claims).
  out = _train_qdpm_vdm(300)
  (q, q_se), (v, v_se) = out['qdpm'], out['vdm']
  assert q + 3 * q_se < v - 3 * v_se, out
  assert q > 1.0, out  # Below ~1 bpd on digits would refute the evaluation.
  a, a_se = out['qdpm_absolute']
  assert a - 3 * a_se > q + 3 * q_se + 0.5, out


@pytest.fixture(scope='module')
def small_flow_dit():
  model = dit.DiT(patch=2, width=32, depth=4, heads=4)
  c = dict(batch_size=128, learning_rate=1e-3, ema_decay=0.999,
           objective='flow')
  train_x = flow.digits('train')
  init, step = flow.make_trainer(model, train_x, c)
  res = loop.train(init, step, seed=0, num_seeds=1, num_steps=600,
                   chunk_size=600, progress=False, data=train_x)
  return model, jax.tree.map(lambda a: a[0], res.state.ema)


def test_bwcache_keeps_the_converged_solution_where_max_reuse_does_not(
    small_flow_dit):
  """Claim (i) in small (a 32-wide DiT, 600 steps, 128 noises), scored
  against the converged solution (200 Heun steps), not the uncached
  sampler: the paper's defaults (delta 0.15, R = 10% of T = 50) save >= 1.5x
  block evaluations and stay within 15 dB of the uncached 50-step sampler's
  PSNR; the control, one reuse window to the horizon (delta inf, R = T),
  saves more and loses more than that (default run, flow: 33.5 vs 44.4 dB,
  control 21.5 dB)."""
  model, params = small_flow_dit
  noise = jax.random.normal(jax.random.key(1), (128, 8, 8, 1))
  ref = bwcache.converged_reference(model, params, noise, 200)
  assert bwcache.reference_error(model, params, noise, 200) > 60.0
  out = bwcache.delta_sweep(model, params, noise, 50, deltas=(0.15,),
                            reuse_steps=(5,), reference=ref)
  head, uncached = out['rows'][0], out['reference']['psnr_ref']
  assert head['speedup'] >= 1.5 and head['psnr_ref'] >= uncached - 15, (
      head, uncached)
  ctl = bwcache.make_sampler(model, 50)(params, noise, jnp.inf, 50)
  ctl_psnr = bwcache.psnr(ctl.samples, ref)
  assert 50 * model.depth / int(ctl.block_evals) > 1.5
  assert ctl_psnr < uncached - 15, (ctl_psnr, uncached)


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
    "QDPM's test NLL is below VDM's", "QDPM's test NLL on the known-entropy",
    'Estimator sanity'])
def test_qdpm_default_claims(qdpm_default, prefix):
  # Measured (default config at 061e497, 2 seeds, 8000 steps, 798 s): test
  # NLL digits QDPM 2.133 < VDM 2.860, known-entropy set (H = 2.012) QDPM
  # 2.269 (gap +0.257 <= 0.3) < VDM 2.967; all >= H - 3 SE. Controls: the
  # literal gate exp(-1/t^2) scores 3.291 / 3.527 (fails both), Eq. 22 without
  # its constant -1.818 bpd (below H: fails).
  c = _by_prefix(qdpm_default, prefix)
  assert c['holds'], c
  assert '(fails)' in c['control'], c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'The paper-style u ~ U(0,1) estimator is biased low (default config at '
    '061e497, 64 known-entropy test examples x 4096 draws): trained QDPM u-MC '
    '2.024 vs quadrature 2.263 bpd (SE 0.071; digits 1.884 vs 2.064); the '
    'literal-gate softround-only model (exact log2 17 = 4.087) 1.825. Its '
    'heavy tail, t < 0.25 grid steps needs u < exp(-16), is almost never '
    'drawn, in float32 or float64.'))
def test_qdpm_default_estimators_agree(qdpm_default):
  c = _by_prefix(qdpm_default, "The paper's u ~ U(0,1) estimator agrees")
  assert c['holds'], c


@pytest.mark.slow
def test_qdpm_default_estimator_control_fails(qdpm_default):
  c = _by_prefix(qdpm_default, "The paper's u ~ U(0,1) estimator agrees")
  assert '(fails)' in c['control'], c


@pytest.fixture(scope='module')
def bwcache_default(tmp_path_factory):
  from experiments.bwcache import EXPERIMENT  # pylint: disable=g-import-not-at-top
  return EXPERIMENT.execute(bwcache_config.get_config(),
                            tmp_path_factory.mktemp('bwcache') / 'run')


@pytest.mark.slow
@pytest.mark.parametrize('prefix', ['BWCache (delta', 'A delta sweep'])
def test_bwcache_default_claims(bwcache_default, prefix):
  # Measured (default config, 2 seeds, ~19 min): flow DiT, Euler 50 steps,
  # delta 0.15, R 5: 120 of 200 block evaluations (1.67x) at 35.6 dB, 1.87x
  # wall clock; every delta sweep monotone.
  c = _by_prefix(bwcache_default, prefix)
  assert c['holds'], c


def _fewer_steps_xfail(reason):
  return pytest.mark.xfail(strict=True, reason=reason)


@pytest.mark.slow
@pytest.mark.parametrize('prefix', [
    pytest.param('[flow, euler 20 steps]', marks=_fewer_steps_xfail(
        'Rectified flow (near-straight paths), Euler T=20: BWCache 56 block '
        'evals at 36.1 dB vs uniform 14 steps 44.1 dB (default config)')),
    pytest.param('[flow, euler 50 steps]', marks=_fewer_steps_xfail(
        'Rectified flow, Euler T=50: BWCache 120 block evals at 35.6 dB vs '
        'uniform 30 steps 47.3 dB (default config)')),
    '[vp_eps, ddim 20 steps]',
    pytest.param('[vp_eps, ddim 50 steps]', marks=_fewer_steps_xfail(
        'VP eps + DDIM T=50 at delta 0.15, R=5: 120 evals at 23.3 dB vs '
        'uniform 30 steps 24.3 dB (at R=2 caching wins: 30.1 vs 27.2 dB)')),
])
def test_bwcache_default_beats_fewer_steps(bwcache_default, prefix):
  # Holds for the curved VP/DDIM sampler at T=20: 60 evals at 38.0 dB vs
  # uniform 15 steps at 22.6 dB.
  c = _by_prefix(bwcache_default, prefix)
  assert c['holds'], c
