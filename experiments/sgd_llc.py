"""SGD as a tempered posterior: the local learning coefficient and late-stage
sub-diffusion ("Almost Bayesian", arXiv 2503.22478; configs/sgd_llc.py).

  python -m experiments.sgd_llc --config=configs/sgd_llc.py:smoke

The method is `iclrjax/stats/sgd_llc.py`.

Part A, the LLC estimator on models whose learning coefficient is known
(one-step phase `llc`, every seed its own data and chains): regular linear
regression (d/2), the product model y = a b x at a true parameter with
a b = 0 (1/2), a deep linear network at a rank-r truth (Aoyagi 2024), and as
controls a rank-deficient design with the same d (its coefficient is
rank/2, not d/2) and the regular two-parameter model y = a x_1 + b x_2 (1,
not the product model's 1/2). Each w* is the data's minimum near the truth
(full-batch gradient descent from it).

Part B, sklearn's two moons: phase `sgd` trains `num_runs` ReLU MLPs from
random inits with constant-lr SGD (runs are the vmapped axis), recording
R(t) = ||w_t - w_0|| on a log grid of the first steps and R(tau) =
||w_{t0 + tau} - w_{t0}|| after `warmup_steps`; phase `sgld` runs SGLD on the
untempered posterior (beta = 1, no localisation, a Gaussian prior) from the
same inits with the same drift (step size lr / n); phases `llc_sgd`,
`llc_sgld` estimate the LLC at every final point. On the host: the late and
early displacement fits, k-means in function space (class-1 probability on a
probe grid) over the SGD and SGLD solutions together, per-cluster masses and
LLCs, and the SGD masses tempered by m D_xi(lambda_c) (Cor. 3.2) with xi
chosen on the even runs and KL scored on the odd ones.
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

from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import loop
from iclrjax.stats import sgd_llc

MODELS = ('regular', 'rank_deficient', 'product', 'regular_2', 'dln')


# -- Part A: the estimator on known learning coefficients ---------------------


def true_llcs(c: ml_collections.ConfigDict) -> dict[str, float]:
  """The learning coefficient of each calibration model."""
  return {'regular': c.d / 2, 'rank_deficient': c.rank / 2, 'product': 0.5,
          'regular_2': 1.0,
          'dln': sgd_llc.dln_learning_coefficient(c.dln_widths, c.dln_rank)}


def _linear_loss(w, ex):
  x, y = ex
  return sgd_llc.gaussian_nll(x @ w, y)


def _product_loss(w, ex):
  x, y = ex
  return sgd_llc.gaussian_nll(w[0] * w[1] * x[0], y)


def _dln_loss(ws, ex):
  x, y = ex
  return sgd_llc.gaussian_nll(sgd_llc.dln_apply(ws, x), y)


def calibration_problems(key: jax.Array, c: ml_collections.ConfigDict
                         ) -> dict[str, tuple[Any, Any, Any]]:
  """model -> (example loss, data, the true parameter), unit noise."""
  ks = jax.random.split(key, 8)
  n, d = c.n, c.d
  noise = lambda k, shape: jax.random.normal(k, shape)
  w0 = jax.random.normal(ks[0], (d,)) / jnp.sqrt(d)
  x = jax.random.normal(ks[1], (n, d))
  # rank-deficient: x = z A^T / sqrt(rank), z [n, rank], so only `rank`
  # directions of w change the fit
  a = jax.random.normal(ks[2], (d, c.rank))
  x_def = jax.random.normal(ks[1], (n, c.rank)) @ a.T / jnp.sqrt(c.rank)
  x1, x2 = x[:, :1], x[:, :2]
  # the deep linear network's truth: random factors with a rank-r middle
  h = tuple(c.dln_widths)
  kw = jax.random.split(ks[3], len(h) - 1)
  ws = [jax.random.normal(k, (h[i], h[i + 1])) / jnp.sqrt(h[i])
        for i, k in enumerate(kw)]
  mask = jnp.arange(h[1]) < c.dln_rank
  ws[0] = ws[0] * mask[None, :]
  x_dln = jax.random.normal(ks[4], (n, h[0]))
  return {
      'regular': (_linear_loss, (x, x @ w0 + noise(ks[5], (n,))), w0),
      'rank_deficient': (_linear_loss,
                         (x_def, x_def @ w0 + noise(ks[5], (n,))), w0),
      'product': (_product_loss, (x1, noise(ks[6], (n,))),
                  jnp.array([c.product_a, 0.0])),
      'regular_2': (_linear_loss, (x2, noise(ks[6], (n,))), jnp.zeros(2)),
      'dln': (_dln_loss, (x_dln, sgd_llc.dln_apply(ws, x_dln)
                          + noise(ks[7], (n, h[-1]))), ws),
  }


class CalibState(NamedTuple):
  key: jax.Array
  llc: jax.Array    # [len(MODELS)]


def make_calibration(c: ml_collections.ConfigDict):
  """init(key), step(state, t): every model's lambda_hat at its minimum."""

  def init(key):
    return CalibState(key, jnp.zeros(len(MODELS)))

  def step(state, t):
    del t
    k_data, k_chain = jax.random.split(state.key)
    probs = calibration_problems(k_data, c)
    out = []
    for i, name in enumerate(MODELS):
      loss, data, w0 = probs[name]
      # The n examples are the batch of the full-batch descent to w*; the
      # SGLD chains' minibatches are marked in `sgd_llc.sgld_step`.
      data = distributed.shard_batch(data)
      w_star = sgd_llc.minimise(loss, w0, data, num_steps=c.minimise_steps,
                                lr=c.minimise_lr)
      est = sgd_llc.estimate_llc(
          jax.random.fold_in(k_chain, i), loss, w_star, data,
          num_chains=c.num_chains, num_steps=c.num_steps,
          num_burnin=c.num_burnin, batch_size=c.batch_size,
          step_size=c.step_size, gamma=c.gamma)
      out.append(est.llc)
    llc = jnp.stack(out)
    return state._replace(llc=llc), dict(zip(MODELS, llc))

  return init, step


def run_calibration(r: launch.Run) -> np.ndarray:
  """lambda_hat [seeds, len(MODELS)]."""
  init, step = make_calibration(r.config.llc)
  res = r.train(init, step, num_steps=1, chunk_size=1, phase='llc',
                log_every=1)
  return np.asarray(distributed.to_host(res.state.llc))


# -- Part B: two moons --------------------------------------------------------


def moons(c: ml_collections.ConfigDict, seed: int
          ) -> tuple[jax.Array, jax.Array]:
  """sklearn's two moons, standardised: x [n, 2] float32, y [n] int32."""
  from sklearn import datasets as sk_data  # pylint: disable=g-import-not-at-top
  x, y = sk_data.make_moons(c.n, noise=c.noise, random_state=seed)
  x = (x - x.mean(0)) / x.std(0)
  return jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.int32)


def probe_grid(num: int) -> jax.Array:
  """[num^2, 2] points covering the standardised moons."""
  g = jnp.linspace(-2.5, 2.5, num)
  return jnp.stack(jnp.meshgrid(g, g), -1).reshape(-1, 2)


def _net(c):
  return sgd_llc.MLP(tuple(c.widths), 2)


def _ce(net):
  def loss(params, ex):
    x, y = ex
    return optax.softmax_cross_entropy_with_integer_labels(
        net.apply(params, x), y)
  return loss


class RunState(NamedTuple):
  params: Any
  key: jax.Array
  w_init: Any
  w_t0: Any
  r_early: jax.Array    # [len(early_times)]
  r_late: jax.Array     # [len(late_times)]
  loss: jax.Array


def record_times(c) -> tuple[np.ndarray, np.ndarray]:
  """Steps at which R is recorded: from init (early) and from t0 (late)."""
  return (sgd_llc.log_times(1, c.warmup_steps, c.num_records),
          sgd_llc.log_times(1, c.late_steps, c.num_records))


def make_runs(c: ml_collections.ConfigDict, kind: str):
  """init(key) and step(state, t, data) of one SGD (`kind='sgd'`) or SGLD
  run (the posterior at beta = 1, no localisation, prior N(0, 1 /
  prior_precision), step size lr / n: SGD's drift plus Langevin noise)."""
  net = _net(c)
  loss = _ce(net)
  early, late = record_times(c)
  early, late = jnp.asarray(early), jnp.asarray(late)
  grad_fn = sgd_llc.posterior_grad(loss, None, c.n, 1.0, 0.0,
                                   c.prior_precision)

  def init(key):
    params = net.init(jax.random.fold_in(key, 0), jnp.zeros((1, 2)))
    return RunState(params, key, params, params, jnp.zeros(early.shape),
                    jnp.zeros(late.shape), jnp.zeros(()))

  def step(state, t, data):
    k_t = jax.random.fold_in(jax.random.fold_in(state.key, 1), t)
    if kind == 'sgd':
      # with replacement, as the SGLD runs draw theirs (an epoch
      # permutation per step costs more than the MLP's step here)
      idx = distributed.shard_batch(jax.random.randint(
          jax.random.fold_in(k_t, 2), (c.batch_size,), 0, c.n))
      batch = jax.tree.map(lambda a: a[idx], data)
      value, grads = jax.value_and_grad(
          lambda p: sgd_llc.full_loss(loss, p, batch))(state.params)
      params = jax.tree.map(lambda p, g: p - c.lr * g, state.params, grads)
    else:
      params, value = sgd_llc.sgld_step(
          k_t, state.params, grad_fn, data, batch_size=c.batch_size,
          step_size=c.lr / c.n, example_loss=loss)
    done = t + 1
    dist = lambda a, b: jnp.sqrt(sum(
        jnp.sum((x - y)**2) for x, y in
        zip(jax.tree.leaves(a), jax.tree.leaves(b))))
    w_t0 = jax.tree.map(lambda a, b: jnp.where(done == c.warmup_steps, a, b),
                        params, state.w_t0)
    r_early = jnp.where(early == done, dist(params, state.w_init),
                        state.r_early)
    r_late = jnp.where(late == done - c.warmup_steps, dist(params, w_t0),
                       state.r_late)
    new = state._replace(params=params, w_t0=w_t0, r_early=r_early,
                         r_late=r_late, loss=value)
    return new, {'loss': value}

  return init, step


class LLCState(NamedTuple):
  key: jax.Array
  params: Any
  llc: jax.Array


def make_point_llc(c: ml_collections.ConfigDict):
  """init(key, params), step(state, t, data): lambda_hat at `params`."""
  loss = _ce(_net(c))

  def init(key, params):
    return LLCState(key, params, jnp.zeros(()))

  def step(state, t, data):
    del t
    est = sgd_llc.estimate_llc(
        jax.random.fold_in(state.key, 3), loss, state.params, data,
        num_chains=c.llc_num_chains, num_steps=c.llc_num_steps,
        num_burnin=c.llc_num_burnin, batch_size=c.batch_size,
        step_size=c.llc_step_size, gamma=c.llc_gamma)
    return state._replace(llc=est.llc), {'llc': est.llc}

  return init, step


def run_moons(r: launch.Run) -> dict[str, Any]:
  """Final params, displacement records, losses and LLCs of both kinds."""
  c = r.config.moons
  data = moons(c, r.config.seed)
  out = {}
  chunk = dict(num_steps=c.warmup_steps + c.late_steps,
               chunk_size=min(c.chunk_size, c.warmup_steps + c.late_steps))
  for kind in ('sgd', 'sgld'):
    init, step = make_runs(c, kind)
    # the same seed ids: SGLD starts from SGD's inits
    st = r.train(init, step, phase=kind, num_seeds=c.num_runs, data=data,
                 **chunk).state
    init, step = make_point_llc(c)
    llc = r.train(init, step, num_steps=1, chunk_size=1, phase=f'llc_{kind}',
                  num_seeds=c.num_runs, data=data, init_args=st.params,
                  log_every=1).state.llc
    host = distributed.to_host((st.params, st.r_early, st.r_late, st.loss,
                                llc))
    out[kind] = dict(zip(('params', 'r_early', 'r_late', 'loss', 'llc'),
                         host))
  out['data'] = data
  return out


# -- analysis on the host -----------------------------------------------------


def fit_windows(c, r_early, r_late):
  """Per run: (late PowerFit, early PowerFit) over the configured windows."""
  early, late = record_times(c)
  e_sel = early <= c.early_window
  l_sel = late >= c.late_window_start
  fit = jax.vmap(sgd_llc.displacement_exponent, in_axes=(None, 0))
  return (jax.tree.map(np.asarray, fit(jnp.asarray(late[l_sel], jnp.float32),
                                       jnp.asarray(r_late[:, l_sel]))),
          jax.tree.map(np.asarray, fit(jnp.asarray(early[e_sel], jnp.float32),
                                       jnp.asarray(r_early[:, e_sel]))))


def probe_probs(c, params) -> jax.Array:
  """Class-1 probability of every solution on the probe grid [runs, g^2]."""
  net = _net(c)
  grid = probe_grid(c.probe_grid)
  return jax.vmap(lambda p: jax.nn.softmax(net.apply(p, grid))[:, 1])(params)


def function_features(c, params) -> np.ndarray:
  """`probe_probs` on the host: the k-means features [runs, g^2]."""
  return np.asarray(probe_probs(c, params))


def cluster(c, seed: int, feats: np.ndarray) -> np.ndarray:
  from sklearn import cluster as sk_cluster  # pylint: disable=g-import-not-at-top
  km = sk_cluster.KMeans(c.num_clusters, n_init=10, random_state=seed)
  return km.fit_predict(feats)


def tempering_scan(c, masses_sgd, masses_sgld, llc_c, d_s):
  """(xi grid, KL(SGLD || tempered SGD) per xi). The xi grid is where the
  mean-LLC cluster's tempering power m D_xi spans `power_grid` (xi =
  (k / m)^{1 / e} with e = 2 - 2 mean(lambda_c) / d_s)."""
  e = 2.0 - 2.0 * float(np.mean(llc_c)) / d_s
  e = e if abs(e) > 1e-6 else 1e-6     # D_xi = 1 for every xi: a flat scan
  powers = np.geomspace(*c.power_range, c.num_powers)
  xis = (powers / c.n)**(1.0 / e)
  kl = [float(sgd_llc.kl_divergence(
      jnp.asarray(masses_sgld), sgd_llc.temper_masses(
          jnp.asarray(masses_sgd), jnp.asarray(llc_c), d_s, xi, c.n)))
        for xi in xis]
  return xis, np.asarray(kl)


def concentration(c, seed, res, d_s) -> dict[str, Any]:
  """Clusters, masses, per-cluster LLCs and the held-out tempering KLs."""
  R, k = c.num_runs, c.num_clusters
  feats = function_features(c, jax.tree.map(
      lambda a, b: np.concatenate([a, b]), res['sgd']['params'],
      res['sgld']['params']))
  labels = cluster(c, seed, feats)
  lab_sgd, lab_sgld = labels[:R], labels[R:]
  llc_all = np.concatenate([res['sgd']['llc'], res['sgld']['llc']])
  llc_c = np.array([llc_all[labels == j].mean() if np.any(labels == j)
                    else np.mean(llc_all) for j in range(k)])
  mass = lambda lab: np.asarray(sgd_llc.cluster_masses(jnp.asarray(lab), k))
  halves = {h: (lab_sgd[h::2], lab_sgld[h::2]) for h in (0, 1)}
  out = {'llc_c': llc_c, 'mass_sgd': mass(lab_sgd), 'mass_sgld': mass(lab_sgld)}
  # controls: the per-cluster LLCs in reverse rank order
  order = np.argsort(llc_c)
  reversed_llc = np.empty_like(llc_c)
  reversed_llc[order] = llc_c[order[::-1]]
  for name, lam in (('llc', llc_c), ('reversed', reversed_llc)):
    xis, kl_a = tempering_scan(c, mass(halves[0][0]), mass(halves[0][1]), lam,
                               d_s)
    best = int(np.argmin(kl_a))
    kl_b = sgd_llc.kl_divergence(
        jnp.asarray(mass(halves[1][1])), sgd_llc.temper_masses(
            jnp.asarray(mass(halves[1][0])), jnp.asarray(lam), d_s, xis[best],
            c.n))
    out[f'{name}_xi'] = float(xis[best])
    out[f'{name}_kl_heldout'] = float(kl_b)
    out[f'{name}_scan'] = (xis, kl_a)
  out['raw_kl_heldout'] = float(sgd_llc.kl_divergence(
      jnp.asarray(mass(halves[1][1])), jnp.asarray(mass(halves[1][0]))))
  # the full-sample scan, as the paper reports it (xi chosen and scored on
  # the same runs)
  xis, kl = tempering_scan(c, out['mass_sgd'], out['mass_sgld'], llc_c, d_s)
  out['full_scan'] = (xis, kl)
  out['raw_kl'] = float(sgd_llc.kl_divergence(
      jnp.asarray(out['mass_sgld']), jnp.asarray(out['mass_sgd'])))
  return out


def programs(cfg, sharded: bool = False) -> list[loop.Program]:
  """The calibration step, the moons SGD / SGLD chunks, the endpoint LLC
  step and the probe-grid features (`benchmarks/paper_variants.py`)."""
  l, c = cfg.llc, cfg.moons
  R, total = c.num_runs, c.warmup_steps + c.late_steps
  data = (jax.ShapeDtypeStruct((c.n, 2), jnp.float32),
          jax.ShapeDtypeStruct((c.n,), jnp.int32))
  calib = loop.train_program(
      'train/llc', *make_calibration(l), num_seeds=cfg.num_seeds,
      num_steps=1, chunk_size=1, sharded=sharded,
      params=2 * l.d + 4 + _dln_params(l))
  progs = [dataclasses.replace(calib, note=(
      f'per seed {len(MODELS)} models: full-batch descent to w* '
      f'({l.minimise_steps} steps on n = {l.n}), then {l.num_chains} SGLD '
      f'chains x {l.num_steps} steps; params: the five models\' '
      'parameters together'))]
  for kind in ('sgd', 'sgld'):
    progs.append(loop.train_program(
        f'train/{kind}', *make_runs(c, kind), num_seeds=R, num_steps=total,
        chunk_size=min(c.chunk_size, total), data=data, sharded=sharded))
  init = make_runs(c, 'sgd')[0]
  params = jax.eval_shape(jax.vmap(init),
                          jax.ShapeDtypeStruct((R, 2), jnp.uint32)).params
  llc = loop.train_program(
      'train/llc_point x2', *make_point_llc(c), num_seeds=R, num_steps=1,
      chunk_size=1, data=data, init_args=params, sharded=sharded)
  both = jax.tree.map(lambda a: jax.ShapeDtypeStruct((2 * R,) + a.shape[1:],
                                                     a.dtype), params)
  return progs + [
      dataclasses.replace(llc, calls=2, note=(
          f'llc_sgd and llc_sgld: {c.llc_num_chains} SGLD chains x '
          f'{c.llc_num_steps} steps at every endpoint')),
      loop.Program('eval/probe_features',
                   jax.jit(functools.partial(probe_probs, c)), (both,),
                   params=loop.count_params(params) // R,
                   note=('the SGD and SGLD endpoints on the probe grid; '
                         'the moons data (sklearn), the displacement fits, '
                         'k-means (sklearn) and the tempering scan are '
                         'host work'))]


PAPER_SCALE = (
    'arXiv 2503.22478: the diffusion check on TinyStories-1M/33M, '
    'TinyLlama-15M, ResNet18/34 and VGG16 checkpoints (Table 1, LLC by '
    'devinterp) and MNIST MLPs; the posterior-concentration experiment '
    'trains an ensemble of small fully connected nets on sklearn\'s two '
    'moons with SGD against SGLD (Fig. 1 and the cluster masses); the batch '
    'size, learning rate, run count and steps are in its appendix G, not '
    'extracted.')


# -- run, claims, plots -------------------------------------------------------


def run(r: launch.Run) -> launch.Result:
  cfg = r.config
  c = cfg.moons
  calib = run_calibration(r)
  res = run_moons(r)
  late, early = fit_windows(c, res['sgd']['r_early'], res['sgd']['r_late'])
  llc_sgd = res['sgd']['llc']
  d_s = np.asarray(sgd_llc.spectral_dimension(llc_sgd, late.alpha))
  conc = concentration(c, cfg.seed, res, float(np.mean(d_s)))
  metrics = {f'llc/{m}': calib[:, i] for i, m in enumerate(MODELS)}
  # per moons run (num_runs of them, not seeds): beside the metrics
  runs = {
      'alpha': late.alpha, 'r2': late.r2, 'd_s': d_s,
      'early_alpha': early.alpha, 'early_r2': early.r2, 'llc_sgd': llc_sgd,
      'llc_sgld': res['sgld']['llc'], 'loss_sgd': res['sgd']['loss'],
      'loss_sgld': res['sgld']['loss'],
  }
  _plots(r, cfg, calib, res, conc)
  extra = {'llc_true': true_llcs(cfg.llc),
           'moons_runs': {k: np.round(np.asarray(v, float), 5).tolist()
                          for k, v in runs.items()},
           'clusters': {k: np.round(np.asarray(v), 5).tolist()
                        for k, v in conc.items() if not k.endswith('scan')}}
  return launch.Result(metrics=metrics,
                       claims=evaluate_claims(cfg, calib, late, early, d_s,
                                              res, conc),
                       extra=extra)


def _plots(r, cfg, calib, res, conc) -> None:
  from experiments import plots  # pylint: disable=g-import-not-at-top
  c = cfg.moons
  xs = np.arange(len(MODELS), dtype=float)
  truth = true_llcs(cfg.llc)
  plots.plot_series(
      [('lambda_hat', xs, calib.T),
       ('known coefficient', xs, np.array([[truth[m]] for m in MODELS]))],
      r.plots_dir / 'llc_calibration.png',
      title='LLC estimator vs known learning coefficients',
      xlabel=' | '.join(f'{i}: {m}' for i, m in enumerate(MODELS)),
      ylabel='learning coefficient')
  early, late = record_times(c)
  plots.plot_series(
      [('late: ||w_{t0+tau} - w_{t0}||', np.log10(late),
        res['sgd']['r_late'].T),
       ('early: ||w_tau - w_0||', np.log10(early), res['sgd']['r_early'].T),
       ('SGLD late', np.log10(late), res['sgld']['r_late'].T)],
      r.plots_dir / 'displacement.png',
      title='SGD displacement on two moons', xlabel='log10 tau (steps)',
      ylabel='R(tau)', logy=True)
  ks = np.arange(c.num_clusters, dtype=float)
  xis, kl = conc['full_scan']
  plots.plot_series(
      [('SGD', ks, conc['mass_sgd'][:, None]),
       ('SGLD (posterior)', ks, conc['mass_sgld'][:, None])],
      r.plots_dir / 'cluster_masses.png',
      title='cluster masses (function-space k-means)',
      xlabel='cluster (LLC: ' + ', '.join(f'{v:.1f}' for v in conc['llc_c'])
      + ')', ylabel='mass', bounds=(0.0, 1.0))
  plots.plot_series(
      [('all runs', np.log10(xis), kl[:, None]),
       ('even runs (xi chosen)', np.log10(conc['llc_scan'][0]),
        conc['llc_scan'][1][:, None])],
      r.plots_dir / 'tempering_scan.png',
      title='KL(SGLD || SGD tempered by m D_xi)', xlabel='log10 xi',
      ylabel='KL')


def _frac(mask) -> float:
  return float(np.mean(mask))


def evaluate_claims(cfg, calib, late, early, d_s, res, conc
                    ) -> list[launch.Claim]:
  """The paper's claims at our calibration, each with its control."""
  l, c = cfg.llc, cfg.moons
  truth = true_llcs(l)
  est = {m: float(calib[:, i].mean()) for i, m in enumerate(MODELS)}
  per = lambda m: ' / '.join(f'{v:.2f}' for v in calib[:, MODELS.index(m)])
  S = cfg.num_seeds
  claims = []

  rel = lambda m, target: abs(est[m] / target - 1)
  claims.append(launch.Claim(
      claim=(f'The LLC estimator recovers d/2 = {truth["regular"]:g} for '
             f'regular linear regression (d = {l.d}) within '
             f'{l.regular_tol:.0%}.'),
      holds=rel('regular', truth['regular']) <= l.regular_tol,
      evidence=(f'lambda_hat = {est["regular"]:.3f} (mean of {S} seeds: '
                f'{per("regular")}; n = {l.n}, beta = 1/log n, gamma = '
                f'{l.gamma:g})'),
      control=launch.control_text(
          f'the same estimator on a rank-{l.rank} design with the same d '
          f'(its coefficient is {truth["rank_deficient"]:g}, not d/2)',
          f'lambda_hat = {est["rank_deficient"]:.3f}, '
          f'{rel("rank_deficient", truth["regular"]):.0%} from d/2',
          rel('rank_deficient', truth['regular']) <= l.regular_tol)))

  gap = lambda m: abs(est[m] - 0.5)
  claims.append(launch.Claim(
      claim=(f'The LLC estimator recovers 1/2 for the singular model y = a b '
             f'x at a true parameter with a b = 0 (within '
             f'{l.singular_tol:g}; the regular count d/2 is 1).'),
      holds=gap('product') <= l.singular_tol,
      evidence=(f'lambda_hat = {est["product"]:.3f} at (a, b) = '
                f'({l.product_a:g}, 0) (seeds: {per("product")}). Deep '
                f'linear network {tuple(l.dln_widths)} at rank {l.dln_rank}: '
                f'lambda_hat = {est["dln"]:.3f} vs Aoyagi\'s '
                f'{truth["dln"]:g} (seeds: {per("dln")}; parameter count / 2 '
                f'= {_dln_params(l) / 2:g})'),
      control=launch.control_text(
          'the same estimator on the regular two-parameter model y = a x_1 + '
          'b x_2 (coefficient 1)',
          f'lambda_hat = {est["regular_2"]:.3f}, |lambda_hat - 1/2| = '
          f'{gap("regular_2"):.3f}', gap('regular_2') <= l.singular_tol),
      paper='Lau et al. recover the DLN coefficients to within a few percent'))

  sub = lambda fit: (fit.alpha > 0) & (fit.alpha < 0.5) & (fit.r2 > c.r2_min)
  f_sub, f_early = _frac(sub(late)), _frac(sub(early))
  llc_sgd = res['sgd']['llc']
  f_lemma = _frac(d_s <= llc_sgd)
  R = c.num_runs
  claims.append(launch.Claim(
      claim=(f'Late-stage SGD is sub-diffusive: the displacement exponent '
             f'alpha = d_s / (2 lambda) lies in (0, 0.5) with r^2 > '
             f'{c.r2_min:g} in >= {c.min_fraction:.0%} of runs, and d_s = 2 '
             f'lambda alpha <= lambda (Lemma 3.4) in >= {c.min_fraction:.0%} '
             '(two moons).'),
      holds=f_sub >= c.min_fraction and f_lemma >= c.min_fraction,
      evidence=(f'{f_sub:.0%} of {R} runs sub-diffusive (alpha '
                f'{np.median(late.alpha):.3f} median, range '
                f'{late.alpha.min():.3f}..{late.alpha.max():.3f}; r^2 median '
                f'{np.median(late.r2):.3f}); d_s <= lambda in {f_lemma:.0%} '
                f'(d_s median {np.median(d_s):.2f}, lambda_hat median '
                f'{np.median(llc_sgd):.1f}); tau in [{c.late_window_start}, '
                f'{c.late_steps}] after {c.warmup_steps} steps'),
      control=launch.control_text(
          f'the same fit over the first {c.early_window} steps from init',
          f'{f_early:.0%} sub-diffusive (alpha median '
          f'{np.median(early.alpha):.3f})', f_early >= c.min_fraction),
      paper=('alpha 0.32-0.49 (TinyStories / TinyLlama), 0.001-0.004 '
             '(ResNet, VGG), r^2 0.98-1 (Table 1)')))

  llc_sgld = res['sgld']['llc']
  ok_i, txt_i = _below(llc_sgd, llc_sgld)
  ok_c, txt_c = _below(llc_sgd[0::2], llc_sgd[1::2])
  claims.append(launch.Claim(
      claim=('SGD solutions sit at lower LLC than posterior (SGLD) samples '
             'from the same inits (mean difference beyond 2 standard '
             'errors).'),
      holds=ok_i, evidence=f'SGD vs SGLD: {txt_i}',
      control=launch.control_text(
          'the even vs the odd SGD runs', txt_c, ok_c),
      paper='SGD solutions sit at lower LLC (Fig. 3)'))

  kl_t, kl_raw = conc['llc_kl_heldout'], conc['raw_kl_heldout']
  kl_rev = conc['reversed_kl_heldout']
  claims.append(launch.Claim(
      claim=('Tempering the SGD cluster masses by m D_xi(lambda_c) (Cor. '
             '3.2) brings them closer to the posterior: KL(SGLD || tempered '
             'SGD) < KL(SGLD || raw SGD), xi chosen on the even runs and '
             'scored on the odd runs.'),
      holds=kl_t < kl_raw,
      evidence=(f'held-out KL {kl_t:.4f} tempered (xi = '
                f'{conc["llc_xi"]:.3g}) vs {kl_raw:.4f} raw; all runs: raw '
                f'{conc["raw_kl"]:.4f}, best over the scan '
                f'{float(np.min(conc["full_scan"][1])):.4f}; masses SGD '
                f'{_fmt(conc["mass_sgd"])}, SGLD {_fmt(conc["mass_sgld"])}, '
                f'cluster LLC {_fmt(conc["llc_c"], 2)}'),
      control=launch.control_text(
          'tempering with the cluster LLCs in reverse rank order (xi chosen '
          'the same way)', f'held-out KL {kl_rev:.4f} vs raw {kl_raw:.4f}',
          kl_rev < kl_raw),
      paper='KL(Bayes || tempered SGD) = 0.009 at xi = 0.5'))
  return claims


def _fmt(v, digits=3) -> str:
  return '(' + ', '.join(f'{x:.{digits}f}' for x in v) + ')'


def _below(a: np.ndarray, b: np.ndarray) -> tuple[bool, str]:
  """mean(a) < mean(b) by more than 2 standard errors of the difference."""
  diff = float(np.mean(a) - np.mean(b))
  se = float(np.sqrt(np.var(a, ddof=1) / a.size + np.var(b, ddof=1) / b.size))
  return diff < -2 * se, (f'mean {np.mean(a):.2f} vs {np.mean(b):.2f} '
                          f'(difference {diff:+.2f}, 2 s.e. {2 * se:.2f})')


def _dln_params(l) -> int:
  h = list(l.dln_widths)
  return sum(a * b for a, b in zip(h[:-1], h[1:]))


def check_config(c: ml_collections.ConfigDict) -> None:
  l, m = c.llc, c.moons
  cfg_lib.check(l.rank < l.d, 'llc.rank', l.rank,
                f'< llc.d = {l.d} (the rank-deficient control)')
  cfg_lib.check(0 <= l.dln_rank <= min(l.dln_widths), 'llc.dln_rank',
                l.dln_rank, f'in [0, min(llc.dln_widths) = '
                f'{min(l.dln_widths)}]')
  cfg_lib.check(l.num_burnin < l.num_steps, 'llc.num_burnin', l.num_burnin,
                f'< llc.num_steps = {l.num_steps}')
  cfg_lib.check(m.llc_num_burnin < m.llc_num_steps, 'moons.llc_num_burnin',
                m.llc_num_burnin,
                f'< moons.llc_num_steps = {m.llc_num_steps}')
  cfg_lib.check(m.early_window <= m.warmup_steps, 'moons.early_window',
                m.early_window, f'<= moons.warmup_steps = {m.warmup_steps}')
  cfg_lib.check(m.late_window_start < m.late_steps, 'moons.late_window_start',
                m.late_window_start, f'< moons.late_steps = {m.late_steps}')
  cfg_lib.check(m.num_runs >= 2 * m.num_clusters, 'moons.num_runs',
                m.num_runs, f'>= 2 * moons.num_clusters = '
                f'{2 * m.num_clusters} (both halves need every cluster)')
  cfg_lib.check(m.power_range[0] < m.power_range[1], 'moons.power_range',
                tuple(m.power_range), 'increasing (low, high)')


_POS = cfg_lib.Float(min=0.0, min_inclusive=False)
EXPERIMENT = launch.Experiment('sgd_llc', run, requires=lambda c: [
    ('blackjax', 'stats')], schema={
    'num_seeds': cfg_lib.Int(min=2),
    'llc.n': cfg_lib.Int(min=10),
    'llc.d': cfg_lib.Int(min=2),
    'llc.rank': cfg_lib.Int(min=1),
    'llc.dln_widths': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=2),
    'llc.num_chains': cfg_lib.Int(min=1),
    'llc.num_steps': cfg_lib.Int(min=2),
    'llc.batch_size': cfg_lib.Int(min=1),
    'llc.step_size': _POS,
    'llc.gamma': _POS,
    'llc.minimise_lr': _POS,
    'llc.regular_tol': _POS,
    'llc.singular_tol': _POS,
    'moons.n': cfg_lib.Int(min=10),
    'moons.noise': cfg_lib.Float(min=0.0),
    'moons.widths': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1),
    'moons.lr': _POS,
    'moons.batch_size': cfg_lib.Int(min=1),
    'moons.warmup_steps': cfg_lib.Int(min=1),
    'moons.late_steps': cfg_lib.Int(min=2),
    'moons.num_runs': cfg_lib.Int(min=2),
    'moons.num_records': cfg_lib.Int(min=3),
    'moons.prior_precision': cfg_lib.Float(min=0.0),
    'moons.llc_num_steps': cfg_lib.Int(min=2),
    'moons.llc_step_size': _POS,
    'moons.llc_gamma': _POS,
    'moons.probe_grid': cfg_lib.Int(min=2),
    'moons.num_clusters': cfg_lib.Int(min=2),
    'moons.num_powers': cfg_lib.Int(min=2),
    'moons.r2_min': cfg_lib.Float(min=0.0, max=1.0),
    'moons.min_fraction': cfg_lib.Float(min=0.0, max=1.0),
}, check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
