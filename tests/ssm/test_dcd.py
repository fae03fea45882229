"""DCD SSMs (arXiv 2603.01959): scans, constructions, data, trained claims."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dcd_ssm as dc
from experiments.dcd_ssm import EXPERIMENT
from iclrjax.core import data as data_lib
from iclrjax.ssm import construct
from iclrjax.ssm import dcd
from iclrjax.ssm import groups
from iclrjax.ssm import state_tracking as st


@pytest.mark.parametrize('dtype', [jnp.complex64, jnp.float32])
def test_associative_scan_equals_sequential(dtype):
  k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
  T, N = 333, 7
  mag = jax.random.uniform(k1, (T, N), minval=0.5, maxval=1.0)
  if dtype == jnp.complex64:
    a = mag * jnp.exp(1j * jax.random.uniform(k2, (T, N), maxval=6.3))
    b = (jax.random.normal(k3, (T, N)) + 1j * jax.random.normal(k2, (T, N)))
  else:
    a, b = mag, jax.random.normal(k3, (T, N))
  h0 = b[5] * 0.3
  for init in (None, h0):
    h_a = dcd.diag_scan(a, b, init, method='associative')
    h_s = dcd.diag_scan(a, b, init, method='sequential')
    np.testing.assert_allclose(h_a, h_s, atol=1e-5, rtol=1e-5)
  # And against a plain loop.
  h, ref = np.zeros(N, np.asarray(b).dtype), []
  for t in range(T):
    h = np.asarray(a[t]) * h + np.asarray(b[t])
    ref.append(h)
  np.testing.assert_allclose(dcd.diag_scan(a, b), np.stack(ref), atol=1e-5,
                             rtol=1e-5)


@pytest.mark.parametrize('mode', ['additive', 'multiplicative'])
@pytest.mark.parametrize('kind', ['dcd', 'real', 'lti', 'gru'])
def test_models_run_and_scans_agree(kind, mode):
  x = jax.random.randint(jax.random.key(1), (40,), 0, 6)
  model = dcd.make_model(kind, 2, 6, width=16, state=8, hidden=16,
                         input_mode=mode)
  params = model.init(jax.random.key(2), x)
  out = model.apply(params, x)
  assert out.shape == (40, 6) and np.all(np.isfinite(out))
  if kind != 'gru':
    seq = dcd.SeqModel(kind, 2, 6, 6, 16, 8, 16, 0.98, 'sequential', mode)
    np.testing.assert_allclose(seq.apply(params, x), out, atol=1e-4)


def test_multiplicative_layer_is_a_product_of_lambdas():
  """With B = 0: h_t = prod_{s<=t} lambda(u_s) h_0 exactly."""
  u = jax.random.normal(jax.random.key(3), (30, 5))
  layer = dcd.DiagLayer('dcd', 4, 8, 0.99, input_mode='multiplicative')
  params = layer.init(jax.random.key(4), u)
  p = params['params']
  lam = jnp.exp(-jax.nn.softplus(u @ p['mag']['kernel'] + p['mag']['bias'])
                + 1j * (u @ p['phase']['kernel'] + p['phase']['bias']))
  h0 = p['h0_re'] + 1j * p['h0_im']
  h = jnp.cumprod(lam, 0) * h0
  feats = jnp.concatenate([h.real, h.imag, u], -1)
  z = jax.nn.gelu(feats @ p['dec_in']['kernel'] + p['dec_in']['bias'])
  want = u + z @ p['dec_out']['kernel'] + p['dec_out']['bias']
  np.testing.assert_allclose(layer.apply(params, u), want, atol=1e-4)


@pytest.mark.parametrize('name', ['Z2', 'Z3', 'Z6', 'Z7', 'Z12', 'Z60',
                                  'Z2xZ4', 'Z2xZ2xZ3', 'Z3xZ5'])
def test_one_layer_construction_tracks_abelian_groups_exactly(name):
  g = groups.make(name)
  chi = construct.characters(g)
  # Characters are homomorphisms into the unit circle and orthogonal.
  np.testing.assert_allclose(chi[:, g.table], chi[:, :, None] *
                             chi[:, None, :], atol=1e-8)
  np.testing.assert_allclose(chi @ chi.conj().T / g.order, np.eye(g.order),
                             atol=1e-8)
  _, track = construct.abelian_one_layer(g)
  x = np.random.default_rng(0).integers(0, g.order, (3, 4096)).astype(
      np.int32)
  pred = np.asarray(jax.jit(jax.vmap(track))(jnp.asarray(x)))
  np.testing.assert_array_equal(pred, groups.running_products(g, x))


def test_one_layer_construction_refuses_non_abelian():
  with pytest.raises(ValueError, match='not abelian'):
    construct.abelian_one_layer(groups.make('S3'))


def test_two_layer_construction_tracks_s3_up_to_4096():
  g = groups.make('S3')
  a, b, index = construct.s3_structure(g)
  # r^a s^b: the semidirect-product rule behind the construction.
  for x in range(6):
    for y in range(6):
      A = (a[x] + (-1) ** b[x] * a[y]) % 3
      assert g.table[x, y] == index[A, (b[x] + b[y]) % 2]
  _, track = construct.s3_two_layer(g)
  x = np.random.default_rng(1).integers(0, 6, (4, 4096)).astype(np.int32)
  pred = np.asarray(jax.jit(jax.vmap(track))(jnp.asarray(x)))
  np.testing.assert_array_equal(pred, groups.running_products(g, x))


def test_word_problem_builder(tmp_path, monkeypatch):
  monkeypatch.setattr(data_lib, 'default_data_dir', lambda: str(tmp_path))
  name = st.word_problem_builder('S3', 8, (8, 16), num_train=32, num_test=16)
  assert name == 'word_problem_s3_t8_n32_m16'
  x, y = st.load_split(name, 'train')
  assert x.shape == (32, 8) and y.shape == (32, 8)
  np.testing.assert_array_equal(y, groups.running_products(
      groups.make('S3'), x))
  x16, _ = st.load_split(name, st.test_split(16))
  assert x16.shape == (16, 16)


def test_bad_runs_entry_is_a_clear_error():
  c = dc.get_config('smoke')
  c.runs = ('S3/dcd/1', 'G7/dcd/1')
  with pytest.raises(ValueError, match='runs'):
    EXPERIMENT.validate(c)
  c.runs = ('S3/transformer/1',)
  with pytest.raises(ValueError, match='model must be one of'):
    EXPERIMENT.validate(c)


@pytest.fixture(scope='module')
def claims_run(tmp_path_factory):
  """1-layer DCD on Z6 and S3, 3 seeds, at half the default length (trained
  at T = 32, tested at 32 and 64) and 2000 steps; the default config (T =
  64, tested at 128) is the slow test."""
  c = dc.get_config()
  c.runs = ('Z6/dcd/1', 'S3/dcd/1')
  c.train_len, c.test_lens, c.steps = 32, (32, 64), 2000
  return EXPERIMENT.execute(c, tmp_path_factory.mktemp('dcd_claims'))


def test_abelian_vs_non_abelian_claims(claims_run):
  m = {k: np.asarray(v['per_seed']) for k, v in claims_run['metrics'].items()}
  assert m['acc_min@32/Z6_dcd1'].mean() >= 0.99, m
  assert m['acc_min@64/Z6_dcd1'].mean() >= 0.99, m
  assert m['acc_last@32/S3_dcd1'].mean() <= 0.40, m
  assert (m['acc_last@32/Z6_dcd1'].mean() -
          m['acc_last@32/S3_dcd1'].mean()) >= 0.5, m
  assert all(c['holds'] for c in claims_run['claims']), claims_run['claims']


@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  return EXPERIMENT.execute(dc.get_config(),
                            tmp_path_factory.mktemp('dcd_default'))


@pytest.mark.slow
def test_default_config_claims(default_run):
  for c in default_run['claims']:
    assert c['holds'], c
