"""DCD SSMs (arXiv 2603.01959): scans, constructions, data, trained claims."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import dcd_ssm as dc
from experiments import dcd_ssm as st
from experiments.dcd_ssm import EXPERIMENT
from iclrjax.core import data as data_lib
from iclrjax.ssm import construct
from iclrjax.ssm import dcd
from iclrjax.ssm import groups
from tests.conftest import smoke_summary


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
  scan = jax.jit(dcd.diag_scan, static_argnames='method')
  for init in (None, h0):
    h_a = scan(a, b, init, method='associative')
    h_s = scan(a, b, init, method='sequential')
    np.testing.assert_allclose(h_a, h_s, atol=1e-5, rtol=1e-5)
  # And against a plain loop.
  h, ref = np.zeros(N, np.asarray(b).dtype), []
  for t in range(T):
    h = np.asarray(a[t]) * h + np.asarray(b[t])
    ref.append(h)
  np.testing.assert_allclose(scan(a, b), np.stack(ref), atol=1e-5,
                             rtol=1e-5)
  if dtype == jnp.complex64:  # a real b (and h0) promote to a's dtype
    for method in ('associative', 'sequential'):
      h = scan(a, b.real, h0.real, method=method)
      assert h.dtype == jnp.complex64
      np.testing.assert_allclose(
          h, scan(a, b.real + 0j, h0.real + 0j, method=method), atol=1e-6)


@pytest.mark.parametrize('mode', ['additive', 'multiplicative'])
@pytest.mark.parametrize('kind', ['dcd', 'real', 'lti', 'gru'])
def test_models_run_scans_agree_and_no_dead_parameters(kind, mode):
  x = jax.random.randint(jax.random.key(1), (40,), 0, 6)
  y = jax.random.randint(jax.random.key(5), (40,), 0, 6)
  model = dcd.make_model(kind, 2, 6, width=16, state=8, hidden=16,
                         input_mode=mode)
  params = jax.jit(model.init)(jax.random.key(2), x)
  out = jax.jit(model.apply)(params, x)
  assert out.shape == (40, 6) and np.all(np.isfinite(out))
  if kind != 'gru':
    seq = dcd.SeqModel(kind, 2, 6, 6, 16, 8, 16, 0.98, 'sequential', mode)
    np.testing.assert_allclose(jax.jit(seq.apply)(params, x), out, atol=1e-4)
    names = set(params['params']['layer0'])
    assert ({'b_re'} <= names) == (mode == 'additive'), names
    assert ({'h0_re'} <= names) == (mode == 'multiplicative'), names
    assert ('phase' in names) == (kind != 'real'), names
  # Every parameter the model creates gets a gradient: none is dead.
  loss = lambda p: -jnp.take_along_axis(
      jax.nn.log_softmax(model.apply(p, x)), y[:, None], 1).mean()
  grads = jax.tree_util.tree_leaves_with_path(jax.jit(jax.grad(loss))(params))
  dead = [jax.tree_util.keystr(k) for k, g in grads if not np.any(g != 0)]
  assert not dead, dead


def test_magnitude_reaches_one_with_a_live_gradient():
  z = jnp.array([-3.0, -0.1, 0.0, 0.1, 3.0])
  np.testing.assert_allclose(dcd.magnitude(z), np.exp(-np.abs(z)), rtol=1e-6)
  assert float(dcd.magnitude(0.0)) == 1.0
  assert float(jnp.max(dcd.magnitude(jnp.linspace(-50, 50, 1001)))) <= 1.0
  # d|lambda|/dz = -sign(z) |lambda|, and -1 (not 0) on the unit circle.
  g = jax.vmap(jax.grad(dcd.magnitude))(z)
  np.testing.assert_allclose(g, -np.where(z >= 0, 1, -1) * np.exp(-np.abs(z)),
                             rtol=1e-6)
  assert dcd.magnitude_bias(1.0) == 0.0
  np.testing.assert_allclose(dcd.magnitude(dcd.magnitude_bias(0.9)), 0.9)
  with pytest.raises(ValueError, match='init_magnitude'):
    dcd.magnitude_bias(1.5)


def test_multiplicative_layer_is_a_product_of_lambdas():
  """With B = 0: h_t = prod_{s<=t} lambda(u_s) h_0 exactly."""
  u = jax.random.normal(jax.random.key(3), (30, 5))
  layer = dcd.DiagLayer('dcd', 4, 8, 0.99, input_mode='multiplicative')
  params = jax.jit(layer.init)(jax.random.key(4), u)
  p = jax.tree.map(lambda a: a + 0.1 * jax.random.normal(
      jax.random.key(6), a.shape), params)['params']
  lam = jnp.exp(-jnp.abs(u @ p['mag']['kernel'] + p['mag']['bias'])
                + 1j * (u @ p['phase']['kernel'] + p['phase']['bias']))
  h0 = p['h0_re'] + 1j * p['h0_im']
  h = jnp.cumprod(lam, 0) * h0
  feats = jnp.concatenate([h.real, h.imag, u], -1)
  z = jax.nn.gelu(feats @ p['dec_in']['kernel'] + p['dec_in']['bias'])
  want = u + z @ p['dec_out']['kernel'] + p['dec_out']['bias']
  np.testing.assert_allclose(jax.jit(layer.apply)({'params': p}, u), want,
                             atol=1e-4)


# Other abelian groups: test_one_layer_construction_tracks_abelian_groups_exactly.
@pytest.mark.parametrize('name', ['Z60'])
def test_trained_module_with_construction_weights_tracks_at_4096(name):
  """The trained `SeqModel`/`DiagLayer` itself, weights from the character
  construction (|lambda| = 1 exactly), tracks the group at length 4096."""
  g = groups.make(name)
  model, params = construct.abelian_seq_model(g)
  x = np.random.default_rng(0).integers(0, g.order, (2, 4096)).astype(
      np.int32)
  # The construction fills exactly the module's own parameter tree.
  ref = jax.eval_shape(model.init, jax.random.key(0), jnp.asarray(x[0, :4]))
  assert jax.tree.structure(ref) == jax.tree.structure(params)
  assert all(jax.tree.leaves(jax.tree.map(lambda a, b: a.shape == b.shape,
                                          ref, params)))
  logits = jax.jit(jax.vmap(model.apply, in_axes=(None, 0)))(
      params, jnp.asarray(x))
  np.testing.assert_array_equal(np.asarray(logits.argmax(-1)),
                                groups.running_products(g, x))
  # On the unit circle the magnitude still has a gradient.
  y = jnp.asarray(groups.running_products(g, x[:1, :64])[0])
  loss = lambda p: -jnp.take_along_axis(jax.nn.log_softmax(
      model.apply(p, jnp.asarray(x[0, :64])) * 0.1), y[:, None], 1).mean()
  gm = jax.jit(jax.grad(loss))(params)['params']['layer0']['mag']['bias']
  assert np.all(np.isfinite(gm)) and np.any(gm != 0)


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
  c.runs = ('S3/dcd/1/warmup',)
  with pytest.raises(ValueError, match='curriculum'):
    EXPERIMENT.validate(c)
  c.runs = ('S3/dcd/1/curriculum',)
  c.curriculum_lens = (8, 32)   # not below train_len = 16
  with pytest.raises(ValueError, match='curriculum_lens'):
    EXPERIMENT.validate(c)


def test_curriculum_stages_split_the_steps():
  c = dc.get_config()
  assert st.parse_run('Z60/dcd/1/curriculum') == ('Z60', 'dcd', 1, True)
  assert st._stages(c, False) == [(64, 3000)]
  stages = st._stages(c, True)
  assert [L for L, _ in stages] == [8, 16, 32, 64]
  assert sum(n for _, n in stages) == c.steps


def _metrics(s3_last=0.33, s3_q=1.0, s3_loss=1.1, real_last=0.5,
             real_loss=0.66, lti_last=0.17, lti_loss=1.7):
  """Synthetic per-seed metrics (3 seeds) of the default config's runs."""
  T, L = 64, 128
  f = lambda v: np.full(3, v, float)
  m = {}
  for tag in ('Z6_dcd1', 'Z2xZ4_dcd1', 'Z2_dcd1', 'S3_gru1'):
    for n in (T, L):
      for k in ('all', 'min', 'last', 'first'):
        m[f'acc_{k}@{n}/{tag}'] = f(1.0)
    m[f'loss_train/{tag}'] = f(0.001)
    m[f'loss_untrained/{tag}'] = f(2.0)
    m[f'acc_last_untrained@{T}/{tag}'] = f(0.17)
  m[f'qacc_last@{T}/S3_gru1'] = f(1.0)
  for tag, last, loss, chance in (('S3_dcd1', s3_last, s3_loss, 1 / 6),
                                  ('Z2_real1', real_last, real_loss, 0.5),
                                  ('Z6_lti1', lti_last, lti_loss, 1 / 6)):
    for n in (T, L):
      for k in ('all', 'min', 'last', 'first'):
        m[f'acc_{k}@{n}/{tag}'] = f(last)
    m[f'loss_train/{tag}'] = f(loss)
    m[f'loss_untrained/{tag}'] = f(np.log(1 / chance) + 0.01)
    m[f'acc_last_untrained@{T}/{tag}'] = f(chance)
  m[f'qacc_last@{T}/S3_dcd1'] = f(s3_q)
  m[f'qacc_last_untrained@{T}/S3_dcd1'] = f(0.5)
  return m


def _by_model(claims):
  keys = {'Abelian': 'abelian', 'Non-abelian': 's3', 'acc(Z6)': 'gap',
          'The input-dependent non-negative': 'real',
          'The input-independent': 'lti'}
  return {v: c for c in claims for k, v in keys.items()
          if c.claim.startswith(k)}


def test_claims_hold_for_trained_models_and_fail_for_their_controls():
  """Claim logic on synthetic numbers: the trained models pass; a model
  that failed to train (chance accuracy, loss at ln |G|) fails every
  negative claim although it is below each bound; every control fails."""
  cfg = dc.get_config()
  good = _by_model(st.evaluate_claims(cfg, _metrics()))
  assert set(good) == {'abelian', 's3', 'gap', 'real', 'lti'}
  assert all(c.holds for c in good.values()), good
  for c in good.values():
    assert c.control and '(passes)' not in c.control, c
  untrained = _by_model(st.evaluate_claims(cfg, _metrics(
      s3_last=1 / 6, s3_q=0.5, s3_loss=np.log(6), real_loss=np.log(2),
      lti_loss=np.log(6))))
  for k in ('s3', 'real', 'lti'):
    assert not untrained[k].holds, untrained[k]
  # At the bound but not at the quotient ceiling: S3 below the band.
  assert not _by_model(st.evaluate_claims(cfg, _metrics(s3_last=0.25)))[
      's3'].holds
  # One seed above the bound fails the claim (not the mean).
  m = _metrics()
  m['acc_last@128/Z6_lti1'] = np.array([0.17, 0.17, 0.9])
  assert not _by_model(st.evaluate_claims(cfg, m))['lti'].holds


def test_gap_and_curriculum_claims_count_seeds():
  cfg = dc.get_config('gap')
  T = cfg.train_len
  m = {}
  for gname, d, gru in (('S3', [1, 1, 1], [1, 1, 1]),
                        ('A4', [0, 0, 1], [1, 1, 1])):
    m[f'learned/{gname}_dcd2'] = np.array(d, float)
    m[f'learned/{gname}_gru1'] = np.array(gru, float)
    m[f'qacc_last@{T}/{gname}_dcd2'] = np.ones(3)
    m[f'qacc_last_untrained@{T}/{gname}_dcd2'] = np.full(3, 0.34)
  (gap,) = st._gap_claim(cfg, m)
  assert gap.holds and 'A4: DCD 1/3' in gap.evidence and 'GRU 3/3' in (
      gap.evidence) and '(fails)' in gap.control, gap
  # Failed seeds that do not even track the quotient: not the gap.
  m['qacc_last@32/A4_dcd2'] = np.array([0.5, 1.0, 1.0])
  assert not st._gap_claim(cfg, m)[0].holds
  # The GRU learns no more than the DCD: no gap.
  m['qacc_last@32/A4_dcd2'] = np.ones(3)
  m['learned/A4_gru1'] = np.array([0.0, 0.0, 1.0])
  m['learned/S3_gru1'] = np.array([1.0, 1.0, 1.0])
  assert not st._gap_claim(cfg, m)[0].holds
  c = dc.get_config()
  cur = {f'acc_last@64/Z60_dcd1_cur': np.array([0.95, 0.99, 0.97]),
         'acc_last@128/Z60_dcd1_cur': np.array([0.5, 0.6, 0.7]),
         'acc_first@64/Z60_dcd1_cur': np.ones(3),
         'acc_last@64/Z60_dcd1': np.full(3, 0.02)}
  (claim,) = st._curriculum_claim(c, cur)
  assert claim.holds and '(fails)' in claim.control
  cur['acc_last@64/Z60_dcd1_cur'][1] = 0.5
  assert not st._curriculum_claim(c, cur)[0].holds


@pytest.fixture(scope='module')
def smoke_run():
  return smoke_summary('dcd_ssm')   # the launcher test's run (conftest)


def test_smoke_run_records_per_seed_metrics_and_controls(smoke_run):
  s = smoke_run
  assert s['num_seeds'] == 2
  for k, v in s['metrics'].items():
    assert len(v['per_seed']) == 2, k
  for tag in ('Z6_dcd1', 'S3_dcd1', 'Z6_dcd1_cur'):
    assert f'loss_train/{tag}' in s['metrics']
    assert f'acc_last@32/{tag}' in s['metrics']
  assert 'qacc_last@16/S3_dcd1' in s['metrics']
  assert not any(k.startswith(('chance/', 'quotient_ceiling/'))
                 for k in s['metrics'])
  names = [c['claim'] for c in s['claims']]
  assert any('curriculum' in n for n in names), names
  for c in s['claims']:
    assert c['control'], c


@pytest.fixture(scope='module')
def default_run(tmp_path_factory):
  return EXPERIMENT.execute(dc.get_config(),
                            tmp_path_factory.mktemp('dcd_default'))


def _claim(summary, start):
  (c,) = [c for c in summary['claims'] if c['claim'].startswith(start)]
  assert '(fails)' in c['control'] and '(passes)' not in c['control'], c
  return c


# results/dcd_ssm/default (06a380b, 2160 s, 3 seeds): every seed is >= 0.99
# at every position at the training length 64, but one seed per group falls
# below at 2x.
_ABELIAN_2X = ('at length 128 one seed per group drops below 0.99 (min '
               'over positions Z6 [0.499, 1.0, 1.0], Z2xZ4 [1.0, 0.824, '
               '0.999], Z2 [1.0, 1.0, 0.945]; all 1.000 at 64)')
_Z60_CURRICULUM = ('Z60 with the curriculum 8 -> 16 -> 32 -> 64: last-8 '
                   '[0.635, 0.253, 0.497] at 64 (without: [0.196, 0.487, '
                   '0.507]); chance 0.017, target >= 0.9')


@pytest.mark.slow
@pytest.mark.parametrize('start', [
    pytest.param('Abelian', marks=pytest.mark.xfail(strict=True,
                                                    reason=_ABELIAN_2X)),
    'Non-abelian', 'acc(Z6)', 'The input-dependent non-negative',
    'The input-independent',
    pytest.param('A 1-layer DCD learns Z60', marks=pytest.mark.xfail(
        strict=True, reason=_Z60_CURRICULUM))])
def test_default_config_claims(default_run, start):
  c = _claim(default_run, start)
  assert c['holds'], c


@pytest.fixture(scope='module')
def gap_run(tmp_path_factory):
  return EXPERIMENT.execute(dc.get_config('gap'),
                            tmp_path_factory.mktemp('dcd_gap'))


@pytest.mark.slow
def test_gap_config_learnability_gap(gap_run):
  """results/dcd_ssm/gap (bbf8bb3, 780 s): DCD 6/9 seeds vs GRU 7/9 (A4:
  DCD 0/3 at its quotient ceiling 0.25, GRU 1/3)."""
  c = _claim(gap_run, 'Learnability gap')
  assert c['holds'], c
