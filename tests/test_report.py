"""experiments.report builds RESULTS.md from summaries."""

import json

from experiments import report
from tests.conftest import run_module


def _summary(name, holds, finished):
  return {
      'experiment': name, 'config': {'seed': 0}, 'num_seeds': 5,
      'backend': 'cpu', 'devices': 1, 'device_kind': 'cpu', 'wall_s': 12.3,
      'metrics': {'regret/a': {'mean': 1.0, 'ci95': 0.1, 'per_seed': [1.0]}},
      'claims': [{'claim': f'{name} beats | baseline', 'holds': holds,
                  'evidence': '1.0 < 2.0'}],
      'command': f'python -m experiments.{name}', 'finished': finished,
  }


def test_report_from_two_fake_summaries(tmp_path):
  runs = tmp_path / 'runs'
  for name, holds in (('alpha', True), ('beta', False)):
    d = runs / name / '20260101-000000'
    d.mkdir(parents=True)
    (d / 'summary.json').write_text(json.dumps(
        _summary(name, holds, '2026-01-01T00:00:00')))
  out = tmp_path / 'RESULTS.md'
  proc = run_module('experiments.report', f'--runs={runs}', f'--out={out}')
  assert proc.returncode == 0, proc.stderr
  text = out.read_text()
  lines = [l for l in text.splitlines() if l.startswith('| alpha') or
           l.startswith('| beta')]
  assert len(lines) == 2
  assert lines[0].startswith('| alpha | alpha beats \\| baseline | yes |')
  assert '| beta | beta beats \\| baseline | **no** | 1.0 < 2.0 | 5 |' in lines[1]
  assert 'cpu x1 (cpu)' in lines[0]
  assert '`python -m experiments.alpha`' in lines[0]


def test_newest_summary_of_a_config_wins():
  old = _summary('alpha', False, '2026-01-01T00:00:00')
  new = _summary('alpha', True, '2026-02-01T00:00:00')
  table = report.build_table(
      sorted([old, new], key=lambda s: s['finished'], reverse=True))
  assert table.count('| alpha |') == 1 and '| yes |' in table
