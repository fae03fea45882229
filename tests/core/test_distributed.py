"""The ('seeds', 'data') mesh: shapes, every device used, same numbers.

Runs on 1 device, on 8 forced host devices (with 8, 3 and 1 seeds) and on 2
processes x 4 devices (jax.distributed over gloo) must agree up to float
rounding; each is a subprocess so it gets its own device count.
"""

import json
import os
import socket
import subprocess
import sys
import types

import jax
import numpy as np
import pytest

from iclrjax.core import distributed
from tests.conftest import ROOT, run_module


@pytest.mark.parametrize('num_seeds,num_devices,shape', [
    (8, 8, (8, 1)), (3, 8, (1, 8)), (1, 8, (1, 8)), (10, 8, (2, 4)),
    (12, 8, (4, 2)), (4, 1, (1, 1)), (6, 4, (2, 2))])
def test_mesh_shape_uses_every_device(num_seeds, num_devices, shape):
  k, m = distributed.mesh_shape(num_seeds, num_devices)
  assert (k, m) == shape
  assert k * m == num_devices and num_seeds % k == 0


def test_make_mesh_is_two_dimensional():
  mesh = distributed.make_mesh(3)
  assert mesh.axis_names == ('seeds', 'data')
  assert mesh.devices.size == len(jax.devices())
  assert distributed.mesh_size(mesh) == {
      'seeds': 1, 'data': len(jax.devices())}


def test_mesh_that_leaves_out_a_process_is_an_error(monkeypatch):
  monkeypatch.setattr(jax, 'process_count', lambda: 2)
  mesh = types.SimpleNamespace(
      devices=np.array([types.SimpleNamespace(process_index=0)] * 4),
      shape={'seeds': 1, 'data': 4})
  with pytest.raises(ValueError, match=r'leaves out process\(es\) \[1\]'):
    distributed.check_covers_processes(mesh)


def test_shard_batch_is_identity_without_a_mesh():
  x = np.arange(8.0)
  assert distributed.shard_batch(x) is x


def _summary(path):
  with open(path / 'summary.json') as f:
    return json.load(f)


def _assert_same_metrics(a, b, seeds=None):
  """b's per-seed metrics equal a's seeds `seeds` (default all)."""
  assert a['metrics'].keys() == b['metrics'].keys()
  for k, v in a['metrics'].items():
    ref = np.asarray(v['per_seed'])
    ref = ref if seeds is None else ref[list(seeds)]
    # param_rel_error = |w - w_ols| / |w_ols| is a difference of nearly
    # equal float32 vectors: rounding of w (~1e-7 relative) moves it by
    # ~1e-7 absolutely, whatever the reduction order.
    np.testing.assert_allclose(b['metrics'][k]['per_seed'], ref, rtol=1e-5,
                               atol=1e-6, err_msg=k)


_HLO = '''
import jax, jax.numpy as jnp
from configs import linreg as lc
from iclrjax.core import distributed, loop
from iclrjax.examples import linreg
cfg = lc.get_config('smoke')
mesh = distributed.make_mesh(1)
states = loop.init_states(linreg.make_init(cfg), loop.seed_keys(0, 1), mesh)
step = jax.vmap(lambda s: jax.lax.scan(linreg.make_step(cfg), s,
                                       jnp.arange(2))[0],
                spmd_axis_name='seeds')
with jax.set_mesh(mesh):
  hlo = jax.jit(step).lower(states).compile().as_text()
# The per-device minibatch: batch_size / 8 rows in every dot.
rows = {l.split('= f32[')[1].split(',')[0] for l in hlo.splitlines()
        if ' dot(' in l and '= f32[' in l}
print(json.dumps({'rows': sorted(rows), 'all_reduce': 'all-reduce' in hlo,
                  'batch': cfg.batch_size}))
'''


def test_one_seed_program_splits_its_minibatch_over_eight_devices():
  proc = subprocess.run(
      [sys.executable, '-c', 'import json\n' + _HLO], cwd=ROOT,
      capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, JAX_PLATFORMS='cpu',
               XLA_FLAGS='--xla_force_host_platform_device_count=8'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert out['all_reduce']
  assert str(out['batch'] // 8) in out['rows'], out


def test_one_and_eight_devices_same_metrics_for_8_3_1_seeds(tmp_path):
  """The Done-when check: 1 and 3 seeds on 8 devices use all 8."""
  runs = {'1dev': (1, 8), '8dev': (8, 8), '8dev3': (8, 3), '8dev1': (8, 1)}
  out = {}
  for tag, (n, seeds) in runs.items():
    proc = run_module(
        'experiments.linreg', '--config=configs/linreg.py:smoke',
        f'--config.num_seeds={seeds}', f'--workdir={tmp_path / tag}',
        env={'XLA_FLAGS': f'--xla_force_host_platform_device_count={n}'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out[tag] = _summary(tmp_path / tag)
  assert out['1dev']['mesh'] == {'seeds': 1, 'data': 1}
  assert out['1dev']['devices'] == 1
  assert out['8dev']['mesh'] == {'seeds': 8, 'data': 1}
  assert out['8dev3']['mesh'] == {'seeds': 1, 'data': 8}
  assert out['8dev1']['mesh'] == {'seeds': 1, 'data': 8}
  for tag in ('8dev', '8dev3', '8dev1'):
    assert out[tag]['devices'] == 8
  _assert_same_metrics(out['1dev'], out['8dev'])
  _assert_same_metrics(out['1dev'], out['8dev3'], seeds=range(3))
  _assert_same_metrics(out['1dev'], out['8dev1'], seeds=[0])
  # Evidence strings print rounded numbers; the verdicts must agree.
  assert [(c['claim'], c['holds']) for c in out['1dev']['claims']] == [
      (c['claim'], c['holds']) for c in out['8dev']['claims']]


def _free_port():
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


def _two_processes(module, args, workdir):
  """`module args` as 2 processes x 4 CPU devices; no --workdir if None."""
  port = _free_port()
  procs = []
  for pid in range(2):
    env = dict(os.environ, JAX_PLATFORMS='cpu', ICLRJAX_QUIET='1',
               XLA_FLAGS='--xla_force_host_platform_device_count=4',
               JAX_COORDINATOR_ADDRESS=f'localhost:{port}',
               JAX_NUM_PROCESSES='2', JAX_PROCESS_ID=str(pid),
               ICLRJAX_RUNS=str(workdir.parent / 'runs'))
    env.pop('PYTEST_CURRENT_TEST', None)
    wd = [f'--workdir={workdir}'] if workdir.name != 'runs' else []
    procs.append(subprocess.Popen(
        [sys.executable, '-m', module, *args, '--config.distributed=True',
         *wd], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True))
  for p in procs:
    _, err = p.communicate(timeout=900)
    assert p.returncode == 0, err[-3000:]


@pytest.mark.parametrize('name,overrides', [
    # RL: clip-PPO's batch of 8 envs split over the 'data' axis and the
    # NPG-TD rows; the RKHS phase and a second power are dropped to keep the
    # test short.
    ('kernel_ppo', ('--config.ppo.num_envs=8', '--config.rkhs_envs=()',
                    '--config.powers=(0.5,)')),
    # Supervised: the training split is a sharded argument of the loop and
    # each minibatch of 64 is split over 'data' (mesh 2 x 4); one group.
    ('dcd_ssm', ("--config.runs=('Z6/dcd/1',)",)),
    # LM: its config check traces the task (no backend may start before
    # jax.distributed.initialize); SFT batch and GRPO prompts over 'data'.
    ('lm_grpo', ('--config.sft_steps=10', '--config.grpo_steps=2',
                 '--config.num_seeds=1', '--config.prompts_per_step=8')),
])
def test_two_processes_match_one_process(name, overrides, tmp_path):
  """Multi-host path: 2 processes x 4 CPU devices, jax.distributed + gloo."""
  args = [f'--config=configs/{name}.py:smoke', *overrides]
  solo = run_module(f'experiments.{name}', *args,
                    f'--workdir={tmp_path / "solo"}')
  assert solo.returncode == 0, solo.stderr[-3000:]
  _two_processes(f'experiments.{name}', args, tmp_path / 'multi')
  a, b = _summary(tmp_path / 'solo'), _summary(tmp_path / 'multi')
  assert b['processes'] == 2 and b['devices'] == 8
  assert b['mesh']['seeds'] * b['mesh']['data'] == 8
  for k, v in a['metrics'].items():
    if 'per_s' in k:  # throughput, not a result
      continue
    np.testing.assert_allclose(b['metrics'][k]['per_seed'], v['per_seed'],
                               rtol=1e-4, atol=1e-5, err_msg=k)
  assert [c['holds'] for c in a['claims']] == [c['holds'] for c in b['claims']]


def test_two_processes_agree_on_a_default_workdir(tmp_path):
  """Without --workdir, both processes use runs/<name>/<config hash>."""
  runs = tmp_path / 'runs'
  _two_processes('experiments.linreg',
                 ['--config=configs/linreg.py:smoke', '--config.num_seeds=8'],
                 runs)
  (wd,) = list((runs / 'linreg').iterdir())
  assert (wd / 'summary.json').exists()
  assert _summary(wd)['processes'] == 2


_IMPORT_ALL = '''
import importlib, pkgutil, sys
from jax._src import xla_bridge
import configs, experiments, iclrjax
from iclrjax.core import extras, launch
names = []
for pkg in (iclrjax, experiments, configs):
  names += [m.name for m in pkgutil.walk_packages(pkg.__path__,
                                                  pkg.__name__ + '.')]
for name in names:
  importlib.import_module(name)
  if xla_bridge.backends_are_initialized():
    sys.exit(f'importing {name} started the XLA backend')
# What Experiment.execute does before jax.distributed.initialize() may not
# start a backend either: validate and preflight every config variant.
checked = 0
for name in names:
  exp = getattr(sys.modules[name], 'EXPERIMENT', None)
  if exp is None:
    continue
  mod = importlib.import_module('configs.' + exp.name)
  for variant in getattr(mod, 'VARIANTS', ('smoke', 'default', 'paper')):
    try:
      exp.check_ready(mod.get_config(variant))
    except (launch.MissingDataError, extras.MissingExtraError):
      pass
    checked += 1
    if xla_bridge.backends_are_initialized():
      sys.exit(f'checking {exp.name}:{variant} started the XLA backend')
print(len(names), checked)
'''


def test_no_module_starts_the_backend_at_import():
  """jax.distributed.initialize() must be able to run after the imports
  and the config checks."""
  proc = subprocess.run([sys.executable, '-c', _IMPORT_ALL], cwd=ROOT,
                        capture_output=True, text=True, timeout=300,
                        check=False, env=dict(os.environ, JAX_PLATFORMS='cpu'))
  assert proc.returncode == 0, proc.stderr[-3000:]
  modules, variants = map(int, proc.stdout.split()[-2:])
  assert modules > 50 and variants >= 75
