"""experiments.report builds RESULTS.md from summaries."""

import json
import re

from experiments import report
from tests.conftest import run_module

# The columns RESULTS.md promises; a column that disappears fails the tests.
CLAIM_COLUMNS = ['experiment', 'claim', 'paper', 'holds', 'evidence',
                 'control', 'seeds', 'mesh (seeds x data)', 'backend',
                 'commit', 'wall (s)', 'command']
METRIC_COLUMNS = ['metric', 'mean ± ci95', 'seeds']
SHA = '0123456789abcdef0123456789abcdef01234567'


def _summary(name, holds, finished, **claim_fields):
  return {
      'experiment': name, 'config': {'seed': 0}, 'num_seeds': 5,
      'backend': 'cpu', 'devices': 8, 'device_kind': 'cpu', 'wall_s': 12.3,
      'mesh': {'seeds': 1, 'data': 8}, 'commit': SHA,
      'metrics': {
          'regret/a': {'mean': 1.0, 'ci95': 0.1, 'per_seed': [1.0] * 5},
          'regret/b': {'mean': 123.456, 'ci95': 7.89, 'per_seed': [2.0] * 5},
      },
      'claims': [{'claim': f'{name} beats | baseline', 'holds': holds,
                  'evidence': '1.0 < 2.0', **claim_fields}],
      'command': f'python -m experiments.{name}', 'finished': finished,
  }


def _old_summary(name):
  """A summary written before control, paper, commit and mesh existed."""
  s = _summary(name, True, '2025-01-01T00:00:00')
  del s['mesh'], s['commit']
  return s


def _split_row(line):
  cells = re.split(r'(?<!\\)\|', line.strip())
  assert cells[0] == '' and cells[-1] == '', line
  return [c.strip() for c in cells[1:-1]]


def _tables(text):
  """Every markdown table in `text`: (header, [row dict]), in order."""
  out, lines = [], text.splitlines()
  for i, line in enumerate(lines):
    if (line.startswith('|') and i + 1 < len(lines)
        and lines[i + 1].startswith('|---')
        and (i == 0 or not lines[i - 1].startswith('|'))):
      header = _split_row(line)
      rows = []
      for row in lines[i + 2:]:
        if not row.startswith('|'):
          break
        cells = _split_row(row)
        assert len(cells) == len(header), row
        rows.append(dict(zip(header, cells)))
      out.append((header, rows))
  return out


def test_report_from_two_fake_summaries(tmp_path):
  runs = tmp_path / 'runs'
  for name, holds in (('alpha', True), ('beta', False)):
    d = runs / name / '20260101-000000'
    d.mkdir(parents=True)
    (d / 'summary.json').write_text(json.dumps(_summary(
        name, holds, '2026-01-01T00:00:00', control=f'{name} ablation: 3.0',
        paper='0.27 bpd')))
  out = tmp_path / 'RESULTS.md'
  proc = run_module('experiments.report', '--nosite', f'--runs={runs}',
                    f'--out={out}',
                    f'--parity={tmp_path / "absent.json"}')
  assert proc.returncode == 0, proc.stderr
  (claims_header, claims), *metric_tables = _tables(out.read_text())
  assert claims_header == CLAIM_COLUMNS
  alpha, beta = claims
  assert alpha == {
      'experiment': 'alpha', 'claim': 'alpha beats \\| baseline',
      'paper': '0.27 bpd', 'holds': 'yes', 'evidence': '1.0 < 2.0',
      'control': 'alpha ablation: 3.0', 'seeds': '5',
      'mesh (seeds x data)': '1 x 8', 'backend': 'cpu x8 (cpu)',
      'commit': SHA[:10], 'wall (s)': '12',
      'command': '`python -m experiments.alpha`'}
  assert beta['holds'] == '**no**' and beta['control'] == 'beta ablation: 3.0'
  # One metrics table per run, under a heading with its command.
  assert len(metric_tables) == 2
  for header, rows in metric_tables:
    assert header == METRIC_COLUMNS
    assert rows == [
        {'metric': 'regret/a', 'mean ± ci95': '1 ± 0.1', 'seeds': '5'},
        {'metric': 'regret/b', 'mean ± ci95': '123.5 ± 7.9', 'seeds': '5'}]
  assert '### beta: `python -m experiments.beta`' in out.read_text()


def test_old_summaries_show_a_dash_for_what_they_lack():
  (header, (row,)), (_, metrics) = _tables(report.build_report(
      [_old_summary('alpha')]))
  assert header == CLAIM_COLUMNS
  for col in ('paper', 'control', 'mesh (seeds x data)', 'commit'):
    assert row[col] == '-', col
  assert metrics[0]['mean ± ci95'] == '1 ± 0.1'


def test_metric_without_a_confidence_interval_shows_its_mean():
  s = _summary('alpha', True, '2026-01-01T00:00:00')
  s['metrics'] = {'x': {'mean': 0.5, 'ci95': float('nan'),
                        'per_seed': [0.5, float('nan')]}}
  s['commit'] = 'abc1234-dirty'
  (_, (row,)), (_, metrics) = _tables(report.build_report([s]))
  assert row['commit'] == 'abc1234-dirty'
  assert metrics == [{'metric': 'x', 'mean ± ci95': '0.5', 'seeds': '2'}]


def test_newest_summary_of_a_config_wins():
  old = _summary('alpha', False, '2026-01-01T00:00:00')
  new = _summary('alpha', True, '2026-02-01T00:00:00')
  table = report.build_table(
      sorted([old, new], key=lambda s: s['finished'], reverse=True))
  assert table.count('| alpha |') == 1 and '| yes |' in table
  assert len(_tables(report.build_metrics([new, old]))) == 1


def test_parity_table_ranks_by_tolerance_and_separates_deliberate():
  from experiments import parity  # pylint: disable=g-import-not-at-top
  row = dict(paper='P (arXiv 1)', repo='o/r', commit='abcdef0123', what='w',
             date='2026-12-06', checks=[
                 dict(quantity='a', diff=1e-7, tol=1e-6, ok=True),
                 dict(quantity='b', diff=5e-6, tol=1e-5, ok=True),
                 dict(quantity='deliberate: x differs', diff=0.0, tol=0.0,
                      ok=True)])
  (_, rows), = _tables('# t\n\n' + parity.table([row]))
  assert rows[0]['max diff (matched)'] == '5.0e-06 (tol 1.0e-05, b)'
  assert rows[0]['deliberate differences (asserted)'] == 'x differs'
  assert rows[0]['reference (repo @ commit)'] == 'o/r @ abcdef0'
  row['checks'][0]['ok'] = False
  assert 'FAILS' in parity.table([row], compact=True)


def test_rejudge_applies_the_current_claim_rule_to_recorded_metrics(
    tmp_path, monkeypatch):
  # BWCache's recorded run, its claims wiped: the current rule re-judges
  # them from the per-seed metrics; the run's commit stays, the rule's is
  # added, and a dirty tree is refused.
  import pathlib  # pylint: disable=g-import-not-at-top
  import pytest  # pylint: disable=g-import-not-at-top
  from experiments import site  # pylint: disable=g-import-not-at-top
  from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
  src = pathlib.Path(site.ROOT) / 'results/bwcache/default/summary.json'
  s = json.loads(src.read_text())
  run_commit, n = s['commit'], len(s['claims'])
  s['claims'] = []
  dest = tmp_path / 'results/bwcache/default'
  dest.mkdir(parents=True)
  (dest / 'summary.json').write_text(json.dumps(s))
  monkeypatch.setattr(launch, 'code_commit', lambda: 'f' * 40)
  out = json.loads(site.rejudge('bwcache', 'default', root=tmp_path)
                   .read_text())
  assert len(out['claims']) == n and out['commit'] == run_commit
  assert out['claims_commit'] == 'f' * 40
  assert all(c['control'].endswith(('(fails)', '(passes)'))
             for c in out['claims'])
  assert '(claims: ffffffffff)' in site.short_commit(out)
  monkeypatch.setattr(launch, 'code_commit', lambda: 'f' * 40 + '-dirty')
  with pytest.raises(site.DirtyRunError):
    site.rejudge('bwcache', 'default', root=tmp_path)
