"""Every notebook in colabs/ runs top to bottom (at its smoke size)."""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import types

import nbformat
from nbclient import NotebookClient
import pytest

from experiments import colab_sync
from iclrjax.core import launch
from tests.conftest import ROOT, SMOKE_ROOT, smoke_launch

NOTEBOOKS = sorted((ROOT / 'colabs').glob('*.ipynb'))


@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
  monkeypatch.setenv('JAX_PLATFORMS', 'cpu')
  monkeypatch.setenv('ICLRJAX_QUIET', '1')
  monkeypatch.setenv('MPLBACKEND', colab_sync.INLINE_BACKEND)
  save_to = os.environ.get('ICLRJAX_SAVE_NOTEBOOKS')
  monkeypatch.delenv(launch.REUSE_ENV, raising=False)  # a saved one runs all
  if not save_to:
    # The notebook's smoke-size run is the launcher's smoke run of the same
    # code and config (tests/test_launchers.py checks it, once per test run):
    # `execute` reuses it (a dirty tree or another config runs afresh).
    _, status = smoke_launch(path.stem)
    if status['returncode'] == 0:
      monkeypatch.setenv(launch.REUSE_ENV, str(SMOKE_ROOT))
  nb = nbformat.read(path, as_version=4)
  client = NotebookClient(nb, timeout=900, kernel_name='python3',
                          resources={'metadata': {'path': str(ROOT)}})
  client.execute()
  if save_to:  # the suite's run doubles as `colab_sync --execute`
    colab_sync.scrub(nb, ROOT)
    nbformat.write(nb, pathlib.Path(save_to) / path.name)
  errors = [o for c in nb.cells if c.cell_type == 'code'
            for o in c.get('outputs', []) if o.get('output_type') == 'error']
  assert not errors, errors
  images = [o for c in nb.cells if c.cell_type == 'code'
            for o in c.get('outputs', []) if 'image/png' in o.get('data', {})]
  assert images, 'the notebook should show its plots'


def test_every_notebook_installs_on_colab():
  url = colab_sync.repository_url()
  assert url.startswith('https://'), (
      'pyproject.toml needs [project.urls] Repository, the URL the notebooks '
      'install from')
  cell = colab_sync.install_cell(url)
  for path in NOTEBOOKS:
    first_code = colab_sync.first_code_cell(nbformat.read(path, as_version=4))
    assert 'google.colab' in first_code.source and 'pip' in first_code.source
    assert repr(url) in first_code.source, (
        f'{path.name} does not install from {url}: run '
        '`python -m experiments.colab_sync`')
    assert first_code.source == cell, (
        f'{path.name}: install cell differs from pyproject.toml: run '
        '`python -m experiments.colab_sync`')


def test_no_notebook_silences_the_progress_bar():
  for path in NOTEBOOKS:
    nb = nbformat.read(path, as_version=4)
    assert not any('ICLRJAX_QUIET' in c.source for c in nb.cells), path.name
    assert 'Runtime on a 2-core CPU' in nb.cells[0].source, path.name


def _run_install_cell(monkeypatch, url, on_colab=True):
  """Executes the install cell as Colab would; returns the pip commands."""
  calls = []
  if on_colab:
    monkeypatch.setitem(sys.modules, 'google.colab',
                        types.ModuleType('google.colab'))
  else:
    monkeypatch.delitem(sys.modules, 'google.colab', raising=False)
  find_spec = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: (
      None if name == 'iclrjax' else find_spec(name, *a)))
  monkeypatch.setattr(subprocess, 'run',
                      lambda cmd, **kw: calls.append(list(cmd)))
  exec(colab_sync.install_cell(url), {})  # pylint: disable=exec-used
  return calls


def test_install_cell_installs_the_repository_or_says_what_to_do(monkeypatch):
  monkeypatch.delenv(colab_sync.REPO_ENV, raising=False)
  url = 'https://github.com/someone/iclrjax'
  (cmd,) = _run_install_cell(monkeypatch, url)
  assert cmd[-1] == f'iclrjax[all] @ git+{url}' and cmd[1:4] == ['-m', 'pip', 'install']
  assert not _run_install_cell(monkeypatch, url, on_colab=False)
  # ICLRJAX_REPO overrides the generated URL.
  monkeypatch.setenv(colab_sync.REPO_ENV, 'https://github.com/fork/iclrjax')
  (cmd,) = _run_install_cell(monkeypatch, url)
  assert cmd[-1] == 'iclrjax[all] @ git+https://github.com/fork/iclrjax'
  # No URL anywhere: one line saying what to set, and no pip.
  monkeypatch.delenv(colab_sync.REPO_ENV)
  with pytest.raises(RuntimeError) as e:
    _run_install_cell(monkeypatch, '')
  msg = str(e.value)
  assert '\n' not in msg and colab_sync.REPO_ENV in msg and 'fork' in msg


def _other_cells(nb):
  first = colab_sync.first_code_cell(nb)
  return [c.source for c in nb.cells if c is not first]


def test_colab_sync_rewrites_only_the_install_cell(tmp_path):
  (tmp_path / 'colabs').mkdir()
  src = NOTEBOOKS[0]
  dst = tmp_path / 'colabs' / src.name
  shutil.copy(src, dst)
  (tmp_path / 'pyproject.toml').write_text(
      '[project]\nname = "x"\n[project.urls]\n'
      'Repository = "https://example.org/fork/iclrjax"\n')
  assert colab_sync.sync(tmp_path, check=True) == [dst]
  assert dst.read_text() == src.read_text()  # --check writes nothing.
  assert colab_sync.sync(tmp_path) == [dst]
  old, new = (nbformat.read(p, as_version=4) for p in (src, dst))
  first = colab_sync.first_code_cell(new)
  assert "'https://example.org/fork/iclrjax'" in first.source
  assert _other_cells(new) == _other_cells(old)
  assert colab_sync.sync(tmp_path) == []
  # pyproject without a URL: cells that tell Colab users to set ICLRJAX_REPO.
  (tmp_path / 'pyproject.toml').write_text('[project]\nname = "x"\n')
  assert colab_sync.sync(tmp_path) == [dst]
  assert "or ''" in colab_sync.first_code_cell(
      nbformat.read(dst, as_version=4)).source
