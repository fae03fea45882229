"""The DGN paper: stochastic-stability methods against closed forms, the
experiment's evaluation plumbing and claim logic, and end-to-end runs."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dgn_snn as dgn_config
from experiments import dgn_snn as exp
from iclrjax.core import config as cfg_lib
from iclrjax.core import data
from iclrjax.core import launch
from iclrjax.core import loop
from iclrjax.snn import cells
from iclrjax.snn import dgn
from tests.conftest import assert_missing_data_stops_early
from tests.snn import shd_files


def _validate(c):
  launch.validate(c, exp.config_schema(), exp.check_config)


def test_config_errors_name_the_field():
  c = dgn_config.get_config('smoke')
  c.data_args.peak_rate = 0.3  # A synthetic-digits argument under mnist1d.
  with pytest.raises(cfg_lib.ConfigError, match='data_args.peak_rate'):
    _validate(c)
  c = dgn_config.get_config('smoke')
  c.perturbations.delete = (1.5,)
  with pytest.raises(cfg_lib.ConfigError, match='perturbations.delete'):
    _validate(c)
  c = dgn_config.get_config('smoke')
  c.cells = ('lif', 'hh')
  with pytest.raises(cfg_lib.ConfigError, match='cells'):
    _validate(c)
  c = dgn_config.get_config('smoke')
  c.layer_noise.repeats = 1  # Var over one draw is undefined.
  with pytest.raises(cfg_lib.ConfigError, match='layer_noise.repeats'):
    _validate(c)


# -- stochastic stability: closed forms ------------------------------------------
def test_subthreshold_variance_matches_ou_closed_form():
  # No spikes (huge threshold): V^t = rho V^{t-1} + mu + sigma eps is an AR(1)
  # process with stationary variance sigma^2 / (1 - rho^2), where rho is beta
  # for LIF and phi(beta - dt * C * sum_i D_i) for DGN at its stationary trace.
  sigma, num_pre, rate, coupling = 0.3, 100, 0.05, 0.01
  for kind in ('lif', 'dgn'):
    cell = cells.Cell(kind=kind, theta=1e9)
    _, var = dgn.single_neuron_stats(cell, 0.01, coupling, rate, sigma,
                                     num_pre, 20_000, 500,
                                     jax.random.key(1), 8)
    trace = num_pre * rate / (1 - cell.alpha_syn)
    rho = cell.beta - (cell.dt * coupling * trace if kind == 'dgn' else 0.0)
    assert dgn.single_neuron_decay(cell, coupling, rate, num_pre) == (
        pytest.approx(rho, rel=1e-6))
    expected = dgn.stationary_variance(rho, sigma)
    assert float(var) == pytest.approx(expected, rel=0.05), kind


def test_single_neuron_dgn_below_lif_at_matched_rate():
  c = dgn_config.get_config()  # The default config's single-neuron setup.
  out = dgn.stability(c, jax.random.key(0))
  lif, dg = out['lif'], out['dgn']
  target = c.stability.target_rate
  for o in (lif, dg):
    assert abs(o['rate'] - target) < 0.1 * target  # Matched firing rate.
  assert dg['decay'] < lif['decay']
  # Measured: Var(V) DGN 0.15 vs LIF 0.25 (ratio ~0.6); require <= 0.8.
  assert dg['var_v'] <= 0.8 * lif['var_v'], out


def _random_layer(kind, n_in=16, n_out=24, seed=0):
  cell = cells.Cell(kind=kind, w_gain=2.0, c_init=0.5)
  return cell, cell.init_params(jax.random.key(seed), n_in, n_out)


def _spikes(seed, shape=(6, 60, 16), rate=0.15):
  rng = np.random.default_rng(seed)
  return jnp.asarray((rng.random(shape) < rate).astype(np.float32))


def test_layer_noise_variance_matches_the_transient_closed_form():
  # No spikes: the noise part of V^t is sum_k beta^(t-k) xi^k, so its
  # variance at step t (from V^0 = 0) is sigma^2 (1 - beta^(2t)) /
  # (1 - beta^2), whatever the input; averaged here over t >= burn_in.
  cell, p = _random_layer('lif')
  cell = dataclasses.replace(cell, theta=1e9)
  sigma, burn_in, x = 0.3, 5, _spikes(0)
  out = dgn.layer_noise_stats(cell, p, x, sigma, jax.random.key(2), 64,
                              burn_in)
  t = np.arange(burn_in + 1, x.shape[1] + 1)
  want = np.mean(sigma**2 * (1 - cell.beta**(2 * t)) / (1 - cell.beta**2))
  n = x.shape[0] * 24 * 64  # Independent draws behind each step's variance.
  assert float(out['var_v']) == pytest.approx(want, rel=6 / np.sqrt(n))
  assert float(out['rate']) == 0.0
  assert float(out['decay']) == pytest.approx(cell.beta)


def test_conductance_ablation_is_lif_and_gain_matches_the_rate():
  dcell, dp = _random_layer('dgn')
  lcell = cells.Cell(kind='lif', w_gain=2.0)
  x, key = _spikes(1), jax.random.key(3)
  args = (x, 0.3, key, 4, 10)
  d = dgn.layer_noise_stats(dcell, dp, *args)
  d0 = dgn.layer_noise_stats(dcell, dgn.without_conductance(dp), *args)
  lif = dgn.layer_noise_stats(lcell, {'w': dp['w']}, *args)
  for k in ('rate', 'var_v', 'decay'):  # C = 0 is LIF exactly.
    assert float(d0[k]) == pytest.approx(float(lif[k]), rel=1e-6), k
  assert float(d['decay']) < lcell.beta  # The gate closes with input.
  target = 0.08
  m = jax.jit(lambda p: dgn.matched_rate_noise_stats(
      dcell, p, x, 0.3, key, target, 4, 10, bisection_steps=16))(dp)
  assert float(m['rate']) == pytest.approx(target, rel=0.1)
  again = dgn.layer_noise_stats(dcell, dp, *args, gain=m['gain'])
  assert float(again['var_v']) == pytest.approx(float(m['var_v']), rel=1e-5)


# -- evaluation on briefly trained networks --------------------------------------
@pytest.fixture(scope='module')
def trained_smoke():
  """LIF and DGN trained briefly on a small spiking MNIST-1D (2 seeds)."""
  c = dgn_config.get_config('smoke')
  c.epochs = 3
  spk = exp.load_data(c)
  x, y = jnp.asarray(spk.train_x), jnp.asarray(spk.train_y)
  out = {}
  for kind in ('lif', 'dgn'):
    net = dgn.make_network(kind, spk.num_classes, c)
    steps = exp.num_steps(c, x.shape[0])
    init, step = exp.make_trainer(net, x, c, steps)
    res = loop.train(init, step, seed=0, num_seeds=2, num_steps=steps,
                     chunk_size=steps, progress=False, data=(x, y))
    out[kind] = (net, res.state.params)
  return c, spk, out


def test_zero_strength_perturbations_equal_clean(trained_smoke):
  c, spk, nets = trained_smoke
  net, params = nets['dgn']
  evaluate = exp.make_evaluator(net, c.eval_batch)
  x, y = jnp.asarray(spk.test_x), jnp.asarray(spk.test_y)
  key = jax.random.key(0)
  clean = np.asarray(evaluate(params, x, y, 'clean', [0.0], key))
  assert clean.shape == (2, 1) and clean.min() > 0.1  # Above chance.
  for kind in exp.PERTURBATIONS:
    acc = np.asarray(evaluate(params, x, y, kind, [0.0, 0.5], key))
    np.testing.assert_array_equal(acc[:, 0], clean[:, 0])
    assert acc.shape == (2, 2)
  # Heavy insertion destroys the input: accuracy falls.
  heavy = np.asarray(evaluate(params, x, y, 'insert', [0.5], key))
  assert heavy.mean() < clean.mean()


def test_evaluator_matches_direct_loop(trained_smoke):
  c, spk, nets = trained_smoke
  net, params = nets['lif']
  evaluate = exp.make_evaluator(net, c.eval_batch)
  x, y = jnp.asarray(spk.test_x), jnp.asarray(spk.test_y)
  acc = np.asarray(evaluate(params, x, y, 'clean', [0.0], jax.random.key(0)))
  for s in range(2):
    p = jax.tree.map(lambda a: a[s], params)
    n = (x.shape[0] // c.eval_batch) * c.eval_batch
    pred = jnp.argmax(jax.vmap(lambda xi: net.apply(p, xi))(x[:n]), -1)
    assert acc[s, 0] == pytest.approx(float((pred == y[:n]).mean()))


def test_noise_analysis_is_per_seed_and_matches_one_seed(trained_smoke):
  c, spk, nets = trained_smoke
  net, params = nets['dgn']
  c.layer_noise.bisection_steps = 10
  x, key = jnp.asarray(spk.test_x[:8]), jax.random.key(5)
  out = exp.make_noise_analysis(net, c)(params['layers'][0], x, key)
  assert all(v.shape == (2,) for v in out.values())
  assert out['var_v'][0] != out['var_v'][1]  # Each seed's own network.
  s = c.layer_noise
  one = dgn.matched_rate_noise_stats(
      net.cell, jax.tree.map(lambda a: a[1], params['layers'][0]), x,
      s.noise, key, s.target_rate, s.repeats, s.burn_in, False,
      s.log2_gain_range, s.bisection_steps)
  np.testing.assert_allclose(float(one['var_v']), float(out['var_v'][1]),
                             rtol=1e-4)


# -- claim logic on synthetic numbers ---------------------------------------------
def _synthetic_metrics(dgn_acc, lif_acc, plif_acc, var_dgn, var_c0):
  seeds = np.array([-0.01, 0.0, 0.01])
  m = {}
  for kind, a in (('dgn', dgn_acc), ('lif', lif_acc), ('plif', plif_acc),
                  ('alif', lif_acc + 0.02)):
    for key in ('acc_clean', 'acc_insert_0.02', 'acc_delete_0.3'):
      m[f'{key}/{kind}'] = a + seeds
    m[f'retention_insert_0.02/{kind}'] = a + seeds
  for name, v in (('lif', 0.30), ('dgn', var_dgn), ('dgn_c0', var_c0)):
    m[f'noise_var_v/{name}'] = v + 0.1 * seeds
    m[f'noise_rate/{name}'] = 0.05 + 0.1 * seeds
  m['noise_decay/dgn'] = 0.85 + seeds
  for name in ('dgn', 'dgn_c0'):
    m[f'noise_var_ratio/{name}_vs_lif'] = (m[f'noise_var_v/{name}']
                                           / m['noise_var_v/lif'])
  return m


def _claims_by_kind(m):
  c = dgn_config.get_config()
  c.perturbations = dict(insert=(0.02,))
  claims = exp.evaluate_claims(c, m)
  assert len(claims) == 6, [x.claim for x in claims]
  return claims


def test_claims_hold_and_their_controls_fail_on_a_clear_win():
  claims = _claims_by_kind(_synthetic_metrics(0.80, 0.65, 0.64, 0.20, 0.30))
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_when_dgn_is_no_better_and_controls_would_pass():
  # DGN no better than LIF, no variance reduction: every claim fails; a
  # control that matches the claim (PLIF far above LIF, C = 0 with low
  # variance) reads '(passes)'.
  claims = _claims_by_kind(_synthetic_metrics(0.64, 0.65, 0.90, 0.30, 0.20))
  for c in claims:
    assert not c.holds, c
    assert c.control.endswith('(passes)'), c


def test_stability_claim_needs_matched_rates():
  m = _synthetic_metrics(0.80, 0.65, 0.64, 0.20, 0.30)
  m['noise_rate/dgn'] = m['noise_rate/dgn'] * 2  # Bisection missed.
  (stab,) = [c for c in _claims_by_kind(m) if 'stability' in c.claim]
  assert not stab.holds and '0.1000' in stab.evidence


# -- end-to-end runs -------------------------------------------------------------------
# The smoke config's launcher run (subprocess, run record) is in
# tests/test_launchers.py; here the paper variant runs in-process.
def _check_summary(summary, cells_run):
  s = summary['num_seeds']
  for name, v in summary['metrics'].items():
    assert len(v['per_seed']) == s, name
  # Real per-seed numbers, not one copied value (accuracies on 20 test
  # examples may tie between seeds; continuous ones may not).
  keys = [f'noise_{m}/{k}' for k in (*cells_run, exp.ABLATION)
          for m in ('var_v', 'rate')]
  for key in keys:
    per_seed = summary['metrics'][key]['per_seed']
    assert len(set(per_seed)) == s, (key, per_seed)
  for c in summary['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c


def test_shd_paper_variant_runs_end_to_end_on_fake_files(tmp_path):
  # The real SHD layout (spikes/times, spikes/units, labels; 700 units,
  # 20 classes) with random spikes; the paper variant's two recurrent
  # layers, shrunk.
  shd_files.write_random_shd(tmp_path / 'shd', num_train=40, num_test=20)
  c = dgn_config.get_config('paper')
  assert c.data == 'shd' and c.recurrent and len(c.hidden) == 2
  c.data_dir = str(tmp_path / 'shd')
  c.update(num_seeds=2, cells=('lif', 'plif', 'dgn'), hidden=(8, 8),
           epochs=1, batch_size=20, eval_batch=10, steps_per_chunk=2,
           log_every=1)
  c.perturbations = dict(insert=(0.001,))
  c.layer_noise.update(examples=4, repeats=2, bisection_steps=4)
  c.stability.update(steps=200, burn_in=50, trials=1, bisection_steps=3)
  summary = exp.EXPERIMENT.execute(c, tmp_path / 'run')
  assert summary['dataset'] == 'shd_t100_m1p4_u700'
  assert summary['train_steps'] == 2
  _check_summary(summary, ('lif', 'plif', 'dgn'))
  assert 'noise_var_ratio/dgn_vs_lif' in summary['metrics']
  sn = summary['single_neuron']
  assert sn['dgn']['decay'] < sn['lif']['decay']
  assert (tmp_path / 'run' / 'plots' / 'membrane_variance.png').exists()


def test_preflight_names_the_missing_files_before_any_compute(tmp_path):
  c = dgn_config.get_config('paper')
  c.data_dir = str(tmp_path)
  with pytest.raises(data.DatasetNotFoundError) as e:
    exp.preflight(c)
  msg = str(e.value)
  assert '\n' not in msg
  assert msg.startswith(f'dataset shd is not in {tmp_path} (missing '
                        'shd_train.h5 and shd_test.h5)')
  assert '--config.data_dir' in msg
  c = dgn_config.get_config(None)  # Spiking MNIST-1D: generated, not read.
  c.data_dir = str(tmp_path / 'tfds')
  exp.preflight(c)
  assert not (tmp_path / 'tfds').exists()


def test_launcher_checks_shd_before_it_creates_the_workdir(tmp_path):
  assert_missing_data_stops_early(exp.EXPERIMENT,
                                  dgn_config.get_config('paper'), tmp_path,
                                  'shd')


def _claims(summary):
  return {c['claim']: c for c in summary['claims']}


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The full default run (~8 min, 3 seeds); only the slow tests use it.
  Its record: results/dgn_snn/default/summary.json."""
  return exp.EXPERIMENT.execute(dgn_config.get_config(),
                                tmp_path_factory.mktemp('dgn') / 'run')


@pytest.mark.slow
def test_default_config_claims(default_summary):
  # Measured (d6b43f9, 2-core CPU): clean DGN 0.816 vs LIF 0.711 (+0.104),
  # ALIF 0.735 (+0.081); insertion 0.02: 0.594 vs 0.522; deletion 30%:
  # 0.707 vs 0.599; PLIF in DGN's place fails each (+0.028, +0.004, +0.016,
  # +0.019). Trained first layer at rate 0.05: Var(V) DGN/LIF 0.584 (per
  # seed 0.564, 0.610, 0.578); C = 0 ablation 0.983.
  claims = _claims(default_summary)
  assert len(claims) == 6, list(claims)
  for name, c in claims.items():
    if name.startswith('Robustness'):
      continue
    assert c['holds'], c
    assert c['control'].endswith('(fails)'), c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'Retention (perturbed / clean) is LIF-like: DGN higher at 5/12 levels '
    '(deletion and current noise), lower under insertion and jitter, e.g. '
    'jitter 4: 0.70 vs 0.83 (d6b43f9, 3 seeds)'))
def test_default_config_retention_claim(default_summary):
  (c,) = [c for n, c in _claims(default_summary).items()
          if n.startswith('Robustness')]
  assert c['holds'], c
  assert c['control'].endswith('(fails)'), c
