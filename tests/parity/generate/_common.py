"""Shared by the fixture generators: command line, provenance, writing.

Generators run the papers' released code, not ours: each is a script run in
a throwaway environment that has the reference's own dependencies (torch,
transformers stubs, ...), never iclrjax. This module needs only NumPy.

  python tests/parity/generate/<paper>.py --ref CHECKOUT [--out DIR]

writes DIR/<paper>.npz (inputs and the reference's outputs) and
DIR/<paper>.json (repository, commit, command, package versions, date).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import pathlib
import platform
import subprocess
import sys
import types

import numpy as np

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / 'fixtures'


def cli(doc: str) -> argparse.Namespace:
  """--ref: a local checkout of the reference repository; --out: where the
  fixture goes (default tests/parity/fixtures)."""
  p = argparse.ArgumentParser(description=doc)
  p.add_argument('--ref', required=True, type=pathlib.Path,
                 help='local checkout of the reference repository')
  p.add_argument('--out', default=FIXTURES, type=pathlib.Path)
  args = p.parse_args()
  if not args.ref.is_dir():
    p.error(f'--ref {args.ref} is not a directory: clone the reference '
            'repository there first')
  return args


def commit_of(ref: pathlib.Path) -> str:
  """HEAD of the checkout (the fixture records it; pin it to regenerate)."""
  try:
    return subprocess.run(['git', '-C', str(ref), 'rev-parse', 'HEAD'],
                          check=True, capture_output=True,
                          text=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return 'unknown'


def versions(*names: str) -> dict[str, str]:
  out = {}
  for n in names:
    try:
      out[n] = importlib.metadata.version(n)
    except importlib.metadata.PackageNotFoundError:
      out[n] = 'absent'
  return out


def stub(name: str, **attrs) -> types.ModuleType:
  """Registers an empty module `name` (with `attrs`) in sys.modules: for
  imports the reference makes but the compared functions never call."""
  mod = types.ModuleType(name)
  mod.__dict__.update(attrs)
  sys.modules[name] = mod
  return mod


def add_path(ref: pathlib.Path, sub: str = '') -> None:
  """Makes the reference's modules importable (its own layout, unchanged)."""
  sys.path.insert(0, str(ref / sub) if sub else str(ref))


def write(name: str, arrays: dict[str, np.ndarray], *, args: argparse.Namespace,
          repo: str, files: list[str], what: str,
          packages: tuple[str, ...] = ('numpy',), notes: str = '') -> None:
  """Saves the arrays and their provenance; `repo` is owner/name on GitHub,
  `files` the reference files whose functions were run."""
  args.out.mkdir(parents=True, exist_ok=True)
  arrays = {k: np.asarray(v) for k, v in arrays.items()}
  np.savez_compressed(args.out / f'{name}.npz', **arrays)
  meta = dict(
      paper=name, repo=repo, commit=commit_of(args.ref), files=files,
      what=what, notes=notes,
      command=(f'python tests/parity/generate/{name}.py --ref <checkout of '
               f'{repo}>'),
      packages=versions(*packages), python=platform.python_version(),
      date=datetime.date.today().isoformat(),
      arrays={k: list(v.shape) for k, v in arrays.items()})
  (args.out / f'{name}.json').write_text(json.dumps(meta, indent=1) + '\n')
  print(f'wrote {args.out / name}.npz ({len(arrays)} arrays) and .json')
