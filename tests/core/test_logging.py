"""metrics.jsonl, TensorBoard events, progress and CIs."""

import logging
import math

import numpy as np
import scipy.stats

from iclrjax.core import logging as log_lib


def test_mean_ci95_matches_t_interval():
  x = np.array([1.0, 2.0, 4.0, 7.0])
  mean, half = log_lib.mean_ci95(x)
  lo, hi = scipy.stats.t.interval(0.95, len(x) - 1, loc=x.mean(),
                                  scale=scipy.stats.sem(x))
  assert math.isclose(mean, 3.5)
  assert math.isclose(half, (hi - lo) / 2, rel_tol=1e-12)
  assert log_lib.mean_ci95([5.0]) == (5.0, 0.0)
  s = log_lib.summarize(x)
  assert s['per_seed'] == [1.0, 2.0, 4.0, 7.0]


def test_writer_rows_truncate_and_torn_line(tmp_path):
  w = log_lib.MetricWriter(tmp_path)
  w.write_rows([10, 20], {'loss': np.array([[1.0, 0.5], [2.0, 1.0]])})
  w.write(30, {'loss': np.array([0.1, 0.2]), 'lr': 0.01})
  w.flush()
  rows = log_lib.read_metrics(tmp_path)
  assert rows == [{'step': 10, 'loss': [1.0, 2.0]},
                  {'step': 20, 'loss': [0.5, 1.0]},
                  {'step': 30, 'loss': [0.1, 0.2], 'lr': 0.01}]
  w.truncate(20)
  assert [r['step'] for r in log_lib.read_metrics(tmp_path)] == [10, 20]
  with open(tmp_path / 'metrics.jsonl', 'a') as f:
    f.write('{"step": 30, "lo')  # what a kill mid-write leaves
  assert [r['step'] for r in log_lib.read_metrics(tmp_path)] == [10, 20]
  w.close()
  # TensorBoard holds the mean over seeds of the rows that survived the
  # truncate (rewritten from metrics.jsonl), read back as TensorBoard does.
  assert _tb_scalars(tmp_path / 'tensorboard') == {
      'loss': [(10, 1.5), (20, 0.75)]}


def test_tensorboard_leaves_out_undefined_values(tmp_path):
  """NaN (a step without the value) and inf stay in metrics.jsonl;
  TensorBoard averages the seeds with a finite value and writes nothing
  where none has one."""
  w = log_lib.MetricWriter(tmp_path)
  w.write_rows([1, 2, 3], {'pick': np.array([[np.nan, 0.5, np.nan],
                                             [-np.inf, 1.5, 4.0]])})
  w.close()
  assert math.isnan(log_lib.read_metrics(tmp_path)[0]['pick'][0])
  assert _tb_scalars(tmp_path / 'tensorboard') == {'pick': [(2, 1.0),
                                                            (3, 4.0)]}


def _tb_scalars(tb_dir):
  from tensorboard.backend.event_processing import event_accumulator
  acc = event_accumulator.EventAccumulator(str(tb_dir))
  acc.Reload()
  return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
          for tag in acc.Tags()['scalars']}


def test_progress_quiet_logs(caplog):
  caplog.set_level(logging.INFO)
  p = log_lib.Progress(10, quiet=True, log_every_s=0.0, desc='x')
  p.update(5, {'loss': 0.5})
  p.update(5)
  p.close()
  lines = [r.getMessage() for r in caplog.records]
  assert len(lines) == 2, lines
  assert lines[0].startswith('x step 5/10 (') and lines[0].endswith(
      'loss=0.5'), lines[0]
  assert lines[1].startswith('x step 10/10 (') and 'ETA 0s' in lines[1]


def test_progress_quiet_rate_limits_to_the_last_step(caplog):
  caplog.set_level(logging.INFO)
  p = log_lib.Progress(10, quiet=True, log_every_s=3600.0, desc='y')
  for _ in range(10):
    p.update(1)
  p.close()
  lines = [r.getMessage() for r in caplog.records]
  assert len(lines) == 1 and lines[0].startswith('y step 10/10 ('), lines
