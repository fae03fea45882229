"""First contact: the documentation site builds, the generated tables and
pages agree with results/, and the repository holds no machine's paths."""

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
      if _MACHINE_PATH.search(line) and rel != 'tests/test_docs.py':
        bad.append(f'{rel}:{i}: {line.strip()[:120]}')
  assert not bad, '\n'.join(bad[:20])


def test_every_launcher_is_in_the_paper_registry():
  from tests.test_launchers import NAMES  # pylint: disable=g-import-not-at-top
  assert set(NAMES) == set(papers.BY_NAME), (
      set(NAMES) ^ set(papers.BY_NAME))
