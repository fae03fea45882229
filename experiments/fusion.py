"""Intermediate vs late multimodal fusion and IID's regularisers
("Supporting Multimodal Intermediate Fusion with Informatic Constraint and
Distribution Coherence", ICLR 2026, OpenReview 5bxmmuRhO6;
configs/fusion.py).

  python -m experiments.fusion --config=configs/fusion.py:smoke

The method is `iclrjax/multimodal/fusion.py` (its informatic constraint and
cohering loss are reconstructions: the paper's loss forms were not
available; the cohering term is the sliced-Wasserstein fallback).

One phase per training-set size (`n<N>`, `digits`) trains all of its
models in one compiled step, seeds the vmapped axis; each seed draws its own
training set (and LF / IF / IID of a seed share it: paired comparisons):

  * xor_n<N>: the synthetic two-modality XOR (label 1[z1 z2 > 0], z1 seen
    only in modality a, z2 only in b, b with incoherent marginals), N
    training points; models LF, IF, IID, IF reseeded (a second
    initialisation on the same data: the noise floor of the cohering
    effect) and IF on modality a only;
  * add_n<N>: the same modalities with the additive label 1[z1 + z2 > 0],
    LF and IF (the control of the IF >> LF claim: LF should not lose);
  * digits: scikit-learn digits two-view, the top half of one image and the
    bottom half of another, label = parity of the sum of the two digits;
    the same five models.

Then, on the host: test accuracy of every model per seed, the claims with
their controls, an accuracy plot and the training curves.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import plots
from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import logging as log_lib
from iclrjax.core import loop
from iclrjax.multimodal import fusion

MODELS = ('lf', 'if', 'iid', 'if_reseed', 'single_a')
CONTROL_MODELS = ('lf', 'if')
_MAP_WIDTH = 32            # hidden width of the XOR modalities' random maps
_DIGITS = 1797             # images in scikit-learn's digits


# -- data ---------------------------------------------------------------------


class Pairs(NamedTuple):
  xa: jax.Array    # [N, Da]
  xb: jax.Array    # [N, Db]
  y: jax.Array     # [N] int32


def xor_maps(c: ml_collections.ConfigDict):
  """The fixed random tanh networks that render (z1, z3) as modality a and
  (z2, z4) as modality b (the task's definition, the same for every
  seed)."""
  k = jax.random.split(jax.random.key(c.seed + 1234), 4)
  w1 = lambda key: jax.random.normal(key, (2, _MAP_WIDTH))
  w2 = lambda key: jax.random.normal(key, (_MAP_WIDTH, c.xor.dim)) / np.sqrt(
      _MAP_WIDTH)
  return (w1(k[0]), w2(k[1])), (w1(k[2]), w2(k[3]))


def xor_sample(key: jax.Array, c: ml_collections.ConfigDict, n: int,
               additive: bool = False) -> Pairs:
  """n draws of the two-modality task: label 1[z1 z2 > 0] (XOR), or the
  additive control 1[z1 + z2 > 0]."""
  (a1, a2), (b1, b2) = xor_maps(c)
  z = jax.random.normal(key, (n, 4))
  xa = jnp.tanh(z[:, 0::2] @ a1) @ a2
  xb = (jnp.tanh(z[:, 1::2] @ b1) @ b2) * c.xor.b_scale + c.xor.b_shift
  y = (z[:, 0] + z[:, 1] > 0) if additive else (z[:, 0] * z[:, 1] > 0)
  return Pairs(xa, xb, y.astype(jnp.int32))


def digits_data(c: ml_collections.ConfigDict) -> dict[str, np.ndarray]:
  """scikit-learn's 8x8 digits in [0, 1], split by image into a training
  pool and held-out images (a fixed split)."""
  from sklearn import datasets as sk_data  # pylint: disable=g-import-not-at-top
  x, t = sk_data.load_digits(return_X_y=True)
  perm = np.random.default_rng(c.seed).permutation(len(t))
  n_test = int(round(c.digits.test_fraction * len(t)))
  test, train = perm[:n_test], perm[n_test:]
  x = (x / 16.0).astype(np.float32)
  return {'x_train': x[train], 't_train': t[train].astype(np.int32),
          'x_test': x[test], 't_test': t[test].astype(np.int32)}


def digits_pairs(key: jax.Array, c: ml_collections.ConfigDict, x, t, n: int
                 ) -> Pairs:
  """n pairs (i, j) of images: modality a = the top half (rows 0-3) of
  image i, b = the bottom half (rows 4-7) of image j (scaled like the XOR's
  b), label = (digit_i + digit_j) mod 2. Either half alone says nothing of
  the label (the other image is independent, parities nearly balanced)."""
  ki, kj = jax.random.split(key)
  i = jax.random.randint(ki, (n,), 0, x.shape[0])
  j = jax.random.randint(kj, (n,), 0, x.shape[0])
  return Pairs(x[i, :32], x[j, 32:] * c.xor.b_scale + c.xor.b_shift,
               ((t[i] + t[j]) % 2).astype(jnp.int32))


# -- models and training ------------------------------------------------------


def make_model(c: ml_collections.ConfigDict, kind: str):
  m = c.model
  if kind == 'lf':
    return fusion.LateFusion(hidden=m.hidden, num_classes=2)
  return fusion.IntermediateFusion(hidden=m.hidden, latent=m.latent,
                                   num_classes=2)


def _inputs(kind: str, xa, xb):
  """The single-modality model sees a and zeros in b's place."""
  return (xa, jnp.zeros_like(xb)) if kind == 'single_a' else (xa, xb)


def loss_fn(c: ml_collections.ConfigDict, kind: str, model, params,
            batch: Pairs, key: jax.Array):
  xa, xb = _inputs(kind, batch.xa, batch.xb)
  if kind == 'lf':
    logits = model.apply(params, xa, xb)
    ce = fusion.cross_entropy(logits, batch.y)
    parts = {'ce': ce}
  else:
    out = model.apply(params, xa, xb)
    logits = out.logits
    if kind == 'iid':
      proj = fusion.rip_projection(jax.random.key(c.seed + 99),
                                   c.model.latent, c.model.rip_dim)
      theta = fusion.random_directions(key, c.model.num_directions,
                                       c.model.rip_dim)
      ce, parts = fusion.iid_loss(out, batch.y, proj, theta,
                                  c.model.informatic_weight,
                                  c.model.cohering_weight)
    else:   # IF: both weights 0 (the regularisers are not computed)
      ce = fusion.cross_entropy(logits, batch.y)
      parts = {'ce': ce}
  acc = jnp.mean(jnp.argmax(logits, -1) == batch.y)
  return ce, {**parts, 'acc': acc}


class TrainState(NamedTuple):
  params: Any      # model name -> params
  opt_state: Any   # model name -> optimizer state
  key: jax.Array
  data: Any        # task -> this seed's training Pairs


def groups(c: ml_collections.ConfigDict) -> dict[str, dict[str, tuple]]:
  """phase -> {task -> the models trained on it}: one phase (one compiled
  program, all its models updated in each step) per training-set size."""
  out = {f'n{n}': {f'xor_n{n}': MODELS, f'add_n{n}': CONTROL_MODELS}
         for n in c.xor.n_train}
  out['digits'] = {'digits': MODELS}
  return out


def tasks(c: ml_collections.ConfigDict) -> dict[str, tuple[str, ...]]:
  """task -> the models trained on it."""
  return {t: k for g in groups(c).values() for t, k in g.items()}


def make_training(c: ml_collections.ConfigDict, group: dict[str, tuple]):
  """(init, step) of every (task, model) of a phase; init(key[, images])."""
  names = [(t, k) for t, kinds in group.items() for k in kinds]
  models = {f'{t}/{k}': make_model(c, k) for t, k in names}
  opt = optax.adamw(c.train.lr, weight_decay=c.train.weight_decay)

  def draw(key, task, images):
    if task == 'digits':
      return digits_pairs(key, c, images['x'], images['t'], c.digits.n_train)
    n = int(task.split('_n')[1])
    return xor_sample(key, c, n, additive=task.startswith('add'))

  def init(key, images=None):
    # LF / IF / IID of a seed share its training set (paired comparisons);
    # the reseeded IF differs from IF by its initialisation only.
    data = {t: draw(jax.random.fold_in(key, 1), t, images) for t in group}
    params = {}
    for t, k in names:
      k_init = jax.random.fold_in(key, 2 if k == 'if_reseed' else 0)
      params[f'{t}/{k}'] = models[f'{t}/{k}'].init(
          k_init, data[t].xa[:2], data[t].xb[:2])
    return TrainState(params, {n: opt.init(p) for n, p in params.items()},
                      key, data)

  def step(state, t):
    k = jax.random.fold_in(state.key, t + 3)
    data = distributed.shard_batch(state.data)   # full batch: N over 'data'
    params, opt_state, metrics = {}, {}, {}
    for task, kind in names:
      name = f'{task}/{kind}'
      grads, m = jax.grad(
          lambda p, task=task, kind=kind, name=name: loss_fn(
              c, kind, models[name], p, data[task], k),
          has_aux=True)(state.params[name])
      updates, opt_state[name] = opt.update(grads, state.opt_state[name],
                                            state.params[name])
      params[name] = optax.apply_updates(state.params[name], updates)
      metrics.update({f'{name}/{mk}': v for mk, v in m.items()})
    return state._replace(params=params, opt_state=opt_state), metrics

  return init, step


def test_set(c: ml_collections.ConfigDict, task: str, images) -> Pairs:
  """Held-out points (a key training never draws from; digits: pairs of
  held-out images)."""
  key = jax.random.key(c.seed + 10_000)
  if task == 'digits':
    return digits_pairs(key, c, jnp.asarray(images['x_test']),
                        jnp.asarray(images['t_test']), c.digits.n_test)
  return xor_sample(key, c, c.xor.n_test, additive=task.startswith('add'))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _accuracy(model, kind, params_S, test: Pairs):
  xa, xb = _inputs(kind, test.xa, test.xb)

  def one(p):
    out = model.apply(p, xa, xb)
    logits = out if kind == 'lf' else out.logits
    return jnp.mean(jnp.argmax(logits, -1) == test.y)

  return jax.vmap(one)(params_S)


def run(r: launch.Run) -> launch.Result:
  c = r.config
  images = digits_data(c)
  pool = {'x': jnp.asarray(images['x_train']),
          't': jnp.asarray(images['t_train'])}
  acc = {}
  for phase, group in groups(c).items():
    init, step = make_training(c, group)
    if phase == 'digits':
      init = functools.partial(init, images=pool)
    res = r.train(init, step, num_steps=c.train.num_steps,
                  chunk_size=min(c.train.chunk_size, c.train.num_steps),
                  phase=phase)
    params = jax.tree.map(jnp.asarray, distributed.to_host(res.state.params))
    for task, kinds in group.items():
      test = test_set(c, task, images)
      for kind in kinds:
        acc[f'{task}/{kind}'] = np.asarray(_accuracy(
            make_model(c, kind), kind, params[f'{task}/{kind}'], test))
  _plots(r, c, acc)
  metrics = {f'acc_{k}': v for k, v in acc.items()}
  extra = {'digits_images': {'train': int(len(images['t_train'])),
                             'test': int(len(images['t_test']))}}
  return launch.Result(metrics=metrics, claims=evaluate_claims(c, acc),
                       extra=extra)


def _plots(r: launch.Run, c, acc) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  groups = list(tasks(c).items())
  fig, ax = plt.subplots(figsize=(2.2 * len(groups) + 2, 3.8))
  width = 0.8 / len(MODELS)
  for m_i, kind in enumerate(MODELS):
    xs, ms, cis = [], [], []
    for g_i, (task, kinds) in enumerate(groups):
      if kind in kinds:
        mean, ci = log_lib.mean_ci95(acc[f'{task}/{kind}'])
        xs.append(g_i + (m_i - len(MODELS) / 2 + 0.5) * width)
        ms.append(mean)
        cis.append(ci)
    ax.bar(xs, ms, width, yerr=cis, label=kind, capsize=2)
  ax.axhline(0.5, color='k', lw=0.6, ls='--')
  ax.set_xticks(range(len(groups)), [t for t, _ in groups])
  ax.set_ylim(0.3, 1.0)
  ax.set_ylabel('test accuracy')
  ax.set_title(f'Late vs intermediate fusion ({c.num_seeds} seeds, 95% CI)')
  plots.outside_legend(ax, fontsize=7)
  fig.tight_layout()
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  fig.savefig(r.plots_dir / 'accuracy.png', dpi=120, bbox_inches='tight')
  plt.close(fig)
  n = min(c.xor.n_train)
  plots.plot_run(r, [f'n{n}/xor_n{n}/{k}/acc' for k in MODELS], 'training_xor',
                 title=f'XOR, n_train = {n}: training accuracy')


def _paired(acc, task: str, a: str, b: str) -> tuple[float, float]:
  """Mean and 95% CI half-width over seeds of acc[a] - acc[b] (paired)."""
  return log_lib.mean_ci95(acc[f'{task}/{a}'] - acc[f'{task}/{b}'])


def evaluate_claims(c: ml_collections.ConfigDict, acc) -> list[launch.Claim]:
  e, S = c.eval, c.num_seeds
  ns = tuple(c.xor.n_train)
  mean = lambda k: float(np.mean(acc[k]))
  claims = []

  gap = {n: mean(f'xor_n{n}/if') - mean(f'xor_n{n}/lf') for n in ns}
  lf = {n: mean(f'xor_n{n}/lf') for n in ns}
  agap = {n: mean(f'add_n{n}/if') - mean(f'add_n{n}/lf') for n in ns}
  alf = {n: mean(f'add_n{n}/lf') for n in ns}
  per_n = lambda f: ', '.join(f'n={n}: {f(n)}' for n in ns)
  claims.append(launch.Claim(
      claim=(f'Intermediate fusion beats late fusion when the label needs '
             f'cross-modal interaction: on the two-modality XOR IF >= LF + '
             f'{e.margin:g} at n_train in {ns} and LF <= {e.lf_max:g}.'),
      holds=all(gap[n] >= e.margin and lf[n] <= e.lf_max for n in ns),
      evidence=('test accuracy, mean of ' f'{S} seeds: ' + per_n(
          lambda n: f'IF {mean(f"xor_n{n}/if"):.3f} vs LF {lf[n]:.3f} '
          f'(+{gap[n]:.3f}), IID {mean(f"xor_n{n}/iid"):.3f}, modality a '
          f'only {mean(f"xor_n{n}/single_a"):.3f}')),
      control=launch.control_text(
          'the additive label 1[z1 + z2 > 0] on the same modalities (LF '
          'sees all it needs)', per_n(
              lambda n: f'LF {alf[n]:.3f}, IF - LF {agap[n]:+.3f}'),
          all(agap[n] >= e.margin and alf[n] <= e.lf_max for n in ns)),
      paper='IF superior to LF under the paper\'s constraint (theory); '
            'task numbers not extracted'))

  dgap = mean('digits/if') - mean('digits/lf')
  sgap = mean('digits/single_a') - mean('digits/lf')
  claims.append(launch.Claim(
      claim=(f'On a real two-view task (scikit-learn digits: the top half of '
             f'one image, the bottom half of another, label = parity of '
             f'their digit sum) IF >= LF + {e.digits_margin:g}.'),
      holds=dgap >= e.digits_margin,
      evidence=(f'test accuracy on {c.digits.n_test} held-out pairs, mean of '
                f'{S} seeds: IF {mean("digits/if"):.3f}, LF '
                f'{mean("digits/lf"):.3f} (IF - LF {dgap:+.3f}), IID '
                f'{mean("digits/iid"):.3f}'),
      control=launch.control_text(
          'IF seeing the top half only (its bottom input zeroed)',
          f'{mean("digits/single_a"):.3f} ({sgap:+.3f} over LF)',
          sgap >= e.digits_margin)))

  n0 = min(ns)
  eff = {t: _paired(acc, t, 'iid', 'if') for t in (*(f'xor_n{n}' for n in ns),
                                                   'digits')}
  noise = {t: _paired(acc, t, 'if_reseed', 'if') for t in eff}
  fmt = lambda d: ', '.join(f'{t}: {m:+.3f} +- {ci:.3f}' for t, (m, ci) in
                            d.items())
  m0, ci0 = eff[f'xor_n{n0}']
  nm0, nci0 = noise[f'xor_n{n0}']
  claims.append(launch.Claim(
      claim=(f'The informatic constraint + distribution cohering (our '
             f'reconstruction; sliced-Wasserstein fallback) improve IF: '
             f'IID - IF > 0 (95% CI over seeds) on the XOR at n_train = '
             f'{n0}.'),
      holds=m0 - ci0 > 0,
      evidence=(f'IID - IF test accuracy, paired over {S} seeds, mean +- '
                f'95% CI: {fmt(eff)} (weights: informatic '
                f'{c.model.informatic_weight:g}, cohering '
                f'{c.model.cohering_weight:g})'),
      control=launch.control_text(
          'IF with a second initialisation on the same data (weights 0: '
          'the seed noise floor), minus IF', fmt(noise), nm0 - nci0 > 0),
      paper='consistent gains on vision-language, RGB-D and multimodal KG '
            'tasks (numbers not extracted)'))
  return claims


def check_config(c: ml_collections.ConfigDict) -> None:
  cfg_lib.check(c.model.rip_dim <= c.model.latent, 'model.rip_dim',
                c.model.rip_dim, f'<= model.latent = {c.model.latent} (a '
                'dimensionality reduction)')
  cfg_lib.check(len(set(c.xor.n_train)) == len(c.xor.n_train),
                'xor.n_train', tuple(c.xor.n_train), 'distinct sizes')
  cfg_lib.check(c.num_seeds >= 2, 'num_seeds', c.num_seeds,
                '>= 2 (the claims report confidence intervals over seeds)')


def programs(c: ml_collections.ConfigDict, sharded: bool = False
             ) -> list[loop.Program]:
  """Each phase's training chunk (all its models in one step) and the test
  accuracy of each model kind, at the config's shapes
  (`benchmarks/paper_variants.py`)."""
  S = c.num_seeds
  f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
  n_pool = _DIGITS - int(round(c.digits.test_fraction * _DIGITS))
  pool = {'x': f32(S, n_pool, 64),   # per seed: init is vmapped with it
          't': jax.ShapeDtypeStruct((S, n_pool), jnp.int32)}
  out = []
  for phase, group in groups(c).items():
    init, step = make_training(c, group)
    out.append(dataclasses.replace(loop.train_program(
        f'train/{phase}', init, step, num_seeds=S,
        num_steps=c.train.num_steps,
        chunk_size=min(c.train.chunk_size, c.train.num_steps),
        init_args=pool if phase == 'digits' else None, sharded=sharded),
        note='params: every model of the phase (one step updates all)'))
  key = jax.ShapeDtypeStruct((S, 2), jnp.uint32)
  sets = {'xor': (c.xor.dim, c.xor.dim, c.xor.n_test),
          'digits': (32, 32, c.digits.n_test)}
  for data, (da, db, n) in sets.items():
    test = Pairs(f32(n, da), f32(n, db), jax.ShapeDtypeStruct((n,), jnp.int32))
    for kind in MODELS:
      model = make_model(c, kind)
      params = jax.eval_shape(jax.vmap(lambda k, model=model: model.init(
          k, jnp.zeros((2, da)), jnp.zeros((2, db)))), key)
      calls = (1 if data == 'digits' else len(c.xor.n_train) * sum(
          kind in kinds for kinds in (MODELS, CONTROL_MODELS)))
      out.append(loop.Program(
          f'eval/{data}/{kind}',
          jax.jit(lambda p, t, model=model, kind=kind: _accuracy(
              model, kind, p, t)),
          (params, test), calls=calls,
          params=loop.count_params(params) // S))
  return out


PAPER_SCALE = (
    'Li, Song, Zheng, Li (ICLR 2026, OpenReview 5bxmmuRhO6) evaluate IID on '
    'vision-language classification, RGB-D scene recognition and '
    'multimodal knowledge-graph link prediction; their models, data sizes '
    'and training steps were not extracted (those tasks are not '
    'reproduced here).')

_POS = cfg_lib.Float(min=0.0, min_inclusive=False)
_NONNEG = cfg_lib.Float(min=0.0)

EXPERIMENT = launch.Experiment('fusion', run, schema={
    'num_seeds': cfg_lib.Int(min=1),
    'model.hidden': cfg_lib.Int(min=1),
    'model.latent': cfg_lib.Int(min=1),
    'model.rip_dim': cfg_lib.Int(min=1),
    'model.num_directions': cfg_lib.Int(min=1),
    'model.informatic_weight': _NONNEG,
    'model.cohering_weight': _NONNEG,
    'xor.dim': cfg_lib.Int(min=1),
    'xor.b_scale': _POS,
    'xor.n_train': cfg_lib.Seq(item=cfg_lib.Int(min=2), min_len=1),
    'xor.n_test': cfg_lib.Int(min=2),
    'digits.n_train': cfg_lib.Int(min=2),
    'digits.n_test': cfg_lib.Int(min=2),
    'digits.test_fraction': cfg_lib.Float(min=0.05, max=0.95),
    'train.num_steps': cfg_lib.Int(min=1),
    'train.lr': _POS,
    'train.weight_decay': _NONNEG,
    'train.chunk_size': cfg_lib.Int(min=1),
    'eval.margin': _NONNEG,
    'eval.lf_max': cfg_lib.Float(min=0.0, max=1.0),
    'eval.digits_margin': _NONNEG,
}, check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
