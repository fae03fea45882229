"""The parity table: our code against the papers' released code.

  python -m experiments.parity          # -> results/parity.json, prints the table

Runs `checks()` of every `tests/parity/test_<paper>.py` (each compares our
code with a fixture made by running the paper's released code on the same
inputs; `tests/parity/generate/<paper>.py` makes it) and writes, per paper,
the reference (repository at commit), what is compared, the largest
difference among the quantities that must match, the differences that are
deliberate (asserted exactly by the test) and the fixture's date.
`experiments.report` puts the table into RESULTS.md.
Run from the repository root (the tests are not part of the package).
"""

from __future__ import annotations

import importlib
import json
import pathlib
from collections.abc import Sequence
from typing import Any

from absl import app
from absl import flags

_JSON = flags.DEFINE_string('json', 'results/parity.json',
                           'Where the table (JSON) goes.')
PARITY_DIR = pathlib.Path('tests') / 'parity'
DELIBERATE = 'deliberate:'
COLUMNS = ('paper', 'reference (repo @ commit)', 'compared',
           'max diff (matched)', 'deliberate differences (asserted)',
           'fixture date')


def gather(root: pathlib.Path = PARITY_DIR) -> list[dict[str, Any]]:
  """One row per parity module: provenance from the fixture's JSON and the
  checks run now."""
  rows = []
  for path in sorted(root.glob('test_*.py')):
    mod = importlib.import_module(
        '.'.join(path.with_suffix('').parts))
    common = importlib.import_module('tests.parity.common')
    meta = common.load(mod.FIXTURE)[1]
    checks = mod.checks()
    rows.append(dict(
        paper=mod.PAPER, fixture=mod.FIXTURE, repo=meta['repo'],
        commit=meta['commit'], files=meta.get('files', []),
        what=meta.get('what', ''), date=meta.get('date', ''),
        checks=[dict(quantity=c.quantity, diff=float(c.diff), tol=float(c.tol),
                     ok=bool(c.ok))
                for c in checks]))
  return rows


def _ratio(c: dict[str, Any]) -> float:
  """diff / tol (an exact check, tol 0, ranks by its diff alone)."""
  return c['diff'] / c['tol'] if c['tol'] else (float('inf') if c['diff']
                                                 else 0.0)


def _fmt(x: float) -> str:
  return f'{x:.1e}' if x else '0'


def table(rows: Sequence[dict[str, Any]], compact: bool = False) -> str:
  """The markdown table of `gather`'s rows; `compact` (README) gives
  counts instead of the compared quantities and deliberate differences."""
  lines = ['| ' + ' | '.join(COLUMNS) + ' |', '|' + '---|' * len(COLUMNS)]
  for r in rows:
    matched = [c for c in r['checks']
               if not c['quantity'].startswith(DELIBERATE)]
    deliberate = [c['quantity'][len(DELIBERATE):].strip()
                  for c in r['checks'] if c['quantity'].startswith(DELIBERATE)]
    worst = max(matched, key=_ratio, default=None)
    diff = (f"{_fmt(worst['diff'])} (tol {_fmt(worst['tol'])}"
            + ('' if compact else f", {worst['quantity']}") + ')'
            if worst else '-')
    if any(not c['ok'] for c in r['checks']):
      diff += ' FAILS'
    what = f"{len(matched)} quantities"
    if compact:
      cells = (r['paper'].split(' (arXiv')[0], f"{r['repo']} @ "
               f"{r['commit'][:7]}", what, diff, str(len(deliberate)),
               r['date'])
    else:
      cells = (r['paper'], f"{r['repo']} @ {r['commit'][:7]}",
               f"{what}: {r['what']}", diff, '; '.join(deliberate) or 'none',
               r['date'])
    lines.append('| ' + ' | '.join(str(c).replace('|', '\\|') for c in cells)
                 + ' |')
  return '\n'.join(lines)


def main(argv):
  del argv
  rows = gather()
  out = pathlib.Path(_JSON.value)
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text(json.dumps(rows, indent=1) + '\n')
  print(table(rows, compact=True))
  print(f'\nWrote {out} ({len(rows)} papers).')


if __name__ == '__main__':
  app.run(main)
