"""Gathers every summary.json under --runs into RESULTS.md, and writes the
generated parts of README.md and the documentation site (experiments/site.py).

  python -m experiments.report                 # results/ -> RESULTS.md, docs
  python -m experiments.report --runs=runs --nosite --out=/tmp/local.md  # local runs
  python -m experiments.report --record=runs/fge/20261206-1200 --variant=default
  python -m experiments.report --check         # exit 1 if a generated file is stale
  python -m experiments.report --rejudge=bwcache/default  # a revised claim rule

`--record` first copies a finished run (summary.json, plots/*.png) into
results/<experiment>/<variant>/; a run from a tree with uncommitted edits is
refused, and so is any such record under results/.

RESULTS.md has two parts. The claims table has one row per claim: experiment,
the claim, the paper's own number (a claim's optional `paper` field), whether
it holds, the evidence, the control that would fail it, seeds, the device mesh
(seeds x data), backend (with device kind and count), the commit the run came
from, wall time and the command that reproduces it. Then one metrics table per
run: every metric's mean +- 95% confidence half-width over seeds, and the
number of seeds. Fields that older summaries lack (`control`, `paper`,
`commit`, `mesh`) show as '-'. The newest summary per (experiment, config)
wins when a config ran twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import json
import math
import pathlib
from typing import Any

from absl import app
from absl import flags

_RUNS = flags.DEFINE_multi_string(
    'runs', ['results'],
    'Directories searched for summary.json (results/ holds the committed '
    'summaries that RESULTS.md is built from).')
_OUT = flags.DEFINE_string('out', 'RESULTS.md', 'Markdown file to write.')
_CHECK = flags.DEFINE_bool(
    'check', False, 'Write nothing; exit 1 listing the generated files '
    '(RESULTS.md, README.md table, docs/) that differ from results/.')
_RECORD = flags.DEFINE_string(
    'record', None, 'A finished run\'s workdir to copy into '
    'results/<experiment>/<variant>/ before generating.')
_SITE = flags.DEFINE_bool(
    'site', True, 'Also write the results table (README.md, the top of '
    'RESULTS.md) and docs/ from results/; --nosite writes only --out.')
_VARIANT = flags.DEFINE_string('variant', 'default',
                               'The variant name --record files the run as.')
_REJUDGE = flags.DEFINE_multi_string(
    'rejudge', [], '<experiment>/<variant> of results/ whose claims the '
    'current (committed) claim rule re-judges from the recorded metrics '
    'before generating (`site.rejudge`).')
_PARITY = flags.DEFINE_string(
    'parity', 'results/parity.json',
    'The parity table of `python -m experiments.parity` (skipped if absent).')


def find_summaries(root: str | pathlib.Path) -> list[dict[str, Any]]:
  """Loads every summary.json below `root`, newest first."""
  out = []
  for path in sorted(pathlib.Path(root).rglob('summary.json')):
    try:
      with path.open() as f:
        s = json.load(f)
    except (OSError, json.JSONDecodeError):
      continue
    s.setdefault('_path', str(path))
    out.append(s)
  out.sort(key=lambda s: s.get('finished', ''), reverse=True)
  return out


CLAIM_COLUMNS = ('experiment', 'claim', 'paper', 'holds', 'evidence',
                 'control', 'seeds', 'mesh (seeds x data)', 'backend',
                 'commit', 'wall (s)', 'command')
METRIC_COLUMNS = ('metric', 'mean ± ci95', 'seeds')
_MISSING = '-'


def _cell(text: Any) -> str:
  return str(text).replace('|', '\\|').replace('\n', ' ')


def _table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
  lines = ['| ' + ' | '.join(columns) + ' |',
           '|' + '---|' * len(columns)]
  lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
  return '\n'.join(lines)


def _backend(s: dict[str, Any]) -> str:
  kind = s.get('device_kind')
  text = f"{s.get('backend', '?')} x{s.get('devices', '?')}"
  return f'{text} ({kind})' if kind else text


def _mesh(s: dict[str, Any]) -> str:
  mesh = s.get('mesh')
  if not isinstance(mesh, dict) or not {'seeds', 'data'} <= mesh.keys():
    return _MISSING
  return f"{mesh['seeds']} x {mesh['data']}"


def _commit(s: dict[str, Any]) -> str:
  """The run's commit as every generated page writes it (`site.short_commit`)."""
  from experiments import site  # pylint: disable=g-import-not-at-top
  return site.short_commit(s)


def _number(x: Any, spec: str) -> str:
  if isinstance(x, (int, float)) and not isinstance(x, bool):
    return format(x, spec)
  return _MISSING


def _mean_ci(m: dict[str, Any]) -> str:
  mean, ci = m.get('mean'), m.get('ci95')
  text = _number(mean, '.4g')
  if isinstance(ci, (int, float)) and math.isfinite(ci) and text != _MISSING:
    text += f' ± {ci:.2g}'
  return text


def _dedupe(summaries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
  seen, out = set(), []
  for s in summaries:
    key = (s.get('experiment'), json.dumps(s.get('config'), sort_keys=True))
    if key in seen:
      continue
    seen.add(key)
    out.append(s)
  return out


def _runs(summaries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """The newest summary per config, ordered by experiment then command."""
  return sorted(_dedupe(summaries),
                key=lambda s: (s.get('experiment', ''), s.get('command', '')))


def build_table(summaries: Sequence[dict[str, Any]]) -> str:
  """The markdown claims table of RESULTS.md (`CLAIM_COLUMNS`)."""
  rows = []
  for s in _runs(summaries):
    claims = s.get('claims') or [
        {'claim': '(no claim recorded)', 'holds': None, 'evidence': ''}]
    for c in claims:
      holds = {True: 'yes', False: '**no**', None: _MISSING}[c.get('holds')]
      rows.append([
          _cell(s.get('experiment', '?')),
          _cell(c.get('claim', '')),
          _cell(c.get('paper') or _MISSING),
          holds,
          _cell(c.get('evidence', '')),
          _cell(c.get('control') or _MISSING),
          _cell(s.get('num_seeds', '?')),
          _mesh(s),
          _cell(_backend(s)),
          _cell(_commit(s)),
          _number(s.get('wall_s'), '.0f'),
          f"`{_cell(s.get('command', ''))}`",
      ])
  return _table(CLAIM_COLUMNS, rows)


def build_metrics(summaries: Sequence[dict[str, Any]]) -> str:
  """One markdown table per run (`METRIC_COLUMNS`), under a heading naming the
  experiment and its command."""
  sections = []
  for s in _runs(summaries):
    metrics = s.get('metrics') or {}
    rows = [[_cell(k), _mean_ci(m if isinstance(m, dict) else {}),
             _cell(len(m['per_seed']) if isinstance(m, dict) and
                   'per_seed' in m else s.get('num_seeds', '?'))]
            for k, m in sorted(metrics.items())]
    heading = (f"### {_cell(s.get('experiment', '?'))}: "
               f"`{_cell(s.get('command', ''))}`")
    body = _table(METRIC_COLUMNS, rows) if rows else '(no metrics recorded)'
    sections.append(f'{heading}\n\n{body}')
  return '\n\n'.join(sections)


def build_report(summaries: Sequence[dict[str, Any]], parity: str = '',
                 table: str = '') -> str:
  """RESULTS.md: the results `table` (`site.results_table`), claims,
  `parity` (`parity_section`), metrics."""
  head = ('# Results\n\n' + (table + '\n\n' if table else '') +
          '## Every claim\n\nGenerated by `python -m experiments.report` from every '
          '`summary.json` under the runs directories (runs/ and the committed '
          'results/). A claim marked **no** did '
          'not reproduce at the recorded scale; its evidence gives the '
          'numbers, its control what would fail it, and `paper` the '
          "paper's own number where it states one. '-': not recorded by that "
          'run.\n\n')
  metrics_head = ('\n\n## Metrics\n\nPer run: the mean over seeds ± the '
                  'half-width of its 95% confidence interval (Student t; 0 for '
                  'one seed), and the number of seeds.\n\n')
  return (head + build_table(summaries) + parity +
          metrics_head + build_metrics(summaries) + '\n')


def parity_section(path: str | pathlib.Path) -> str:
  """The parity table of `experiments.parity` (our code against the papers'
  released code on the same inputs), if it was written."""
  path = pathlib.Path(path)
  if not path.exists():
    return ''
  from experiments import parity  # pylint: disable=g-import-not-at-top
  return ('\n\n## Parity with the released code\n\nFrom `python -m '
          'experiments.parity` (tests/parity/): each fixture holds the '
          "outputs of the paper's released code on inputs drawn with NumPy; "
          'our code runs on the same inputs. Max diff is the largest '
          'difference (relative to its tolerance) among the quantities that '
          'must match; deliberate differences are asserted exactly by the '
          'tests.\n\n' + parity.table(json.loads(path.read_text())))


def main(argv):
  del argv
  from experiments import site  # pylint: disable=g-import-not-at-top
  if _RECORD.value:
    dest = site.record(_RECORD.value, _VARIANT.value)
    print(f'Recorded {_RECORD.value} as {dest.relative_to(site.ROOT)}')
  for spec in _REJUDGE.value:
    dest = site.rejudge(*spec.split('/', 1))
    print(f'Re-judged the claims of {dest.relative_to(site.ROOT)}')
  try:
    results = site.load_results() if _SITE.value else {}
  except site.DirtyRunError as e:
    raise SystemExit(f'error: {e}') from e
  summaries = []
  for root in _RUNS.value:
    for s in find_summaries(root):
      if str(s.get('commit', '')).endswith('-dirty'):
        print(f"skipped {s['_path']}: ran from a tree with uncommitted edits")
        continue
      summaries.append(s)
  summaries.sort(key=lambda s: s.get('finished', ''), reverse=True)
  out = pathlib.Path(_OUT.value)
  text = build_report(summaries, parity_section(_PARITY.value),
                      site.results_table(results, page_prefix='docs/papers/')
                      if _SITE.value else '')
  if _CHECK.value:
    stale = site.check_all(results) if _SITE.value else []
    if _SITE.value:
      from experiments import colab_sync  # pylint: disable=g-import-not-at-top
      stale += [str(p.relative_to(site.ROOT))
                for p in colab_sync.sync(check=True)]
    if not out.exists() or out.read_text() != text:
      stale.append(str(_OUT.value))
    if stale:
      print('stale (run `python -m experiments.report`): ' + ', '.join(stale))
      raise SystemExit(1)
    print('every generated file is current')
    return
  out.write_text(text)
  changed = site.write_all(results) if _SITE.value else []
  if _SITE.value:  # the notebooks' claims cells follow results/ too
    from experiments import colab_sync  # pylint: disable=g-import-not-at-top
    changed += [str(p.relative_to(site.ROOT)) for p in colab_sync.sync()]
  print(f'Wrote {_OUT.value} from {len(summaries)} summaries'
        + (f"; updated {', '.join(changed)}" if changed else '') + '.')


if __name__ == '__main__':
  app.run(main)
