"""First contact: the documentation site builds, the generated tables and
pages agree with results/, and the repository holds no machine's paths."""

import json
import os
import pathlib
import re
import subprocess
import sys

import nbformat
import pytest

from experiments import colab_sync
from experiments import papers
from experiments import site
from tests.conftest import ROOT


def test_mkdocs_build_strict(tmp_path):
  """A broken link, reference or page fails here (offline)."""
  out = subprocess.run(
      [sys.executable, '-m', 'mkdocs', 'build', '--strict', '--site-dir',
       str(tmp_path / 'site')], cwd=ROOT, capture_output=True, text=True,
      timeout=600, env={**os.environ, 'NO_MKDOCS_2_WARNING': '1'})
  assert out.returncode == 0, out.stderr[-4000:]


def test_generated_parts_are_current():
  results = site.load_results()  # raises on a run from a '-dirty' tree
  stale = site.check_all(results)
  stale += [p.name for p in colab_sync.sync(check=True)]
  assert not stale, (f'stale: {stale}; run `python -m experiments.report`')
  table = site.results_table(results, page_prefix='docs/papers/')
  assert table in (ROOT / 'RESULTS.md').read_text()[:len(table) + 2000]


def test_readme_is_short():
  words = len((ROOT / 'README.md').read_text().split())
  assert words <= 2200, f'README.md has {words} words'


_MACHINE_PATH = re.compile(r'/work/|/root/|/home/\w|/Users/\w|shared/papers')
# The paper notes the team read are not in the repository: cite the paper.
_NOTES = re.compile(r'\b(gen|llm|rl|seq|stats)\.md\b|(paper|paper\'s|'
                    r'secondary|our) notes\b')


def test_no_machine_path_in_the_repository():
  files = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
  bad = []
  for rel in files:
    path = ROOT / rel
    if path.suffix in ('.png', '.npz') or not path.is_file():
      continue
    try:
      text = path.read_text()
    except UnicodeDecodeError:
      continue
    for i, line in enumerate(text.splitlines(), 1):
      if (_MACHINE_PATH.search(line) or _NOTES.search(line)) and (
          rel != 'tests/test_docs.py'):
        bad.append(f'{rel}:{i}: {line.strip()[:120]}')
  assert not bad, '\n'.join(bad[:20])


def test_every_launcher_is_in_the_paper_registry():
  from tests.test_launchers import NAMES  # pylint: disable=g-import-not-at-top
  assert set(NAMES) == set(papers.BY_NAME), (
      set(NAMES) ^ set(papers.BY_NAME))


def test_every_parity_test_is_named_on_its_papers_page():
  named = [t for p in papers.PAPERS for t in p.parity]
  files = sorted(f.name for f in (ROOT / 'tests' / 'parity').glob('test_*.py'))
  assert sorted(named) == files, set(named) ^ set(files)
  for p in papers.PAPERS:
    assert bool(p.references) <= bool(p.parity), p.name
    assert p.code or p.code_note or not p.parity or p.references, p.name


# Runs recorded before figures were tracked, whose reruns are still to come
# (issue 47); each rerun removes its <name>/<variant> here.
AWAITING_FIGURES = {
    'dcd_ssm/gap'}


def test_every_paper_has_a_page_and_every_recorded_run_its_figures():
  results = site.load_results()
  for p in papers.PAPERS:
    page = (ROOT / 'docs' / 'papers' / f'{p.name}.md').read_text()
    assert site.BEGIN.format(key='results') in page, p.name
    assert '(What the paper claims' not in page, (
        f'docs/papers/{p.name}.md: the template text is still there')
  for name, runs in results.items():
    assert name in papers.BY_NAME, f'results/{name}: not in experiments/papers.py'
    for variant, r in runs.items():
      key = f'{name}/{variant}'
      if key in AWAITING_FIGURES:
        assert not r.figures, f'{key} has its figures: drop it from AWAITING_FIGURES'
      else:
        assert r.figures, f'results/{key} has no plots/*.png'
    for r in runs.values():
      for fig in r.figures:
        assert fig.stat().st_size <= site.MAX_FIGURE_BYTES * 1.05, fig


def test_every_stale_mark_names_a_recorded_run_and_shows():
  """site.STALE marks runs whose code changed; a rerun drops its entry."""
  results = site.load_results()
  for key in site.STALE:
    name, variant = key.split('/')
    assert variant in results.get(name, {}), f'{key}: no such recorded run'
    run = results[name][variant]
    paper = next(p for p in papers.PAPERS if p.name == name)
    assert run.stale and '**Stale:**' in site.results_section(
        paper, results[name])


def test_every_notebook_is_committed_with_outputs():
  """Executed top to bottom (every code cell has an execution count), the
  recorded results shown, and at least one figure in the outputs."""
  for path in sorted((ROOT / 'colabs').glob('*.ipynb')):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == 'code']
    fix = f'{path.name}: run `python -m experiments.colab_sync --execute`'
    assert all(c.get('execution_count') for c in code), fix
    show = [c for c in code if 'site.show(' in c.source]
    assert show and show[0].get('outputs'), (
        f'{path.name} does not show the recorded results')
    # ... the run recorded now, with its figures.
    summary = ROOT / 'results' / path.stem / 'default' / 'summary.json'
    if summary.exists():
      run = site.Run(path.stem, 'default',
                     json.loads(summary.read_text()), summary.parent)
      shown = ''.join(str(o.get('data', {}).get('text/markdown', ''))
                      for o in show[0].outputs)
      h, n = run.held
      assert f'`{site.short_commit(run.summary)}`' in shown and (
          f'{h} of {n} claims hold' in shown), (
              f'{path.name} shows an older recorded run: {fix}')
      images = sum('image/png' in o.get('data', {}) for o in show[0].outputs)
      assert images == len(run.figures), (path.name, images, fix)
    for c in code:  # every plot drawn in the notebook is in its outputs
      if 'plt.show()' in c.source:
        assert any('image/png' in o.get('data', {}) for o in c.outputs), (
            f'{path.name}: a cell calling plt.show() has no image; {fix}')
    assert any('image/png' in o.get('data', {})
               for c in code for o in c.get('outputs', [])), fix
