"""The DGN paper: stochastic-stability methods against closed forms, the
experiment's evaluation plumbing and claim logic, and end-to-end runs."""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dgn_snn as dgn_config
from experiments import dgn_snn as exp
from iclrjax.core import config as cfg_lib
from iclrjax.core import data
from iclrjax.core import loop
from iclrjax.snn import cells
from iclrjax.snn import dgn
from iclrjax.snn import perturb
from tests.conftest import assert_missing_data_stops_early
from tests.conftest import smoke_launch
from tests.conftest import smoke_summary
from tests.snn import shd_files


def _validate(c):
  exp.EXPERIMENT.validate(c)


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
  """DGN trained as the smoke config trains it (3 epochs of a small spiking
  MNIST-1D, 2 seeds): the shared smoke run's programs, so they come from
  the test run's compilation cache."""
  smoke_launch('dgn_snn')
  c = dgn_config.get_config('smoke')
  spk = exp.load_data(c)
  x, y = jnp.asarray(spk.train_x), jnp.asarray(spk.train_y)
  net = dgn.make_network('dgn', spk.num_classes, c)
  steps = exp.num_steps(c, x.shape[0])
  init, step = exp.make_trainer(net, x, c, steps)
  res = loop.train(init, step, seed=c.seed, num_seeds=c.num_seeds,
                   num_steps=steps, chunk_size=c.steps_per_chunk,
                   progress=False, data=(x, y))
  return c, spk, {'dgn': (net, res.state.params)}


@pytest.fixture(scope='module')
def swept(trained_smoke):
  """The evaluator at each kind's strength 0 and at heavy insertion, in
  sweeps of the smoke run's size (clean + 2 rows: one compiled program)."""
  c, spk, nets = trained_smoke
  net, params = nets['dgn']
  evaluate = exp.make_evaluator(net, c.eval_batch)
  x, y = jnp.asarray(spk.test_x), jnp.asarray(spk.test_y)
  key = jax.random.key(0)
  acc = {}
  for sweep in ({'insert': [0.0, 0.5]}, {'delete': [0.0], 'jitter': [0.0]},
                {'current': [0.0, 0.5]}):
    acc.update({k: np.asarray(v) for k, v in evaluate(
        params, x, y, sweep, key).items()})
  with pytest.raises(ValueError, match='Unknown perturbations'):
    evaluate(params, x, y, {'shift': [1.0]}, key)
  return acc


def test_zero_strength_perturbations_equal_clean(swept):
  acc = swept
  assert acc['clean'].shape == (2,) and acc['clean'].min() > 0.1  # > chance
  for kind in exp.PERTURBATIONS:
    np.testing.assert_array_equal(acc[kind][:, 0], acc['clean'])
  # Heavy insertion destroys the input: accuracy falls.
  assert acc['insert'].shape == (2, 2)
  assert acc['insert'][:, 1].mean() < acc['clean'].mean()


def test_evaluator_matches_direct_loop(trained_smoke, swept):
  c, spk, nets = trained_smoke
  net, params = nets['dgn']
  x, y = jnp.asarray(spk.test_x), jnp.asarray(spk.test_y)
  n = (x.shape[0] // c.eval_batch) * c.eval_batch
  keys = jax.random.split(jax.random.key(0), n)
  # Example i's perturbation key is the first half of key i's split.
  forward = jax.jit(jax.vmap(lambda p, xi, ki: net.apply(
      p, perturb.insert_spikes(jax.random.split(ki)[0], xi, 0.5)),
                             in_axes=(None, 0, 0)))
  for s in range(2):
    p = jax.tree.map(lambda a: a[s], params)
    pred = jnp.argmax(forward(p, x[:n], keys), -1)
    assert swept['insert'][s, 1] == pytest.approx(
        float((pred == y[:n]).mean()))


def test_noise_analysis_is_per_seed_and_fires_at_the_target_rate(trained_smoke):
  c, spk, nets = trained_smoke
  net, params = nets['dgn']
  c.layer_noise.bisection_steps = 10
  x, key = jnp.asarray(spk.test_x[:8]), jax.random.key(5)
  analyse = exp.make_noise_analysis(net, c)
  layer = params['layers'][0]
  out = analyse(layer, x, key)
  assert all(v.shape == (2,) for v in out.values())
  assert out['var_v'][0] != out['var_v'][1]  # Each seed's own network.
  # The config's target rate is what the bisection matched, per seed.
  np.testing.assert_allclose(np.asarray(out['rate']), c.layer_noise.target_rate,
                             rtol=0.1)
  # Seed i's numbers depend on seed i's params only: swapping the seeds
  # swaps the results (same compiled program).
  swapped = analyse(jax.tree.map(lambda a: a[::-1], layer), x, key)
  for k, v in out.items():
    np.testing.assert_allclose(np.asarray(swapped[k]), np.asarray(v)[::-1],
                               rtol=1e-5, err_msg=k)


# -- claim logic on synthetic numbers ---------------------------------------------
def _synthetic_metrics(dgn_acc, lif_acc, plif_acc, var_dgn, var_static,
                       var_c0=0.30):
  """var_static: Var(V) of the layer with C = 0 and a static leak at DGN's
  mean decay (the stability claim's reference); var_c0: of the layer with
  C = 0 alone (its control, LIF-like by default)."""
  seeds = np.array([-0.01, 0.0, 0.01])
  m = {}
  m['chance/data'] = np.full(3, 0.1)
  for kind, a in (('dgn', dgn_acc), ('lif', lif_acc), ('plif', plif_acc),
                  ('alif', lif_acc + 0.02)):
    for suffix in ('', exp.NOISY):   # clean- and noise-trained arms
      m[f'acc_clean/{kind}{suffix}'] = a + seeds
      for key in ('acc_insert_0.02', 'acc_delete_0.3'):
        m[f'{key}/{kind}{suffix}'] = a - 0.05 + seeds  # the same drop
  for name, v in (('lif', 0.30), ('dgn', var_dgn), ('dgn_c0', var_c0),
                  (exp.STATIC, var_static)):
    m[f'noise_var_v/{name}'] = v + 0.1 * seeds
    m[f'noise_rate/{name}'] = 0.05 + 0.1 * seeds
  m['noise_decay/dgn'] = 0.85 + seeds
  for name in ('dgn', 'dgn_c0', exp.STATIC):
    m[f'noise_var_ratio/{name}_vs_lif'] = (m[f'noise_var_v/{name}']
                                           / m['noise_var_v/lif'])
  return m


def test_retention_is_chance_corrected_on_seed_means():
  # (perturbed - chance) / (clean - chance): 1 keeps every point above
  # chance, 0 is chance; a seed at chance does not blow the mean up.
  assert exp.retention(0.55, 0.9, 0.1) == pytest.approx(0.45 / 0.8)
  assert exp.retention(0.1, 0.9, 0.1) == 0.0
  c = dgn_config.get_config()
  c.perturbations = dict(insert=(0.02,))
  m = {'chance/data': np.full(2, 0.1),
       'acc_clean/dgn': np.array([0.9, 0.11]),        # seed 2 near chance
       'acc_insert_0.02/dgn': np.array([0.8, 0.2]),
       'acc_clean/lif': np.array([0.9, 0.9]),
       'acc_insert_0.02/lif': np.array([0.5, 0.5])}
  ((_, d, l),) = exp._retention_wins(c, m, 'dgn')  # pylint: disable=protected-access
  assert d == pytest.approx((0.5 - 0.1) / (0.505 - 0.1))
  assert l == pytest.approx(0.4 / 0.8)


def _claims_by_kind(m):
  c = dgn_config.get_config()
  c.perturbations = dict(insert=(0.02,))
  claims = exp.evaluate_claims(c, m)
  assert len(claims) == 7, [x.claim for x in claims]
  return claims


def test_claims_hold_and_their_controls_fail_on_a_clear_win():
  claims = _claims_by_kind(_synthetic_metrics(0.80, 0.65, 0.64, 0.20, 0.30))
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_when_dgn_is_no_better_and_controls_would_pass():
  # DGN no better than LIF, no lower variance than the static leak: every
  # claim fails; a control that matches the claim (PLIF far above LIF, the
  # C = 0 layer below the static leak) reads '(passes)'.
  claims = _claims_by_kind(_synthetic_metrics(0.64, 0.65, 0.90, 0.30, 0.20,
                                              var_c0=0.10))
  for c in claims:
    assert not c.holds, c
    assert c.control.endswith('(passes)'), c


def test_stability_claim_needs_matched_rates():
  m = _synthetic_metrics(0.80, 0.65, 0.64, 0.20, 0.30)
  m['noise_rate/dgn'] = m['noise_rate/dgn'] * 2  # Bisection missed.
  (stab,) = [c for c in _claims_by_kind(m) if 'stability' in c.claim]
  assert not stab.holds and '0.1000' in stab.evidence


# -- end-to-end runs -------------------------------------------------------------------
# The smoke config's launcher run (subprocess, run record) is shared with
# tests/test_launchers.py; here its summary is read, and the paper variant
# runs in-process on fake SHD files.
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


def test_smoke_run_has_per_seed_metrics_and_its_claims():
  summary = smoke_summary('dgn_snn')
  cells_run = tuple(summary['config']['cells'])
  _check_summary(summary, cells_run)
  assert 'noise_var_ratio/dgn_vs_lif' in summary['metrics']
  m = summary['metrics']   # the static-leak control decays at DGN's mean
  assert m[f'noise_static_decay/{exp.STATIC}']['mean'] == pytest.approx(
      m['noise_decay/dgn']['mean'], rel=1e-5)
  assert f'noise_var_ratio/{exp.STATIC}_vs_lif' in m
  claims = {c['claim'].split(':')[0]: c for c in summary['claims']}
  # ALIF's clean-accuracy claim needs ALIF (default run).
  assert len(claims) == 5, list(claims)
  # The C = 0 ablation runs with DGN; PLIF (the accuracy claims' control)
  # only where it is trained: their logic is the synthetic tests above.
  stability = claims['Stochastic stability from the gate, on trained networks']
  assert stability['control'].endswith(('(fails)', '(passes)')), stability
  for pkind, levels in summary['config']['perturbations'].items():
    for lv in levels:
      assert f'acc_{pkind}_{lv:g}/dgn' in summary['metrics']


def test_shd_paper_variant_runs_end_to_end_on_fake_files(tmp_path):
  # The real SHD layout (spikes/times, spikes/units, labels; 700 units,
  # 20 classes) with random spikes; the paper variant's two recurrent
  # layers, shrunk, DGN only (LIF, PLIF and the claims and controls: the
  # smoke run's test above).
  shd_files.write_random_shd(tmp_path / 'shd', num_train=40, num_test=20)
  c = dgn_config.get_config('paper')
  assert c.data == 'shd' and c.recurrent and len(c.hidden) == 2
  c.data_dir = str(tmp_path / 'shd')
  c.update(num_seeds=2, cells=('dgn',), noise_trained=(), hidden=(8, 8),
           epochs=1, batch_size=20, eval_batch=10, steps_per_chunk=2,
           log_every=1)
  c.perturbations = dict(insert=(0.001,))
  c.layer_noise.update(examples=4, repeats=2, bisection_steps=4)
  c.stability.update(steps=200, burn_in=50, trials=1, bisection_steps=3)
  summary = exp.EXPERIMENT.execute(c, tmp_path / 'run')
  assert summary['dataset'] == 'shd_t100_m1p4_u700'
  assert summary['train_steps'] == 2
  _check_summary(summary, ('dgn',))
  assert {'acc_clean/dgn', 'acc_insert_0.001/dgn', 'rate_hidden/dgn'} <= (
      summary['metrics'].keys())
  assert summary['claims'] == []  # Nothing to compare DGN with.
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
  """The full default run (~6 min, 3 seeds); only the slow tests use it.
  Its record: results/dgn_snn/default/summary.json."""
  return exp.EXPERIMENT.execute(dgn_config.get_config(),
                                tmp_path_factory.mktemp('dgn') / 'run')


@pytest.mark.slow
def test_default_config_claims(default_summary):
  # Measured (155ca87, 3 seeds): clean DGN 0.820 vs ALIF 0.731 (+0.090);
  # insertion 0.02: 0.594 vs LIF 0.516 (+0.078); deletion 30%: 0.705 vs
  # 0.598 (+0.107); PLIF in DGN's place fails each (+0.007, +0.017, +0.016).
  # Clean DGN vs LIF (+0.113 against a 0.10 bar, per-seed spread ~0.01) is
  # too close to pin: its rule and control are checked instead.
  claims = _claims(default_summary)
  assert len(claims) == 7, list(claims)
  for name, c in claims.items():
    if name.startswith(('Robustness', 'Stochastic')):
      continue
    assert c['control'].endswith('(fails)'), c
    if 'LIF + 0.10' not in name:
      assert c['holds'], c
  (lif,) = [c for n, c in claims.items() if 'DGN >= LIF + 0.10' in n]
  d = float(re.search(r'difference ([+-][\d.]+)', lif['evidence'])[1])
  assert lif['holds'] == (d >= 0.10 - 5e-4), lif


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'Chance-corrected retention ((perturbed - 0.1) / (clean - 0.1), seed '
    'means) is LIF-like, clean- and noise-trained alike: DGN higher at 5/12 '
    'levels each (deletion; lower under insertion and jitter, e.g. jitter '
    '4: 0.65 vs 0.81; ties under current noise) (155ca87, 3 seeds); PLIF '
    'higher at 3/12 and 2/12'))
@pytest.mark.parametrize('prefix', ['Robustness:', 'Robustness (noise'])
def test_default_config_retention_claims(default_summary, prefix):
  (c,) = [c for n, c in _claims(default_summary).items()
          if n.startswith(prefix)]
  assert c['control'].endswith('(fails)'), c
  assert c['holds'], c


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=(
    'The lower membrane variance is the lower mean decay, not the gate: at '
    "matched rate DGN's Var(V) is 0.588x LIF's but 1.27x that of its own "
    'layer with C = 0 and a static leak at its mean decay 0.644 (0.463x '
    "LIF's) (155ca87, 3 seeds); the C = 0 layer alone is 0.982x LIF"))
def test_default_config_stability_claim(default_summary):
  (c,) = [c for n, c in _claims(default_summary).items()
          if n.startswith('Stochastic stability')]
  assert c['control'].endswith('(fails)'), c
  assert c['holds'], c
