"""Dynamic Gated Neuron experiment (arXiv 2509.03281): LIF, PLIF, ALIF and
DGN networks of equal size trained on the same spike data and seeds, then
evaluated clean and under perturbations applied only at evaluation.

Training: cross-entropy on the readout logits, BPTT through the whole
sequence (`network.SNN`), Adam with a cosine schedule; seeds are the vmap
axis of `core.loop` and each neuron type is one phase. Evaluation: accuracy
on the test split clean, with spikes inserted (probability p per input
neuron and step), deleted (fraction), jittered (Gaussian, in steps) and with
Gaussian current noise on every spiking neuron's membrane; retention =
perturbed / clean accuracy.

Stochastic stability (the paper's SDE analysis): a single neuron driven by
presynaptic input of constant rate (the conductance input) plus Gaussian
current noise. Its decay is beta = 1 - g_l dt as LIF and rho = beta - dt D C
< beta as DGN, so the stationary variance of V, sigma^2 / (1 - rho^2) in the
sub-threshold linear regime, is lower; `stability` measures it with spikes
and resets, at matched mean firing rate (the input weight of each neuron is
set by bisection so both fire at `target_rate`).
"""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import logging as log_lib
from iclrjax.core import supervised
from iclrjax.snn import cells
from iclrjax.snn import datasets
from iclrjax.snn import network
from iclrjax.snn import perturb
from iclrjax.snn import surrogate

# Evaluation-time perturbations: the input-spike ones of `snn.perturb` and
# Gaussian current noise on the membranes.
PERTURBATIONS = (*perturb.PERTURBATIONS, 'current')


def make_cell(kind: str, c: ml_collections.ConfigDict) -> cells.Cell:
  return cells.Cell(kind=kind, dt=c.dt, g_l=c.g_l, tau_syn=c.tau_syn,
                    theta=c.theta, surrogate=c.surrogate,
                    surrogate_scale=c.surrogate_scale, w_gain=c.w_gain,
                    c_init=c.c_init, tau_adapt=c.tau_adapt,
                    beta_adapt=c.beta_adapt)


def make_network(kind: str, num_classes: int,
                 c: ml_collections.ConfigDict) -> network.SNN:
  return network.SNN(make_cell(kind, c), tuple(c.hidden), num_classes,
                     recurrent=c.recurrent, readout=c.readout,
                     readout_beta=c.readout_beta)


# -- training ------------------------------------------------------------------------
def make_trainer(net: network.SNN, train_x: jax.Array,
                 c: ml_collections.ConfigDict, num_steps: int):
  """init(key) -> TrainState; step(state, t, (x, y)) -> (state, metrics).

  Cross-entropy on the readout logits, BPTT through the whole sequence,
  Adam with a cosine decay over `num_steps`. `train_x` gives the input
  shape; the split goes to `step` as `r.train(..., data=(train_x, train_y))`.
  """
  tx = optax.adam(optax.cosine_decay_schedule(c.learning_rate, num_steps))
  return supervised.make_classifier_trainer(
      lambda k: net.init(k, train_x.shape[-1]),
      jax.vmap(net.apply, in_axes=(None, 0)), tx, c.batch_size)


def make_evaluator(net: network.SNN, eval_batch: int):
  """evaluate(params [S, ...], x, y, kind, levels [P], key) -> acc [S, P].

  One compiled function per perturbation kind serves every level (the
  strength is traced); kind 'clean' ignores levels' values. Each level and
  seed uses the same perturbation draws (common random numbers).
  """

  def accuracy(params, x, y, kind, level, key):
    nb = x.shape[0] // eval_batch
    xb = x[:nb * eval_batch].reshape(nb, eval_batch, *x.shape[1:])
    yb = y[:nb * eval_batch].reshape(nb, eval_batch)
    keys = jax.random.split(key, nb * eval_batch).reshape(nb, eval_batch)

    def batch(args):
      xs, ys, ks = args

      def one(xi, ki):
        kp, kn = jax.random.split(ki)
        if kind == 'current':
          return net.apply(params, xi, key=kn, current_noise=level)
        if kind != 'clean':
          xi = perturb.apply(kind, kp, xi, level)
        return net.apply(params, xi)

      logits = jax.vmap(one)(xs, ks)
      return (jnp.argmax(logits, -1) == ys).sum()

    return jax.lax.map(batch, (xb, yb, keys)).sum() / (nb * eval_batch)

  def _eval(params, x, y, levels, key, kind):
    f = lambda p, lv: accuracy(p, x, y, kind, lv, key)
    return jax.vmap(lambda p: jax.vmap(lambda lv: f(p, lv))(levels))(params)

  _eval = jax.jit(_eval, static_argnums=5)

  def evaluate(params, x, y, kind, levels, key):
    return _eval(params, x, y, jnp.asarray(levels, jnp.float32), key, kind)

  return evaluate


def membrane_traces(net: network.SNN, params, x: jax.Array, neurons: int = 4):
  """(v, z) [T, neurons] of the first layer for one example (for plots)."""
  _, aux = net.apply(params, x, with_aux=True)
  return aux['v'][:, :neurons], aux['z'][:, :neurons]


# -- stochastic stability ------------------------------------------------------------
def single_neuron_stats(cell: cells.Cell, w: jax.Array, c: jax.Array,
                        rate: float, sigma: float, num_pre: int, steps: int,
                        burn_in: int, key: jax.Array, trials: int
                        ) -> tuple[jax.Array, jax.Array]:
  """Mean firing rate and stationary Var(V) of one neuron.

  Input: `num_pre` presynaptic lines carrying a constant rate input
  (s_i^t = rate, the mean of Bernoulli(rate) spikes) with weights w and, for
  DGN, couplings c (both uniform over lines), plus Gaussian current noise of
  std sigma. Var(V) is over time after burn-in, averaged over trials.
  """
  params = {'w': jnp.full((num_pre, 1), w)}
  if cell.kind == 'dgn':
    params['c'] = jnp.full((num_pre, 1), c)
  if cell.kind == 'plif':
    params['a'] = jnp.full((1,), jnp.log(cell.beta / (1 - cell.beta)))
  spikes = jnp.full((steps, num_pre), rate)

  def trial(k):
    noise = sigma * jax.random.normal(k, (steps, 1))
    z, v = cells.run_layer(cell, params, spikes, noise)
    return z[burn_in:, 0].mean(), v[burn_in:, 0].var()

  r, var = jax.vmap(trial)(jax.random.split(key, trials))
  return r.mean(), var.mean()


def stability(c: ml_collections.ConfigDict, key: jax.Array) -> dict[str, Any]:
  """LIF vs DGN single-neuron variance at matched mean firing rate."""
  s = c.stability
  out = {}
  for kind in ('lif', 'dgn'):
    cell = make_cell(kind, c)
    stats = jax.jit(lambda w: single_neuron_stats(
        cell, w, s.coupling, s.input_rate, s.noise, s.num_pre, s.steps,
        s.burn_in, key, s.trials))
    lo, hi = 0.0, s.w_max
    for _ in range(s.bisection_steps):  # Rate is increasing in w.
      mid = 0.5 * (lo + hi)
      if float(stats(mid)[0]) < s.target_rate:
        lo = mid
      else:
        hi = mid
    w = 0.5 * (lo + hi)
    rate, var = (float(v) for v in stats(w))
    rho = (cell.beta if kind == 'lif' else float(np.clip(
        cell.beta - c.dt * s.coupling * s.num_pre * s.input_rate
        / (1 - cell.alpha_syn), 0, 1)))
    out[kind] = {'w': w, 'rate': rate, 'var_v': var, 'decay': rho}
  return out


# -- the experiment ---------------------------------------------------------------------
_DATA_ARGS = {  # Ranges of the `datasets` loaders' keyword arguments.
    'num_samples': cfg_lib.Int(min=10),
    'neurons': cfg_lib.Int(min=1),
    'upsample': cfg_lib.Int(min=1),
    'max_rate': cfg_lib.Float(min=0.0, max=1.0),
    'width': cfg_lib.Float(min=0.0, min_inclusive=False),
    'seed': cfg_lib.Int(min=0),
    'num_classes': cfg_lib.Int(min=2),
    'steps': cfg_lib.Int(min=1),
    'num_train': cfg_lib.Int(min=1),
    'num_test': cfg_lib.Int(min=1),
    'base_rate': cfg_lib.Float(min=0.0, max=1.0),
    'peak_rate': cfg_lib.Float(min=0.0, max=1.0),
    'jitter': cfg_lib.Int(min=0),
    'neuron_jitter': cfg_lib.Int(min=0),
    'bumps': cfg_lib.Int(min=1),
    'num_steps': cfg_lib.Int(min=1),
    'max_time': cfg_lib.Float(min=0.0, min_inclusive=False),
    'num_units': cfg_lib.Int(min=1, max=700),
}
# The loader of each `data` (datasets.load): its arguments are the keys
# data_args may have.
_LOADERS = {
    'mnist1d': datasets.mnist1d_builder,
    'synthetic_digits': datasets.synthetic_digits_builder,
    'shd': datasets.load_shd,
    'ntidigits': datasets.load_ntidigits,
}


def config_schema() -> dict[str, cfg_lib.Spec]:
  """Constraints of configs/dgn_snn.py (types come from its default)."""
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  nonneg = cfg_lib.Float(min=0.0)
  prob = cfg_lib.Float(min=0.0, max=1.0)
  return {
      'data': cfg_lib.Choice(*datasets.KINDS),
      # Keys vary with `data`: check_config checks them against its loader.
      'data_args': cfg_lib.Dict(items=_DATA_ARGS),
      'cells': cfg_lib.Seq(item=cfg_lib.Choice(*cells.CELLS), min_len=1),
      'hidden': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
      'readout': cfg_lib.Choice(*network.READOUTS),
      'readout_beta': cfg_lib.Float(min=0.0, max=1.0),
      'dt': pos,
      'g_l': nonneg,
      'tau_syn': nonneg,
      'theta': pos,
      'surrogate': cfg_lib.Choice(*surrogate.SURROGATES),
      'surrogate_scale': pos,
      'w_gain': pos,
      'c_init': nonneg,
      'tau_adapt': pos,
      'beta_adapt': nonneg,
      'epochs': cfg_lib.Int(min=1),
      'batch_size': cfg_lib.Int(min=1),
      'learning_rate': pos,
      'eval_batch': cfg_lib.Int(min=1),
      # Strengths per kind; a kind left out is not evaluated.
      'perturbations': cfg_lib.Dict(keys=PERTURBATIONS, items={
          k: cfg_lib.Seq(item=prob if k in ('insert', 'delete') else nonneg,
                         min_len=1) for k in PERTURBATIONS}),
      'stability.num_pre': cfg_lib.Int(min=1),
      'stability.input_rate': cfg_lib.Float(min=0.0, max=1.0),
      'stability.coupling': nonneg,
      'stability.noise': pos,
      'stability.target_rate': cfg_lib.Float(min=0.0, max=1.0,
                                             min_inclusive=False),
      'stability.w_max': pos,
      'stability.bisection_steps': cfg_lib.Int(min=1),
      'stability.steps': cfg_lib.Int(min=2),
      'stability.burn_in': cfg_lib.Int(min=0),
      'stability.trials': cfg_lib.Int(min=1),
      'steps_per_chunk': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
  }


def check_config(c: ml_collections.ConfigDict) -> None:
  cfg_lib.check(c.g_l * c.dt <= 1.0, 'g_l', c.g_l,
                f'need g_l * dt <= 1 (dt={c.dt}) so the decay 1 - g_l dt '
                'is in [0, 1]')
  params = inspect.signature(_LOADERS[c.data]).parameters
  cfg_lib.check_keys(c.data_args, 'data_args',
                     [p for p in params if p not in ('data_dir', 'split')],
                     f'data={c.data!r} takes')


def load_data(c: ml_collections.ConfigDict) -> datasets.SpikeData:
  return datasets.load(c.data, data_dir=c.data_dir or None,
                       **dict(c.data_args))


def preflight(c: ml_collections.ConfigDict) -> None:
  """Raises `core.data.DatasetNotFoundError` (one line) if the files of
  `c.data` are missing (SHD / N-TIDIGITS in `c.data_dir`); reads nothing, so
  the launcher calls it before any compute."""
  datasets.check_available(c.data, c.data_dir or None)


def num_steps(c: ml_collections.ConfigDict, num_train: int) -> int:
  return c.epochs * max(1, num_train // c.batch_size)


def run(r: launch.Run) -> launch.Result:
  cfg = r.config
  spk = load_data(cfg)
  train_x, train_y = jnp.asarray(spk.train_x), jnp.asarray(spk.train_y)
  test_x, test_y = jnp.asarray(spk.test_x), jnp.asarray(spk.test_y)
  steps = num_steps(cfg, train_x.shape[0])
  metrics: dict[str, np.ndarray] = {}
  curves: dict[str, dict[str, np.ndarray]] = {}
  traces = {}
  eval_key = jax.random.key(cfg.seed + 12345)
  for kind in cfg.cells:
    net = make_network(kind, spk.num_classes, cfg)
    init, step = make_trainer(net, train_x, cfg, steps)
    out = r.train(init, step, num_steps=steps, data=(train_x, train_y),
                  chunk_size=min(cfg.steps_per_chunk, steps), phase=kind,
                  log_every=cfg.log_every, postfix_keys=('loss', 'accuracy'))
    params = out.state.params
    evaluate = make_evaluator(net, cfg.eval_batch)
    clean = np.asarray(distributed.to_host(evaluate(
        params, test_x, test_y, 'clean', [0.0], eval_key)))[:, 0]
    metrics[f'acc_clean/{kind}'] = clean
    curves[kind] = {}
    for pkind, levels in cfg.perturbations.items():
      acc = np.asarray(distributed.to_host(evaluate(
          params, test_x, test_y, pkind, list(levels), eval_key)))  # [S, P]
      curves[kind][pkind] = acc
      for j, lv in enumerate(levels):
        metrics[f'acc_{pkind}_{lv:g}/{kind}'] = acc[:, j]
        metrics[f'retention_{pkind}_{lv:g}/{kind}'] = acc[:, j] / clean
    p0 = jax.tree.map(lambda a: a[0], params)
    traces[kind] = tuple(np.asarray(a) for a in membrane_traces(
        net, p0, test_x[0]))
    rates = jax.vmap(lambda p: net.apply(p, test_x[0], with_aux=True)[1][
        'rates'][0])(params)
    metrics[f'rate_hidden/{kind}'] = np.asarray(rates)
  stab = stability(cfg, jax.random.key(cfg.seed + 777))
  for kind, st in stab.items():
    for k, v in st.items():
      metrics[f'stability_{k}/{kind}'] = np.full((cfg.num_seeds,), v)
  _plots(r, cfg, curves, metrics, traces)
  return launch.Result(metrics=metrics,
                       claims=evaluate_claims(cfg, metrics),
                       extra={'dataset': spk.name, 'train_steps': steps})


def _plots(r, cfg, curves, metrics, traces) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  for pkind, levels in cfg.perturbations.items():
    lv = np.array([0.0, *levels])
    series = []
    for kind in cfg.cells:
      acc = np.concatenate([metrics[f'acc_clean/{kind}'][:, None],
                            curves[kind][pkind]], 1)  # [S, 1 + P]
      series.append((kind, lv, acc.T))
    log_lib.plot_series(series, r.plots_dir / f'accuracy_vs_{pkind}.png',
                        title=f'test accuracy vs {pkind} strength '
                        '(applied at evaluation only)',
                        xlabel=f'{pkind} strength', ylabel='accuracy',
                        bounds=(0.0, 1.0))
  fig, axes = plt.subplots(len(traces), 1, figsize=(7, 1.6 * len(traces)),
                           sharex=True, squeeze=False)
  for ax, (kind, (v, z)) in zip(axes[:, 0], traces.items()):
    t = np.arange(v.shape[0])
    for j in range(v.shape[1]):
      ax.plot(t, v[:, j], lw=0.8)
      ax.plot(t[z[:, j] > 0], v[z[:, j] > 0, j], 'k.', ms=2)
    ax.axhline(cfg.theta, color='gray', ls=':', lw=0.8)
    ax.set_ylabel(f'{kind}\nV', fontsize=8)
  axes[-1, 0].set_xlabel('time step')
  fig.suptitle('membrane traces of 4 first-layer neurons (test example 0, '
               'seed 0; dots = spikes)', fontsize=9)
  fig.tight_layout()
  fig.savefig(r.plots_dir / 'membrane_traces.png', dpi=120)
  plt.close(fig)


def evaluate_claims(cfg, m: dict[str, np.ndarray]) -> list[launch.Claim]:
  claims = []
  get = lambda k: None if k not in m else float(np.mean(m[k]))
  dgn = get('acc_clean/dgn')
  for base, margin in (('lif', 0.10), ('alif', 0.05)):
    b = get(f'acc_clean/{base}')
    if dgn is not None and b is not None:
      claims.append(launch.Claim(
          claim=(f'Clean accuracy: DGN >= {base.upper()} + {margin:.2f} '
                 '(mean over seeds).'),
          holds=bool(dgn >= b + margin),
          evidence=f'DGN {dgn:.3f}, {base.upper()} {b:.3f}, '
                   f'difference {dgn - b:+.3f}'))
  for pkind, lv in (('insert', 0.02), ('delete', 0.3)):
    d, l = get(f'acc_{pkind}_{lv:g}/dgn'), get(f'acc_{pkind}_{lv:g}/lif')
    if d is not None and l is not None:
      claims.append(launch.Claim(
          claim=f'Under {pkind} {lv:g} at evaluation: DGN >= LIF + 0.05.',
          holds=bool(d >= l + 0.05),
          evidence=f'DGN {d:.3f}, LIF {l:.3f}, difference {d - l:+.3f}'))
  pairs = []
  for pkind in ('insert', 'delete', 'jitter', 'current'):
    for lv in cfg.perturbations.get(pkind, ()):
      d = get(f'retention_{pkind}_{lv:g}/dgn')
      l = get(f'retention_{pkind}_{lv:g}/lif')
      if d is not None and l is not None:
        pairs.append((f'{pkind} {lv:g}', d, l))
  if pairs:
    wins = sum(d > l for _, d, l in pairs)
    claims.append(launch.Claim(
        claim=('Robustness (reported): DGN retains more of its clean accuracy '
               'than LIF (retention = perturbed / clean) at most perturbation '
               'levels.'),
        holds=bool(wins > len(pairs) / 2),
        evidence=f'DGN retention higher at {wins}/{len(pairs)} levels; ' +
        '; '.join(f'{n}: {d:.2f} vs {l:.2f}' for n, d, l in pairs)))
  v_d, v_l = get('stability_var_v/dgn'), get('stability_var_v/lif')
  if v_d is not None and v_l is not None:
    r_d, r_l = get('stability_rate/dgn'), get('stability_rate/lif')
    claims.append(launch.Claim(
        claim=('Stochastic stability: at matched mean firing rate, a single '
               'DGN neuron driven by noisy input current has a lower '
               'stationary membrane-potential variance than a LIF neuron.'),
        holds=bool(v_d < v_l),
        evidence=f'Var(V) DGN {v_d:.4f} (rate {r_d:.3f}), LIF {v_l:.4f} '
                 f'(rate {r_l:.3f})'))
  return claims
