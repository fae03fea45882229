"""Short versions of the QDPM and BWCache claims (the full runs are `slow`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import bwcache as bwcache_config
from configs import qdpm as qdpm_config
from iclrjax.core import loop
from iclrjax.diffusion import bwcache
from iclrjax.diffusion import dit
from iclrjax.diffusion import flow
from iclrjax.diffusion import images
from iclrjax.diffusion import qdpm


def _train_qdpm_vdm(steps: int):
  c = qdpm_config.get_config()
  c.width, c.train_steps = 128, steps
  levels = jnp.asarray(images.grid(17, c.scale), jnp.float32)
  train = jnp.asarray(images.to_scale(images.digits('train'), c.scale),
                      jnp.float32)
  test = jnp.asarray(images.to_scale(images.digits('test')[:96], c.scale),
                     jnp.float32)
  out = {}
  for kind in ('qdpm', 'vdm'):
    init, step, net = qdpm.make_trainer(kind, c, train, levels)
    res = loop.train(init, step, seed=0, num_seeds=1, num_steps=steps,
                     chunk_size=steps, progress=False)
    ema = jax.tree.map(lambda a: a[0], res.state.ema)
    est = jax.jit(lambda p, x, k, kind=kind, net=net: qdpm._nll(  # pylint: disable=protected-access
        kind, net, p, x, k, levels, c))(ema, test, jax.random.key(0))
    out[kind] = qdpm._bpd(est, 64)  # pylint: disable=protected-access
  return out


def test_qdpm_below_vdm_on_digits_at_equal_steps():
  # 300 steps of the same 128-wide residual MLP, 96 test digits, 256-stratum
  # quadrature. QDPM starts at the softround bound log2 17 = 4.09 bpd; VDM
  # must learn the rounding posterior itself.
  out = _train_qdpm_vdm(300)
  (q, q_se), (v, v_se) = out['qdpm'], out['vdm']
  assert q + 3 * q_se < v - 3 * v_se, out
  assert q > 1.0, out  # Below ~1 bpd on digits would refute the evaluation.


@pytest.fixture(scope='module')
def small_flow_dit():
  model = dit.DiT(patch=2, width=32, depth=4, heads=4)
  c = dict(batch_size=128, learning_rate=1e-3, ema_decay=0.999,
           objective='flow')
  init, step = flow.make_trainer(model, jnp.asarray(flow.digits('train')), c)
  res = loop.train(init, step, seed=0, num_seeds=1, num_steps=600,
                   chunk_size=600, progress=False)
  return model, jax.tree.map(lambda a: a[0], res.state.ema)


def test_bwcache_fewer_block_evals_at_high_psnr_and_monotone_sweep(
    small_flow_dit):
  # The paper's defaults (delta 0.15, R = 10% of T) on a rectified-flow DiT
  # (32 wide, 4 blocks, 600 steps), Euler T = 50, 128 noises.
  model, params = small_flow_dit
  noise = jax.random.normal(jax.random.key(1), (128, 8, 8, 1))
  out = bwcache.delta_sweep(model, params, noise, 50,
                            deltas=(0.02, 0.05, 0.15, 0.3), reuse_steps=(5,))
  rows = {r['delta']: r for r in out['rows']}
  head = rows[0.15]
  assert head['speedup'] >= 1.5 and head['psnr'] >= 30.0, head
  evals = [rows[d]['block_evals'] for d in sorted(rows)]
  psnrs = [rows[d]['psnr'] for d in sorted(rows)]
  assert all(b <= a for a, b in zip(evals, evals[1:])), evals
  assert all(b <= a + 0.5 for a, b in zip(psnrs, psnrs[1:])), psnrs
