"""The experiments' figures: curves from metrics rows, bands, bars."""

from experiments import plots


def test_curves_and_plot(tmp_path):
  rows = [{'step': s, 'a': [s, s + 1.0, s + 2.0], 'b': [1.0, 1.0, 1.0]}
          for s in range(1, 6)]
  steps, vals = plots.curves(rows, 'a')
  assert steps.tolist() == [1, 2, 3, 4, 5] and vals.shape == (5, 3)
  path = plots.plot_curves(rows, ['a', 'b'], tmp_path / 'p' / 'ab.png')
  data = path.read_bytes()
  assert data[:8] == b'\x89PNG\r\n\x1a\n' and len(data) > 5000
  bars = plots.plot_bars({'method': [0.9, 0.8, 1.0],
                         'ablation': [0.2, 0.1, 0.3]},
                         tmp_path / 'bars.png', bounds=(0.0, 1.0),
                         highlight=('method',), ylabel='accuracy')
  assert bars.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
