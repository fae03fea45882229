"""The public API: every family package exports its entry points.

`iclrjax/<family>/__init__.py` imports the family's modules and main names
and lists them in `__all__`; its docstring names the papers and shows an
`Example:`. Importing a family must stay cheap: no JAX backend (so a
launcher can call `jax.distributed.initialize()` after its imports) and none
of the optional extras (those are imported inside functions by
`core.extras.require`).
"""

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import types

import pytest

import iclrjax
from experiments import papers
from tests.conftest import ROOT

FAMILIES = sorted(m.name for m in pkgutil.iter_modules(iclrjax.__path__)
                  if m.ispkg)

# The optional extras (pyproject.toml), by import name.
OPTIONAL = ('xgboost', 'lightgbm', 'blackjax', 'gymnax', 'brax', 'mujoco',
            'flowjax', 'paramax', 'statsmodels', 'networkx', 'mnist1d',
            'h5py', 'torch')


def test_the_families_are_all_there():
  assert len(FAMILIES) >= 16, FAMILIES
  assert {p.family for p in papers.PAPERS} <= set(FAMILIES)


def _own_doc(obj) -> str:
  """obj's own docstring ('' if none or only a generated one)."""
  if inspect.isclass(obj):
    doc = obj.__dict__.get('__doc__') or ''
    # dataclasses and NamedTuples make up 'Name(field, ...)' when undocumented
    return '' if doc.startswith(obj.__name__ + '(') else doc.strip()
  doc = getattr(obj, '__doc__', None) or ''
  if not isinstance(obj, types.ModuleType) and doc is type(obj).__doc__:
    return ''  # a wrapper's class docstring, not the function's
  return doc.strip()


@pytest.mark.parametrize('family', FAMILIES)
def test_family_exports_documented_names(family):
  pkg = importlib.import_module(f'iclrjax.{family}')
  names = getattr(pkg, '__all__', None)
  assert names, f'iclrjax.{family}.__all__ is empty or missing'
  assert len(names) == len(set(names)), f'iclrjax.{family}: duplicate names'
  for name in names:
    assert hasattr(pkg, name), f'iclrjax.{family}.{name} does not resolve'
    obj = getattr(pkg, name)
    if isinstance(obj, types.ModuleType):
      assert obj.__name__.startswith(f'iclrjax.{family}.'), (family, name)
    else:
      assert callable(obj), (
          f'iclrjax.{family}.{name}: export functions, classes and modules')
    assert _own_doc(obj), f'iclrjax.{family}.{name} has no docstring'
  doc = pkg.__doc__ or ''
  assert 'Example:' in doc and '```python' in doc, (
      f'iclrjax.{family}: the docstring needs an Example: with a code block')
  assert '>>>' not in doc, f'iclrjax.{family}: write the example as a block'


@pytest.mark.parametrize('paper', papers.PAPERS, ids=lambda p: p.name)
def test_papers_modules_are_exported_and_cited(paper):
  pkg = importlib.import_module(f'iclrjax.{paper.family}')
  ident = paper.source.partition(' ')[2]
  if ident:
    assert ident in pkg.__doc__, (
        f'iclrjax.{paper.family}: the docstring does not cite {paper.source}')
  for module in paper.modules:
    parts = module.split('.')
    if len(parts) == 3:  # iclrjax.<family>.<module>
      owner = importlib.import_module('.'.join(parts[:2]))
      assert parts[2] in owner.__all__, f'{module} is not exported'


def test_importing_every_family_is_cheap():
  """A fresh interpreter: no optional extra imported, no JAX backend."""
  code = (
      'import importlib, json, sys\n'
      f'for f in {FAMILIES!r}:\n'
      '  importlib.import_module("iclrjax." + f)\n'
      'import jax\n'
      f'print(json.dumps({{"optional": [m for m in {OPTIONAL!r} '
      'if m in sys.modules], "backends": '
      'sorted(jax._src.xla_bridge._backends)}))\n')
  env = {**os.environ, 'JAX_PLATFORMS': 'cpu'}
  out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120,
                       check=False)
  assert out.returncode == 0, out.stderr[-3000:]
  got = json.loads(out.stdout.strip().splitlines()[-1])
  assert got == {'optional': [], 'backends': []}, got


def _example(family: str) -> str:
  doc = importlib.import_module(f'iclrjax.{family}').__doc__ or ''
  block = doc.split('```python', 1)[1].split('```', 1)[0]
  lines = block.splitlines()
  indent = min(len(l) - len(l.lstrip()) for l in lines if l.strip())
  return '\n'.join(l[indent:] for l in lines)


@pytest.mark.slow
@pytest.mark.parametrize('family', FAMILIES)
def test_family_example_runs(family):
  """The docstring example a reader copies first runs as written (slow: each
  compiles its small model; about a minute for all on 2 cores)."""
  env = {**os.environ, 'JAX_PLATFORMS': 'cpu'}
  out = subprocess.run([sys.executable, '-c', _example(family)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600,
                       check=False)
  assert out.returncode == 0, out.stderr[-3000:]
