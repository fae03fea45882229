"""Every notebook in colabs/ runs top to bottom (at its smoke size)."""

import nbformat
from nbclient import NotebookClient
import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / 'colabs').glob('*.ipynb'))


@pytest.mark.parametrize('path', NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
  monkeypatch.setenv('JAX_PLATFORMS', 'cpu')
  monkeypatch.setenv('ICLRJAX_QUIET', '1')
  monkeypatch.setenv('MPLBACKEND', 'Agg')
  nb = nbformat.read(path, as_version=4)
  client = NotebookClient(nb, timeout=900, kernel_name='python3',
                          resources={'metadata': {'path': str(ROOT)}})
  client.execute()
  errors = [o for c in nb.cells if c.cell_type == 'code'
            for o in c.get('outputs', []) if o.get('output_type') == 'error']
  assert not errors, errors
  images = [o for c in nb.cells if c.cell_type == 'code'
            for o in c.get('outputs', []) if 'image/png' in o.get('data', {})]
  assert images, 'the notebook should show its plots'


def test_every_notebook_installs_on_colab():
  for path in NOTEBOOKS:
    first_code = next(c for c in nbformat.read(path, as_version=4).cells
                      if c.cell_type == 'code')
    assert 'google.colab' in first_code.source and 'pip' in first_code.source
