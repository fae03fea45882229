"""experiments/fgl.py: claim logic and controls on synthetic records, config
errors, missing data, the graphs, the smoke run, the default run (slow)."""

import numpy as np
import pytest

from configs import fgl as fgl_config
from experiments import fgl as exp
from iclrjax.core import config as cfg_lib
from iclrjax.core import launch
from iclrjax.graph import data as gdata
from tests.conftest import find_claim, smoke_summary

S = 5


def _records(good: bool):
  c = fgl_config.get_config()
  c.data.karate = False
  full = lambda v: np.full(S, float(v))
  m = {}
  for t in exp.settings(c):
    g = 0.6 if '0.6' in t else 0.8
    m[f'{t}/graph_h'] = full(g)
    m[f'{t}/tree_h/uniform'] = full(g + 0.005)
    m[f'{t}/tree_h/est'] = full(g + (0.15 if good else 0.03))
    m[f'{t}/tree_h/shuffled'] = full(g + 0.01)
    m[f'{t}/tree_h/oracle'] = full(0.99)
    m[f'{t}/acc/mlp'] = full(0.57)
    m[f'{t}/acc/gcn'] = full(0.9)
    m[f'{t}/acc/fgl_uniform'] = full(0.6)
    m[f'{t}/acc/fgl_shuffled'] = full(0.59)
    m[f'{t}/acc/fgl_est'] = full(0.95 if good else 0.58)
    m[f'{t}/acc/fgl_oracle'] = full(0.99)
  dp = {'max_err': 1e-15 if good else 1e-6, 'random_order_err': 3.0}
  cs = {'sizes': [4000, 16000], 'seconds': [0.01, 0.04 if good else 0.3],
        'slope': 1.0 if good else 2.5, 'dense_sizes': [1000, 2000],
        'dense_seconds': [0.1, 0.4], 'dense_slope': 2.0, 'sampler': 'kruskal'}
  return c, m, dp, cs


def test_claims_hold_on_the_papers_pattern_and_controls_fail():
  claims = exp.evaluate_claims(*_records(good=True))
  assert len(claims) == 5
  for c in claims:
    assert c.holds, c
    assert c.control.endswith('(fails)'), c


def test_claims_fail_on_the_opposite_pattern():
  claims = exp.evaluate_claims(*_records(good=False))
  assert not any(c.holds for c in claims), claims


def test_config_errors_name_the_field():
  c = fgl_config.get_config('smoke')
  c.data.snr = (0.3, 0.6)
  with pytest.raises(cfg_lib.ConfigError, match='data.snr'):
    exp.EXPERIMENT.validate(c)
  c = fgl_config.get_config('smoke')
  c.forest.sampler = 'prim'
  with pytest.raises(cfg_lib.ConfigError, match='forest.sampler'):
    exp.EXPERIMENT.validate(c)
  c = fgl_config.get_config('smoke')
  c.data.num_val = 1000
  with pytest.raises(cfg_lib.ConfigError, match='data.num_nodes'):
    exp.EXPERIMENT.validate(c)


def test_missing_planetoid_is_one_line_naming_the_files(tmp_path):
  c = fgl_config.get_config('paper')
  c.data.data_dir = str(tmp_path / 'planetoid')
  wd = tmp_path / 'run'
  with pytest.raises(launch.MissingDataError,
                     match=r'^dataset cora is not in .*planetoid \(missing '
                           r'ind\.cora\.x, ind\.cora\.y, .*ind\.cora\.graph'):
    exp.EXPERIMENT.execute(c, workdir=wd)
  assert not wd.exists()


def test_csbm_has_the_requested_homophily_and_split():
  rng = np.random.default_rng(0)
  g = gdata.csbm(rng, 3000, 5, 16, 6.0, 0.6, 0.5, 20, 500)
  assert len(g.edges) == 9000 and not np.any(g.edges[:, 0] == g.edges[:, 1])
  assert abs(gdata.edge_homophily(g.edges, g.y) - 0.6) < 0.02
  assert g.train.sum() == 100 and g.val.sum() == 500
  assert not np.any(g.train & g.test) and np.all(g.train | g.val | g.test)


def test_karate_from_networkx():
  pytest.importorskip('networkx')
  g = gdata.karate(np.random.default_rng(0), 3)
  assert g.x.shape == (34, 34) and len(g.edges) == 78
  assert np.bincount(g.y).tolist() == [17, 17] and g.train.sum() == 6


def test_smoke_run_records_every_score_and_claim():
  s = smoke_summary('fgl')
  cfg = fgl_config.get_config('smoke')
  assert len(s['claims']) == 5
  for c in s['claims']:
    assert c['control'].endswith(('(fails)', '(passes)')), c
  for t in exp.settings(cfg):
    for k in ('mlp', 'gcn', *(f'fgl_{n}' for n in exp.TREES)):
      v = s['metrics'][f'{t}/acc/{k}']['per_seed']
      assert len(v) == cfg.num_seeds and all(0 <= x <= 1 for x in v), k
  # exactness and linear cost hold at any size
  assert find_claim(s, 'The two-pass tree filter')['holds']
  assert find_claim(s, 'The two-pass tree filter')['control'].endswith(
      '(fails)')


@pytest.fixture(scope='module')
def default_summary(tmp_path_factory):
  """The default run; only the slow tests use it. Its record:
  results/fgl/default/summary.json."""
  return exp.EXPERIMENT.execute(fgl_config.get_config(),
                                tmp_path_factory.mktemp('fgl') / 'run')


_XFAIL = {
    'Homophily-biased sampling': (
        'default run at 35c4c53: uniform trees match the graph (0.798 / '
        '0.602 / 0.596 vs 0.797 / 0.603 / 0.597) and estimator trees clear '
        '+0.08 (0.905 / 0.721 / 0.893), but oracle trees reach 0.978 / '
        '0.933 / 0.929 < 0.98 (perturb-and-MAP with the 0.05 weight floor; '
        'a rerun with the floor on Wilson only: oracle 0.993 / 0.973 / '
        '0.971, est 0.914 / 0.791 / 0.949, still short at h 0.6)'),
    'Accuracy improves with the tree': (
        'default run at 35c4c53: at h 0.8 / SNR 0.3 the refined estimator '
        'loses to uniform trees on 2 of 5 seeds (0.879 vs 0.886, 0.862 vs '
        '0.914; learned affinities recover much of the gap); uniform < est '
        '< oracle holds on every seed at h 0.6 (SNR 0.3 and 0.6)'),
    'At graph homophily': (
        'default run at 35c4c53: FGL-est 0.977 >= GCN 0.920 on 5/5 seeds, '
        'but the control does not fail: FGL on uniform trees 0.968 (and '
        'the MLP 0.936) also beat GCN at this SNR'),
}


@pytest.mark.slow
@pytest.mark.parametrize('start', [
    pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=_XFAIL[s]))
    if s in _XFAIL else s
    for s in ('The two-pass tree filter', 'Homophily-biased sampling',
              'Accuracy improves with the tree', 'At graph homophily',
              'One forest tree')])
def test_default_run_claims(default_summary, start):
  c = find_claim(default_summary, start)
  assert c['holds'] and c['control'].endswith('(fails)'), c
