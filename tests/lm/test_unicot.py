"""iclrjax/lm/unicot.py: the macro/micro mask against a NumPy loop
transcription, gradient probes through every layer, the cost, the grid walk and
the self-check generation loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.lm import model as lm_model
from iclrjax.lm import unicot as U

M, T, G = 3, 3, 3


def _reference_mask(lay: U.Layout) -> np.ndarray:
  """The mask's rules, one (q, k) pair at a time."""
  L = len(lay.role)
  out = np.zeros((L, L), bool)
  for q in range(L):
    for k in range(q + 1):
      rq, rk = lay.role[q], lay.role[k]
      if U.R_PAD in (rq, rk):
        continue
      ok = rk == U.R_INPUT or lay.segment[q] == lay.segment[k]
      if rq in (U.R_PLAN, U.R_SUMMARY):
        ok |= rk == U.R_PLAN or (rk == U.R_STATE and lay.final[k])
      if rq == U.R_STEP:
        ok |= rk == U.R_PLAN and lay.subgoal[k] == lay.subgoal[q]
        ok |= rk == U.R_STATE and lay.chain[k] == lay.chain[q] - 1
      out[q, k] = ok
  return out


def test_mask_matches_a_loop_transcription_of_its_rules():
  lay = U.layout(M, T, G, length=U.seq_len(M, T, G) + 3)   # with padding
  np.testing.assert_array_equal(np.asarray(U.subgoal_mask(lay)),
                                _reference_mask(lay))
  causal = np.asarray(U.long_chain_mask(lay))
  n = U.seq_len(M, T, G)
  np.testing.assert_array_equal(causal[:n, :n], np.tril(np.ones((n, n))))
  assert not causal[n:].any() and not causal[:, n:].any()


def test_layout_segments_and_lengths():
  lay = U.layout(M, T, G)
  assert len(lay.role) == U.seq_len(M, T, G)
  assert (lay.role == U.R_PLAN).sum() == M
  assert (lay.role == U.R_STATE).sum() == M * T * G
  assert (lay.final & (lay.role == U.R_STATE)).sum() == M * G
  starts, checked = U.units(lay)
  assert len(starts) == M * T + 1 and checked.sum() == M * T
  # A re-encoded state copies the state rows its step generated.
  for i in np.flatnonzero(lay.copy_from >= 0):
    j = lay.copy_from[i]
    assert lay.generated[j] and lay.chain[j] == lay.chain[i]


@pytest.fixture(scope='module')
def probe_model():
  model = lm_model.Model(lm_model.Config(
      vocab_size=U.vocab_size(G), d_model=16, num_heads=2, num_layers=2,
      d_ff=32, max_len=128))
  return model, model.init(jax.random.PRNGKey(0))


def test_gradient_probes_are_exact_through_every_layer(probe_model):
  # Jitted here; the experiment's probe (the smoke run's mask claim) runs it
  # both eagerly and jitted.
  model, params = probe_model
  lay = U.layout(M, T, G)
  tokens = U.eval_batch(jax.random.PRNGKey(1), 1, num_subgoals=M, steps=T,
                        grid=G).tokens_BxL[0]
  sets = U.probe_sets(lay, 2, 3)         # step t = 3 of sub-goal i = 2
  d = jax.random.normal(jax.random.PRNGKey(2), (model.cfg.vocab_size,))
  f = jax.jit(U.embedding_gradients, static_argnums=0)

  def grads(mask, row):
    return np.asarray(f(model, params, tokens, mask, row, d))

  g = grads(U.subgoal_mask(lay), int(sets['row'][0]))
  for hidden in ('step_t_minus_2', 'step_t_minus_1_generation',
                 'earlier_intermediates'):
    assert len(sets[hidden]) and (g[sets[hidden]] == 0.0).all(), hidden
  for live in ('state_t_minus_1', 'subgoal'):
    assert (g[sets[live]] > 0.0).all(), live
  s = grads(U.subgoal_mask(lay), int(sets['summary_row'][0]))
  assert (s[sets['intermediates']] == 0.0).all()
  assert (s[sets['finals']] > 0.0).all() and (s[sets['subgoal']] > 0).all()
  # Control: the causal mask leaks step t - 2 into step t.
  c = grads(U.long_chain_mask(lay), int(sets['row'][0]))
  assert (c[sets['step_t_minus_2']] > 0.0).all()


def test_cost_is_linear_in_subgoals_and_causal_is_quadratic():
  ratio = {}
  for name, fn in U.MASKS.items():
    a, b = (U.allowed_pairs(fn(U.layout(m, 2, 4))) for m in (5, 10))
    ratio[name] = b / a
  assert 1.9 <= ratio['unicot'] <= 2.1, ratio
  assert ratio['long_chain'] > 3.5, ratio
  # Closed form of the causal count: L (L + 1) / 2.
  L = U.seq_len(5, 2, 4)
  assert U.allowed_pairs(U.long_chain_mask(U.layout(5, 2, 4))) == (
      L * (L + 1) // 2)


def test_walk_matches_a_python_simulation():
  key = jax.random.PRNGKey(3)
  start = jax.random.randint(key, (5, 2), 0, 4)
  dirs = jax.random.randint(jax.random.fold_in(key, 1), (5, 3), 0, 4)
  cells, bumps = U.walk(start, dirs, 2, 4)
  for b in range(5):
    cell = np.asarray(start[b])
    for k in range(6):
      new = np.clip(cell + U.DIRECTIONS[int(dirs[b, k // 2])], 0, 3)
      assert (np.asarray(cells[b, k]) == new).all()
      assert bool(bumps[b, k]) == bool((new == cell).all())
      cell = new


def _decode_cell(rows):
  (r,) = np.flatnonzero(rows != U.EMPTY_ROW)
  return np.array([r, rows[r] - U.EMPTY_ROW - 1])


def test_batches_are_consistent_walks_with_labelled_corruptions():
  b = jax.jit(lambda k: U.sample_batch(
      k, 16, min_subgoals=2, max_subgoals=3, steps=T, grid=G,
      corrupt_fraction=0.5, corrupt_prob=0.3))(jax.random.PRNGKey(4))
  tok, w = np.asarray(b.tokens_BxL), np.asarray(b.weights_BxL)
  lay = U.Layout(*(np.asarray(x) for x in b.layout))
  n_fix = 0
  for i in range(16):
    m = int(b.num_subgoals_B[i])
    role, gen = lay.role[i], lay.generated[i]
    prev = _decode_cell(tok[i, 1:1 + G])
    plan = tok[i][role == U.R_PLAN] - U.UP
    assert len(plan) == m
    clean = True
    for k in range(m * T):
      rows = tok[i][(role == U.R_STEP) & (lay.chain[i] == k + 1) & gen][1:]
      again = tok[i][(role == U.R_STATE) & (lay.chain[i] == k + 1)]
      np.testing.assert_array_equal(rows, again)
      ev = tok[i][(role == U.R_STEP) & (lay.chain[i] == k + 1) & ~gen][-1]
      cell = _decode_cell(rows)
      expect = np.clip(prev + U.DIRECTIONS[plan[k // T]], 0, G - 1)
      assert ev == (U.OK if (cell == expect).all() else U.FIX)
      n_fix += ev == U.FIX
      clean &= ev == U.OK
      prev = cell
    ans = tok[i][(role == U.R_SUMMARY) & gen][:G]
    np.testing.assert_array_equal(ans, np.asarray(b.answer_BxG[i]))
    if clean:   # a clean walk's summary is its last state
      np.testing.assert_array_equal(_decode_cell(ans), prev)
    trained = w[i] > 0
    is_eval = (role == U.R_STEP) & ~gen & (tok[i] != U.STEP)
    assert trained[is_eval].all()
    assert trained.sum() in (is_eval.sum(), (gen | is_eval).sum())
  assert n_fix > 0


@pytest.fixture(scope='module')
def tiny_generation():
  model = lm_model.Model(lm_model.Config(
      vocab_size=U.vocab_size(G), d_model=16, num_heads=2, num_layers=1,
      d_ff=32, max_len=128))
  params = model.init(jax.random.PRNGKey(5))
  lay = U.layout(2, 2, G)
  b = U.eval_batch(jax.random.PRNGKey(6), 8, num_subgoals=2, steps=2, grid=G)
  mask = U.subgoal_mask(lay)

  @jax.jit
  def run(key, rounds, greedy, checker, fix_rate):
    return U.generate(model, params, b.tokens_BxL, mask, lay, key,
                      rounds=rounds, greedy=greedy, checker=checker,
                      fix_rate=fix_rate)
  return run, lay, b


def test_generation_revises_only_on_fix_and_feeds_states_back(tiny_generation):
  run, lay, b = tiny_generation
  key = jax.random.PRNGKey(7)
  args = lambda r, ch, rate=0.0: (key, jnp.int32(r), jnp.asarray(False),
                                  jnp.int32(U.CHECKERS.index(ch)),
                                  jnp.float32(rate))
  single = run(*args(1, 'always_ok'))
  ok4 = run(*args(4, 'always_ok'))
  np.testing.assert_array_equal(single.tokens_BxL, ok4.tokens_BxL)
  assert int(ok4.revisions_B.sum()) == 0
  always_fix = run(*args(4, 'random', 1.0))
  steps = 2 * 2
  assert (np.asarray(always_fix.revisions_B) == 3 * steps).all()
  assert (np.asarray(always_fix.checks_B) == 4 * steps).all()
  learned = run(*args(4, 'learned'))
  assert (np.asarray(learned.revisions_B) <= 3 * steps).all()
  # The given tokens stay; re-encoded states equal the generated ones.
  tok = np.asarray(always_fix.tokens_BxL)
  given = ~lay.generated & (lay.copy_from < 0)
  np.testing.assert_array_equal(tok[:, given],
                                np.asarray(b.tokens_BxL)[:, given])
  i = np.flatnonzero(lay.copy_from >= 0)
  np.testing.assert_array_equal(tok[:, i], tok[:, lay.copy_from[i]])
  with pytest.raises(ValueError, match='checker'):
    U.generate(None, None, b.tokens_BxL, None, lay, key, checker='oracle')


def test_cached_greedy_generation_agrees_with_a_full_forward(tiny_generation):
  run, lay, b = tiny_generation
  model = lm_model.Model(lm_model.Config(
      vocab_size=U.vocab_size(G), d_model=16, num_heads=2, num_layers=1,
      d_ff=32, max_len=128))
  params = model.init(jax.random.PRNGKey(5))
  g = run(jax.random.PRNGKey(0), jnp.int32(1), jnp.asarray(True),
          jnp.int32(1), jnp.float32(0.0))
  tok = np.asarray(g.tokens_BxL)
  logits = np.asarray(model.apply(params, g.tokens_BxL, U.subgoal_mask(lay)))
  pos = np.flatnonzero(lay.generated)
  np.testing.assert_array_equal(tok[:, pos], logits[:, pos - 1].argmax(-1))
