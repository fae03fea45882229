"""Writes the Colab install cell of every colabs/*.ipynb from pyproject.toml.

  python -m experiments.colab_sync            # rewrite the cells that differ
  python -m experiments.colab_sync --check    # list them and exit 1, change nothing

Colab has no checkout, so the first code cell of each notebook holds the
repository URL as a literal. Its one source is `[project.urls] Repository` in
pyproject.toml: a fork edits that URL and runs this command, and
tests/test_notebooks.py fails while any notebook's cell differs from what this
writes. At run time the environment variable ICLRJAX_REPO overrides the
literal, and an empty URL stops the cell with a one-line error saying what to
do. The cell installs nothing when iclrjax is already importable (a fork
installed by hand, or a rerun of the cell).
"""

from __future__ import annotations

import pathlib
import sys
import tomllib

from absl import app
from absl import flags
import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPO_ENV = 'ICLRJAX_REPO'

_CHECK = flags.DEFINE_bool(
    'check', False, 'Only list the notebooks whose install cell differs from '
    'pyproject.toml (exit status 1 if any); write nothing.')

_CELL = '''\
# Installs iclrjax (all extras) when this notebook runs on Colab (elsewhere: pip install -e . in a checkout).
# REPO is written by `python -m experiments.colab_sync` from [project.urls] Repository in
# pyproject.toml; set the environment variable {env} to install from a fork instead.
import importlib.util, os, subprocess, sys
REPO = os.environ.get('{env}') or {url!r}
if 'google.colab' in sys.modules and importlib.util.find_spec('iclrjax') is None:
  if not REPO:
    raise RuntimeError('No repository to install iclrjax from: run `%env {env}=https://github.com/<you>/iclrjax` (or `!pip install` your fork) and rerun this cell.')
  subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', f'iclrjax[all] @ git+{{REPO}}'], check=True)'''


def repository_url(pyproject: str | pathlib.Path = ROOT / 'pyproject.toml'
                   ) -> str:
  """`[project.urls] Repository` of pyproject.toml ('' when not set)."""
  with open(pyproject, 'rb') as f:
    project = tomllib.load(f).get('project', {})
  return str(project.get('urls', {}).get('Repository', '')).strip()


def install_cell(url: str) -> str:
  """The source of the first code cell of every notebook, installing `url`."""
  return _CELL.format(env=REPO_ENV, url=url)


def notebooks(root: str | pathlib.Path = ROOT) -> list[pathlib.Path]:
  return sorted((pathlib.Path(root) / 'colabs').glob('*.ipynb'))


def first_code_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
  return next(c for c in nb.cells if c.cell_type == 'code')


def sync(root: str | pathlib.Path = ROOT, *, check: bool = False
         ) -> list[pathlib.Path]:
  """Notebooks under `root`/colabs whose install cell differs; rewritten
  (their other cells untouched) unless `check`."""
  cell = install_cell(repository_url(pathlib.Path(root) / 'pyproject.toml'))
  stale = []
  for path in notebooks(root):
    nb = nbformat.read(path, as_version=4)
    first = first_code_cell(nb)
    if first.source == cell:
      continue
    stale.append(path)
    if not check:
      first.source = cell
      nbformat.write(nb, path)
  return stale


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  url = repository_url()
  if not url:
    print('warning: pyproject.toml has no [project.urls] Repository; the '
          f'notebooks will ask Colab users to set {REPO_ENV}.',
          file=sys.stderr)
  stale = sync(check=_CHECK.value)
  for path in stale:
    print(f"{'differs' if _CHECK.value else 'rewrote'}: "
          f'{path.relative_to(ROOT)}')
  if _CHECK.value and stale:
    print('run `python -m experiments.colab_sync` to update them',
          file=sys.stderr)
    sys.exit(1)
  if not stale:
    print(f'all notebooks install from {url!r}')


if __name__ == '__main__':
  app.run(main)
