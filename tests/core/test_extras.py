"""The lean install: optional dependencies fail with one line naming their
extra, and iclrjax/core/extras.py agrees with pyproject.toml."""

import os
import subprocess
import sys
import tomllib

import pytest

from iclrjax.core import extras
from tests.conftest import ROOT


def test_extras_match_pyproject():
  with open(ROOT / 'pyproject.toml', 'rb') as f:
    optional = tomllib.load(f)['project']['optional-dependencies']
  for extra in extras.EXTRAS:
    assert extra in optional, f'pyproject.toml has no extra {extra!r}'
    assert f'iclrjax[{extra}]' in ' '.join(optional['all']) or extra in (
        optional['all'][0]), extra
  core = tomllib.load(open(ROOT / 'pyproject.toml', 'rb'))['project'][
      'dependencies']
  heavy = {'xgboost', 'brax', 'mujoco', 'gymnax', 'lightgbm', 'blackjax'}
  assert not heavy & {d.split('>')[0].split('=')[0] for d in core}
  assert 'iclrjax[all]' in optional['dev']


def test_missing_module_names_its_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, 'xgboost', None)
  with pytest.raises(extras.MissingExtraError) as e:
    extras.require('xgboost', 'causal')
  msg = str(e.value)
  assert '\n' not in msg and "pip install 'iclrjax[causal]'" in msg


def test_a_broken_import_inside_the_package_is_not_hidden(monkeypatch):
  monkeypatch.setitem(sys.modules, 'statsmodels.api', None)
  monkeypatch.delitem(sys.modules, 'statsmodels', raising=False)
  with pytest.raises(extras.MissingExtraError):
    extras.require('statsmodels.api', 'timeseries')
  with pytest.raises(ValueError, match='unknown extra'):
    extras.require('numpy', 'nope')


def test_launcher_says_which_extra_in_one_line(tmp_path):
  """The front-door XGBoost variant without xgboost: exit 2, one line."""
  code = (
      'import sys; sys.modules["xgboost"] = None; '
      'sys.argv = ["experiments/frontdoor.py", '
      '"--config=configs/frontdoor.py:smoke", '
      '"--config.nuisance=xgb", '
      f'"--workdir={tmp_path}"]; '
      'from experiments import frontdoor; frontdoor.EXPERIMENT.main()')
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, 'JAX_PLATFORMS': 'cpu',
                            'ICLRJAX_QUIET': '1'})
  assert out.returncode == 2, out.stderr[-2000:]
  last = out.stderr.strip().splitlines()[-1]
  assert last.startswith('error: xgboost is not installed') and (
      "pip install 'iclrjax[causal]'" in last), last


EXTRA_USERS = ('kernel_ppo', 'fge', 'fastmix', 'sgd_llc', 'tsfm_knobs', 'fgl',
               'dgn_snn')


@pytest.mark.parametrize('name', EXTRA_USERS)
def test_experiments_check_their_extras_before_any_compute(name, monkeypatch):
  """Each experiment that needs an extra names it in `requires`, and its
  preflight fails on the missing package with the one-line message."""
  import importlib  # pylint: disable=g-import-not-at-top
  exp = importlib.import_module(f'experiments.{name}').EXPERIMENT
  cfg = exp.default_config()
  needed = exp.requires(cfg)
  assert needed, name
  for module, extra in needed:
    assert extra in extras.EXTRAS and module.split('.')[0] in extras.EXTRAS[
        extra], (module, extra)
  module, extra = needed[0]
  monkeypatch.setitem(sys.modules, module.split('.')[0], None)
  with pytest.raises(extras.MissingExtraError,
                     match=rf"pip install 'iclrjax\[{extra}\]'"):
    exp.check_ready(cfg)


def test_a_core_install_imports_every_family_and_launcher():
  """Without any extra (the optional packages hidden), every family and
  every launcher imports; the launchers that need one say which."""
  hidden = sorted({m for mods in extras.EXTRAS.values() for m in mods})
  code = f'''
import importlib, pathlib, sys
for m in {hidden!r}:
  sys.modules[m] = None
from iclrjax.core import extras
for fam in sorted(p.parent.name for p in pathlib.Path('iclrjax').glob('*/__init__.py')):
  importlib.import_module('iclrjax.' + fam)
missing = []
for p in sorted(pathlib.Path('experiments').glob('*.py')):
  if p.stem in ('__init__', 'colab_sync'):
    continue
  mod = importlib.import_module('experiments.' + p.stem)
  exp = getattr(mod, 'EXPERIMENT', None)
  if exp is None:
    continue
  try:
    exp.check_ready(exp.default_config())
  except extras.MissingExtraError:
    missing.append(p.stem)
print(' '.join(missing))
'''
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, 'JAX_PLATFORMS': 'cpu'})
  assert out.returncode == 0, out.stderr[-3000:]
  assert set(out.stdout.split()) == set(EXTRA_USERS), out.stdout
