"""Every launcher: configs validate, the smoke variant runs and records.

New experiments are picked up automatically: any `experiments/<name>.py`
defining `EXPERIMENT` must have `configs/<name>.py` with the variants
smoke / default / paper.
"""

import copy
import importlib
import json
import pathlib

import pytest

from iclrjax.core import config as config_lib
from iclrjax.core import launch
from iclrjax.core import loop
from tests.conftest import ROOT, run_module, smoke_launch

NAMES = sorted(p.stem for p in (ROOT / 'experiments').glob('*.py')
               if p.stem not in ('__init__', 'report', 'colab_sync', 'parity',
                                 'papers', 'plots', 'site', 'timing'))
SUMMARY_KEYS = {'experiment', 'config', 'num_seeds', 'backend', 'devices',
                'mesh', 'commit', 'wall_s', 'metrics', 'claims'}


def _experiment(name):
  return importlib.import_module(f'experiments.{name}').EXPERIMENT


def _config(name, variant):
  return importlib.import_module(f'configs.{name}').get_config(variant)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('variant', ['smoke', None, 'paper'])
def test_config_variants_validate(name, variant):
  exp = _experiment(name)
  assert exp.name == name
  exp.validate(_config(name, variant))


def _variants(name):
  """Every variant of configs/<name>.py: its VARIANTS, else the three."""
  mod = importlib.import_module(f'configs.{name}')
  return getattr(mod, 'VARIANTS', ('smoke', 'default', 'paper'))


_MISSING = object()


def _lookup(cfg, path):
  node = cfg
  for part in path.split('.'):
    if not hasattr(node, 'keys') or part not in node:
      return _MISSING
    node = node[part]
  return node


@pytest.mark.parametrize('name,variant',
                         [(n, v) for n in NAMES for v in _variants(n)])
def test_every_config_variant_validates(name, variant):
  _experiment(name).validate(_config(name, variant))


@pytest.mark.parametrize('name', NAMES)
def test_every_constraint_names_a_field_of_some_variant(name):
  """A constraint left behind by a renamed or removed field fails here."""
  configs = [_config(name, v) for v in _variants(name)]
  for path in _experiment(name).schema:
    assert any(_lookup(c, path) is not _MISSING for c in configs), path


_BARE = [config_lib.Int(), config_lib.Float(), config_lib.Bool(),
         config_lib.Str(), config_lib.Seq(), config_lib.AnyValue(),
         config_lib.AnyValue(nullable=True)] + [
             config_lib.Seq(item=t()) for t in (
                 config_lib.Int, config_lib.Float, config_lib.Bool,
                 config_lib.Str)]


@pytest.mark.parametrize('name', NAMES)
def test_constraints_say_more_than_the_default_type(name):
  """One declaration per field: a bare type comes from configs/<name>.py."""
  default = _config(name, None)
  for path, spec in _experiment(name).schema.items():
    if _lookup(default, path) is _MISSING:
      continue
    bare = copy.copy(spec)
    object.__setattr__(bare, 'help', '')  # Specs are frozen.
    assert bare not in _BARE, f'{path}: {spec} adds nothing to its type'


@pytest.mark.parametrize('name', NAMES)
def test_unknown_variant_is_a_clear_error(name):
  with pytest.raises(ValueError, match='smoke'):
    _config(name, 'nonsense')


@pytest.mark.parametrize('name', NAMES)
def test_smoke_run_writes_the_run_record(name):
  wd, status = smoke_launch(name)   # shared with the paper's own tests
  assert status['returncode'] == 0, status['stderr']
  summary = json.loads((wd / 'summary.json').read_text())
  assert SUMMARY_KEYS <= summary.keys()
  assert summary['experiment'] == name
  mesh = summary['mesh']  # every device is used, whatever num_seeds
  assert mesh['seeds'] * mesh['data'] == summary['devices'] >= 1
  assert summary['num_seeds'] % mesh['seeds'] == 0
  assert summary['config'] == json.loads((wd / 'config.json').read_text())
  for m in summary['metrics'].values():
    assert {'mean', 'ci95', 'per_seed'} <= m.keys()
    assert len(m['per_seed']) == summary['num_seeds']
  for c in summary['claims']:
    assert {'claim', 'holds', 'evidence', 'control'} <= c.keys()
  assert (wd / 'metrics.jsonl').stat().st_size > 0
  assert list((wd / 'plots').glob('*.png'))
  assert list((wd / 'tensorboard').glob('events.out.tfevents.*'))
  assert any((wd / 'checkpoints').iterdir())


def test_no_flags_uses_default_config_and_resumes_after_kill(tmp_path):
  """`python -m experiments.linreg` with no flags; killed; same command."""
  root = tmp_path / 'runs' / 'linreg'
  killed = run_module('experiments.linreg', cwd=tmp_path,
                      env={loop.FAULT_ENV: '1000'})
  assert killed.returncode == -9, killed.stderr[-3000:]
  (first,) = list(root.iterdir())
  cfg = json.loads((first / 'config.json').read_text())
  assert cfg == json.loads(json.dumps(
      launch.config_lib.to_dict(_config('linreg', None))))

  again = run_module('experiments.linreg', cwd=tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  assert 'Resuming' in again.stderr
  assert list(root.iterdir()) == [first]
  summary = json.loads((first / 'summary.json').read_text())
  assert all(c['holds'] for c in summary['claims'])

  # A finished run is not resumed: the next run gets a fresh directory.
  third = run_module('experiments.linreg', '--config.num_steps=100',
                     '--config.tolerance=10.0', cwd=tmp_path)
  assert third.returncode == 0, third.stderr[-3000:]
  assert len(list(root.iterdir())) == 2


def test_changed_config_in_existing_workdir_is_refused(tmp_path):
  wd = tmp_path / 'w'
  args = ['--config=configs/linreg.py:smoke', f'--workdir={wd}',
          '--config.num_steps=100']
  assert run_module('experiments.linreg', *args).returncode == 0
  proc = run_module('experiments.linreg', *args, '--config.seed=5')
  assert proc.returncode == 2
  assert 'config.seed=' in proc.stderr and 'different config' in proc.stderr
  assert 'Traceback' not in proc.stderr
