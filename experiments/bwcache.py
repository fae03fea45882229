"""BWCache (arXiv 2509.13789): block-wise caching of a diffusion transformer's
block outputs across sampling steps, on 8x8 digits (configs/bwcache.py).

  python -m experiments.bwcache
  python -m experiments.bwcache --config=configs/bwcache.py:smoke --workdir=/tmp/bwc

Trains a tiny AdaLN-DiT per objective (rectified flow with Euler, VP eps
with DDIM; seeds vmapped), then sweeps BWCache's threshold delta and reuse
count R against the uncached sampler and against fewer uniform steps at an
equal block budget; claims gen.md 5.5.
"""

from __future__ import annotations

from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.core import config as cfg_lib
from iclrjax.core import launch
from iclrjax.diffusion import dit as dit_lib
from iclrjax.diffusion import flow
from iclrjax.diffusion import images
from iclrjax.diffusion.bwcache import (delta_sweep, equal_compute_steps,
                                       make_sampler, reference_sample)


# -- the experiment ---------------------------------------------------------------------
# (objective, sampler): a rectified-flow DiT sampled by Euler (near-straight
# paths), and a VP eps-prediction DiT sampled by DDIM (curved paths).
SAMPLERS = {'flow': 'euler', 'vp_eps': 'ddim'}


def config_schema() -> dict[str, Any]:
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  frac = cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False)
  return {
      'objectives': cfg_lib.Seq(item=cfg_lib.Choice(*SAMPLERS), min_len=1),
      'num_steps': cfg_lib.Seq(item=cfg_lib.Int(min=2), min_len=1,
                               help='sampling steps T, one sweep each'),
      'deltas': cfg_lib.Seq(item=cfg_lib.Float(min=0.0), min_len=2),
      'reuse_fractions': cfg_lib.Seq(item=frac, min_len=1,
                                     help='R = max(1, round(f T))'),
      'headline_delta': cfg_lib.Float(min=0.0),
      'headline_reuse_fraction': frac,
      'headline_steps': cfg_lib.Int(min=2),
      'num_samples': cfg_lib.Int(min=1),
      'patch': cfg_lib.Int(min=1),
      'width': cfg_lib.Int(min=1),
      'depth': cfg_lib.Int(min=1),
      'heads': cfg_lib.Int(min=1),
      'train_steps': cfg_lib.Int(min=1),
      'batch_size': cfg_lib.Int(min=1),
      'learning_rate': pos,
      'ema_decay': cfg_lib.Float(min=0.0, max=1.0, max_inclusive=False),
      'steps_per_chunk': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
  }


def check_config(c) -> None:
  cfg_lib.check(c.width % c.heads == 0, 'heads', c.heads,
                f'must divide width={c.width}')
  cfg_lib.check(8 % c.patch == 0, 'patch', c.patch,
                'must divide the 8x8 digits')
  cfg_lib.check(c.headline_steps in c.num_steps, 'headline_steps',
                c.headline_steps, f'must be one of num_steps={c.num_steps}')
  cfg_lib.check(c.headline_delta in c.deltas, 'headline_delta',
                c.headline_delta, f'must be one of deltas={c.deltas}')
  cfg_lib.check(c.headline_reuse_fraction in c.reuse_fractions,
                'headline_reuse_fraction', c.headline_reuse_fraction,
                f'must be one of reuse_fractions={c.reuse_fractions}')


def reuse_steps(fraction: float, num_steps: int) -> int:
  return max(1, round(fraction * num_steps))


def _tag(objective: str, num_steps: int) -> str:
  return f'{objective}_T{num_steps}'


def run(r):
  """Trains a DiT per objective, then sweeps BWCache against the uncached and
  the equal-compute uniform samplers (launch.Run -> launch.Result)."""
  cfg = r.config
  train_x = jnp.asarray(flow.digits('train'))
  model = dit_lib.DiT(patch=cfg.patch, width=cfg.width, depth=cfg.depth,
                      heads=cfg.heads)
  noise = jax.random.normal(jax.random.key(cfg.seed + 4242),
                            (cfg.num_samples, *train_x.shape[1:]))
  metrics: dict[str, np.ndarray] = {}
  sweeps: dict[str, list[dict[str, Any]]] = {}
  samples = {}
  for objective in cfg.objectives:
    tc = dict(batch_size=cfg.batch_size, learning_rate=cfg.learning_rate,
              ema_decay=cfg.ema_decay, objective=objective)
    init, step = flow.make_trainer(model, train_x, tc)
    out = r.train(init, step, num_steps=cfg.train_steps, data=train_x,
                  chunk_size=min(cfg.steps_per_chunk, cfg.train_steps),
                  phase=objective, log_every=cfg.log_every,
                  postfix_keys=('loss',))
    sampler = SAMPLERS[objective]
    for T in cfg.num_steps:
      tag = _tag(objective, T)
      per_seed = []
      for s in range(cfg.num_seeds):  # Not vmapped: cond must stay a cond.
        logging.info('bwcache: %s, %d steps, seed %d: sweeping %d deltas x '
                     '%d R', objective, T, s, len(cfg.deltas),
                     len(cfg.reuse_fractions))
        ema = jax.tree.map(lambda a, s=s: a[s], out.state.ema)
        per_seed.append(delta_sweep(
            model, ema, noise, T, cfg.deltas,
            sorted({reuse_steps(f, T) for f in cfg.reuse_fractions}),
            sampler=sampler))
        if s == 0 and T == cfg.headline_steps:
          samples[objective] = _headline_samples(model, ema, noise, cfg,
                                                 sampler)
      ind = np.stack([p['reference']['indicator'] for p in per_seed])
      metrics[f'ref_wall_s/{tag}'] = np.array(
          [p['reference']['wall_s'] for p in per_seed])
      n = max(1, T // 10)
      metrics[f'indicator_first/{tag}'] = np.nanmean(ind[:, 1:1 + n], 1)
      metrics[f'indicator_mid/{tag}'] = np.nanmean(ind[:, 1 + n:T - n], 1)
      metrics[f'indicator_last/{tag}'] = np.nanmean(ind[:, T - n:], 1)
      sweeps[tag] = [[row for row in p['rows']] for p in per_seed]
      sweeps[f'{tag}/indicator'] = ind.tolist()
      for j, row in enumerate(per_seed[0]['rows']):
        key = f"{tag}_d{row['delta']:g}_R{row['reuse_steps']}"
        for field in ('block_evals', 'speedup', 'psnr', 'wall_s',
                      'uniform_steps', 'uniform_psnr', 'uniform_wall_s',
                      'reuse_fraction'):
          metrics[f'{field}/{key}'] = np.array(
              [p['rows'][j][field] for p in per_seed], float)
        metrics[f'wall_speedup/{key}'] = (metrics[f'ref_wall_s/{tag}']
                                          / metrics[f'wall_s/{key}'])
  _plots(r, cfg, metrics, sweeps, samples)
  return launch.Result(metrics=metrics, claims=evaluate_claims(cfg, metrics),
                       extra={'sweeps': sweeps})


def _headline_samples(model, params, noise, cfg, sampler):
  T = cfg.headline_steps
  R = reuse_steps(cfg.headline_reuse_fraction, T)
  k = min(16, noise.shape[0])
  ref = reference_sample(model, params, noise[:k], T, sampler=sampler)
  cached = make_sampler(model, T, sampler=sampler)(
      params, noise[:k], cfg.headline_delta, R)
  steps = equal_compute_steps(int(cached.block_evals), model.depth)
  uni = reference_sample(model, params, noise[:k], steps, sampler=sampler)
  return {'uncached': np.asarray(ref.samples),
          f'BWCache ({int(cached.block_evals)} block evals)':
              np.asarray(cached.samples),
          f'uniform {steps} steps': np.asarray(uni.samples)}


def _plots(r, cfg, metrics, sweeps, samples) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  tags = [_tag(o, T) for o in cfg.objectives for T in cfg.num_steps]
  fig, axes = plt.subplots(1, len(tags), figsize=(3.2 * len(tags), 2.8),
                           squeeze=False)
  for ax, tag in zip(axes[0], tags):
    ind = np.asarray(sweeps[f'{tag}/indicator'], float)
    for curve in ind:
      ax.plot(np.arange(len(curve)), curve, lw=1)
    ax.set_title(tag, fontsize=9)
    ax.set_xlabel('sampling step k')
  axes[0, 0].set_ylabel('indicator (mean rel. L1)')
  fig.suptitle('BWCache indicator between consecutive steps (uncached)',
               fontsize=9)
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'indicator_curve.png', dpi=120)
  plt.close(fig)
  mean = lambda field, keys: [metrics[f'{field}/{k}'].mean() for k in keys]

  def compute_panel(ax, keys, R):
    ax.plot(mean('block_evals', keys), mean('psnr', keys), 'o-',
            label=f'BWCache R={R}')
    ax.plot([u * cfg.depth for u in mean('uniform_steps', keys)],
            mean('uniform_psnr', keys), 'x--',
            label=f'fewer steps (R={R} budget)')

  def delta_panel(ax, keys, R):
    ax.plot(cfg.deltas, np.minimum(mean('psnr', keys), 80.0), 'o-',
            label=f'R={R}')

  for name, panel, xlabel, ylabel in (
      ('psnr_vs_compute', compute_panel, 'block evaluations',
       'PSNR vs uncached (dB)'),
      ('psnr_vs_delta', delta_panel, 'delta',
       'PSNR vs uncached (dB, capped at 80)')):
    fig, axes = plt.subplots(1, len(tags), figsize=(3.4 * len(tags), 3.0),
                             squeeze=False)
    for ax, tag in zip(axes[0], tags):
      T = int(tag.rsplit('T', 1)[1])
      for R in sorted({reuse_steps(f, T) for f in cfg.reuse_fractions}):
        panel(ax, [f'{tag}_d{d:g}_R{R}' for d in cfg.deltas], R)
      ax.set_title(tag, fontsize=9)
      ax.set_xlabel(xlabel)
      ax.legend(fontsize=7)
    axes[0, 0].set_ylabel(ylabel)
    fig.tight_layout()
    fig.savefig(r.plots_dir / f'{name}.png', dpi=120)
    plt.close(fig)
  for objective, imgs in samples.items():
    images.plot_grid(imgs, r.plots_dir / f'samples_{objective}.png',
                     title=f'{objective}: samples from the same noise')


def evaluate_claims(cfg, m: dict[str, np.ndarray]) -> list[Any]:
  claims = []
  get = lambda k: None if k not in m else float(np.mean(m[k]))
  T = cfg.headline_steps
  d = cfg.headline_delta
  R = reuse_steps(cfg.headline_reuse_fraction, T)
  if 'flow' in cfg.objectives:
    key = f'{_tag("flow", T)}_d{d:g}_R{R}'
    sp, ps = get(f'speedup/{key}'), get(f'psnr/{key}')
    wall = get(f'wall_speedup/{key}')
    claims.append(launch.Claim(
        claim=(f'BWCache (delta {d:g}, R {R}) on a rectified-flow DiT, Euler '
               f'{T} steps: >= 1.5x fewer block evaluations at PSNR >= 30 dB '
               'against the uncached sampler (same noise).'),
        holds=bool(sp >= 1.5 and ps >= 30.0),
        evidence=(f'{sp:.2f}x fewer block evaluations, PSNR {ps:.1f} dB; '
                  f'wall-clock speedup {wall:.2f}x (CPU, one decision per '
                  'batch)')))
  for objective in cfg.objectives:
    for steps in cfg.num_steps:
      R = reuse_steps(cfg.headline_reuse_fraction, steps)
      key = f'{_tag(objective, steps)}_d{d:g}_R{R}'
      ps, up = get(f'psnr/{key}'), get(f'uniform_psnr/{key}')
      ev, us = get(f'block_evals/{key}'), get(f'uniform_steps/{key}')
      claims.append(launch.Claim(
          claim=(f'[{objective}, {SAMPLERS[objective]} {steps} steps] '
                 'BWCache beats fewer uniform steps at equal block budget '
                 f'(delta {d:g}, R {R}: higher PSNR vs the uncached '
                 'sampler).'),
          holds=bool(ps > up),
          evidence=(f'BWCache {ev:.0f} block evals, {ps:.1f} dB; uniform '
                    f'{us:.0f} steps, {up:.1f} dB')))
  bad = []
  for objective in cfg.objectives:
    for steps in cfg.num_steps:
      for R in sorted({reuse_steps(f, steps) for f in cfg.reuse_fractions}):
        keys = [f'{_tag(objective, steps)}_d{dd:g}_R{R}'
                for dd in sorted(cfg.deltas)]
        ev = [get(f'block_evals/{k}') for k in keys]
        ps = [get(f'psnr/{k}') for k in keys]
        if any(b > a for a, b in zip(ev, ev[1:])) or any(
            b > a + 0.5 for a, b in zip(ps, ps[1:])):
          bad.append(f'{objective} T{steps} R{R}: evals {ev}, PSNR '
                     f'{[round(p, 1) for p in ps]}')
  claims.append(launch.Claim(
      claim=('A delta sweep is monotone: larger delta, no fewer skipped '
             'steps and no higher PSNR (within 0.5 dB), for every sampler, '
             'T and R.'),
      holds=not bad,
      evidence='monotone in every sweep' if not bad else '; '.join(bad)))
  return claims


EXPERIMENT = launch.Experiment('bwcache', run, schema=config_schema(),
                               check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
