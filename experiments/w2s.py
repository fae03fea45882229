"""W2S generalization under spurious correlations (arXiv 2509.24005;
configs/w2s.py).

  python -m experiments.w2s --config=configs/w2s.py:smoke

The method is `iclrjax/stats/w2s.py`; the benchmark data
`iclrjax/stats/datasets.py`.

Part A, the theory's Gaussian feature model: every point of a sweep (eta_l,
eta_u, ||mu_S||, alignment) is one row of a vmapped seed axis in a one-step
phase; row i of every point uses seed i (the same frames T, S and the same
draws: common random numbers across the grid), and records the teacher's and
the student's exact excess risks on D(eta_t), the closed form and the
limit as the paper states it.

Part B, spurious digits: phase `pretrain` trains the student's CNN on digit
identity (backgrounds at random) on its own pool of train digits; per
mismatch setting, phase `teacher_<setting>` trains the small CNN teacher
from scratch on n_l labelled digits from D(eta_l), and the one-step phase
`heads_<setting>` fits the frozen student's linear heads on N digits from
D(eta_u): vanilla W2S on the teacher's pseudolabels, Enhanced-W2S, its
random-subset ablation, and the ceiling on ground-truth labels; all scored on
the group-balanced test set (every test digit on both backgrounds).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.core import data as data_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import loop
from iclrjax.stats import datasets
from iclrjax.stats import w2s

THEORY_KEYS = ('er_teacher', 'er_student', 'cf_teacher', 'cf_student',
               'quoted_teacher', 'quoted_student')
HEADS = ('teacher', 'w2s', 'enhanced', 'enhanced_random', 'ceiling')
NUM_GROUPS = 4      # (label, background)


# -- Part A: the Gaussian feature model ---------------------------------------


class TheoryState(NamedTuple):
  key: jax.Array
  point: jax.Array      # [4]: eta_l, eta_u, mu_s, align
  risks: jax.Array      # [len(THEORY_KEYS)]


def make_theory(t: ml_collections.ConfigDict, align_to: str):
  """init(key, point) and step(state, t) of one sweep point per row."""

  def init(key, point):
    return TheoryState(key, point, jnp.zeros(len(THEORY_KEYS)))

  def step(state, step_t):
    del step_t
    eta_l, eta_u, mu_s, align = state.point
    k_geom, k_data = jax.random.split(state.key)
    geom = w2s.make_geometry(k_geom, t.d_z, t.p, t.p_t, t.p_s, mu_t=t.mu_t,
                             mu_s=mu_s, align=align, align_to=align_to,
                             sigma_xi=t.sigma_xi, sigma_y=t.sigma_y)
    sim = w2s.simulate(k_data, geom, t.n, t.big_n, eta_l, eta_u, t.eta_t)
    cf = w2s.closed_form(geom, t.n, t.big_n, eta_l, eta_u, t.eta_t)
    qt = w2s.quoted_limit(geom, t.n, eta_l, eta_u, t.eta_t)
    r = jnp.stack([sim.teacher, sim.student, cf.teacher, cf.student,
                   qt.teacher, qt.student])
    return state._replace(risks=r), dict(zip(THEORY_KEYS, r))

  return init, step


def theory_points(t) -> dict[str, list[tuple[float, float, float, float]]]:
  """sweep -> [(eta_l, eta_u, mu_s, align)]; 'align*' sweeps at eta_u =
  eta_l = align_eta_l."""
  main = [(el, eu, 0.0, 0.0) for el in t.eta_ls for eu in t.eta_us]
  return {
      'eta': main,
      'eta_control': [(el, eu, t.control_mu_s, a) for el, eu, _, a in main],
      'align': [(t.align_eta_l, t.align_eta_l, 0.0, a) for a in t.aligns],
      'align_control': [(t.align_eta_l, t.align_eta_l, 0.0, a)
                        for a in t.aligns],
  }


THEORY_GROUPS = {'teacher': ('eta', 'eta_control', 'align'),
                 'complement': ('align_control',)}


def theory_phases(t) -> list[tuple[str, str, list]]:
  """[(align_to, phase name, points)]: every group's sweep points
  (`THEORY_GROUPS`), `points_per_phase` at a time (0: all in one)."""
  sweeps = theory_points(t)
  out = []
  for align_to, names in THEORY_GROUPS.items():
    points = [p for n in names for p in sweeps[n]]
    k = t.points_per_phase or len(points)
    for i in range(0, len(points), k):
      suffix = f'_{i // k}' if k < len(points) else ''
      out.append((align_to, f'theory_{align_to}{suffix}', points[i:i + k]))
  return out


def theory_args(points, num_seeds: int) -> np.ndarray:
  """init_args of a theory phase: the point of every row [points x seeds, 4]."""
  return np.repeat(np.asarray(points, np.float32), num_seeds, axis=0)


def run_theory(r: launch.Run) -> dict[str, np.ndarray]:
  """sweep -> risks [points, seeds, len(THEORY_KEYS)]."""
  cfg = r.config
  S = cfg.num_seeds
  sweeps = theory_points(cfg.theory)
  risks = {align_to: [] for align_to in THEORY_GROUPS}
  for align_to, phase, part in theory_phases(cfg.theory):
    init, step = make_theory(cfg.theory, align_to)
    res = r.train(init, step, num_steps=1, chunk_size=1, phase=phase,
                  num_seeds=len(part) * S,
                  seed_ids=list(range(S)) * len(part),
                  init_args=jnp.asarray(theory_args(part, S)), log_every=1)
    risks[align_to].append(np.asarray(distributed.to_host(
        res.state.risks)).reshape(len(part), S, len(THEORY_KEYS)))
  out = {}
  for align_to, names in THEORY_GROUPS.items():
    tab = np.concatenate(risks[align_to])
    i = 0
    for n in names:
      out[n] = tab[i:i + len(sweeps[n])]
      i += len(sweeps[n])
  return out


# -- Part B: spurious digits --------------------------------------------------


def max_pool_2x2(x: jax.Array) -> jax.Array:
  """2x2 max-pooling by a reshape (even H, W): under the seeds' vmap it stays
  a plain reduction, where `nn.max_pool`'s batched reduce_window and its
  gradient run ~2.5x slower on CPU."""
  b, h, w, c = x.shape
  return x.reshape(b, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


class Conv3x3(nn.Module):
  """A 3x3 'SAME' convolution as im2col + one matmul (the same function and
  parameter shapes as `nn.Conv(features, (3, 3))`): vmapped over seeds it is
  a batched matmul, where XLA's CPU grouped convolution ran 4x slower."""
  features: int

  @nn.compact
  def __call__(self, x_BxHxWxC):
    c = x_BxHxWxC.shape[-1]
    kernel = self.param('kernel', nn.initializers.lecun_normal(),
                        (3, 3, c, self.features))
    bias = self.param('bias', nn.initializers.zeros, (self.features,))
    h, w = x_BxHxWxC.shape[1:3]
    xp = jnp.pad(x_BxHxWxC, ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = jnp.concatenate([xp[:, i:i + h, j:j + w] for i in range(3)
                            for j in range(3)], axis=-1)
    return cols @ kernel.reshape(9 * c, self.features) + bias


class ConvNet(nn.Module):
  """Conv(3x3) + ReLU + 2x2 max-pool blocks, a ReLU hidden layer, logits."""
  widths: tuple[int, ...]
  hidden: int
  num_classes: int

  @nn.compact
  def __call__(self, x, features_only: bool = False):
    for w in self.widths:
      x = max_pool_2x2(nn.relu(Conv3x3(w)(x)))
    h = nn.relu(nn.Dense(self.hidden)(x.reshape(x.shape[0], -1)))
    return h if features_only else nn.Dense(self.num_classes)(h)


def _nets(g):
  return (ConvNet(tuple(g.teacher_widths), g.teacher_hidden, 2),
          ConvNet(tuple(g.student_widths), g.student_hidden, 10))


class Digits(NamedTuple):
  """Device arrays of a split: images [n, 2, H, W, 3] in [-2, 2] (both
  backgrounds), digit [n], label [n]."""
  images: jax.Array
  digit: jax.Array
  label: jax.Array


def _to_device(d: datasets.SpuriousDigits) -> Digits:
  x = (np.asarray(d.images, np.float32) / 255.0 - 0.5) / 0.25
  return Digits(jnp.asarray(x), jnp.asarray(d.digit, jnp.int32),
                jnp.asarray(d.label, jnp.int32))


def draw(key: jax.Array, data: Digits, idx: jax.Array, eta):
  """Examples idx of D(eta): background = label, flipped with probability
  eta (the minority group). Returns (images, labels, minority)."""
  minority = (jax.random.uniform(key, idx.shape) < eta).astype(jnp.int32)
  bg = data.label[idx] ^ minority
  return data.images[idx, bg], data.label[idx], minority


def pools(key: jax.Array, n_train: int, g) -> tuple[jax.Array, ...]:
  """The seed's split of the train digits: pretraining, labelled and
  unlabelled pools (a permutation from the seed's key)."""
  perm = jax.random.permutation(jax.random.fold_in(key, 0), n_train)
  a, b = g.num_pretrain, g.num_pretrain + g.num_labelled
  return perm[:a], perm[a:b], perm[b:]


class NetState(NamedTuple):
  params: Any
  opt_state: Any
  key: jax.Array
  pool: jax.Array       # [m] the train digits this net learns from
  minority: jax.Array   # [m] 1: shown on the background opposing its label


def make_net_trainer(net: ConvNet, tx, batch_size: int, n_train: int,
                     pool_index: int, g, target: str):
  """init(key, eta) and step(state, t, data) training `net` on a pool of
  the seed's train digits: `target='digit'` with backgrounds at random each
  step (the student's pretraining), `'label'` on the pool drawn once from
  D(eta) (the teacher's labelled set)."""

  def init(key, eta):
    params = net.init(jax.random.fold_in(key, 1),
                      jnp.zeros((1, datasets.SIDE, datasets.SIDE, 3)))
    pool = pools(key, n_train, g)[pool_index]
    minority = (jax.random.uniform(jax.random.fold_in(key, 4), pool.shape)
                < eta).astype(jnp.int32)
    return NetState(params, tx.init(params), key, pool, minority)

  def step(state, t, data: Digits):
    pos = data_lib.batch_indices(jax.random.fold_in(state.key, 2), t,
                                 state.pool.shape[0], batch_size)
    idx = state.pool[pos]
    if target == 'digit':
      k_bg = jax.random.fold_in(jax.random.fold_in(state.key, 3), t)
      x, _, _ = draw(k_bg, data, idx, 0.5)
      y = data.digit[idx]
    else:
      x = data.images[idx, data.label[idx] ^ state.minority[pos]]
      y = data.label[idx]
    x, y = distributed.shard_batch((x, y))
    (loss, acc), grads = jax.value_and_grad(
        lambda p: _ce(net.apply(p, x), y), has_aux=True)(state.params)
    upd, opt_state = tx.update(grads, state.opt_state, state.params)
    return (state._replace(params=optax.apply_updates(state.params, upd),
                           opt_state=opt_state),
            {'loss': loss, 'accuracy': acc})

  return init, step


def _ce(logits, y):
  loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
  return loss, (jnp.argmax(logits, -1) == y).mean()


def group_accuracy(logits_fn, test: Digits) -> jax.Array:
  """Accuracy per group (label, background) on the test digits, each shown
  on both backgrounds: [NUM_GROUPS], index 2 * label + background."""
  acc = []
  for bg in (0, 1):
    correct = jnp.argmax(logits_fn(test.images[:, bg]), -1) == test.label
    for y in (0, 1):
      m = test.label == y
      acc.append(jnp.sum(correct * m) / jnp.sum(m))
  return jnp.stack(acc)[jnp.array([0, 2, 1, 3])]


class HeadsState(NamedTuple):
  key: jax.Array
  student: Any
  teacher: Any
  eta_u: jax.Array
  group_acc: jax.Array   # [len(HEADS), NUM_GROUPS]
  grid_acc: jax.Array    # [len(grid(e)), NUM_GROUPS]: Enhanced over (p, q)
  pseudo_acc: jax.Array
  subset_minority: jax.Array   # minority fraction of Enhanced's subset


def make_heads(cfg):
  """The W2S stage of one mismatch setting (one step): vanilla W2S,
  Enhanced-W2S, its random-subset ablation and the ground-truth ceiling."""
  g, e = cfg.digits, cfg.enhanced
  teacher_net, student_net = _nets(g)
  fit = dict(steps=g.head_steps, lr=g.head_lr, batch_size=g.batch_size)

  def init(key, args):
    student, teacher, eta_u = args
    return HeadsState(key, student, teacher, eta_u,
                      jnp.zeros((len(HEADS), NUM_GROUPS)),
                      jnp.zeros((len(grid(e)), NUM_GROUPS)), jnp.zeros(()),
                      jnp.zeros(()))

  def step(state, t, data):
    del t
    train, test = data
    # The test digits are the batch every head is scored on (the unlabelled
    # pool, 1437 - num_pretrain - num_labelled digits, need not divide the
    # mesh; each head's minibatches are marked in `w2s.fit_head`).
    test = test._replace(images=distributed.shard_batch(test.images))
    unl = pools(state.key, train.label.shape[0], g)[2]
    x_u, y_u, minority = draw(jax.random.fold_in(state.key, 5), train, unl,
                              state.eta_u)
    pseudo = jnp.argmax(teacher_net.apply(state.teacher, x_u), -1)
    feats = lambda x: student_net.apply(state.student, x, features_only=True)
    f_u = feats(x_u)
    mean, std = f_u.mean(0), f_u.std(0) + 1e-3
    norm = lambda f: (f - mean) / std
    f_u = norm(f_u)
    k_w2s, k_enh, k_ceil = jax.random.split(jax.random.fold_in(state.key, 6),
                                            3)
    everyone = jnp.ones(unl.shape, bool)
    h_w2s = w2s.fit_head(k_w2s, f_u, pseudo, everyone, num_classes=2, **fit)
    enh = lambda subset, p=e.fraction, q=e.q: w2s.enhanced_w2s(
        k_enh, f_u, h_w2s, pseudo, fraction=p, q=q, labels=e.labels,
        subset=subset, **fit)
    h_enh, h_rand = enh('entropy'), enh('random')
    h_grid = [enh('entropy', p, q) for p, q in grid(e)]
    h_ceil = w2s.fit_head(k_ceil, f_u, y_u, everyone, num_classes=2, **fit)
    head_fn = lambda h: (lambda x: w2s.head_logits(h, norm(feats(x))))
    fns = [lambda x: teacher_net.apply(state.teacher, x)] + [
        head_fn(h) for h in (h_w2s, h_enh, h_rand, h_ceil)]
    acc = jnp.stack([group_accuracy(f, test) for f in fns])
    grid_acc = jnp.stack([group_accuracy(head_fn(h), test) for h in h_grid])
    mask = w2s.confident_subset(w2s.head_logits(h_w2s, f_u), e.fraction)
    sub_min = jnp.sum(mask * minority) / jnp.sum(mask)
    new = state._replace(group_acc=acc, grid_acc=grid_acc,
                         pseudo_acc=jnp.mean(pseudo == y_u),
                         subset_minority=sub_min)
    return new, {**{f'acc/{h}': acc[i].mean() for i, h in enumerate(HEADS)},
                 'pseudo_acc': new.pseudo_acc, 'subset_minority': sub_min}

  return init, step


def grid(e) -> list[tuple[float, float]]:
  """The (p, q) grid of Enhanced-W2S reported beside the claim's a-priori
  setting (the paper tunes p and q)."""
  return [(p, q) for p in e.grid_fractions for q in e.grid_qs]


def settings(g) -> list[tuple[str, float, float]]:
  """The two mismatch settings: (name, eta_l, eta_u)."""
  lo = data_lib.name_number(g.eta_o)
  return [(f'l{lo}_u0p5', g.eta_o, 0.5), (f'l0p5_u{lo}', 0.5, g.eta_o)]


def run_digits(r: launch.Run) -> dict[str, dict[str, np.ndarray]]:
  """setting -> {'group_acc' [seeds, HEADS, groups], 'pseudo_acc',
  'subset_minority' [seeds]}."""
  cfg = r.config
  g = cfg.digits
  S = cfg.num_seeds
  data_dir = cfg.data_dir or None
  train = _to_device(datasets.load_spurious_digits('train', data_dir))
  test = _to_device(datasets.load_spurious_digits('test', data_dir))
  teacher_net, student_net = _nets(g)
  n_steps = lambda k: dict(num_steps=k, chunk_size=min(g.chunk_size, k))
  n_train = int(train.label.shape[0])
  init, step = make_net_trainer(student_net, optax.adam(g.lr), g.batch_size,
                                n_train, 0, g, 'digit')
  student = r.train(init, step, phase='pretrain', data=train,
                    init_args=jnp.full((S,), 0.5),
                    **n_steps(g.pretrain_steps)).state.params
  out = {}
  for name, eta_l, eta_u in settings(g):
    init, step = make_net_trainer(teacher_net, optax.adam(g.lr),
                                  g.teacher_batch_size, n_train, 1, g, 'label')
    teacher = r.train(init, step, phase=f'teacher_{name}', data=train,
                      init_args=jnp.full((S,), eta_l),
                      **n_steps(g.teacher_steps)).state.params
    init, step = make_heads(cfg)
    res = r.train(init, step, phase=f'heads_{name}', num_steps=1,
                  chunk_size=1, data=(train, test), log_every=1,
                  init_args=(student, teacher, jnp.full((S,), eta_u)))
    st = distributed.to_host(res.state)
    out[name] = {'group_acc': np.asarray(st.group_acc),
                 'grid_acc': np.asarray(st.grid_acc),
                 'pseudo_acc': np.asarray(st.pseudo_acc),
                 'subset_minority': np.asarray(st.subset_minority)}
  return out


def programs(cfg, sharded: bool = False) -> list[loop.Program]:
  """The theory phases' one-step chunks, the digits trainers and the heads
  step at the config's shapes (`benchmarks/paper_variants.py`)."""
  S, t, g = cfg.num_seeds, cfg.theory, cfg.digits
  progs = []
  same: dict[tuple[str, int], list] = {}   # phases of one program
  for align_to, _, part in theory_phases(t):
    same.setdefault((align_to, len(part)), []).append(part)
  for (align_to, k), parts in same.items():
    calls = len(parts)
    p = loop.train_program(
        f'train/theory_{align_to}' + (f' x{calls}' if calls > 1 else ''),
        *make_theory(t, align_to), num_seeds=k * S, num_steps=1,
        chunk_size=1, init_args=theory_args(parts[0], S),
        sharded=sharded, params=t.d_z * (t.p_t + t.p_s))
    progs.append(dataclasses.replace(p, calls=calls, note=(
        'no gradient training: per row two ridgeless least-squares fits '
        f'(n x d_T = {t.n} x {t.d_z * t.p_t}, N x d_S = {t.big_n} x '
        f'{t.d_z * t.p_s}) by SVD, a solver call the FLOP count leaves out '
        '(~4 n d^2 each) and that runs replicated over the data axis; '
        'params: the two fits\' coefficients')))
  n_train = data_lib.DIGITS_NUM_TRAIN
  n_test = data_lib.DIGITS_NUM_EXAMPLES - n_train
  side = datasets.SIDE
  digits = lambda n: Digits(
      jax.ShapeDtypeStruct((n, 2, side, side, 3), jnp.float32),
      jax.ShapeDtypeStruct((n,), jnp.int32),
      jax.ShapeDtypeStruct((n,), jnp.int32))
  train, test = digits(n_train), digits(n_test)
  teacher_net, student_net = _nets(g)
  eta = np.full((S,), 0.5, np.float32)
  keys = jax.ShapeDtypeStruct((S, 2), jnp.uint32)
  nets = {}
  for name, net, bs, index, target, steps in (
      ('pretrain', student_net, g.batch_size, 0, 'digit', g.pretrain_steps),
      ('teacher', teacher_net, g.teacher_batch_size, 1, 'label',
       g.teacher_steps)):
    init, step = make_net_trainer(net, optax.adam(g.lr), bs, n_train, index,
                                  g, target)
    nets[name] = jax.eval_shape(jax.vmap(init), keys, eta).params
    progs.append(loop.train_program(
        f'train/{name}' + (' x2' if name == 'teacher' else ''), init, step,
        num_seeds=S, num_steps=steps, chunk_size=min(g.chunk_size, steps),
        data=train, init_args=eta, sharded=sharded))
  progs[-1] = dataclasses.replace(progs[-1], calls=2 * progs[-1].calls)
  heads = loop.train_program(
      'train/heads x2', *make_heads(cfg), num_seeds=S, num_steps=1,
      chunk_size=1, data=(train, test),
      init_args=(nets['pretrain'], nets['teacher'], eta), sharded=sharded,
      params=g.student_hidden * 2 + 2)
  progs.append(dataclasses.replace(heads, calls=2, note=(
      f'{5 + len(grid(cfg.enhanced))} linear heads on the frozen student\'s '
      f'features, {g.head_steps} minibatch steps each, and the group '
      'accuracies on the test digits')))
  return progs


PAPER_SCALE = (
    'arXiv 2509.24005: frozen pretrained backbones (10 teacher-student pairs '
    'from ResNet18, CLIP ViT-B/32, ConvNeXt-L, DINOv2 ViT-L/14, MAE '
    'ViT-B/16) with only the linear head fine-tuned, on Waterbirds, BFFHQ, '
    'ImageNet-9 and BG-COCO, and the Gaussian feature model simulated at '
    'd_z = 2048; the head-training steps and batch sizes and the synthetic '
    'sample sizes n, N were not extracted (this config takes n = N = 32768).')


# -- run, claims, plots -------------------------------------------------------


def run(r: launch.Run) -> launch.Result:
  cfg = r.config
  theory = run_theory(r)
  digits = run_digits(r)
  metrics = {}
  t = cfg.theory
  pts = theory_points(t)
  for sweep, tab in theory.items():
    for (el, eu, _, a), v in zip(pts[sweep], tab):
      tag = (f'align{data_lib.name_number(a)}' if sweep.startswith('align')
             else f'l{data_lib.name_number(el)}_u{data_lib.name_number(eu)}')
      for i, k in enumerate(THEORY_KEYS):
        metrics[f'{sweep}/{tag}/{k}'] = v[:, i]
  for name, d in digits.items():
    for i, h in enumerate(HEADS):
      metrics[f'digits_{name}/acc_{h}'] = d['group_acc'][:, i].mean(-1)
      metrics[f'digits_{name}/worst_group_{h}'] = d['group_acc'][:, i].min(-1)
    for (p, q), v in zip(grid(cfg.enhanced), np.moveaxis(d['grid_acc'], 1, 0)):
      tag = f'p{data_lib.name_number(p)}_q{data_lib.name_number(q)}'
      metrics[f'digits_{name}/acc_enhanced_{tag}'] = v.mean(-1)
    metrics[f'digits_{name}/pseudo_acc'] = d['pseudo_acc']
    metrics[f'digits_{name}/subset_minority'] = d['subset_minority']
  _plots(r, cfg, theory, digits)
  return launch.Result(metrics=metrics,
                       claims=evaluate_claims(cfg, theory, digits),
                       extra={'theory_mean': {k: v.mean(1).round(5).tolist()
                                              for k, v in theory.items()},
                              'theory_keys': list(THEORY_KEYS)})


def _plots(r, cfg, theory, digits) -> None:
  from experiments import plots  # pylint: disable=g-import-not-at-top
  t = cfg.theory
  x = np.asarray(t.eta_us, float)
  k = {n: i for i, n in enumerate(THEORY_KEYS)}
  m = len(t.eta_us)
  for sweep, label in (('eta', 'student frame without the group mean'),
                       ('eta_control', f'control: ||mu_S|| = '
                                       f'{t.control_mu_s:g}')):
    series = []
    for j, el in enumerate(t.eta_ls):
      tab = theory[sweep][j * m:(j + 1) * m]
      series += [(f'student, eta_l={el:g}', x, tab[:, :, k['er_student']]),
                 (f'closed form, eta_l={el:g}', x, tab[:, :, k['cf_student']]),
                 (f'teacher, eta_l={el:g}', x, tab[:, :, k['er_teacher']])]
    plots.plot_series(series, r.plots_dir / f'risk_vs_eta_u_{sweep}.png',
                      title=f'Excess risk on D({t.eta_t:g}) ({label})',
                      xlabel='eta_u', ylabel='excess risk', logy=True)
  xa = np.asarray(t.aligns, float)
  gain = lambda tab: tab[:, :, k['er_teacher']] - tab[:, :, k['er_student']]
  plots.plot_series(
      [('towards span(T)', xa, gain(theory['align'])),
       ('control: away from both', xa, gain(theory['align_control']))],
      r.plots_dir / 'gain_vs_alignment.png',
      title=f'W2S gain at eta_u = eta_l = {t.align_eta_l:g}',
      xlabel='align (||Xi||_F^2 = align^2 (p_S - 1))', ylabel='ER_T - ER_S')
  names = list(digits)
  xs = np.arange(len(names), dtype=float)
  series = [(h, xs, np.stack([digits[n]['group_acc'][:, i].mean(-1)
                              for n in names]))
            for i, h in enumerate(HEADS)]
  plots.plot_series(series, r.plots_dir / 'digits_accuracy.png',
                    title='spurious digits, balanced test accuracy',
                    xlabel=' | '.join(f'{i}: {n}' for i, n in
                                      enumerate(names)),
                    ylabel='accuracy', bounds=(0.0, 1.0))


def _argmins(cfg, tab) -> list[float]:
  t = cfg.theory
  m = len(t.eta_us)
  er = tab[:, :, THEORY_KEYS.index('er_student')].mean(1)
  return [float(t.eta_us[int(np.argmin(er[j * m:(j + 1) * m]))])
          for j in range(len(t.eta_ls))]


def _rises(cfg, tab) -> list[tuple[bool, float]]:
  """Per eta_l: (risk non-decreasing away from eta_l on both sides within
  rise_tol of ER_S(eta_l), far-end rise over ER_S(eta_l))."""
  t = cfg.theory
  m = len(t.eta_us)
  er = tab[:, :, THEORY_KEYS.index('er_student')].mean(1)
  eu = np.asarray(t.eta_us)
  out = []
  for j, el in enumerate(t.eta_ls):
    curve = er[j * m:(j + 1) * m]
    c = int(np.argmin(np.abs(eu - el)))
    tol = t.rise_tol * curve[c]
    right, left = curve[c:], curve[:c + 1][::-1]
    mono = all(np.all(np.diff(side) >= -tol) for side in (right, left))
    far = int(np.argmax(np.abs(eu - el)))
    out.append((bool(mono), float(curve[far] / curve[c] - 1.0)))
  return out


def _max_dev(tab, sim: str, ref: str) -> float:
  i, j = THEORY_KEYS.index(sim), THEORY_KEYS.index(ref)
  return float(np.max(np.abs(tab[:, :, i].mean(1) / tab[:, :, j].mean(1) - 1)))


def evaluate_claims(cfg, theory, digits) -> list[launch.Claim]:
  """The paper's claims at our calibration, each with its control."""
  t, g = cfg.theory, cfg.digits
  fmt = lambda v: ' / '.join(f'{x:.3g}' for x in v)
  els = fmt(t.eta_ls)
  claims = []

  am, am_c = _argmins(cfg, theory['eta']), _argmins(cfg, theory['eta_control'])
  near = lambda a: all(abs(x - el) <= t.argmin_tol + 1e-9
                       for x, el in zip(a, t.eta_ls))
  claims.append(launch.Claim(
      claim=(f'The student\'s risk is lowest when the pseudolabelled data has '
             f'the teacher\'s minority fraction: argmin over eta_u within '
             f'{t.argmin_tol:g} of eta_l = {els}.'),
      holds=near(am),
      evidence=(f'argmin eta_u = {fmt(am)} for eta_l = {els} (mean risk over '
                f'{cfg.num_seeds} seeds, grid {fmt(t.eta_us)})'),
      control=launch.control_text(
          f'a student that sees the group as well (||mu_S|| = '
          f'{t.control_mu_s:g}; the paper: eta_u* leaves eta_l as ||mu_S|| '
          'grows)', f'argmin eta_u = {fmt(am_c)}', near(am_c))))

  rise, rise_c = _rises(cfg, theory['eta']), _rises(cfg, theory['eta_control'])
  ok = lambda rs: all(mono and r >= t.min_rise for mono, r in rs)
  desc = lambda rs: '; '.join(
      f'eta_l={el:g}: {"monotone" if mono else "not monotone"}, far end '
      f'{r:+.1%}' for el, (mono, r) in zip(t.eta_ls, rs))
  claims.append(launch.Claim(
      claim=(f'The student\'s risk rises with |eta_u - eta_l| (non-decreasing '
             f'within {t.rise_tol:.0%} seed noise, >= {t.min_rise:.0%} higher '
             'at the far end of the grid).'),
      holds=ok(rise), evidence=desc(rise),
      control=launch.control_text(
          f'the same with ||mu_S|| = {t.control_mu_s:g}', desc(rise_c),
          ok(rise_c))))

  k_t, k_s = THEORY_KEYS.index('er_teacher'), THEORY_KEYS.index('er_student')
  gain = lambda tab: (tab[:, :, k_t] - tab[:, :, k_s]).mean(1)
  ga, gc = gain(theory['align']), gain(theory['align_control'])
  falls = lambda v: bool(np.all(np.diff(v) < 0)
                         and v[-1] <= (1 - t.min_align_drop) * v[0])
  al = fmt(t.aligns)
  claims.append(launch.Claim(
      claim=(f'The W2S gain falls as teacher-student alignment ||Xi||_F^2 '
             f'grows (eta_u = eta_l = {t.align_eta_l:g}; >= '
             f'{t.min_align_drop:.0%} lower at the largest alignment).'),
      holds=falls(ga),
      evidence=f'gain ER_T - ER_S at align {al}: {fmt(ga)}',
      control=launch.control_text(
          'the student\'s frame turned by the same angles away from both '
          '(Xi stays 0)', f'gain {fmt(gc)}', falls(gc))))

  dev = max(_max_dev(theory['eta'], 'er_student', 'cf_student'),
            _max_dev(theory['eta'], 'er_teacher', 'cf_teacher'))
  dev_q = max(_max_dev(theory['eta'], 'er_student', 'quoted_student'),
              _max_dev(theory['eta'], 'er_teacher', 'quoted_teacher'))
  claims.append(launch.Claim(
      claim=(f'The simulated risks match the closed form (finite-n factor, '
             f'group-mixture covariance) within {t.closed_form_tol:.0%} over '
             'the eta_l x eta_u grid.'),
      holds=dev <= t.closed_form_tol,
      evidence=f'max |sim / closed form - 1| = {dev:.3f} (teacher and student)',
      control=launch.control_text(
          'Thms 1-2 as a secondary summary quotes them (no finite-n '
          'factor, shift term unsaturated)', f'max deviation {dev_q:.3f}',
          dev_q <= t.closed_form_tol)))

  heads = {h: i for i, h in enumerate(HEADS)}
  acc = lambda d, h: d['group_acc'][:, heads[h]].mean(-1)
  wins = {n: int(np.sum(acc(d, 'enhanced') > acc(d, 'w2s')))
          for n, d in digits.items()}
  wins_r = {n: int(np.sum(acc(d, 'enhanced_random') > acc(d, 'w2s')))
            for n, d in digits.items()}
  S = cfg.num_seeds
  grid_wins = lambda d: [int(np.sum(v.mean(-1) > acc(d, 'w2s')))
                         for v in np.moveaxis(d['grid_acc'], 1, 0)]
  grid_text = '; '.join(
      f'{n}: ' + ', '.join(f'p{p:g}/q{q:g} {w}/{S}' for (p, q), w in
                           zip(grid(cfg.enhanced), grid_wins(d)))
      for n, d in digits.items())
  summary = lambda d: (f'teacher {acc(d, "teacher").mean():.3f}, W2S '
                       f'{acc(d, "w2s").mean():.3f}, Enhanced '
                       f'{acc(d, "enhanced").mean():.3f}, ceiling '
                       f'{acc(d, "ceiling").mean():.3f}')
  claims.append(launch.Claim(
      claim=(f'Enhanced-W2S (p = {cfg.enhanced.fraction:g}, q = '
             f'{cfg.enhanced.q:g}, {cfg.enhanced.labels} labels) beats '
             f'vanilla W2S in >= {g.min_wins}/{S} seeds in both mismatch '
             'settings (spurious digits, balanced test accuracy).'),
      holds=all(w >= g.min_wins for w in wins.values()),
      evidence=('; '.join(f'{n}: {wins[n]}/{S} seeds ({summary(d)})'
                          for n, d in digits.items())
                + f'. Over the (p, q) grid (wins vs W2S): {grid_text}'),
      control=launch.control_text(
          'retraining on a random subset of the same size (no entropy '
          'ranking)', ', '.join(f'{n}: {w}/{S}' for n, w in wins_r.items()),
          all(w >= g.min_wins for w in wins_r.values())),
      paper='mean relative gains +0.77% .. +24.11% over 10 teacher-student '
            'pairs on Waterbirds, BFFHQ, ImageNet-9, BG-COCO'))
  return claims


def check_config(c: ml_collections.ConfigDict) -> None:
  t, g = c.theory, c.digits
  cfg_lib.check(t.n > t.d_z * t.p_t, 'theory.n', t.n,
                f'> d_T = d_z * p_t = {t.d_z * t.p_t} (the closed form is '
                'for the underparameterised teacher)')
  cfg_lib.check(t.big_n > t.d_z * t.p_s, 'theory.big_n', t.big_n,
                f'> d_S = d_z * p_s = {t.d_z * t.p_s}')
  cfg_lib.check(t.p_s < t.p_t and t.p_t + 2 * t.p_s - 3 <= t.p, 'theory.p',
                t.p, 'p_s < p_t and p >= p_t + 2 p_s - 3 (room for the '
                'alignment control)')
  for el in t.eta_ls:
    cfg_lib.check(el in t.eta_us, 'theory.eta_ls', t.eta_ls,
                  f'values in theory.eta_us {tuple(t.eta_us)}')
  cfg_lib.check(t.align_eta_l in t.eta_us, 'theory.align_eta_l',
                t.align_eta_l, 'a value of theory.eta_us')
  cfg_lib.check(g.num_pretrain + g.num_labelled < 1437,
                'digits.num_labelled', g.num_labelled,
                f'< {1437 - g.num_pretrain} (1437 train digits: '
                'num_pretrain + num_labelled + at least one unlabelled)')
  cfg_lib.check(g.min_wins <= c.num_seeds, 'digits.min_wins', g.min_wins,
                f'<= num_seeds = {c.num_seeds}')


_ETA = cfg_lib.Float(min=0.0, max=0.5)
EXPERIMENT = launch.Experiment('w2s', run, schema={
    'num_seeds': cfg_lib.Int(min=2),
    'theory.d_z': cfg_lib.Int(min=1),
    'theory.p': cfg_lib.Int(min=3),
    'theory.p_t': cfg_lib.Int(min=3),
    'theory.p_s': cfg_lib.Int(min=2),
    'theory.mu_t': cfg_lib.Float(min=0.0),
    'theory.control_mu_s': cfg_lib.Float(min=0.0),
    'theory.sigma_xi': cfg_lib.Float(min=0.0, min_inclusive=False),
    'theory.sigma_y': cfg_lib.Float(min=0.0, min_inclusive=False),
    'theory.eta_t': _ETA,
    'theory.eta_ls': cfg_lib.Seq(item=_ETA, min_len=1),
    'theory.eta_us': cfg_lib.Seq(item=_ETA, min_len=3),
    'theory.aligns': cfg_lib.Seq(item=cfg_lib.Float(min=0.0, max=1.0,
                                                    max_inclusive=False),
                                 min_len=2),
    'theory.align_eta_l': _ETA,
    'theory.points_per_phase': cfg_lib.Int(min=0),
    'digits.eta_o': _ETA,
    'digits.num_pretrain': cfg_lib.Int(min=10),
    'digits.num_labelled': cfg_lib.Int(min=10),
    'digits.min_wins': cfg_lib.Int(min=1),
    'enhanced.fraction': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False),
    'enhanced.q': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False),
    'enhanced.labels': cfg_lib.Choice(*w2s.LABEL_SOURCES),
    'enhanced.grid_fractions': cfg_lib.Seq(
        item=cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False)),
    'enhanced.grid_qs': cfg_lib.Seq(
        item=cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False)),
}, check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
