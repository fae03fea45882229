"""LightCtrl (ICLR 2026, OpenReview 5ft8vd9rwc): training-free controllable
video relighting in a Lambertian toy world (configs/lightctrl.py).

  python -m experiments.lightctrl
  python -m experiments.lightctrl --config=configs/lightctrl.py:smoke --workdir=/tmp/lc

Trains the two stand-ins on the diffusion core (rectified flow, AdamW, EMA),
`num_seeds` of each (vmapped):

  relighter  IC-Light: a conditional U-Net from a light map to the relit
             frame, trained on plain rendered frames only (never on
             normal-fused conditions, so LightCtrl stays training-free at
             relight time); its target keeps a fraction beta of the source
             light, (1 - beta) target render + beta source render (IC-Light
             copies its input's light per frame), beta drawn per example
             from `betas` and given to the net, so one net per seed is the
             relighter of every beta (the sweep holds its other errors
             fixed); beta = 0 is the null where fusion has nothing to fix;
  prior      AnimateDiff: an unconditional U-Net flow over 8-frame clips lit
             by a static light (it knows no trajectory).

Then, per trained seed, relights held-out source videos (a static source
light) along the reference's six moving trajectories with the arms of
`ARMS` from SDEdit strength `strength` (flow time 0.69: the release's
strength 0.5, sigma 2.19; every beta: full, no_fusion, baseline, the
per-frame relighter; at `claim_beta` also no_injection, wrong_injection
(the same noise on the masks rotated by 180 degrees), no_detail (the
step-0 detail residual off), low_strength / low_strength_no_fusion /
low_strength_no_injection (flow strength `low_strength` 0.5, sigma 1), thw
(the paper's (t, h, w) FFT axes) and baseline_rerun (fresh noise: the
baseline's noise floor)), scored against the renderer's ground truth:
light-centroid error and its excess over the ground truth's own, PSNR,
source-light leakage, frame-to-frame change and the two-sided change
error mean |delta_f(out) - delta_f(gt)|. The untouched source video is
scored too. The per-seed numbers are means over a seed's videos, so the
seeds include training variance; every claim, and every control, must
meet its threshold on every seed (see `evaluate_claims`).
"""

from __future__ import annotations

import functools
from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import logging as log_lib
from iclrjax.core import loop
from iclrjax.diffusion import flow
from iclrjax.diffusion import lightctrl as lc
from iclrjax.diffusion import train as train_lib

# arm -> (light-map injection, normal fusion, detail residual, low (SDEdit
# strength cfg.low_strength, else cfg.strength), masks ('true' or
# 'rotated': the trajectory's masks rotated by 180 degrees), fft axes).
ARMS = {
    'full': (True, True, True, False, 'true', 'chw'),
    'no_fusion': (True, False, True, False, 'true', 'chw'),
    'baseline': (False, False, True, False, 'true', 'chw'),
    'no_injection': (False, True, True, False, 'true', 'chw'),
    'wrong_injection': (True, True, True, False, 'rotated', 'chw'),
    'no_detail': (True, True, False, False, 'true', 'chw'),
    'low_strength': (True, True, True, True, 'true', 'chw'),
    'low_strength_no_fusion': (True, False, True, True, 'true', 'chw'),
    'low_strength_no_injection': (False, True, True, True, 'true', 'chw'),
    'thw': (True, True, True, False, 'true', 'thw'),
    'baseline_rerun': (False, False, True, False, 'true', 'chw'),
}
EVERY_BETA = ('full', 'no_fusion', 'baseline')  # the others at claim_beta
SCORES = ('centroid', 'excess', 'psnr', 'leakage', 'change', 'change_error')


def beta_name(beta: float) -> str:
  return f'b{beta:g}'


def config_schema() -> dict[str, Any]:
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  unit = cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                       max_inclusive=False)
  nets = {}
  for n in ('relighter', 'prior'):
    nets.update({f'{n}.channels': cfg_lib.Int(min=4),
                 f'{n}.channel_mults': cfg_lib.Seq(item=cfg_lib.Int(min=1),
                                                   min_len=1),
                 f'{n}.num_res_blocks': cfg_lib.Int(min=0),
                 f'{n}.train_steps': cfg_lib.Int(min=1),
                 f'{n}.batch_size': cfg_lib.Int(min=1),
                 f'{n}.learning_rate': pos,
                 f'{n}.ema_decay': cfg_lib.Float(min=0.0, max=1.0,
                                                 max_inclusive=False)})
  return {
      'size': cfg_lib.Int(min=8, help='frame side (divisible by 2)'),
      'num_frames': cfg_lib.Int(min=2),
      'num_objects': cfg_lib.Int(min=1),
      'motion': cfg_lib.Float(min=0.0),
      'light_height': pos,
      'ambient': cfg_lib.Float(min=0.0, max=1.0),
      'light_radius': pos,
      'trajectories': cfg_lib.Seq(item=cfg_lib.Choice(
          *[b.name for b in lc.MOVING]), min_len=1),
      'strength': unit,
      'low_strength': unit,
      'num_steps': cfg_lib.Int(min=2),
      'relight_steps': cfg_lib.Int(min=1),
      'relight_strength': unit,
      'fft_axes': cfg_lib.Choice(*lc.FFT_AXES),
      'eval_videos': cfg_lib.Int(min=1),
      **nets,
      'betas': cfg_lib.Seq(item=cfg_lib.Float(min=0.0, max=1.0,
                                              max_inclusive=False),
                           min_len=2),
      'claim_beta': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                                  max_inclusive=False),
      'centroid_ratio': pos,
      'psnr_margin': cfg_lib.Float(min=0.0),
      'leakage_drop': unit,
      'change_ratio': pos,
      'change_error_ratio': pos,
      'steps_per_chunk': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
  }


def check_config(c) -> None:
  cfg_lib.check(c.size % (2 * lc.PATCH) == 0, 'size', c.size,
                f'must be divisible by {2 * lc.PATCH} (2x2 patches, 2 U-Net '
                'levels)')
  for n in ('relighter', 'prior'):
    levels = len(c[n].channel_mults)
    cfg_lib.check(c.size // lc.PATCH % 2 ** (levels - 1) == 0,
                  f'{n}.channel_mults', tuple(c[n].channel_mults),
                  f'has too many levels for {c.size // lc.PATCH}-pixel '
                  'latents')
  cfg_lib.check(lc.num_fused_steps(c.num_steps) >= 1, 'num_steps',
                c.num_steps, 'leaves no step with lbd > 0.15')
  betas = tuple(float(b) for b in c.betas)
  cfg_lib.check(0.0 in betas, 'betas', betas,
                'must hold 0 (the null: a relighter that copies no light)')
  cfg_lib.check(len(set(betas)) == len(betas), 'betas', betas,
                'has repeats')
  cfg_lib.check(float(c.claim_beta) in betas, 'claim_beta', c.claim_beta,
                f'must be one of betas {betas}')


def _tx(n):
  return optax.chain(optax.clip_by_global_norm(1.0),
                     optax.adamw(n.learning_rate))


def make_relighter_trainer(cfg):
  """(model, init, step) of the relighter's rectified flow on
  `lc.relight_batch` (plain frames; generated from the step's key, split
  over the mesh's 'data' axis), each example's beta drawn from
  `cfg.betas` and given to the net (one relighter per seed serves every
  beta)."""
  n = cfg.relighter
  model = lc.Relighter(channels=n.channels,
                       channel_mults=tuple(n.channel_mults),
                       num_res_blocks=n.num_res_blocks)
  h = cfg.size // lc.PATCH
  betas = jnp.asarray(cfg.betas, jnp.float32)

  def init_params(key):
    x = jnp.zeros((1, h, h, lc.LATENT_CHANNELS))
    return model.init(key, x, jnp.zeros((1,)), x, x, jnp.zeros((1,)))

  def loss_fn(params, batch, key, frozen):
    del batch, frozen
    k_data, k_beta, k_loss = jax.random.split(key, 3)
    beta = jax.random.choice(k_beta, betas, (n.batch_size,))
    tgt, cond, light, beta = distributed.shard_batch((*lc.relight_batch(
        k_data, n.batch_size, cfg.size, light_height=cfg.light_height,
        ambient=cfg.ambient, radius=cfg.light_radius,
        num_objects=cfg.num_objects, beta=beta), beta))
    return flow.flow_loss(
        lambda x, t: model.apply(params, x, t, cond, light, beta), tgt,
        k_loss)

  init, step = train_lib.make_trainer(init_params, loss_fn, _tx(n),
                                      ema_decay=n.ema_decay)
  return model, init, step


def make_prior_trainer(cfg):
  """(model, init, step) of the video prior's rectified flow on
  `lc.video_batch` (split over 'data')."""
  n = cfg.prior
  model = lc.VideoPrior(channels=n.channels,
                        channel_mults=tuple(n.channel_mults),
                        num_res_blocks=n.num_res_blocks)
  h = cfg.size // lc.PATCH
  shape = (1, cfg.num_frames, h, h, lc.LATENT_CHANNELS)

  def init_params(key):
    return model.init(key, jnp.zeros(shape), jnp.zeros((1,)))

  def loss_fn(params, batch, key, frozen):
    del batch, frozen
    k_data, k_loss = jax.random.split(key)
    clips = distributed.shard_batch(lc.video_batch(
        k_data, n.batch_size, cfg.num_frames, cfg.size,
        light_height=cfg.light_height, ambient=cfg.ambient,
        num_objects=cfg.num_objects, motion=cfg.motion))
    return flow.flow_loss(lambda x, t: model.apply(params, x, t), clips,
                          k_loss)

  init, step = train_lib.make_trainer(init_params, loss_fn, _tx(n),
                                      ema_decay=n.ema_decay)
  return model, init, step


def _trajectories(cfg, size, sigma_scale):
  """(centres [T, F, 2], sigmas [T, F]) of every trajectory on a grid of
  side `size`, sigmas times `sigma_scale`."""
  tr = [lc.light_positions(lc.BGSource[n], cfg.num_frames, size, size,
                           cfg.light_radius) for n in cfg.trajectories]
  return (jnp.asarray(np.stack([p for p, _ in tr])),
          jnp.asarray(np.stack([g for _, g in tr])) * sigma_scale)


def eval_set(cfg, key):
  """Held-out videos x trajectories, [B, ...] with B = eval_videos *
  len(trajectories), video-major: the source video (a static source light
  at a random point), its albedo, the ground-truth relit video, the source
  shading A E_src, the light centres (frame pixels); the latents of the
  source and the normals; the injection masks (latent grid, sigma R / 8),
  the same masks rotated by 180 degrees (the wrong-injection control) and
  the light-map latents (frame grid, sigma PATCH R / 8), each on its
  grid's integer trajectory as in the reference."""
  f, s, h = cfg.num_frames, cfg.size, cfg.size // lc.PATCH
  k_sc, k_src = jax.random.split(key)
  scs = jax.vmap(lambda k: lc.scene(k, f, s, cfg.num_objects, cfg.motion))(
      jax.random.split(k_sc, cfg.eval_videos))
  src_xy = jax.random.uniform(k_src, (cfg.eval_videos, 1, 2), maxval=s)
  source = lc.render(scs, src_xy, cfg.light_height, cfg.ambient)
  e_src = lc.irradiance(scs['normals'], scs['height'],
                        jnp.broadcast_to(src_xy, (cfg.eval_videos, f, 2)),
                        cfg.light_height)
  nv, nt = cfg.eval_videos, len(cfg.trajectories)
  rep = lambda a: jnp.repeat(a, nt, axis=0)
  tile = lambda a: jnp.tile(a, (nv,) + (1,) * (a.ndim - 1))
  pos, sig = map(tile, _trajectories(cfg, s, lc.PATCH))
  pos_l, sig_l = map(tile, _trajectories(cfg, h, 1))
  sc_b = jax.tree.map(rep, scs)
  mask = jax.vmap(lc.light_masks, (0, 0, None, None))(pos_l, sig_l, h, h)
  return {
      'source': rep(source), 'albedo': sc_b['albedo'],
      'target': lc.render(sc_b, pos, cfg.light_height, cfg.ambient),
      'source_shading': sc_b['albedo'] * rep(e_src)[..., None],
      'pos': pos,
      'source_latent': lc.encode(rep(source)),
      'normals_latent': lc.encode(sc_b['normals']),
      'mask': mask, 'mask_rotated': mask[..., ::-1, ::-1, :],
      'light_map': jax.vmap(lc.light_map_latent, (0, 0, None, None))(
          pos, sig, s, s)}


def scores(cfg, video, ev):
  """Per-video scores of relit videos [B, F, H, W, C] against `ev`:
  'excess' is the centroid error minus the ground truth's own (the
  brightness-weighted centroid of a perfect relighting is off the light
  too: shadows, albedo, clipping at the border); 'change' the mean
  frame-to-frame |delta| (one-sided: flicker), 'change_error' the mean
  |delta(video) - delta(ground truth)| (two-sided: a static video scores
  the ground truth's own change)."""
  shading = lambda x: lc.to_intensity(x) - ev['albedo'] * cfg.ambient
  err = lambda v: lc.light_centroid_error(v, ev['albedo'], ev['pos'],
                                          cfg.ambient)
  centroid = err(video)
  return {
      'centroid': centroid, 'excess': centroid - err(ev['target']),
      'psnr': lc.psnr(video, ev['target']),
      'leakage': lc.source_leakage(shading(video), shading(ev['target']),
                                   ev['source_shading']),
      'change': lc.frame_change(video),
      'change_error': lc.change_error(video, ev['target'])}


def eval_fns(cfg, relighter, prior) -> dict[str, Any]:
  """The jitted pieces of `make_evaluator`: 'eval_set' (key), 'pipeline'
  (relighter params, prior params, ev, key, beta, inject, fuse, detail,
  strength, rotated, fft_axes=), 'perframe' (relighter params, ev, key,
  beta) and 'scores' (video, ev), videos decoded."""
  ev_fn = jax.jit(lambda k: eval_set(cfg, k))

  @functools.partial(jax.jit, static_argnames='fft_axes')
  def pipeline(p_rel, p_pri, ev, key, beta, inj, fus, det, strength,
               rotated, fft_axes):
    relight = lc.relight_sampler(relighter, p_rel, cfg.relight_steps,
                                 cfg.relight_strength, beta)
    mask = jnp.where(rotated, ev['mask_rotated'], ev['mask'])
    return lc.decode(lc.lightctrl(
        lc.prior_velocity(prior, p_pri), relight, ev['source_latent'],
        ev['normals_latent'], mask, ev['light_map'], key,
        num_steps=cfg.num_steps, strength=strength, inject_light=inj,
        fusion=fus, detail_residual=det, fft_axes=fft_axes))

  @jax.jit
  def perframe(p_rel, ev, key, beta):
    return lc.decode(lc.relight_sampler(
        relighter, p_rel, cfg.relight_steps, cfg.relight_strength, beta)(
            ev['source_latent'], ev['light_map'], key))

  score_fn = jax.jit(lambda v, ev: scores(cfg, v, ev))
  return {'eval_set': ev_fn, 'pipeline': pipeline, 'perframe': perframe,
          'scores': score_fn}


def arm_axes(cfg, arm: str) -> str:
  """The FFT axes an arm runs with: the config's, but (t, h, w) for
  'thw'."""
  return ARMS[arm][5] if arm == 'thw' else cfg.fft_axes


def arms_at(cfg, beta: float) -> tuple[str, ...]:
  """The pipeline arms run with the relighter of `beta`."""
  return tuple(ARMS) if beta == cfg.claim_beta else EVERY_BETA


def make_evaluator(cfg, relighter, prior):
  """(relighter params, prior params, key) -> ({'arm/bBETA' or
  'source' / 'ground_truth': {score: [B]}}, a few videos per arm at
  claim_beta); one compiled sampler per FFT-axes choice."""
  fns = eval_fns(cfg, relighter, prior)

  def evaluate(p_rel, p_pri, key):
    k_ev, k_run = jax.random.split(key)
    ev = fns['eval_set'](k_ev)
    videos = {'ground_truth': ev['target'], 'source': ev['source']}
    for beta in cfg.betas:
      bn = beta_name(beta)
      for arm in arms_at(cfg, beta):
        inj, fus, det, low, masks, _ = ARMS[arm]
        logging.info('lightctrl: %s %s', bn, arm)
        k_arm = (jax.random.fold_in(k_run, 1) if arm == 'baseline_rerun'
                 else k_run)   # the others share noise: paired arms
        videos[f'{arm}/{bn}'] = fns['pipeline'](
            p_rel, p_pri, ev, k_arm, jnp.float32(beta), jnp.bool_(inj),
            jnp.bool_(fus), jnp.bool_(det),
            jnp.float32(cfg.low_strength if low else cfg.strength),
            jnp.bool_(masks == 'rotated'), fft_axes=arm_axes(cfg, arm))
      videos[f'perframe/{bn}'] = fns['perframe'](
          p_rel, ev, jax.random.fold_in(k_run, 7), jnp.float32(beta))
    out = {k: fns['scores'](v, ev) for k, v in videos.items()}
    del out['ground_truth']['psnr']  # infinite
    nt = len(cfg.trajectories)
    cb = beta_name(cfg.claim_beta)
    keep = {'source': 'source', 'ground_truth': 'ground_truth',
            'baseline': f'baseline/{cb}', 'full': f'full/{cb}',
            'perframe': f'perframe/{cb}'}
    return out, {k: np.asarray(videos[v][:nt]) for k, v in keep.items()}

  return evaluate


def _chunk(cfg, name) -> int:
  return min(cfg.steps_per_chunk, cfg[name].train_steps)


def _train(r, cfg, name, make, **kwargs):
  model, init, step = make(cfg)
  n = cfg[name]
  res = r.train(init, step, num_steps=n.train_steps,
                chunk_size=_chunk(cfg, name), phase=name,
                log_every=cfg.log_every, postfix_keys=('loss',), unroll=True,
                **kwargs)
  return model, res.state.ema


def run(r):
  """Trains the relighters and the priors (one per seed), relights
  held-out videos with every arm, scores them against the ground truth
  (launch.Run -> launch.Result)."""
  cfg = r.config
  relighter, p_rel = _train(r, cfg, 'relighter', make_relighter_trainer)
  prior, p_pri = _train(r, cfg, 'prior', make_prior_trainer)
  evaluate = make_evaluator(cfg, relighter, prior)
  per_seed: dict[str, list[float]] = {}
  samples = None
  S = cfg.num_seeds
  for s in range(S):
    pick = lambda tree, i: jax.tree.map(lambda a: a[i], tree)
    logging.info('lightctrl: trained seed %d', s)
    out, vids = evaluate(pick(p_rel, s), pick(p_pri, s),
                         jax.random.key(cfg.seed + 1000 + s))
    for arm, sc in out.items():
      for k, v in sc.items():
        per_seed.setdefault(f'{k}/{arm}', []).append(float(jnp.mean(v)))
    if samples is None:
      samples = vids
  metrics = {k: np.asarray(v) for k, v in per_seed.items()}
  rows = r.rows()
  for name in ('relighter', 'prior'):
    last = [row[f'{name}/loss'] for row in rows if f'{name}/loss' in row]
    metrics[f'final_loss/{name}'] = np.asarray(last[-1], float).reshape(-1)
  _plots(r, cfg, metrics, samples)
  return launch.Result(metrics=metrics, claims=evaluate_claims(cfg, metrics))


def _plots(r, cfg, metrics, samples) -> None:
  from iclrjax.diffusion import images  # pylint: disable=g-import-not-at-top
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  order = ('source', 'ground_truth', 'baseline', 'full', 'perframe')
  for j, name in enumerate(cfg.trajectories[:2]):
    images.plot_grid({k: samples[k][j] for k in order},
                     r.plots_dir / f'videos_{name.lower()}.png',
                     title=f'{name}: frames left to right')
  cb = beta_name(cfg.claim_beta)
  arms = [*[f'{a}/{cb}' for a in ARMS], f'perframe/{cb}', 'source',
          'ground_truth']
  mean = lambda k: float(np.mean(metrics.get(k, np.nan)))
  fig, axes = plt.subplots(1, len(SCORES), figsize=(3.2 * len(SCORES), 3.0))
  for ax, k in zip(axes, SCORES):
    ax.bar(range(len(arms)), [mean(f'{k}/{a}') for a in arms])
    ax.set_xticks(range(len(arms)), [a.split('/')[0] for a in arms],
                  rotation=60, fontsize=7)
    ax.set_title(f'{k} (beta = {cfg.claim_beta:g})', fontsize=9)
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'scores.png', dpi=120, bbox_inches='tight')
  plt.close(fig)
  # The beta sweep: what fusion buys as the relighter copies more light.
  fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.0))
  for ax, k in zip(axes, ('leakage', 'psnr', 'excess')):
    for arm in (*EVERY_BETA, 'perframe'):
      ax.plot(cfg.betas, [mean(f'{k}/{arm}/{beta_name(b)}')
                          for b in cfg.betas], 'o-', label=arm)
    ax.set_xlabel('beta (source light the relighter keeps)')
    ax.set_title(k, fontsize=9)
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'beta_sweep.png', dpi=120, bbox_inches='tight')
  plt.close(fig)


def _seeds(x, fmt: str = '.2f') -> str:
  """Per-seed values as '[a, b, c]'."""
  return '[' + ', '.join(f'{v:{fmt}}' for v in np.ravel(x)) + ']'


def _verdict(passes: bool) -> str:
  return 'passes' if passes else 'fails'


def _meets(passes: bool) -> str:
  """One of several controls' verdicts, inside the control's text."""
  return 'meets both bounds' if passes else 'misses'


def evaluate_claims(cfg, m: dict[str, np.ndarray]) -> list[Any]:
  """The four claims, (1)-(3) at the relighter of `claim_beta`, from the
  SDEdit strength `strength` (the release's noise level). A claim holds
  only if its threshold is met on every trained seed (not by the seed
  mean), and each control is judged by the same rule; the evidence gives
  the per-seed values.

  (1) injection places the light: excess centroid error <= centroid_ratio
      x that without injection (control: the same noise on the wrong
      masks);
  (2) PSNR >= the baseline's + psnr_margin and above the untouched source
      video's (control: the source video in the pipeline's place, against
      the baseline: doing nothing must not clear the bar; the baseline
      rerun with fresh noise is reported as the noise floor);
  (3) fusion cuts the source-light leakage by >= leakage_drop (control:
      the same test with the beta = 0 relighter, which copies no source
      light);
  (4) temporal consistency with the beta = 0 relighter, two-sided: frame
      change <= change_ratio x the ground truth's (no flicker) and the
      change error mean |delta(out) - delta(gt)| <= change_error_ratio x
      the ground truth's frame change (the light moves as it should; a
      static video scores 1) (controls: the per-frame relighter, which
      flickers, and the untouched source video, which is static; both must
      fail).
  """
  cb, b0 = beta_name(cfg.claim_beta), beta_name(0.0)
  arr = lambda k: np.asarray(m[k], np.float64).reshape(-1)
  get = lambda k: float(np.mean(m[k]))
  at = lambda k, arm, b=cb: get(f'{k}/{arm}/{b}')
  seeds = lambda k, arm, b=cb: arr(f'{k}/{arm}/{b}')

  def paired(k, a1, a2, b=cb, rel=False):
    """Mean and ci95 over seeds of a1 - a2 (rel: 1 - a1 / a2)."""
    x, y = seeds(k, a1, b), seeds(k, a2, b)
    return log_lib.mean_ci95(1.0 - x / y if rel else x - y)

  claims = []
  # (1) light placement: injection vs none, with fusion on.
  none = seeds('excess', 'no_injection')
  ok = lambda v, ref=none: bool(np.all(ref > 0)
                                and np.all(v <= cfg.centroid_ratio * ref))
  full, wrong = seeds('excess', 'full'), seeds('excess', 'wrong_injection')
  low, low_none = (seeds('excess', 'low_strength'),
                   seeds('excess', 'low_strength_no_injection'))
  d, ci = paired('excess', 'full', 'no_injection')
  claims.append(launch.Claim(
      claim=(f'Light-map injection puts the light where the trajectory asks: '
             f'the light-centroid error in excess of the ground truth\'s is '
             f'<= {cfg.centroid_ratio:g}x that of the same pipeline without '
             f'injection on every seed (relighter keeping beta = '
             f'{cfg.claim_beta:g} of the source light; SDEdit from flow time '
             f'{cfg.strength:g}, the release\'s noise level).'),
      holds=ok(full),
      evidence=(f'excess {full.mean():.2f} px vs {none.mean():.2f} px without '
                f'injection (ratio per seed {_seeds(full / none)}; paired '
                f'{d:+.2f} +- {ci:.2f} px); at flow strength '
                f'{cfg.low_strength:g} (sigma 1): {low.mean():.2f} vs '
                f'{low_none.mean():.2f} px (ratio per seed '
                f'{_seeds(low / low_none)}, {_verdict(ok(low, low_none))}); '
                f'baseline {at("excess", "baseline"):.2f}, detail residual '
                f'off {at("excess", "no_detail"):.2f}, (t, h, w) axes '
                f'{at("excess", "thw"):.2f}, per-frame relighter '
                f'{at("excess", "perframe"):.2f}, source video '
                f'{get("excess/source"):.2f} px; the ground truth\'s own '
                f'error {get("centroid/ground_truth"):.2f} px'),
      control=launch.control_text(
          'the same injection on the masks rotated by 180 degrees',
          f'{wrong.mean():.2f} px (ratio per seed {_seeds(wrong / none)})',
          ok(wrong))))
  # (2) PSNR to the ground-truth relit video; doing nothing (the source
  # video) is the control.
  full, base = seeds('psnr', 'full'), seeds('psnr', 'baseline')
  src, rerun = arr('psnr/source'), seeds('psnr', 'baseline_rerun')
  clears = lambda v: bool(np.all(v >= base + cfg.psnr_margin))
  gain = lambda b: (at('psnr', 'full', beta_name(b))
                    - at('psnr', 'baseline', beta_name(b)))
  others = ', '.join(f'beta {b:g} {gain(b):+.2f}' for b in cfg.betas)
  claims.append(launch.Claim(
      claim=(f'LightCtrl\'s PSNR to the ground-truth relit video is >= the '
             f'baseline\'s (no injection, no fusion) + {cfg.psnr_margin:g} '
             f'dB and above the untouched source video\'s, on every seed '
             f'(beta = {cfg.claim_beta:g}).'),
      holds=clears(full) and bool(np.all(full > src)),
      evidence=(f'PSNR {full.mean():.2f} dB vs baseline {base.mean():.2f} dB '
                f'(full - baseline per seed {_seeds(full - base)}) and the '
                f'untouched source video {src.mean():.2f} dB (full - source '
                f'per seed {_seeds(full - src)}); the baseline rerun with '
                f'fresh noise (noise floor) {_seeds(rerun - base, "+.2f")}; '
                f'full - baseline by beta: {others}; injection only '
                f'{at("psnr", "no_fusion"):.2f}, fusion only '
                f'{at("psnr", "no_injection"):.2f}, flow strength '
                f'{cfg.low_strength:g} {at("psnr", "low_strength"):.2f}, '
                f'detail residual off {at("psnr", "no_detail"):.2f}, '
                f'per-frame relighter {at("psnr", "perframe"):.2f} dB'),
      control=launch.control_text(
          'the untouched source video in the pipeline\'s place (doing '
          'nothing)',
          f'{src.mean():.2f} dB (source - baseline per seed '
          f'{_seeds(src - base, "+.2f")})', clears(src))))
  # (3) leakage of the source light, fusion on vs off.
  cut = lambda on, off: bool(np.all(off > 0)
                             and np.all(on <= (1.0 - cfg.leakage_drop) * off))
  drops = lambda on, off: _seeds(100 * (1.0 - on / off), '.0f') + '%'
  on, off = seeds('leakage', 'full'), seeds('leakage', 'no_fusion')
  on0, off0 = seeds('leakage', 'full', b0), seeds('leakage', 'no_fusion', b0)
  s_on, s_off = (seeds('leakage', 'low_strength'),
                 seeds('leakage', 'low_strength_no_fusion'))
  d, ci = paired('leakage', 'full', 'no_fusion', rel=True)
  sweep = ', '.join(
      f'beta {b:g} {at("leakage", "no_fusion", beta_name(b)):.3f} -> '
      f'{at("leakage", "full", beta_name(b)):.3f}' for b in cfg.betas)
  claims.append(launch.Claim(
      claim=(f'Geometry-aware normal fusion cuts the source-light leakage '
             f'(coefficient of the source shading in the output) by >= '
             f'{cfg.leakage_drop:.0%} relative to the same pipeline with '
             f'fusion off on every seed, with a training-free relighter that '
             f'keeps beta = {cfg.claim_beta:g} of its input\'s light.'),
      holds=cut(on, off),
      evidence=(f'leakage {on.mean():.3f} with fusion vs {off.mean():.3f} '
                f'without (drop per seed {drops(on, off)}; mean {d:.0%} +- '
                f'{ci:.0%}); without -> with fusion by beta: {sweep}; '
                f'per-frame relighter '
                + ', '.join(f'{at("leakage", "perframe", beta_name(b)):.3f}'
                            for b in cfg.betas)
                + f'; flow strength {cfg.low_strength:g} '
                f'{s_off.mean():.3f} -> {s_on.mean():.3f} (drop per seed '
                f'{drops(s_on, s_off)}); detail residual off '
                f'{at("leakage", "no_detail"):.3f}; source video '
                f'{get("leakage/source"):.3f}'),
      control=launch.control_text(
          'the same test with the beta = 0 relighter (no source light to '
          'remove)', f'{off0.mean():.3f} -> {on0.mean():.3f} (drop per seed '
          f'{drops(on0, off0)})', cut(on0, off0))))
  # (4) temporal consistency, two-sided, with the beta = 0 relighter (one
  # that keeps beta of its static input flickers less per frame by
  # construction, so only the null relighter is a flicker control).
  gt = arr('change/ground_truth')

  def temporal(change, err):
    """(frame change / gt's, change error / gt's frame change, meets both
    bounds on every seed)."""
    rc, re = change / gt, err / gt
    return rc, re, bool(np.all(rc <= cfg.change_ratio)
                        and np.all(re <= cfg.change_error_ratio))

  rc, re, ok = temporal(seeds('change', 'full', b0),
                        seeds('change_error', 'full', b0))
  prc, pre, pok = temporal(seeds('change', 'perframe', b0),
                           seeds('change_error', 'perframe', b0))
  src_rc, src_re, sok = temporal(arr('change/source'),
                                 arr('change_error/source'))

  def ratio(arm, b=cb):
    rc, re, _ = temporal(seeds('change', arm, b), seeds('change_error', arm, b))
    return f'change {rc.mean():.2f}x, error {re.mean():.2f}x'

  claims.append(launch.Claim(
      claim=(f'LightCtrl is temporally consistent and its light moves as the '
             f'ground truth\'s: frame-to-frame change <= '
             f'{cfg.change_ratio:g}x the ground truth\'s and the change '
             f'error mean |delta(out) - delta(gt)| <= '
             f'{cfg.change_error_ratio:g}x the ground truth\'s frame change '
             '(1 for a static video), on every seed (the beta = 0 '
             'relighter).'),
      holds=ok,
      evidence=(f'frame change / ground truth\'s per seed {_seeds(rc)}, '
                f'change error / ground truth\'s change per seed '
                f'{_seeds(re)} (ground truth\'s change {gt.mean():.4f}); '
                f'baseline {ratio("baseline", b0)}; at '
                f'beta = {cfg.claim_beta:g}: LightCtrl '
                f'{ratio("full")}, per-frame relighter '
                f'{ratio("perframe")}, flow strength '
                f'{cfg.low_strength:g} {ratio("low_strength")}'),
      control=launch.control_text(
          'the per-frame relighter alone (flicker) and the untouched source '
          'video (static)',
          f'per-frame relighter change per seed {_seeds(prc)}, error '
          f'{_seeds(pre)}: {_meets(pok)}; source video change '
          f'{_seeds(src_rc)}, error {_seeds(src_re)}: {_meets(sok)}',
          pok or sok)))
  return claims


PAPER_SCALE = (
    'Training-free (OpenReview 5ft8vd9rwc): LightCtrl steers pretrained '
    'IC-Light and AnimateDiff (with StableNormal normals; billion-parameter '
    'models) at 512 px and trains nothing; our stand-ins (a 64-channel '
    'relighter and a 128-channel video prior on 128-px frames, 50k steps '
    'each) are trained here.')


def programs(cfg, sharded: bool = False) -> list[loop.Program]:
  """Both training chunks (unrolled) and, per trained seed, the eval set,
  the LightCtrl pipeline per FFT-axes choice (decoded), the per-frame
  relighter per beta and the scores (`benchmarks/paper_variants.py`)."""
  key = jax.ShapeDtypeStruct((2,), jnp.uint32)
  progs, models, params = [], {}, {}
  for name, make in (('relighter', make_relighter_trainer),
                     ('prior', make_prior_trainer)):
    models[name], init, step = make(cfg)
    progs.append(loop.train_program(
        f'train/{name}', init, step, num_seeds=cfg.num_seeds,
        num_steps=cfg[name].train_steps, chunk_size=_chunk(cfg, name),
        sharded=sharded, unroll=True))
    params[name] = jax.eval_shape(init, key).ema
  n_rel, n_pri = progs[0].params, progs[1].params
  fns = eval_fns(cfg, models['relighter'], models['prior'])
  ev = jax.eval_shape(fns['eval_set'], key)
  S = cfg.num_seeds
  progs.append(loop.Program('eval/eval set', fns['eval_set'], (key,),
                            calls=S))
  boolean = jax.ShapeDtypeStruct((), jnp.bool_)
  real = jax.ShapeDtypeStruct((), jnp.float32)
  arms: dict[str, list[str]] = {}
  for beta in cfg.betas:
    for arm in arms_at(cfg, beta):
      arms.setdefault(arm_axes(cfg, arm), []).append(arm)
  for axes, names in arms.items():
    progs.append(loop.Program(
        f'eval/lightctrl ({axes} FFT)',
        jax.jit(lambda *a, axes=axes: fns['pipeline'](*a, fft_axes=axes)),
        (params['relighter'], params['prior'], ev, key, real, boolean,
         boolean, boolean, real, boolean),
        calls=S * len(names), params=n_rel + n_pri,
        note=f'{len(names)} arm-betas per seed'))
  video = jax.eval_shape(fns['perframe'], params['relighter'], ev, key,
                         real)
  n_videos = sum(len(arms_at(cfg, b)) + 1 for b in cfg.betas) + 2
  progs += [
      loop.Program('eval/perframe relighter', fns['perframe'],
                   (params['relighter'], ev, key, real),
                   calls=S * len(cfg.betas),
                   params=n_rel),
      loop.Program('eval/scores', fns['scores'], (video, ev),
                   calls=S * n_videos)]
  return progs


EXPERIMENT = launch.Experiment('lightctrl', run, schema=config_schema(),
                               check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
