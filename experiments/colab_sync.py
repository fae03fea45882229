"""Writes the generated cells of every colabs/*.ipynb; executes them.

  python -m experiments.colab_sync            # rewrite the cells that differ
  python -m experiments.colab_sync --check    # list them and exit 1, change nothing
  python -m experiments.colab_sync --execute  # also run every notebook, saving its outputs
  python -m experiments.colab_sync --execute --only=fge,dlm

Generated cells: the install cell (below), and after it the recorded
results (`site.show(<name>)`: the default run's claims table and figures
from results/) with a note that the smoke run that follows is too small to
test the claims. Notebooks are committed with their outputs (the site
renders them without running them; tests/test_docs.py checks every code cell
has output); `--execute` runs each top to bottom at its smoke size.

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
import re
import sys
import tomllib

from absl import app
from absl import flags
import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPO_ENV = 'ICLRJAX_REPO'

# Flags are defined when this runs as a program (report.py, imported
# beside it by the tests, has its own --check).
_EXECUTE = _ONLY = _CHECK = None

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


_TAG = 'iclrjax'   # cell metadata key of the generated result cells
# Executed notebooks keep the figures that `plt.show()` draws (Agg would
# drop them).
INLINE_BACKEND = 'module://matplotlib_inline.backend_inline'

RECORDED_MD = """\
## Recorded results

The default config's run as recorded in `results/{name}/default/` (the
numbers and figures of the paper's page, docs/papers/{name}.md): each claim
with the paper's number where it states one, ours, the control that fails
it, and whether it holds."""

SMOKE_MD = """\
## Smoke run

The cells below run the **`smoke` config**: small enough for a free CPU in
minutes, and **too small to test the claims**, so the verdicts it prints
(often 'does not hold') say nothing about the paper; the recorded run above
does. Set `VARIANT = None` for the default config (its wall time is in the
table above) or `'paper'` for the paper's scale."""


def _generated(nb: nbformat.NotebookNode, kind: str):
  return next((i for i, c in enumerate(nb.cells)
               if c.metadata.get(_TAG) == kind), None)


def result_cells(name: str) -> list[nbformat.NotebookNode]:
  cells = [nbformat.v4.new_markdown_cell(RECORDED_MD.format(name=name)),
           nbformat.v4.new_code_cell(
               f"from experiments import site\nsite.show('{name}', repo=REPO)"),
           nbformat.v4.new_markdown_cell(SMOKE_MD)]
  for c, kind in zip(cells, ('recorded', 'show', 'smoke')):
    c.metadata[_TAG] = kind
  return cells


def claims_md(name: str, root: pathlib.Path = ROOT) -> str:
  """The claims the paper's experiment tests (from its recorded default run),
  and what the notebook shows."""
  import json  # pylint: disable=g-import-not-at-top
  path = root / 'results' / name / 'default' / 'summary.json'
  claims = (json.loads(path.read_text()).get('claims') or []
            if path.exists() else [])
  lines = ['**The claims tested** (each with a control that fails it):', '']
  lines += [f'{i}. {c["claim"]}' for i, c in enumerate(claims, 1)]
  if not claims:
    lines = ['No recorded run yet; `python -m experiments.report --record` '
             'adds one.']
  lines += ['', 'This notebook shows the recorded default run (its claims '
            'table and figures), then runs the method and the experiment at '
            'the `smoke` size.']
  return '\n'.join(lines)


# The opening cell's sentence on the default config's runtime, rewritten from
# the recorded run's wall time ("the default config (`VARIANT = None`...)
# took 26 min in its recorded run (CPU (2 cores), commit 35c4c53)").
_RUNTIME = re.compile(r'(the default config \(`VARIANT = None`[^)]*\))(.*?)'
                      r'(?=\.(?:\s|\Z))', re.S)  # to the sentence's end


def runtime_phrase(name: str, root: pathlib.Path = ROOT) -> str:
  """' took <wall time> in its recorded run (<hardware>, commit <c>)'."""
  import json  # pylint: disable=g-import-not-at-top
  from experiments import site  # pylint: disable=g-import-not-at-top
  path = root / 'results' / name / 'default' / 'summary.json'
  if not path.exists():
    return ' has no recorded run yet'
  s = json.loads(path.read_text())
  return (f' took {site.duration(s.get("wall_s"))} in its recorded run '
          f'({site.hardware(s)}, commit {site.short_commit(s)})')


def sync_notebook(nb: nbformat.NotebookNode, name: str, url: str) -> bool:
  """Rewrites `nb`'s generated cells in place; True if anything changed."""
  changed = False
  opening = nb.cells[0]
  text = _RUNTIME.sub(lambda m: m.group(1) + runtime_phrase(name),
                      opening.source, count=1)
  if text != opening.source:
    opening.source = text
    changed = True
  claims = nbformat.v4.new_markdown_cell(claims_md(name))
  claims.metadata[_TAG] = 'claims'
  i = _generated(nb, 'claims')
  if i is None:
    nb.cells.insert(1, claims)
    changed = True
  elif nb.cells[i].source != claims.source or i != 1:
    old = nb.cells.pop(i)
    old.source = claims.source
    nb.cells.insert(1, old)
    changed = True
  first = first_code_cell(nb)
  if first.source != install_cell(url):
    first.source = install_cell(url)
    changed = True
  want = result_cells(name)
  at = nb.cells.index(first) + 1
  for offset, cell in enumerate(want):
    i = _generated(nb, cell.metadata[_TAG])
    if i is None:
      nb.cells.insert(at + offset, cell)
      changed = True
    elif nb.cells[i].source != cell.source or i != at + offset:
      old = nb.cells.pop(i)
      old.source = cell.source
      nb.cells.insert(at + offset, old)
      changed = True
  return changed


def sync(root: str | pathlib.Path = ROOT, *, check: bool = False
         ) -> list[pathlib.Path]:
  """Notebooks under `root`/colabs whose generated cells differ; rewritten
  (their other cells untouched) unless `check`."""
  url = repository_url(pathlib.Path(root) / 'pyproject.toml')
  stale = []
  for path in notebooks(root):
    nb = nbformat.read(path, as_version=4)
    if not sync_notebook(nb, path.stem, url):
      continue
    stale.append(path)
    if not check:
      nbformat.write(nb, path)
  return stale


def scrub(nb: nbformat.NotebookNode, root: pathlib.Path = ROOT) -> None:
  """Drops this machine's paths from `nb`'s outputs (the repository root
  becomes '.', a Python installation's site-packages '<site-packages>')."""
  import re  # pylint: disable=g-import-not-at-top
  site_pkgs = re.compile(r'/[^\s\'"]*?/site-packages')
  def clean(text: str) -> str:
    return site_pkgs.sub('<site-packages>', text.replace(str(root), '.'))
  for cell in nb.cells:
    for out in cell.get('outputs', []):
      if 'text' in out:
        out['text'] = clean(out['text'])
      for key, value in out.get('data', {}).items():
        if key.startswith('text/') and isinstance(value, str):
          out['data'][key] = clean(value)
      if 'traceback' in out:
        out['traceback'] = [clean(t) for t in out['traceback']]


def execute(path: pathlib.Path, root: pathlib.Path = ROOT,
            timeout: int = 1800) -> None:
  """Runs a notebook top to bottom from the repository root and saves it
  with its outputs."""
  import os  # pylint: disable=g-import-not-at-top
  from nbclient import NotebookClient  # pylint: disable=g-import-not-at-top
  nb = nbformat.read(path, as_version=4)
  os.environ['MPLBACKEND'] = INLINE_BACKEND
  client = NotebookClient(nb, timeout=timeout, kernel_name='python3',
                          resources={'metadata': {'path': str(root)}})
  client.execute()
  scrub(nb, root)
  nbformat.write(nb, path)


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
    print(f'all notebooks install from {url!r} and show their results')
  if _EXECUTE.value:
    import time  # pylint: disable=g-import-not-at-top
    for path in notebooks():
      if _ONLY.value and path.stem not in _ONLY.value:
        continue
      t0 = time.perf_counter()
      execute(path)
      print(f'executed {path.relative_to(ROOT)} '
            f'({time.perf_counter() - t0:.0f} s)', flush=True)


def _define_flags() -> None:
  global _EXECUTE, _ONLY, _CHECK
  _EXECUTE = flags.DEFINE_bool(
      'execute', False, 'Run every notebook top to bottom (its smoke config) '
      'and save it with its outputs.')
  _ONLY = flags.DEFINE_list('only', [], 'With --execute: only these notebooks '
                            '(names without .ipynb).')
  _CHECK = flags.DEFINE_bool(
      'check', False, 'Only list the notebooks whose install cell differs from '
      'pyproject.toml (exit status 1 if any); write nothing.')


if __name__ == '__main__':
  _define_flags()
  app.run(main)
