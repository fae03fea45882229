"""Group state tracking with diagonal SSMs (arXiv 2603.01959): data, training
and the experiment.

The word problem of a finite group G: inputs x_1..x_T i.i.d. uniform over G,
target at every position the prefix product y_t = x_1 x_2 ... x_t (the state
of G's Cayley automaton). Data: one offline TFDS builder per (group, train
length, sizes), `word_problem_<group>_t<T>_n<train>_m<test>`, with a train
split at length T and test splits at T and at each longer length (length
generalisation). Models
(`ssm.dcd`): k-layer DCD, and the real-diagonal, input-independent complex
and GRU baselines; trained by cross-entropy at every position with AdamW
(one-cycle schedule) and gradient clipping; seeds are the vmap axis of
`core.loop`, one phase per (group, model, depth).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import tensorflow_datasets as tfds

from iclrjax.core import config as cfg_lib
from iclrjax.core import data as data_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import logging as log_lib
from iclrjax.core import supervised
from iclrjax.ssm import dcd
from iclrjax.ssm import groups


# -- data ----------------------------------------------------------------------------
def dataset_name(group: str, train_len: int, num_train: int,
                 num_test: int) -> str:
  """The sizes are in the name: data on disk is keyed by name and version,
  so a run with other sizes must not reuse it."""
  return f'word_problem_{group.lower()}_t{train_len}_n{num_train}_m{num_test}'


def test_split(length: int) -> str:
  return f'test_l{length}'


def word_problem_builder(group: str, train_len: int,
                         test_lens: tuple[int, ...], num_train: int,
                         num_test: int) -> str:
  """Registers the offline builder of G's word problem; returns its name.

  Splits: 'train' (num_train sequences of length train_len) and
  'test_l<L>' (num_test sequences of length L) for L in test_lens.
  """
  g = groups.make(group)
  name = dataset_name(group, train_len, num_train, num_test)
  lens = sorted({int(train_len), *map(int, test_lens)})

  def split_gen(length, n):
    def it(rng):
      for _ in range(n):
        x = rng.integers(0, g.order, size=length).astype(np.int32)
        yield {'x': x,
               'y': groups.running_products(g, x).astype(np.int32)}
    return it

  # Variable-length features: each split stores its own length.
  features = {'x': tfds.features.Tensor(shape=(None,), dtype=np.int32),
              'y': tfds.features.Tensor(shape=(None,), dtype=np.int32)}
  splits = {'train': split_gen(train_len, num_train)}
  for L in lens:
    splits[test_split(L)] = split_gen(L, num_test)
  data_lib.synthetic_builder(
      name, features, splits, version='1.0.0',
      description=f'Word problem of {group} (order {g.order}): prefix '
      f'products; train length {train_len}, test lengths {lens}.')
  return name


def load_split(name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
  arrays = data_lib.as_numpy(name, split)
  return (np.asarray(arrays['x'], np.int32), np.asarray(arrays['y'], np.int32))


# -- training ------------------------------------------------------------------------
def make_trainer(model: dcd.SeqModel, train_x: jax.Array,
                 c: ml_collections.ConfigDict):
  """init(key) -> TrainState; step(state, t, (x, y)) -> (state, metrics);
  evaluate. `train_x` gives the input shape; `step` takes the split as
  `data` (`r.train(..., data=(train_x, train_y))`)."""
  sched = optax.cosine_onecycle_schedule(c.steps, c.learning_rate,
                                         pct_start=c.warmup_frac)
  tx = optax.chain(optax.clip_by_global_norm(c.grad_clip),
                   optax.adamw(sched, weight_decay=c.weight_decay))
  apply = jax.vmap(model.apply, in_axes=(None, 0))
  init, step = supervised.make_classifier_trainer(
      lambda k: model.init(k, train_x[0]), apply, tx, c.batch_size)

  @jax.jit
  def evaluate(states: supervised.TrainState, x: jax.Array,
               y: jax.Array) -> jax.Array:
    """Per-position accuracy [S, L] of every seed on (x, y) [N, L]."""
    def one(params):
      logits = jax.lax.map(lambda xb: apply(params, xb),
                           x.reshape(-1, c.eval_batch, x.shape[-1]))
      return dcd.per_position_accuracy(logits, y.reshape(logits.shape[:-1]))
    return jax.vmap(one)(states.params)

  return init, step, evaluate


# -- the experiment ---------------------------------------------------------------------
def config_schema() -> dict[str, cfg_lib.Spec]:
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  return {
      'runs': cfg_lib.Seq(item=cfg_lib.Str(), min_len=1,
                          help='"<group>/<model>/<depth>" entries'),
      'train_len': cfg_lib.Int(min=2),
      'test_lens': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
      'num_train': cfg_lib.Int(min=1),
      'num_test': cfg_lib.Int(min=1),
      'eval_batch': cfg_lib.Int(min=1),
      'window': cfg_lib.Int(min=1),
      'steps': cfg_lib.Int(min=1),
      'batch_size': cfg_lib.Int(min=1),
      'learning_rate': pos,
      'warmup_frac': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                                   max_inclusive=False),
      'weight_decay': cfg_lib.Float(min=0.0),
      'grad_clip': pos,
      'width': cfg_lib.Int(min=1),
      'state': cfg_lib.Int(min=1),
      'hidden': cfg_lib.Int(min=1),
      'init_magnitude': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                                      max_inclusive=False),
      'input_mode': cfg_lib.Choice('additive', 'multiplicative'),
      'steps_per_chunk': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
  }


def parse_run(entry: str) -> tuple[str, str, int]:
  parts = entry.split('/')
  if len(parts) != 3 or not parts[2].isdigit() or int(parts[2]) < 1:
    raise ValueError(f'runs entry {entry!r}: expected "<group>/<model>/'
                     '<depth>", e.g. "S3/dcd/2"')
  return parts[0], parts[1], int(parts[2])


def check_config(c: ml_collections.ConfigDict) -> None:
  for entry in c.runs:
    try:
      group, model, _ = parse_run(entry)
      groups.make(group)
    except ValueError as e:
      raise cfg_lib.ConfigError('runs', entry, str(e)) from None
    cfg_lib.check(model in dcd.MODELS, 'runs', entry,
                  f'model must be one of {dcd.MODELS}')
  cfg_lib.check(c.num_test % c.eval_batch == 0, 'eval_batch', c.eval_batch,
                f'must divide num_test={c.num_test}')
  for L in c.test_lens:
    cfg_lib.check(L >= c.window, 'window', c.window,
                  f'must be <= every test length (got {L})')


def _tag(group: str, model: str, depth: int) -> str:
  return f'{group}_{model}{depth}'


def run(r: launch.Run) -> launch.Result:
  cfg = r.config
  metrics: dict[str, np.ndarray] = {}
  curves: dict[str, np.ndarray] = {}
  lens = sorted({cfg.train_len, *cfg.test_lens})
  cache: dict[str, Any] = {}
  for entry in cfg.runs:
    group, kind, depth = parse_run(entry)
    g = groups.make(group)
    if group not in cache:
      name = word_problem_builder(group, cfg.train_len, tuple(cfg.test_lens),
                                  cfg.num_train, cfg.num_test)
      cache[group] = (
          load_split(name, 'train'),
          {L: load_split(name, test_split(L)) for L in lens})
    (tx_, ty_), tests = cache[group]
    model = dcd.make_model(kind, depth, g.order, cfg.width, cfg.state,
                           cfg.hidden, cfg.init_magnitude, cfg.input_mode)
    init, step, evaluate = make_trainer(model, jnp.asarray(tx_), cfg)
    tag = _tag(group, kind, depth)
    out = r.train(init, step, num_steps=cfg.steps, data=(tx_, ty_),
                  chunk_size=min(cfg.steps_per_chunk, cfg.steps), phase=tag,
                  log_every=cfg.log_every, postfix_keys=('loss', 'accuracy'))
    for L in lens:
      x, y = tests[L]
      acc = np.asarray(distributed.to_host(
          evaluate(out.state, jnp.asarray(x), jnp.asarray(y))))  # [S, L]
      curves[f'{tag}@{L}'] = acc
      metrics[f'acc_all@{L}/{tag}'] = acc.mean(1)
      metrics[f'acc_first@{L}/{tag}'] = acc[:, :cfg.window].mean(1)
      metrics[f'acc_last@{L}/{tag}'] = acc[:, -cfg.window:].mean(1)
      metrics[f'acc_min@{L}/{tag}'] = acc.min(1)
    metrics[f'chance/{tag}'] = np.full((cfg.num_seeds,), 1.0 / g.order)
    if not g.is_abelian:
      # A model that tracks only the abelian quotient G/[G,G] gets at most
      # 1/|[G,G]| late in the sequence; "learned" = well above that.
      ceiling = 1.0 / len(groups.commutator_subgroup(g))
      metrics[f'quotient_ceiling/{tag}'] = np.full((cfg.num_seeds,), ceiling)
      metrics[f'learned/{tag}'] = (
          metrics[f'acc_last@{cfg.train_len}/{tag}'] >= 0.9).astype(float)
  _plots(r, cfg, curves, lens)
  return launch.Result(metrics=metrics, claims=evaluate_claims(cfg, metrics))


def _plots(r, cfg, curves, lens) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  L = max(lens)
  series = [(k.split('@')[0], np.arange(1, L + 1), v.T)
            for k, v in curves.items() if k.endswith(f'@{L}')]
  log_lib.plot_series(series, r.plots_dir / 'accuracy_vs_position.png',
                      title=f'accuracy per position (trained at length '
                      f'{cfg.train_len}, tested at {L})',
                      xlabel='position t', ylabel='accuracy',
                      bounds=(0.0, 1.0))
  # Heatmap: group x (model, depth) of late-position accuracy at length L.
  entries = [parse_run(e) for e in cfg.runs]
  gs = list(dict.fromkeys(e[0] for e in entries))
  cols = list(dict.fromkeys(f'{e[1]}{e[2]}' for e in entries))
  grid = np.full((len(gs), len(cols)), np.nan)
  for gname, kind, depth in entries:
    v = curves[f'{_tag(gname, kind, depth)}@{L}']
    grid[gs.index(gname), cols.index(f'{kind}{depth}')] = v[:, -cfg.window:
                                                            ].mean()
  fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(cols), 1.0 + 0.5 * len(gs)))
  im = ax.imshow(grid, vmin=0, vmax=1, cmap='viridis')
  ax.set_xticks(range(len(cols)), cols)
  ax.set_yticks(range(len(gs)), gs)
  for i in range(len(gs)):
    for j in range(len(cols)):
      if np.isfinite(grid[i, j]):
        ax.text(j, i, f'{grid[i, j]:.2f}', ha='center', va='center',
                color='w' if grid[i, j] < 0.6 else 'k', fontsize=8)
  fig.colorbar(im, ax=ax)
  ax.set_title(f'last-{cfg.window} accuracy at length {L}', fontsize=9)
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'accuracy_heatmap.png', dpi=120)
  plt.close(fig)


def evaluate_claims(cfg, m: dict[str, np.ndarray]) -> list[launch.Claim]:
  claims = []
  T, L2 = cfg.train_len, 2 * cfg.train_len
  get = lambda k: None if k not in m else float(np.mean(m[k]))
  z_min = get(f'acc_min@{T}/Z6_dcd1')
  z_min2 = get(f'acc_min@{L2}/Z6_dcd1')
  if z_min is not None:
    ok = z_min >= 0.99 and (z_min2 is None or z_min2 >= 0.99)
    claims.append(launch.Claim(
        claim=('Abelian: a trained 1-layer DCD tracks Z6 (accuracy >= 0.99 '
               'at every position, at the training length and at 2x).'),
        holds=bool(ok),
        evidence=f'min over positions, seed mean: {z_min:.4f} at length {T}'
        + ('' if z_min2 is None else f', {z_min2:.4f} at {L2}')))
  s_last = get(f'acc_last@{T}/S3_dcd1')
  z_last = get(f'acc_last@{T}/Z6_dcd1')
  if s_last is not None:
    claims.append(launch.Claim(
        claim=('Non-abelian: a trained 1-layer DCD on S3 stays <= 0.40 on the '
               'last positions (ceiling 1/3: it tracks only the sign).'),
        holds=bool(s_last <= 0.40),
        evidence=f'last-{cfg.window} accuracy {s_last:.3f} at length {T}'))
  if s_last is not None and z_last is not None:
    claims.append(launch.Claim(
        claim='acc(Z6) - acc(S3) >= 0.5 on the last positions (1 layer).',
        holds=bool(z_last - s_last >= 0.5),
        evidence=f'{z_last:.3f} - {s_last:.3f} = {z_last - s_last:.3f}'))
  L = max(cfg.test_lens)
  real = get(f'acc_last@{L}/Z2_real1')
  if real is not None:
    claims.append(launch.Claim(
        claim=('The input-dependent non-negative real diagonal fails Z2 '
               f'parity at long lengths (last-{cfg.window} accuracy <= 0.6 '
               f'at length {L}; chance 0.5).'),
        holds=bool(real <= 0.6),
        evidence=f'last-{cfg.window} accuracy {real:.3f} at length {L}'))
  for k in sorted(m):
    if k.startswith(f'acc_last@{L}/Z') and k.endswith('_lti1'):
      gname = k.split('/')[1].split('_')[0]
      v = float(np.mean(m[k]))
      claims.append(launch.Claim(
          claim=(f'The input-independent complex diagonal fails {gname} '
                 f'(last-{cfg.window} accuracy at length {L} <= 0.5; chance '
                 f'{1 / groups.make(gname).order:.3f}).'),
          holds=bool(v <= 0.5),
          evidence=f'last-{cfg.window} accuracy {v:.3f} at length {L}'))
  learned = {k.split('/')[1]: m[k] for k in sorted(m)
             if k.startswith('learned/') and '_dcd' in k
             and not k.endswith('_dcd1')}
  if learned:
    parts = [f'{t}: {int(v.sum())}/{len(v)}' for t, v in learned.items()]
    claims.append(launch.Claim(
        claim=('Learnability gap (reported): trained multi-layer DCDs often '
               'fail to learn solvable non-abelian groups they can express '
               f'(learned = last-{cfg.window} accuracy >= 0.9).'),
        holds=bool(any(v.mean() < 1.0 for v in learned.values())),
        evidence='seeds that learned: ' + ', '.join(parts)))
  return claims
