"""OFTSR (arXiv 2412.09465): one-step flow super-resolution with a tunable
fidelity-realism knob, on 2x SR of 8x8 digits or, in the paper variant, 4x
SR of FFHQ / DIV2K photographs from a local folder (configs/oftsr.py).

  python -m experiments.oftsr
  python -m experiments.oftsr --config=configs/oftsr.py:smoke --workdir=/tmp/oftsr
  python -m experiments.oftsr --config=configs/oftsr.py:paper \
      --config.data_dir=/path/to/ffhq256

Trains the flow teachers (one per sigma_p, seeds vmapped), distils the
one-step student from the sigma_p = student_sigma_p teacher, and scores
PSNR vs HR and FD to real digits for the LR input, every teacher (N-step
Euler and its one-step jump), the student over the knob t and the
undistilled model used as the student; claims (i)-(iii) and the
gap-closure criterion (vi), each with a control ((v), a fixed 0.2x of the
one-step jump's FD, is retired: the 32-step teacher itself misses it).

Realism (FD) is measured in a digits classifier's features for digits and,
for photographs, in a fixed random conv net's features
(`features.random_conv_features`): a reproducible pixel-statistics distance
that needs no download, not FID (no Inception weights offline). Its
reference set is the training images, its floor the held-out HR images.
PSNR is on RGB in [-1, 1] (the paper reports it on RGB too).
"""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from experiments import plots
from iclrjax.core import config as cfg_lib
from iclrjax.core import data as data_lib
from iclrjax.core import launch
from iclrjax.core import loop
from iclrjax.diffusion import features as features_lib
from iclrjax.diffusion import flow
from iclrjax.diffusion import images
from iclrjax.diffusion import oftsr
from iclrjax.diffusion.oftsr import (SRVelocity, bind, euler_sample,
                                     eval_inputs, make_net,
                                     make_student_trainer,
                                     make_teacher_trainer, one_step, psnr)

DATASETS = ('digits', 'ffhq', 'div2k')
# dataset -> (the layout data_dir must have, an example value).
_LAYOUTS = {
    'ffhq': ('FFHQ-style PNG/JPEG files under data_dir (<data_dir>/*.png or '
             '<data_dir>/00000/00000.png, ...)', '/path/to/ffhq256'),
    'div2k': ('<data_dir>/DIV2K_train_HR/*.png and '
              '<data_dir>/DIV2K_valid_HR/*.png', '/path/to/DIV2K'),
}


def hr_files(c) -> tuple[list[pathlib.Path], list[pathlib.Path]]:
  """(train, test) image files of a folder dataset (c.dataset 'ffhq' or
  'div2k', c.data_dir): FFHQ holds out its last c.num_eval files (sorted
  paths; the official ffhq_val_100 is from 69000 on), DIV2K tests on
  DIV2K_valid_HR. Lists files only (cheap: the launcher's preflight).

  Raises:
    FileNotFoundError: one line naming data_dir, the layout and the fix.
  """
  root = pathlib.Path(c.data_dir) if c.data_dir else None
  if c.dataset == 'div2k':
    train = images.image_files(root / 'DIV2K_train_HR') if root else []
    test = images.image_files(root / 'DIV2K_valid_HR') if root else []
    found = len(train) + len(test)
  else:
    files = images.image_files(root) if root else []
    train, test = files[:-c.num_eval], files[-c.num_eval:]
    found = len(files)
  if not train or not test:
    layout, example = _LAYOUTS[c.dataset]
    if not found:
      what = 'has no images'
    elif c.dataset == 'ffhq':
      what = (f'has too few images ({found}; training needs more than '
              f'num_eval={c.num_eval} held out)')
    else:
      what = f'lacks {"DIV2K_valid_HR" if train else "DIV2K_train_HR"} images'
    raise FileNotFoundError(
        f"data_dir={c.data_dir!r} {what}: OFTSR's {c.dataset} data reads "
        f'{layout}; set --config.data_dir={example} (nothing is downloaded)')
  return train, test[:c.num_eval]


def preflight(c) -> None:
  """`hr_files` for a folder dataset, before any compute; digits are
  offline."""
  if c.dataset != 'digits':
    hr_files(c)


def load_data(c) -> tuple[jax.Array, jax.Array]:
  """(train HR, test HR) images [N, hr_size, hr_size, C]: digits as float32
  on [-1, 1]; photographs as uint8 RGB (`images.load_image_folder`: FFHQ
  resized to hr_size, DIV2K random training crops, c.crops_per_image per
  image, and centred test crops), converted to [-1, 1] per minibatch."""
  if c.dataset == 'digits':
    return (jnp.asarray(flow.digits('train')),
            jnp.asarray(flow.digits('test')[:c.num_eval]))
  train, test = hr_files(c)
  crop, crops = (('random', c.crops_per_image) if c.dataset == 'div2k'
                 else ('resize', 1))
  logging.info('oftsr: reading %d %s training images', len(train), c.dataset)
  train_x = images.load_image_folder(train, c.hr_size, crop=crop,
                                     limit=c.num_train, num_crops=crops,
                                     seed=c.seed)
  test_crop = 'center' if c.dataset == 'div2k' else 'resize'
  return (jnp.asarray(train_x),
          jnp.asarray(images.load_image_folder(test, c.hr_size,
                                               crop=test_crop)))


def realism_features(c, train_x: jax.Array, x_test: jax.Array
                     ) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
  """(a featurizer with .features(x), the reference features of the
  training images, extra metrics incl. 'fd/real_test': the FD of real
  held-out images, the floor of the FD scale)."""
  if c.dataset == 'digits':
    logging.info('oftsr: training the digits classifier for FD')
    feat = features_lib.train_classifier(seed=c.seed,
                                         steps=c.classifier_steps)
    real_test = jnp.asarray(flow.digits('test'))
  else:
    # Seed 0 always: one feature space for every run.
    feat, real_test = features_lib.random_conv_features(0), x_test
  ref_feats = np.asarray(feat.features(train_x))
  extra = {'fd/real_test': features_lib.frechet_distance(
      np.asarray(feat.features(real_test)), ref_feats)}
  if c.dataset == 'digits':
    extra['classifier_test_accuracy'] = feat.test_accuracy
  return feat, ref_feats, {k: np.full(c.num_seeds, v)
                           for k, v in extra.items()}


def _in_batches(fn: Callable[..., Any], batch: int, *arrays: jax.Array
                ) -> Any:
  """fn(*arrays), called on `batch` rows at a time (0: all at once) and the
  outputs concatenated (the samplers act per example)."""
  n = arrays[0].shape[0]
  if not batch or batch >= n:
    return fn(*arrays)
  outs = [fn(*(a[i:i + batch] for a in arrays)) for i in range(0, n, batch)]
  return jax.tree.map(lambda *o: np.concatenate(o), *outs)


@functools.lru_cache(maxsize=16)
def _samplers(net: SRVelocity, num_steps: int):

  @jax.jit
  def teacher(params, x0, y):
    return (euler_sample(bind(net, params, y), x0, num_steps),
            euler_sample(bind(net, params, y), x0, 1))

  @jax.jit
  def student(params, x0, y, t):
    return one_step(bind(net, params, y), x0, t)

  return teacher, student


def _clip(x):
  return np.clip(np.asarray(x), -1.0, 1.0)


def evaluate_seed(net: SRVelocity, teachers: dict[float, Any], student: Any,
                  x_test: jax.Array, key: jax.Array, featurizer,
                  ref_feats: Any, c: Any
                  ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
  """Metrics of one seed: PSNR vs HR and FD vs real images (the features of
  `featurizer`, see `realism_features`) for the LR input,
  every teacher (N-step Euler from t = eps, and its one-step Euler jump), the
  student at every knob t, and the undistilled model used as the student
  ('undistilled_t<t_max>': the teacher's one-step output x_0 + (1 - eps)
  v_theta(x_0, t_max), i.e. the student before distillation); PSNR of the
  student against its teacher's N-step endpoint.

  Outputs are clipped to [-1, 1] before scoring. Returns (metrics, images of
  the first examples for the sample grid).
  """
  teach_fn, stud_fn = _samplers(net, int(c.teacher_eval_steps))
  fd = lambda x: features_lib.frechet_distance(
      np.asarray(featurizer.features(x)), ref_feats)
  out: dict[str, float] = {}
  imgs: dict[str, np.ndarray] = {}
  n_show = min(12 if c.dataset == 'digits' else 4, x_test.shape[0])
  x1 = y = None
  endpoint = None
  for sp, params in teachers.items():
    x1, y, x0 = eval_inputs(x_test, key, c.eval_draws, c.sigma_y, sp,
                            c.factor, c.degradation)
    multi, jump = _in_batches(functools.partial(teach_fn, params),
                              c.eval_batch, x0, y)
    multi, jump = _clip(multi), _clip(jump)
    tag = f'teacher_sp{sp:g}'
    out[f'psnr/{tag}_euler{c.teacher_eval_steps}'] = psnr(multi, x1)
    out[f'fd/{tag}_euler{c.teacher_eval_steps}'] = fd(multi)
    out[f'psnr/{tag}_1step'] = psnr(jump, x1)
    out[f'fd/{tag}_1step'] = fd(jump)
    imgs[f'teacher sp={sp:g}, {c.teacher_eval_steps} steps'] = multi[:n_show]
    if sp == c.student_sigma_p:
      endpoint = multi
      x0_student, teacher_student = x0, params
      out['psnr_vs_teacher/jump'] = psnr(jump, endpoint)
      imgs[f'teacher sp={sp:g}, 1 step'] = jump[:n_show]
  y_clip = _clip(y)
  out['psnr/lr_input'] = psnr(y_clip, x1)
  out['fd/lr_input'] = fd(y_clip)
  imgs = {'LR (upsampled)': y_clip[:n_show],
          'HR': np.asarray(x1[:n_show]), **imgs}

  def student_at(params, t):
    return _in_batches(
        lambda x0, y: stud_fn(params, x0, y, jnp.float32(t)), c.eval_batch,
        x0_student, y)

  for t in c.knob_ts:
    xh = _clip(student_at(student, t))
    out[f'psnr/student_t{t:g}'] = psnr(xh, x1)
    out[f'fd/student_t{t:g}'] = fd(xh)
    out[f'psnr_vs_teacher/student_t{t:g}'] = psnr(xh, endpoint)
    imgs[f'student t={t:g}'] = xh[:n_show]
  lo, hi = c.knob_ts[0], c.knob_ts[-1]
  for t in (lo, hi):  # student_at(teacher): the undistilled model
    xh = _clip(student_at(teacher_student, t))
    out[f'psnr/undistilled_t{t:g}'] = psnr(xh, x1)
    out[f'fd/undistilled_t{t:g}'] = fd(xh)
  imgs[f'undistilled t={hi:g}'] = xh[:n_show]
  return out, imgs


# ----------------------------------------------------------------------------
# The experiment.


def config_schema() -> dict[str, Any]:
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  unit = cfg_lib.Float(min=0.0, max=1.0, max_inclusive=False)
  knob = cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                       max_inclusive=False)
  return {
      'dataset': cfg_lib.Choice(*DATASETS),
      'hr_size': cfg_lib.Int(min=2, help='HR image side (digits: 8)'),
      'num_train': cfg_lib.Int(min=0, help='folder training images (0: all)'),
      'crops_per_image': cfg_lib.Int(min=1, help='div2k crops per image'),
      'degradation': cfg_lib.Choice(*oftsr.DEGRADATIONS),
      'net': cfg_lib.Choice('resmlp', 'unet'),
      'channels': cfg_lib.Int(min=1),
      'channel_mults': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
      'num_res_blocks': cfg_lib.Int(min=1),
      'attention_res': cfg_lib.Seq(item=cfg_lib.Int(min=1),
                                   help='UNet resolutions with attention'),
      'dropout': unit,
      'eval_batch': cfg_lib.Int(min=0, help='sampler batch (0: all)'),
      'factor': cfg_lib.Int(min=1, help='SR factor (HR side / LR side)'),
      'sigma_y': cfg_lib.Float(min=0.0, help='LR measurement noise'),
      'sigma_ps': cfg_lib.Seq(item=unit, min_len=1,
                              help='teacher noise augmentations'),
      'student_sigma_p': unit,
      'width': cfg_lib.Int(min=1),
      'blocks': cfg_lib.Int(min=1),
      'emb_dim': cfg_lib.Int(min=2),
      'hidden_mult': cfg_lib.Int(min=1),
      'batch_size': cfg_lib.Int(min=1),
      'teacher_steps': cfg_lib.Int(min=1),
      'teacher_lr': pos,
      'student_steps': cfg_lib.Int(min=1),
      'student_lr': pos,
      'warmup_steps': cfg_lib.Int(min=0),
      'grad_clip': cfg_lib.Float(min=0.0),
      'ema_decay': unit,
      't_min': knob,
      't_max': knob,
      'dt': pos,
      'rk2_r': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False),
      'lambda_distill': cfg_lib.Float(min=0.0),
      'lambda_boundary': cfg_lib.Float(min=0.0),
      'lambda_align': cfg_lib.Float(min=0.0),
      'knob_ts': cfg_lib.Seq(item=knob, min_len=2),
      'teacher_eval_steps': cfg_lib.Int(min=1),
      'num_eval': cfg_lib.Int(min=2, help='test images scored (digits: '
                              '<= 360)'),
      'eval_draws': cfg_lib.Int(min=1, help='degradations per test digit'),
      'classifier_steps': cfg_lib.Int(min=1),
      'steps_per_chunk': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
  }


def check_config(c) -> None:
  cfg_lib.check(c.hr_size % c.factor == 0, 'factor', c.factor,
                f'must divide hr_size={c.hr_size}')
  if c.dataset == 'digits':
    cfg_lib.check(c.hr_size == 8, 'hr_size', c.hr_size,
                  "must be 8 for dataset='digits'")
    cfg_lib.check(c.num_eval <= 360, 'num_eval', c.num_eval,
                  'at most 360 (the digits test split)')
  if c.net == 'unet':
    levels = len(c.channel_mults)
    cfg_lib.check(c.hr_size % 2 ** (levels - 1) == 0, 'hr_size', c.hr_size,
                  f'must be divisible by 2^{levels - 1} for '
                  f'channel_mults={tuple(c.channel_mults)}')
    sizes = [c.hr_size // 2 ** l for l in range(levels)]
    cfg_lib.check(set(c.attention_res) <= set(sizes), 'attention_res',
                  c.attention_res, f'must be among the UNet resolutions '
                  f'{sizes} (hr_size={c.hr_size})')
  cfg_lib.check(c.student_sigma_p in c.sigma_ps, 'student_sigma_p',
                c.student_sigma_p, f'must be one of sigma_ps={c.sigma_ps}')
  cfg_lib.check(c.t_min < c.t_max, 't_max', c.t_max,
                f'must exceed t_min={c.t_min}')
  cfg_lib.check(list(c.knob_ts) == sorted(set(c.knob_ts)), 'knob_ts',
                c.knob_ts, 'must be strictly increasing')


def _tag(sp: float) -> str:
  return f'teacher_sp{sp:g}'


def run(r):
  """Teachers (one per sigma_p), the student distilled from the
  student_sigma_p teacher, then evaluation (launch.Run -> launch.Result)."""
  c = r.config
  train_x, x_test = load_data(c)
  net = make_net(c)
  chunk = lambda n: min(c.steps_per_chunk, n)
  teachers = {}
  for sp in c.sigma_ps:
    init, step = make_teacher_trainer(net, train_x, c, sp)
    out = r.train(init, step, num_steps=c.teacher_steps, data=train_x,
                  chunk_size=chunk(c.teacher_steps), phase=_tag(sp),
                  log_every=c.log_every, postfix_keys=('loss',))
    teachers[sp] = out.state.ema
  init, step = make_student_trainer(net, c, c.student_sigma_p)
  out = r.train(init, step, num_steps=c.student_steps, data=train_x,
                chunk_size=chunk(c.student_steps), phase='student',
                log_every=c.log_every, init_args=teachers[c.student_sigma_p],
                postfix_keys=('loss',))
  student = out.state.ema

  featurizer, ref_feats, extra = realism_features(c, train_x, x_test)
  per_seed: list[dict[str, float]] = []
  grid = None
  for i in range(c.num_seeds):
    logging.info('oftsr: evaluating seed %d', i)
    pick = lambda tree, i=i: jax.tree.map(lambda a: a[i], tree)
    m, imgs = evaluate_seed(
        net, {sp: pick(p) for sp, p in teachers.items()}, pick(student),
        x_test, jax.random.fold_in(jax.random.key(c.seed + 777), i),
        featurizer, ref_feats, c)
    per_seed.append(m)
    grid = imgs if grid is None else grid
  metrics = {k: np.array([m[k] for m in per_seed]) for k in per_seed[0]}
  metrics.update(extra)
  _plots(r, c, metrics, grid)
  return launch.Result(metrics=metrics, claims=evaluate_claims(c, metrics))


def _plots(r, c, m: dict[str, np.ndarray], grid: dict[str, np.ndarray]
           ) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  ts = list(c.knob_ts)
  n = c.teacher_eval_steps
  fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
  real = 'digits' if c.dataset == 'digits' else 'images'
  for ax, kind, label in ((axes[0], 'psnr', 'PSNR vs HR (dB)'),
                          (axes[1], 'fd', f'FD to real {real} (lower = '
                                          'more realistic)')):
    vals = np.stack([m[f'{kind}/student_t{t:g}'] for t in ts])  # [T, seeds]
    ax.errorbar(ts, vals.mean(1), yerr=vals.std(1), fmt='o-',
                label='student, 1 step')
    for j, sp in enumerate(c.sigma_ps):
      ax.axhline(m[f'{kind}/{_tag(sp)}_euler{n}'].mean(), ls='--',
                 color=f'C{j + 1}', label=f'teacher sp={sp:g}, {n} steps')
    sp = c.student_sigma_p
    ax.axhline(m[f'{kind}/{_tag(sp)}_1step'].mean(), ls='-.', color='k',
               label=f'teacher sp={sp:g}, 1 Euler step')
    ax.plot([ts[-1]], [m[f'{kind}/undistilled_t{ts[-1]:g}'].mean()], 'rx',
            label='undistilled (teacher as student)')
    ax.axhline(m[f'{kind}/lr_input'].mean(), ls=':', color='gray',
               label='LR input')
    if kind == 'fd':
      ax.set_yscale('log')
    ax.set_xlabel('knob t')
    ax.set_ylabel(label)
  axes[0].legend(fontsize=7)
  fig.suptitle('OFTSR: fidelity (t -> 0) vs realism (t -> 1), mean +- sd '
               'over seeds', fontsize=9)
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'psnr_fd_vs_t.png', dpi=120, bbox_inches='tight')
  plt.close(fig)

  digits = c.dataset == 'digits'
  name = 'digits' if digits else f'{c.dataset} images'
  images.plot_grid(grid, r.plots_dir / 'samples.png',
                   title=f'{c.factor}x SR of test {name} (seed 0)',
                   panel_size=(8.0, 0.8) if digits else (8.0, 2.0))

  plots.plot_run(r, [f'{_tag(sp)}/loss' for sp in c.sigma_ps], 'teacher_loss',
                 title='teacher L1 flow loss', logy=True)
  plots.plot_run(r, ['student/distill', 'student/boundary', 'student/align'],
                 'student_losses', title='student losses (unweighted)',
                 logy=True)


def evaluate_claims(c, m: dict[str, np.ndarray]) -> list[Any]:
  """Criteria (i)-(iii) and (vi), each with a control that fails it; (vi)
  scores the student against the teacher's natural one-step Euler jump as
  the fraction of the jump-to-teacher FD gap it closes (criterion (v), a
  fixed 0.2x of the jump's FD, is retired: the teacher itself misses it)."""
  mean = lambda k: float(np.mean(m[k]))
  lo, hi = c.knob_ts[0], c.knob_ts[-1]
  n = c.teacher_eval_steps
  sp = c.student_sigma_p
  claims = []
  agree = mean(f'psnr_vs_teacher/student_t{hi:g}')
  jump_agree = mean('psnr_vs_teacher/jump')
  claims.append(launch.Claim(
      claim=(f'(i) The one-step student at t={hi:g} lands on the teacher '
             f'(sigma_p={sp:g}) {n}-step Euler endpoint: PSNR(student, '
             'teacher endpoint) >= 27 dB.'),
      holds=agree >= 27.0,
      evidence=(f'{agree:.2f} dB (per seed '
                f'{np.round(m[f"psnr_vs_teacher/student_t{hi:g}"], 2)})'),
      control=launch.control_text(
          "the teacher's one-step Euler jump from t=eps",
          f'{jump_agree:.2f} dB', jump_agree >= 27.0)))
  p_lo, p_hi = mean(f'psnr/student_t{lo:g}'), mean(f'psnr/student_t{hi:g}')
  f_lo, f_hi = mean(f'fd/student_t{lo:g}'), mean(f'fd/student_t{hi:g}')
  u = {t: (mean(f'psnr/undistilled_t{t:g}'), mean(f'fd/undistilled_t{t:g}'))
       for t in (lo, hi)}
  knob = lambda plo, phi, flo, fhi: plo > phi and fhi <= 0.8 * flo
  table = ', '.join(
      f't={t:g}: {mean(f"psnr/student_t{t:g}"):.2f} dB / FD '
      f'{mean(f"fd/student_t{t:g}"):.3f}' for t in c.knob_ts)
  claims.append(launch.Claim(
      claim=(f'(ii) The knob t trades fidelity for realism: PSNR vs HR at '
             f't={lo:g} > at t={hi:g}, and FD(t={hi:g}) is >= 20% below '
             f'FD(t={lo:g}).'),
      holds=bool(knob(p_lo, p_hi, f_lo, f_hi)),
      evidence=f'{table}; FD ratio {f_hi / f_lo:.3f}',
      control=launch.control_text(
          'the undistilled teacher used with the same knob',
          f't={lo:g}: {u[lo][0]:.2f} dB / FD {u[lo][1]:.3f}, t={hi:g}: '
          f'{u[hi][0]:.2f} dB / FD {u[hi][1]:.3f}',
          bool(knob(u[lo][0], u[hi][0], u[lo][1], u[hi][1])))))
  if 0.0 in c.sigma_ps and sp > 0.0:
    f0, fp = mean(f'fd/{_tag(0.0)}_euler{n}'), mean(f'fd/{_tag(sp)}_euler{n}')
    seeds = np.asarray(m[f'fd/{_tag(sp)}_euler{n}'])
    null = float(seeds.max() / seeds.min())
    claims.append(launch.Claim(
        claim=(f'(iii) A sigma_p=0 teacher is >= 1.5x worse in FD than a '
               f'sigma_p={sp:g} teacher ({n}-step Euler).'),
        holds=f0 >= 1.5 * fp,
        evidence=(f'FD {f0:.3f} vs {fp:.3f} (ratio {f0 / fp:.2f}); PSNR '
                  f'{mean(f"psnr/{_tag(0.0)}_euler{n}"):.2f} vs '
                  f'{mean(f"psnr/{_tag(sp)}_euler{n}"):.2f} dB'),
        control=launch.control_text(
            f'the sigma_p={sp:g} teacher against itself across seeds (worst '
            'over best seed)', f'FD ratio {null:.2f}', null >= 1.5)))
  # Criterion (v) of earlier runs, FD(student) <= 0.2x FD(one-step jump),
  # is retired: the 32-step teacher itself sits at ~0.36x, so the threshold
  # asked for a student far better than its teacher. (vi) measures the same
  # question against what the teacher reaches; the ratio stays in evidence.
  undist = u[hi][1]
  jump = mean(f'fd/{_tag(sp)}_1step')
  teach = mean(f'fd/{_tag(sp)}_euler{n}')
  closed = (jump - f_hi) / (jump - teach)
  u_closed = (jump - undist) / (jump - teach)
  claims.append(launch.Claim(
      claim=(f'(vi) The one-step student closes >= 80% of the FD gap between '
             f"the teacher's one-step Euler jump and its {n}-step output."),
      holds=bool(jump > teach and closed >= 0.8),
      evidence=(f'(FD jump {jump:.3f} - student {f_hi:.3f}) / (jump - '
                f'{n}-step {teach:.3f}) = {closed:.3f}; FD ratios to the '
                f'jump: student {f_hi / jump:.3f}, {n}-step teacher '
                f'{teach / jump:.3f}'),
      control=launch.control_text(
          f'the undistilled model used as the student (t={hi:g})',
          f'{u_closed:.3f}', bool(jump > teach and u_closed >= 0.8))))
  return claims


PAPER_SCALE = (
    'arXiv 2412.09465 (FFHQ 4x SR; official configs/dis_fm_ffhq.yml): '
    '256x256 faces from 64x64 with a 128-channel U-Net (mults 1,1,2,2,4,4, '
    'attention at 16, dropout 0.1), batch 32: a flow teacher (200k-step '
    'snapshot), then the one-step student (40k-step snapshot), one run.')


# Images of the folder datasets (`load_data` reads them; `programs` only
# needs their counts): FFHQ's 70k, DIV2K's 800 train / 100 valid.
FOLDER_IMAGES = {'ffhq': 70_000, 'div2k': (800, 100)}


def data_shapes(c) -> tuple[jax.ShapeDtypeStruct, int]:
  """(the shape of `load_data`'s training images, test images) without
  reading a file."""
  if c.dataset == 'digits':
    n_test = data_lib.DIGITS_NUM_EXAMPLES - data_lib.DIGITS_NUM_TRAIN
    return (jax.ShapeDtypeStruct((data_lib.DIGITS_NUM_TRAIN, 8, 8, 1),
                                 jnp.float32), min(c.num_eval, n_test))
  if c.dataset == 'ffhq':
    files, n_test = FOLDER_IMAGES['ffhq'] - c.num_eval, c.num_eval
  else:
    files, n_test = FOLDER_IMAGES['div2k']
    n_test = min(n_test, c.num_eval)
  files = min(files, c.num_train) if c.num_train else files
  crops = c.crops_per_image if c.dataset == 'div2k' else 1
  return (jax.ShapeDtypeStruct((files * crops, c.hr_size, c.hr_size, 3),
                               jnp.uint8), n_test)


def programs(c, sharded: bool = False) -> list[loop.Program]:
  """The teacher chunk (one per sigma_p), the student chunk and the two
  samplers `evaluate_seed` calls, per seed and eval_batch
  (`benchmarks/paper_variants.py`)."""
  train_x, n_test = data_shapes(c)
  net = make_net(c)
  S = c.num_seeds
  keys = jax.ShapeDtypeStruct((S, 2), jnp.uint32)
  chunk = lambda n: min(c.steps_per_chunk, n)
  progs = []
  for sp in c.sigma_ps:
    init, step = make_teacher_trainer(net, train_x, c, sp)
    progs.append(loop.train_program(
        f'train/{_tag(sp)}', init, step, num_seeds=S,
        num_steps=c.teacher_steps, chunk_size=chunk(c.teacher_steps),
        data=train_x, sharded=sharded))
  teacher = jax.eval_shape(jax.vmap(init), keys).ema
  init, step = make_student_trainer(net, c, c.student_sigma_p)
  progs.append(loop.train_program(
      'train/student', init, step, num_seeds=S, num_steps=c.student_steps,
      chunk_size=chunk(c.student_steps), data=train_x,
      init_args=teacher, sharded=sharded))
  params = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype),
                        teacher)
  n = n_test * c.eval_draws
  batch = c.eval_batch if c.eval_batch and c.eval_batch < n else n
  chunks = -(-n // batch)
  img = jax.ShapeDtypeStruct((batch, *train_x.shape[1:]), jnp.float32)
  teach_fn, stud_fn = _samplers(net, int(c.teacher_eval_steps))
  note = (f'{n} images in chunks of {batch} (the last may be smaller: '
          'another compile)' if chunks > 1 else '')
  progs += [
      loop.Program(f'eval/teacher {c.teacher_eval_steps} + 1 steps',
                   teach_fn, (params, img, img),
                   calls=S * len(c.sigma_ps) * chunks,
                   params=progs[0].params, note=note),
      loop.Program('eval/student 1 step', stud_fn,
                   (params, img, img, jax.ShapeDtypeStruct((), jnp.float32)),
                   calls=S * (len(c.knob_ts) + 2) * chunks,
                   params=progs[0].params, note=(
                       'knob t values and the undistilled model; the '
                       'degradations (eval_inputs), the FD features and '
                       'the digits classifier are not listed'))]
  return progs


EXPERIMENT = launch.Experiment('oftsr', run, schema=config_schema(),
                               check_fn=check_config, preflight=preflight)

if __name__ == '__main__':
  EXPERIMENT.main()
