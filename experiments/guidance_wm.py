"""Guidance watermarking (arXiv 2509.22126) for a rectified-flow generator of
8x8 digits or (`paper`) CIFAR-10 from a local TFDS folder: a frozen watermark
decoder guides sampling (configs/guidance_wm.py).

  python -m experiments.guidance_wm
  python -m experiments.guidance_wm --config=configs/guidance_wm.py:smoke --workdir=/tmp/gwm

Trains the generator and the watermark decoder (seeds vmapped), samples
with and without guidance over omega, x0 estimates and augmentation sets,
and scores bit accuracy, zero-bit p-values, robustness to shifts, label
preservation and FD; each claim with a control.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

from absl import logging
import jax
import ml_collections
import jax.numpy as jnp
import numpy as np

from experiments import plots
from iclrjax.core import config as cfg_lib
from iclrjax.core import data as data_lib
from iclrjax.core import launch
from iclrjax.core import loop
from iclrjax.diffusion import flow
from iclrjax.diffusion import images
from iclrjax.diffusion import nets
from iclrjax.diffusion.guidance_wm import (AUGMENTATIONS, BUDGETS,
                                           FlatResMLP, SHIFTS,
                                           Velocity, WMDecoder, WMEncoder,
                                           Whitening,
                                           antipodal, bit_accuracy,
                                           check_augs,
                                           cosine, exact_decoding_threshold,
                                           fit_whitening, guided_sample,
                                           make_decoder_trainer, p_value,
                                           shift_attack_bit_accuracy,
                                           whitened_phi, wm_loss)


class Pipeline(NamedTuple):
  """Everything a seed needs to generate and decode (leading seed axis)."""
  gen: FlatResMLP
  gen_params: Any
  dec: WMDecoder
  dec_params: Any
  white: Whitening


DATASETS = ('digits', 'cifar10')


def preflight(c) -> None:
  """One-line `core.data.DatasetNotFoundError` before any compute if
  cifar10 is asked for but not prepared in c.data_dir (reads no records)."""
  if c.dataset == 'cifar10':
    data_lib.check_available('cifar10', c.data_dir or None)


def load_data(c) -> tuple[jax.Array, jax.Array, Any]:
  """(train images, test images [N, H, W, C] on [-1, 1], the classifier's
  data: None for digits (`features.train_classifier` reads them), else
  (train images, train labels, test images, test labels) of CIFAR-10 read
  from c.data_dir)."""
  if c.dataset == 'digits':
    return (jnp.asarray(flow.digits('train')),
            jnp.asarray(flow.digits('test')), None)
  split = lambda s: data_lib.as_numpy('cifar10', s,
                                      data_dir=c.data_dir or None)
  tr, te = split('train'), split('test')
  x, xt = (jnp.asarray(images.to_signed(np.asarray(d['image'], np.uint8)))
           for d in (tr, te))
  y, yt = (np.asarray(d['label'], np.int32) for d in (tr, te))
  return x, xt, (x, y, xt, yt)


def _data_name(c) -> str:
  return {'digits': 'digits', 'cifar10': 'CIFAR-10 images'}[
      c.get('dataset', 'digits')]


def make_generator(c) -> FlatResMLP:
  return FlatResMLP(c.gen_width, c.gen_blocks, c.gen_emb_dim)


def generator_trainer(c, gen: FlatResMLP, train_x: Any):
  """(init, step) of the rectified-flow generator (`flow.make_trainer`;
  train_x: the images or their shapes)."""
  return flow.make_trainer(gen, train_x, dict(
      batch_size=c.gen_batch_size, learning_rate=c.gen_learning_rate,
      ema_decay=c.gen_ema_decay))


def _velocity(gen: FlatResMLP, params: Any) -> Velocity:
  return lambda x, t: gen.apply(params, x, jnp.full((x.shape[0],), t))


def render(x: jax.Array) -> jax.Array:
  """The image a user gets: the sample clipped to the data range [-1, 1]."""
  return jnp.clip(x, -1.0, 1.0)


@functools.lru_cache(maxsize=32)
def _sampler(gen: FlatResMLP, dec: WMDecoder, num_steps: int,
             guided_steps: int, estimate: str, noise_std: float, tau: float,
             eta: float, clip_x0: bool = False, budget: str = 'shared',
             chunk: int = 0, augs: tuple[str, ...] = ('identity',)):
  """jit(vmap over seeds)(gen_params, dec_params, white, x1, u, key, omega)
  -> rendered images [S, B, H, W, C] (the guidance gradients of the
  augmentation set `augs`, `chunk` images per decoder call)."""

  def one(gen_params, dec_params, white, x1, u, key, omega):
    phi_fn = whitened_phi(dec, dec_params, white)
    x = guided_sample(_velocity(gen, gen_params), phi_fn, x1, u, key,
                      num_steps=num_steps, guided_steps=guided_steps,
                      omega=omega, augs=augs, estimate=estimate,
                      noise_std=noise_std, tau=tau, eta=eta, clip_x0=clip_x0,
                      budget=budget, chunk=chunk)
    return render(x)

  return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, 0, 0, None)))


def generate(p: Pipeline, c, x1, u, key, omega: float,
             augs: Sequence[str], estimate: str, window: int | None = None,
             budget: str | None = None) -> jax.Array:
  """Guided (or, with omega = 0, plain) samples for every seed; guidance in
  the last `window` steps (default: the headline window) with `budget`
  (default: the config's)."""
  window = c.headline_window if window is None else window
  guided = window if omega > 0 else 0
  f = _sampler(p.gen, p.dec, c.num_steps, guided, estimate,
               float(c.guidance_noise_std), float(c.tau), float(c.eta),
               bool(c.get('clip_x0', False)), budget or c.budget,
               c.decode_batch, check_augs(augs) if guided else ('identity',))
  return f(p.gen_params, p.dec_params, p.white, x1, u, key,
           jnp.float32(omega))


def decoder(dec: WMDecoder, chunk: int = 0):
  """(dec_params, images [B, ...]) -> raw logits [B, M], decoded `chunk`
  images per call (`nets.in_chunks`; 0: all at once)."""
  return lambda dp, x: nets.in_chunks(lambda z: dec.apply(dp, z), chunk)(x)


def whitening_fn(dec: WMDecoder, chunk: int = 0):
  """(dec_params, images [N, ...]) -> the `Whitening` fitted to their
  decoded logits, `chunk` images per decoder call."""
  return lambda dp, x: fit_whitening(decoder(dec, chunk)(dp, x))


def _phi_all(p: Pipeline, x: jax.Array, chunk: int = 0) -> jax.Array:
  """Whitened phi of images [S, B, ...] with each seed's decoder."""
  return _phi_all_fn(p.dec, chunk)(p.dec_params, p.white, x)


@functools.lru_cache(maxsize=8)
def _phi_all_fn(dec: WMDecoder, chunk: int = 0):
  return jax.jit(jax.vmap(lambda dp, w, x: w(decoder(dec, chunk)(dp, x))))


def _shift_acc_all(p: Pipeline, x: jax.Array, bits: jax.Array,
                   chunk: int = 0) -> jax.Array:
  return _shift_acc_fn(p.dec, chunk)(p.dec_params, p.white, x, bits)


@functools.lru_cache(maxsize=8)
def _shift_acc_fn(dec: WMDecoder, chunk: int = 0):
  return jax.jit(jax.vmap(lambda dp, w, x, b: nets.in_chunks(
      lambda xx, bb: shift_attack_bit_accuracy(whitened_phi(dec, dp, w), xx,
                                               bb), chunk)(x, b)))


def _posthoc_marks(enc: WMEncoder, dec: WMDecoder, ep, dp, x, bits,
                   chunk: int = 0, clip: bool = False):
  """The post-hoc watermark on images x [B, ...] with bits [B, M]: (marked
  images, rendered if `clip`; bit accuracy [B] and under the shift attack
  [B], read by the raw decoder as it was trained), `chunk` images per call.
  """
  def part(x, bits):
    xw = enc.apply(ep, x, bits)
    xw = render(xw) if clip else xw
    raw = lambda z: dec.apply(dp, z)
    return (xw, bit_accuracy(raw(xw), bits),
            shift_attack_bit_accuracy(raw, xw, bits))
  return nets.in_chunks(part, chunk)(x, bits)


@functools.lru_cache(maxsize=8)
def _posthoc_test_fn(enc: WMEncoder, dec: WMDecoder, chunk: int = 0):
  """jit(vmap over seeds)(enc_params, dec_params, test images (shared),
  bits) -> (bit accuracy, under the shift attack, RMSE of the mark)."""
  def one(ep, dp, x, bits):
    xw, acc, acc_shift = _posthoc_marks(enc, dec, ep, dp, x, bits, chunk)
    return acc.mean(), acc_shift.mean(), jnp.sqrt(jnp.mean((xw - x) ** 2))
  return jax.jit(jax.vmap(one, in_axes=(0, 0, None, 0)))


@functools.lru_cache(maxsize=16)
def _posthoc_gen_fn(enc: WMEncoder, dec: WMDecoder, chunk: int = 0):
  """jit(vmap over seeds)(enc_params, dec_params, images, bits) ->
  (rendered marked images, bit accuracy, under the shift attack)."""
  def one(ep, dp, x, bits):
    xw, acc, acc_shift = _posthoc_marks(enc, dec, ep, dp, x, bits, chunk,
                                        clip=True)
    return xw, acc.mean(), acc_shift.mean()
  return jax.jit(jax.vmap(one))


def config_schema() -> dict[str, Any]:
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  pos_int = cfg_lib.Int(min=1)
  augs = cfg_lib.Seq(item=cfg_lib.Choice(*AUGMENTATIONS), min_len=1)
  return {
      'dataset': cfg_lib.Choice(*DATASETS),
      'gen_width': pos_int, 'gen_blocks': pos_int, 'gen_emb_dim': pos_int,
      'gen_train_steps': pos_int, 'gen_batch_size': pos_int,
      'gen_learning_rate': pos,
      'gen_ema_decay': cfg_lib.Float(min=0.0, max=1.0, max_inclusive=False),
      'num_bits': cfg_lib.Int(min=2),
      'dec_channels': pos_int, 'dec_train_steps': pos_int,
      'dec_batch_size': pos_int, 'dec_learning_rate': pos,
      'dec_noise_std': cfg_lib.Float(min=0.0),
      'dec_image_weight': cfg_lib.Float(min=0.0),
      'enc_strength': pos,
      'classifier_steps': pos_int,
      'num_steps': cfg_lib.Int(min=2),
      'windows': cfg_lib.Seq(item=pos_int, min_len=1,
                             help='guidance in the last W sampling steps'),
      'headline_window': pos_int,
      'budget': cfg_lib.Choice(*BUDGETS),
      'posthoc_strengths': cfg_lib.Seq(item=pos, min_len=2),
      'estimates': cfg_lib.Seq(item=cfg_lib.Choice('tweedie', 'complete'),
                               min_len=1),
      'headline_estimate': cfg_lib.Choice('tweedie', 'complete'),
      'omegas': cfg_lib.Seq(item=pos, min_len=1),
      'headline_omega': pos,
      'eta': pos, 'tau': pos,
      'guidance_noise_std': cfg_lib.Float(min=0.0),
      'base_augs': augs, 'robust_augs': augs, 'nonshift_augs': augs,
      'shift_gain': cfg_lib.Float(min=0.0, help=(
          'bit accuracy under the shift attack the shift set must add over '
          'identity guidance at matched FD')),
      'whiten_on': cfg_lib.Choice('real', 'generated'),
      'num_calibration': cfg_lib.Int(min=10),
      'num_guided': cfg_lib.Int(min=2),
      'decode_batch': cfg_lib.Int(min=0, help=(
          'images per decoder call in the whitening fits, the guidance '
          'gradients and the decoding scores (lax.map over chunks; 0: all '
          'at once)')),
      'steps_per_chunk': pos_int, 'log_every': pos_int,
  }


def check_config(c) -> None:
  for w in c.windows:
    cfg_lib.check(w <= c.num_steps, 'windows', c.windows,
                  f'each must be <= num_steps={c.num_steps}')
  cfg_lib.check(c.headline_window in c.windows, 'headline_window',
                c.headline_window, f'must be one of windows={c.windows}')
  cfg_lib.check(c.headline_omega in c.omegas, 'headline_omega',
                c.headline_omega, f'must be one of omegas={c.omegas}')
  cfg_lib.check(c.headline_estimate in c.estimates, 'headline_estimate',
                c.headline_estimate, f'must be one of estimates={c.estimates}')
  cfg_lib.check(c.num_guided <= c.num_calibration, 'num_guided',
                c.num_guided, f'must be <= num_calibration='
                f'{c.num_calibration} (guided and unguided share noise)')
  cfg_lib.check(any(s in c.robust_augs for s in SHIFTS), 'robust_augs',
                c.robust_augs, 'must contain a 1-pixel shift')
  cfg_lib.check(not any(s in c.nonshift_augs for s in SHIFTS),
                'nonshift_augs', c.nonshift_augs,
                'is the control of the shift claim: no 1-pixel shift in it')
  (n_train, *_), n_test = DATA_SIZES[c.get('dataset', 'digits')]
  sizes = (n_train, n_test, c.num_calibration, c.num_guided)
  cfg_lib.check(not c.decode_batch or all(
      n <= c.decode_batch or n % c.decode_batch == 0 for n in sizes),
                'decode_batch', c.decode_batch,
                'must divide each of the train, test, calibration and guided '
                f'image counts {sizes} that it is below (or be 0)')


def _tag(augs_name: str, estimate: str, omega: float, window: int,
         budget: str) -> str:
  return f'{augs_name}_{estimate}_W{window}_{budget}_w{omega:g}'


def sweep_points(c) -> list[tuple[str, str, float, int, str]]:
  """(augs, estimate, omega, window, budget) of every guided run: window x
  omega for base guidance with the headline estimate; the other estimates
  at the headline window; the robust (shift) and the non-shift sets at the
  headline window over omega with the config's budget, and the robust set
  with the other budget at the headline omega."""
  est, W, b = c.headline_estimate, c.headline_window, c.budget
  pts = [('base', est, o, w, b) for w in c.windows for o in c.omegas]
  pts += [('base', e, o, W, b) for e in c.estimates if e != est
          for o in c.omegas]
  pts += [('robust', est, o, W, b) for o in c.omegas]
  pts += [('nonshift', est, o, W, b) for o in c.omegas]
  pts += [('robust', est, c.headline_omega, W, o) for o in BUDGETS if o != b]
  return pts


def _posthoc_config(c, strength: float):
  """The config of the post-hoc watermark trained at `strength`."""
  d = c.to_dict()
  d['enc_strength'] = float(strength)
  return ml_collections.ConfigDict(d)


def run(r):
  """Trains generator and post-hoc watermark per seed (vmapped), whitens the
  decoder, then samples unguided and guided and scores calibration,
  bit accuracy, shift robustness and quality (launch.Run -> Result)."""
  from scipy import stats  # pylint: disable=g-import-not-at-top
  from iclrjax.diffusion import features  # pylint: disable=g-import-not-at-top
  cfg = r.config
  S = cfg.num_seeds
  train_x, test_x, clf_data = load_data(cfg)
  shape = tuple(train_x.shape[1:])
  chunk = lambda n: min(cfg.steps_per_chunk, n)

  gen = make_generator(cfg)
  init, step = generator_trainer(cfg, gen, train_x)
  out = r.train(init, step, num_steps=cfg.gen_train_steps, data=train_x,
                chunk_size=chunk(cfg.gen_train_steps), phase='generator',
                log_every=cfg.log_every, postfix_keys=('loss',))
  gen_params = out.state.ema

  init, step, enc, dec = make_decoder_trainer(train_x, cfg)
  out = r.train(init, step, num_steps=cfg.dec_train_steps, data=train_x,
                chunk_size=chunk(cfg.dec_train_steps), phase='decoder',
                log_every=cfg.log_every, postfix_keys=('bit_acc',))
  enc_params = out.state.params['encoder']
  dec_params = out.state.params['decoder']
  per_call = cfg.decode_batch
  white_real = jax.vmap(whitening_fn(dec, per_call), in_axes=(0, None))(
      dec_params, train_x)
  metrics: dict[str, np.ndarray] = {}

  # The post-hoc watermark on real test digits: works, but not under shift.
  key = jax.random.key(cfg.seed + 777)
  k_bits, k_noise, k_msg, k_guide, k_held = jax.random.split(key, 5)
  bits_test = jax.random.bernoulli(
      k_bits, 0.5, (S, test_x.shape[0], cfg.num_bits)).astype(jnp.int32)

  acc_id, acc_shift, rmse = map(np.asarray, _posthoc_test_fn(
      enc, dec, per_call)(enc_params, dec_params, test_x, bits_test))
  metrics['posthoc_bit_acc/identity'] = acc_id
  metrics['posthoc_bit_acc/shift'] = acc_shift
  metrics['posthoc_rmse/encoder'] = rmse

  # Unguided generations (the test set of the calibration claim), and a
  # held-out set from other noise to whiten on when whiten_on='generated'.
  m_cal = cfg.num_calibration
  x1 = jax.random.normal(k_noise, (S, m_cal, *shape))
  secret = jax.random.bernoulli(k_msg, 0.5, (S, 1, cfg.num_bits)).astype(
      jnp.int32)
  u_secret = antipodal(jnp.broadcast_to(secret, (S, m_cal, cfg.num_bits)))
  logging.info('guidance_wm: %d unguided samples per seed', m_cal)
  p = Pipeline(gen, gen_params, dec, dec_params, white_real)
  plain_keys = jax.random.split(k_guide, S)
  x_plain = generate(p, cfg, x1, u_secret, plain_keys, 0.0, cfg.base_augs,
                     cfg.headline_estimate)
  x_held = generate(p, cfg, jax.random.normal(k_held, x1.shape), u_secret,
                    plain_keys, 0.0, cfg.base_augs, cfg.headline_estimate)
  white_gen = jax.vmap(whitening_fn(dec, per_call))(dec_params, x_held)
  test_b = jnp.broadcast_to(test_x, (S, *test_x.shape))
  for name, white in (('real', white_real), ('generated', white_gen)):
    q = p._replace(white=white)
    for data, x in (('', x_plain), ('real_test_', test_b)):
      pv = np.asarray(p_value(cosine(_phi_all(q, x, per_call),
                                     antipodal(secret)), cfg.num_bits))
      tag = f'white_{name}_{data}'
      metrics[f'calibration/{tag}ks_pvalue'] = np.array(
          [stats.kstest(pv[s], 'uniform').pvalue for s in range(S)])
      for pfa in (1e-2, 1e-3):
        metrics[f'calibration/{tag}fpr@{pfa:g}'] = (pv < pfa).mean(1)
      if name == cfg.whiten_on and not data:
        pv_plain = pv
  p = p._replace(white=white_real if cfg.whiten_on == 'real' else white_gen)

  # Guided generations: per-image random messages, same noise as unguided.
  clf = features.train_classifier(seed=cfg.seed, steps=cfg.classifier_steps,
                                  data=clf_data)
  real_all = np.concatenate([np.asarray(train_x), np.asarray(test_x)])
  f_real = np.asarray(clf.features(real_all))
  n = cfg.num_guided
  x1g, plain = x1[:, :n], x_plain[:, :n]
  bits = jax.random.bernoulli(jax.random.fold_in(k_msg, 1), 0.5,
                              (S, n, cfg.num_bits)).astype(jnp.int32)
  u = antipodal(bits)
  label_plain = np.asarray(clf.predict(plain.reshape(-1, *shape))).reshape(
      S, n)
  fd_plain = np.array([features.frechet_distance(
      np.asarray(clf.features(plain[s])), f_real) for s in range(S)])
  metrics['fd_real/unguided'] = fd_plain
  metrics['bit_acc/unguided'] = np.asarray(
      bit_accuracy(_phi_all(p, plain, per_call), bits).mean(1))
  metrics['bit_acc_shift/unguided'] = np.asarray(
      _shift_acc_all(p, plain, bits, per_call).mean(1))
  samples = {'unguided': np.asarray(plain[0, :12])}
  # Control of the semantics claim: unguided samples from other noise.
  label_other = np.asarray(clf.predict(
      x_held[:, :n].reshape(-1, *shape))).reshape(S, n)
  metrics['label_same/other_noise'] = (label_other == label_plain).mean(1)
  fd_of = lambda x: np.array([features.frechet_distance(
      np.asarray(clf.features(x[s])), f_real) for s in range(S)])
  # The post-hoc watermark on the same unguided generations, its strength
  # swept: one encoder / decoder pair trained at each strength (the one at
  # enc_strength is the pipeline's). Decoded, as it was trained, by its raw
  # decoder (not the whitened phi).
  for strength in cfg.posthoc_strengths:
    if float(strength) == float(cfg.enc_strength):
      enc_s, dec_s, ep_s, dp_s = enc, dec, enc_params, dec_params
    else:
      init_s, step_s, enc_s, dec_s = make_decoder_trainer(
          train_x, _posthoc_config(cfg, strength))
      out_s = r.train(init_s, step_s, num_steps=cfg.dec_train_steps,
                      data=train_x, chunk_size=chunk(cfg.dec_train_steps),
                      phase=f'posthoc_s{strength:g}', log_every=cfg.log_every,
                      postfix_keys=('bit_acc',))
      ep_s = out_s.state.params['encoder']
      dp_s = out_s.state.params['decoder']
    posthoc_gen = _posthoc_gen_fn(enc_s, dec_s, per_call)
    xw, acc, acc_shift = posthoc_gen(ep_s, dp_s, plain, bits)
    tag = f'posthoc_s{strength:g}'
    metrics[f'bit_acc/{tag}'] = np.asarray(acc)
    metrics[f'bit_acc_shift/{tag}'] = np.asarray(acc_shift)
    metrics[f'fd_real/{tag}'] = fd_of(xw)
    metrics[f'fd_increase/{tag}'] = metrics[f'fd_real/{tag}'] / fd_plain - 1
  aug_sets = {'base': cfg.base_augs, 'robust': cfg.robust_augs,
              'nonshift': cfg.nonshift_augs}
  for name, est, omega, window, budget in sweep_points(cfg):
    tag = _tag(name, est, omega, window, budget)
    logging.info('guidance_wm: guided sampling %s', tag)
    xg = generate(p, cfg, x1g, u, jax.random.split(
        jax.random.fold_in(k_guide, 1), S), omega, aug_sets[name], est,
        window, budget)
    phi = _phi_all(p, xg, per_call)
    c = cosine(phi, u)
    metrics[f'bit_acc/{tag}'] = np.asarray(bit_accuracy(phi, bits).mean(1))
    metrics[f'bit_acc_shift/{tag}'] = np.asarray(
        _shift_acc_all(p, xg, bits, per_call).mean(1))
    metrics[f'exact_decode/{tag}'] = np.asarray(
        (wm_loss(phi, u) < exact_decoding_threshold(cfg.num_bits)).mean(1))
    metrics[f'detect@1e-3/{tag}'] = np.asarray(
        (p_value(c, cfg.num_bits) < 1e-3).mean(1))
    lab = np.asarray(clf.predict(xg.reshape(-1, *shape))).reshape(S, n)
    metrics[f'label_same/{tag}'] = (lab == label_plain).mean(1)
    metrics[f'fd_real/{tag}'] = fd_of(xg)
    metrics[f'fd_increase/{tag}'] = metrics[f'fd_real/{tag}'] / fd_plain - 1
    metrics[f'rmse_vs_unguided/{tag}'] = np.asarray(
        jnp.sqrt(jnp.mean((xg - plain) ** 2, axis=(1, 2, 3, 4))))
    if (est == cfg.headline_estimate and omega == cfg.headline_omega
        and window == cfg.headline_window and budget == cfg.budget):
      samples[f'guided ({name})'] = np.asarray(xg[0, :12])
  _plots(r, cfg, metrics, pv_plain, samples)
  return launch.Result(metrics=metrics, claims=evaluate_claims(cfg, metrics),
                       extra={'clf_test_accuracy': clf.test_accuracy})


def _plots(r, cfg, m, pv, samples) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  fig, (a0, a1) = plt.subplots(1, 2, figsize=(8, 3.2))
  a0.hist(pv.ravel(), bins=20, range=(0, 1), density=True, alpha=0.7)
  a0.axhline(1.0, color='k', lw=1)
  a0.set_xlabel('p-value (Eq. 7), unwatermarked samples')
  a0.set_ylabel('density')
  for s, row in enumerate(pv):
    q = np.sort(row)
    a1.plot((np.arange(len(q)) + 0.5) / len(q), q, lw=1, label=f'seed {s}')
  a1.plot([0, 1], [0, 1], 'k--', lw=1)
  a1.set_xlabel('uniform quantile')
  a1.set_ylabel('p-value quantile')
  plots.outside_legend(a1, fontsize=7)
  fig.suptitle('Calibration of the zero-bit p-value (should be uniform)',
               fontsize=9)
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'pvalue_calibration.png', dpi=120, bbox_inches='tight')
  plt.close(fig)

  est, W, b = cfg.headline_estimate, cfg.headline_window, cfg.budget
  fig, (a0, a1) = plt.subplots(1, 2, figsize=(9, 3.4))
  for w in cfg.windows:
    a0.plot(cfg.omegas, [m[f'bit_acc/{_tag("base", est, o, w, b)}'].mean()
                         for o in cfg.omegas], 'o-',
            label=f'last {w} of {cfg.num_steps} steps')
  for e in cfg.estimates:
    if e != est:
      a0.plot(cfg.omegas, [m[f'bit_acc/{_tag("base", e, o, W, b)}'].mean()
                           for o in cfg.omegas], 's:',
              label=f'{e} x0, last {W}')
  a0.plot(cfg.omegas, [m[f'bit_acc_shift/{_tag("robust", est, o, W, b)}']
                       .mean() for o in cfg.omegas], 'x--',
          label=f'shift-augmented, under 1-px shift (last {W})')
  a0.axhline(float(m['bit_acc/unguided'].mean()), color='gray', lw=1)
  a0.set_xscale('log')
  a0.set_xlabel('guidance strength omega')
  a0.set_ylabel('bit accuracy')
  a0.set_title(f'guided ({est} x0 estimate)', fontsize=9)
  a0.legend(fontsize=6)
  for w in cfg.windows:
    tags = [_tag('base', est, o, w, b) for o in cfg.omegas]
    a1.plot([m[f'fd_real/{t}'].mean() for t in tags],
            [m[f'bit_acc/{t}'].mean() for t in tags], 'o-',
            label=f'guided, last {w}')
  tags = [f'posthoc_s{x:g}' for x in cfg.posthoc_strengths]
  a1.plot([m[f'fd_real/{t}'].mean() for t in tags],
          [m[f'bit_acc/{t}'].mean() for t in tags], 'k^--',
          label='post-hoc encoder (strength swept)')
  a1.axvline(float(m['fd_real/unguided'].mean()), color='gray', lw=1)
  a1.set_xlabel(f'Frechet distance to real {_data_name(cfg)}')
  a1.set_ylabel('bit accuracy (no attack)')
  plots.outside_legend(a1, fontsize=6)
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'bit_accuracy_vs_omega.png', dpi=120, bbox_inches='tight')
  plt.close(fig)

  images.plot_grid(samples, r.plots_dir / 'samples_guided_vs_unguided.png',
                   title=(f'same noise; omega {cfg.headline_omega:g}, '
                          f'{cfg.headline_estimate} estimate'),
                   panel_size=(8.0, 1.1))


def posthoc_at(m: dict[str, np.ndarray], cfg, fd: float,
               field: str = 'bit_acc') -> tuple[float, str]:
  """The post-hoc watermark's mean `field` at Frechet distance fd, linear in
  FD between the swept strengths (sorted by FD), and where fd lies: 'inside'
  the swept range, 'below' it (the weakest post-hoc mark, returned, already
  costs more FD: a conservative comparison) or 'above' it (the strongest,
  returned, costs less FD: the comparison would favour guidance)."""
  tags = [f'posthoc_s{x:g}' for x in cfg.posthoc_strengths]
  fds = np.array([np.mean(m[f'fd_real/{t}']) for t in tags])
  vals = np.array([np.mean(m[f'{field}/{t}']) for t in tags])
  order = np.argsort(fds)
  where = ('below' if fd < fds.min() else 'above' if fd > fds.max()
           else 'inside')
  return float(np.interp(fd, fds[order], vals[order])), where


def shift_gain_at_matched_fd(m: dict[str, np.ndarray], cfg, name: str
                             ) -> tuple[np.ndarray, str]:
  """Per seed: bit accuracy under the shift attack of the augmentation set
  `name` (headline omega, window, estimate and budget) minus that of
  identity guidance at the same Frechet distance, interpolated linearly in
  FD over identity guidance's omega sweep (unguided, omega = 0, included);
  and 'inside' or 'above' (the set's FD beyond identity's strongest
  guidance: no matched comparison)."""
  est, w, W, b = (cfg.headline_estimate, cfg.headline_omega,
                  cfg.headline_window, cfg.budget)
  base = [_tag('base', est, o, W, b) for o in cfg.omegas]
  fds = np.stack([m['fd_real/unguided']] + [m[f'fd_real/{t}'] for t in base])
  accs = np.stack([m['bit_acc_shift/unguided']]
                  + [m[f'bit_acc_shift/{t}'] for t in base])
  tag = _tag(name, est, w, W, b)
  fd, acc = m[f'fd_real/{tag}'], m[f'bit_acc_shift/{tag}']
  gains, where = [], 'inside'
  for s in range(fd.shape[0]):
    order = np.argsort(fds[:, s])
    if fd[s] > fds[:, s].max():
      where = 'above'
    gains.append(acc[s] - np.interp(fd[s], fds[order, s], accs[order, s]))
  return np.asarray(gains), where


def evaluate_claims(cfg, m: dict[str, np.ndarray]) -> list[Any]:
  get = lambda k: float(np.mean(m[k]))
  lo = lambda k: float(np.min(m[k]))
  est, w, W, b = (cfg.headline_estimate, cfg.headline_omega,
                  cfg.headline_window, cfg.budget)
  other_b = [x for x in BUDGETS if x != b][0]
  base, rob = _tag('base', est, w, W, b), _tag('robust', est, w, W, b)
  rob_other = _tag('robust', est, w, W, other_b)
  pre = f'calibration/white_{cfg.whiten_on}_'
  other = 'real' if cfg.whiten_on == 'generated' else 'generated'
  pre_o = f'calibration/white_{other}_'

  def calibrated(p):
    ks, fpr = m[p + 'ks_pvalue'], m[p + 'fpr@0.01']
    return bool(ks.min() > 0.01 and fpr.min() >= 0.005 and fpr.max() <= 0.02)

  claims = [launch.Claim(
      claim=('Zero-bit p-values (Eq. 7) of unwatermarked generations are '
             f'uniform: KS p > 0.01 on {cfg.num_calibration} samples per '
             'seed and FPR at P_FA = 1e-2 within [0.5%, 2%] (every seed).'),
      holds=calibrated(pre),
      evidence=(f'whitened on {cfg.whiten_on} {_data_name(cfg)}: KS p per seed '
                f'{np.round(m[pre + "ks_pvalue"], 3).tolist()}; FPR@1e-2 '
                f'{np.round(m[pre + "fpr@0.01"], 4).tolist()}; FPR@1e-3 '
                f'{np.round(m[pre + "fpr@0.001"], 4).tolist()}'),
      control=launch.control_text(
          f'the decoder whitened on {other} {_data_name(cfg)}',
          f'KS p {np.round(m[pre_o + "ks_pvalue"], 4).tolist()}, FPR@1e-2 '
          f'{np.round(m[pre_o + "fpr@0.01"], 4).tolist()}',
          calibrated(pre_o)))]
  bt = lambda e, o, x: _tag('base', e, o, x, b)
  windows = ', '.join(f'last {x}: {get("bit_acc/" + bt(est, w, x)):.3f}'
                      for x in cfg.windows)
  others = ', '.join(f'{e}: {get("bit_acc/" + bt(e, w, W)):.3f}'
                     for e in cfg.estimates if e != est)
  claims.append(launch.Claim(
      claim=(f'Guidance (augmentation {tuple(cfg.base_augs)}, omega {w:g}, '
             f'last {W} of {cfg.num_steps} steps, {est} x0 estimate) makes '
             'the frozen decoder read the message: bit accuracy >= 0.95.'),
      holds=bool(get(f'bit_acc/{base}') >= 0.95),
      evidence=(f'bit accuracy {get(f"bit_acc/{base}"):.3f} (min seed '
                f'{lo(f"bit_acc/{base}"):.3f}); detection@1e-3 '
                f'{get(f"detect@1e-3/{base}"):.3f}; all bits exact '
                f'{get(f"exact_decode/{base}"):.3f}; by window at omega '
                f'{w:g}: {windows}; other x0 estimates: {others or "none"}'),
      control=launch.control_text(
          'unguided sampling', f'{get("bit_acc/unguided"):.3f}',
          get('bit_acc/unguided') >= 0.95)))
  gain, where = shift_gain_at_matched_fd(m, cfg, 'robust')
  gain_c, where_c = shift_gain_at_matched_fd(m, cfg, 'nonshift')
  nonshift = _tag('nonshift', est, w, W, b)
  gain_o = m[f'bit_acc_shift/{rob_other}'] - m[f'bit_acc_shift/{base}']
  need = cfg.shift_gain
  claims.append(launch.Claim(
      claim=(f'Adding 1-pixel shifts to the guidance augmentations ({b} '
             f'budget, Eq. 9) raises bit accuracy under a 1-pixel shift '
             f'attack by >= {need:g} absolute over identity guidance at the '
             'same Frechet distance to the data, without retraining the '
             'decoder.'),
      holds=bool(where == 'inside' and gain.mean() >= need),
      evidence=(f'shift set {tuple(cfg.robust_augs)} at omega {w:g}: under '
                f'shift {get(f"bit_acc_shift/{rob}"):.3f} at FD '
                f'{get(f"fd_real/{rob}"):.3f}; identity guidance at that FD '
                f'(interpolated over omega, per seed; {where}) gives a gain '
                f'of {gain.mean():+.3f} (per seed '
                f'{np.round(gain, 3).tolist()}); at equal omega identity '
                f'reads {get(f"bit_acc_shift/{base}"):.3f} at FD '
                f'{get(f"fd_real/{base}"):.3f}; with the per-task budget '
                f'(each task its own unit, up to {len(cfg.robust_augs)}x '
                f'the displacement) the equal-omega gain is '
                f'{gain_o.mean():+.3f} at FD {get(f"fd_real/{rob_other}"):.3f}'
                f'; post-hoc encoder (trained strength) under shift '
                f'{get("posthoc_bit_acc/shift"):.3f}'),
      control=launch.control_text(
          f'as many non-shift tasks {tuple(cfg.nonshift_augs)} (FD '
          f'{get(f"fd_real/{nonshift}"):.3f}; {where_c})',
          f'gain at matched FD {gain_c.mean():+.3f}',
          bool(where_c == 'inside' and gain_c.mean() >= need))))
  same = m[f'label_same/{base}']
  chance = m['label_same/other_noise']
  claims.append(launch.Claim(
      claim=(f'Guidance keeps the semantics: the {_data_name(cfg)} '
             'classifier gives the '
             'same label for >= 90% of samples (same noise, guided vs '
             'unguided).'),
      holds=bool(same.mean() >= 0.9),
      evidence=(f'label unchanged {same.mean():.3f} (per seed '
                f'{np.round(same, 3).tolist()})'),
      control=launch.control_text(
          'unguided samples from other noise', f'{chance.mean():.3f}',
          chance.mean() >= 0.9)))
  fdi = m[f'fd_increase/{base}']
  strongest = _tag('base', est, max(cfg.omegas), max(cfg.windows), b)
  sweep = ', '.join(
      f'omega {o:g}: {100 * get("fd_increase/" + bt(est, o, W)):+.0f}%'
      for o in cfg.omegas)
  claims.append(launch.Claim(
      claim=('Guidance costs little realism: the Frechet distance to real '
             f'{_data_name(cfg)} (classifier features) rises by <= 10% vs '
             'unguided.'),
      holds=bool(fdi.mean() <= 0.10),
      evidence=(f'guided {get(f"fd_real/{base}"):.3f} vs unguided '
                f'{get("fd_real/unguided"):.3f} ({100 * fdi.mean():+.1f}%); '
                f'last {W}, by omega: {sweep}'),
      control=launch.control_text(
          f'the strongest guidance swept (omega {max(cfg.omegas):g}, last '
          f'{max(cfg.windows)})', f'{100 * get(f"fd_increase/{strongest}"):+.1f}%',
          get(f'fd_increase/{strongest}') <= 0.10)))
  kind = {base: 'identity', rob: 'shift-augmented'}
  where_text = {
      'inside': 'interpolated',
      'below': 'below the swept FDs: the weakest post-hoc mark',
      'above': 'above the swept FDs: the strongest post-hoc mark, so the '
               'comparison is not at matched FD and does not count'}
  for attack, field, tag in (('no attack', 'bit_acc', base),
                             ('a 1-pixel shift attack', 'bit_acc_shift', rob)):
    fd = get(f'fd_real/{tag}')
    ph, where = posthoc_at(m, cfg, fd, field)
    acc = get(f'{field}/{tag}')
    claims.append(launch.Claim(
        claim=(f'Under {attack}, guidance ({kind[tag]}, omega {w:g}, last '
               f'{W}) reads more bits than the post-hoc watermark at the same '
               f'Frechet distance to real {_data_name(cfg)} (encoder strength '
               'swept).'),
        holds=bool(acc > ph and where != 'above'),
        evidence=(f'guided {acc:.3f} at FD {fd:.3f}; post-hoc at that FD '
                  f'{ph:.3f} ({where_text[where]}); '
                  'post-hoc sweep (strength: FD, bit acc): ' + ', '.join(
                      f'{x:g}: {get(f"fd_real/posthoc_s{x:g}"):.2f}, '
                      f'{get(f"{field}/posthoc_s{x:g}"):.3f}'
                      for x in cfg.posthoc_strengths)),
        control=launch.control_text(
            'the post-hoc watermark at the same FD', f'{ph:.3f}', False)))
  return claims


PAPER_SCALE = (
    'arXiv 2509.22126 (Table 1) trains no generator: it guides pretrained '
    'latent diffusion models (Stable Diffusion 2, Sana, Flux; 1000 prompts '
    'at 512 px) with frozen post-hoc decoders (Stable Signature, 48 bits; '
    'VideoSeal, 256 bits); our stand-in trains a width-2048 FlatResMLP '
    'flow on CIFAR-10 (100k steps, batch 128) and a 48-bit decoder (20k '
    'steps), with 10k calibration and 2k guided samples per seed.')


# (train, test) images of the datasets `load_data` reads (`programs`).
DATA_SIZES = {'digits': ((data_lib.DIGITS_NUM_TRAIN, 8, 8, 1), 360),
              'cifar10': ((50_000, 32, 32, 3), 10_000)}


def programs(cfg, sharded: bool = False) -> list[loop.Program]:
  """The generator and decoder training chunks, the whitening fits, the
  unguided and guided samplers (one compile per guided-steps, estimate
  and budget), the decoding scores and the post-hoc watermark's, the
  decoder `decode_batch` images per call (`benchmarks/paper_variants.py`)."""
  S = cfg.num_seeds
  sds = jax.ShapeDtypeStruct
  shape, n_test = DATA_SIZES[cfg.get('dataset', 'digits')]
  train_x = sds(shape, jnp.float32)
  keys = sds((S, 2), jnp.uint32)
  chunk = lambda n: min(cfg.steps_per_chunk, n)
  gen = make_generator(cfg)
  init, step = generator_trainer(cfg, gen, train_x)
  gen_train = loop.train_program(
      'train/generator', init, step, num_seeds=S,
      num_steps=cfg.gen_train_steps, chunk_size=chunk(cfg.gen_train_steps),
      data=train_x, sharded=sharded)
  gen_params = jax.eval_shape(jax.vmap(init), keys).ema
  init, step, enc, dec = make_decoder_trainer(train_x, cfg)
  dec_train = loop.train_program(
      'train/decoder', init, step, num_seeds=S,
      num_steps=cfg.dec_train_steps, chunk_size=chunk(cfg.dec_train_steps),
      data=train_x, sharded=sharded)
  state = jax.eval_shape(jax.vmap(init), keys).params
  enc_params, dec_params = state['encoder'], state['decoder']
  per_call = cfg.decode_batch
  fit = jax.jit(jax.vmap(whitening_fn(dec, per_call), in_axes=(0, None)))
  white = jax.eval_shape(fit, dec_params, train_x)
  images_of = lambda n: sds((S, n, *shape[1:]), jnp.float32)
  bits_of = lambda n, dt=jnp.int32: sds((S, n, cfg.num_bits), dt)
  n_cal, n = cfg.num_calibration, cfg.num_guided
  sampler = lambda guided, est, budget, augs=('identity',): _sampler(
      gen, dec, cfg.num_steps, guided, est, float(cfg.guidance_noise_std),
      float(cfg.tau), float(cfg.eta), bool(cfg.get('clip_x0', False)),
      budget, cfg.decode_batch, tuple(augs))
  sample_args = lambda m: (gen_params, dec_params, white, images_of(m),
                           bits_of(m, jnp.float32), keys,
                           sds((), jnp.float32))
  aug_sets = {'base': cfg.base_augs, 'robust': cfg.robust_augs,
              'nonshift': cfg.nonshift_augs}
  posthoc_train = [
      loop.train_program(
          f'train/post-hoc s={x:g}',
          *make_decoder_trainer(train_x, _posthoc_config(cfg, x))[:2],
          num_seeds=S, num_steps=cfg.dec_train_steps,
          chunk_size=chunk(cfg.dec_train_steps), data=train_x,
          sharded=sharded)
      for x in cfg.posthoc_strengths
      if float(x) != float(cfg.enc_strength)]
  progs = [gen_train, dec_train, *posthoc_train, loop.Program(
      'eval/whitening fit (train images)', fit, (dec_params, train_x),
      params=dec_train.params, note=(
          'run calls it un-jitted; + the fit on the held-out generations'))]
  progs.append(loop.Program(
      'eval/sample unguided', sampler(0, cfg.headline_estimate, cfg.budget),
      sample_args(n_cal), calls=2, params=gen_train.params,
      note='the calibration set and the held-out set'))
  groups: dict[tuple[str, int, str, str], int] = {}
  for name, est, _, window, budget in sweep_points(cfg):
    k = (name, window, est, budget)
    groups[k] = groups.get(k, 0) + 1
  for (name, window, est, budget), calls in groups.items():
    progs.append(loop.Program(
        f'eval/sample guided {name} W={window} {est} {budget}',
        sampler(window, est, budget, aug_sets[name]), sample_args(n),
        calls=calls, params=gen_train.params, note='omega is traced: one '
        'compile serves the sweep over omega'))
  progs += [
      loop.Program('eval/decode phi', _phi_all_fn(dec, per_call),
                   (dec_params, white, images_of(n)),
                   calls=len(sweep_points(cfg)) + 1, params=dec_train.params,
                   note='+ 4 calls on the calibration and the test images'),
      loop.Program('eval/decode shifted', _shift_acc_fn(dec, per_call),
                   (dec_params, white, images_of(n), bits_of(n)),
                   calls=len(sweep_points(cfg)), params=dec_train.params),
      loop.Program('eval/post-hoc watermark (test images)',
                   _posthoc_test_fn(enc, dec, per_call),
                   (enc_params, dec_params, sds((n_test, *shape[1:]),
                                                jnp.float32), bits_of(n_test)),
                   params=dec_train.params),
      loop.Program('eval/post-hoc watermark (generations)',
                   _posthoc_gen_fn(enc, dec, per_call),
                   (enc_params, dec_params, images_of(n), bits_of(n)),
                   calls=len(cfg.posthoc_strengths), params=dec_train.params,
                   note=('the FD classifier (features.train_classifier, '
                         f'{cfg.classifier_steps} steps) and its features '
                         'and the p-values (scipy) are not listed'))]
  return progs


EXPERIMENT = launch.Experiment('guidance_wm', run, schema=config_schema(),
                               check_fn=check_config, preflight=preflight)

if __name__ == '__main__':
  EXPERIMENT.main()
