"""iclrjax/lm/rwom.py: the app and its drift, rollout targets against a NumPy
loop transcription, tokens, retrieval and reward selection against closed
forms, and the agent loop of a tiny world model (the probes run in the
shared smoke run)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclrjax.lm import model as lm_model
from iclrjax.lm import rwom as R

SPEC = R.Spec()


@functools.lru_cache(maxsize=None)
def _apps():
  v1 = R.make_app(SPEC, 0)
  return v1, R.drift(SPEC, v1, 1, 0.4)


def _walk(app, goal):
  """The procedure replayed through the table."""
  s = 0
  for a in np.asarray(app.proc_actions_GxL)[goal]:
    s = int(np.asarray(app.table_SxA)[s, a])
  return s


def test_procedures_follow_the_table_and_reach_their_goal():
  v1, v2 = _apps()
  for app in (v1[0], v2):
    ps = np.asarray(app.proc_states_GxL1)
    assert ps[:, 0].tolist() == [0] * SPEC.num_goals
    assert ps[:, -1].tolist() == list(range(SPEC.first_leaf,
                                            SPEC.num_states))
    for g in range(SPEC.num_goals):
      assert _walk(app, g) == ps[g, -1]
    vis = np.asarray(app.visible_SxB)
    assert (vis[:SPEC.first_leaf] >= 0).all() and (
        vis[SPEC.first_leaf:] == -1).all()
    for s in range(SPEC.first_leaf):      # distinct names on a screen
      assert len(set(vis[s])) == SPEC.branching


def test_drift_changes_the_fraction_with_v1_primitives_only():
  v1, v2 = _apps()
  app1 = v1[0]
  n = R.changed_goals(app1, v2).sum()
  lo = round(0.4 * SPEC.num_goals)
  assert lo <= n <= lo + 2
  np.testing.assert_array_equal(app1.goal_verb_G, v2.goal_verb_G)
  t1, t2 = np.asarray(app1.table_SxA), np.asarray(v2.table_SxA)
  # Same screens, new compositions: some v2 transitions are not in v1.
  assert set(np.unique(t2)) == set(np.unique(t1))
  assert (t1 != t2).any()
  changed = R.changed_goals(app1, v2)
  p1 = np.asarray(app1.proc_actions_GxL)
  p2 = np.asarray(v2.proc_actions_GxL)
  s2 = np.asarray(v2.proc_states_GxL1)
  new_steps = [(s2[g, j], p2[g, j]) for g in np.flatnonzero(changed)
               for j in range(SPEC.depth)
               if t1[s2[g, j], p2[g, j]] != s2[g, j + 1]]
  assert new_steps      # each changed procedure needs a step v1 lacks
  assert not changed[np.all(p1 == p2, -1) & np.all(
      np.asarray(app1.proc_states_GxL1) == s2, -1)].any()


def _reference_rollout(app, goal, state, action, horizon):
  ps = list(np.asarray(app.proc_states_GxL1)[goal])
  idx = lambda x: ps.index(x) if x in ps else -1
  out = [int(np.asarray(app.table_SxA)[state, action])]
  advanced = idx(out[0]) > idx(state)
  for _ in range(SPEC.max_horizon - 1):
    j = idx(out[-1])
    out.append(ps[j + 1] if advanced and j < SPEC.depth else out[-1])
  last = out[horizon - 1]
  prog = 2 if last == ps[-1] else int(idx(last) > idx(state))
  return out, prog


def test_true_rollout_matches_a_loop_transcription():
  _, v2 = _apps()
  app = R.to_device(v2)
  f = jax.jit(functools.partial(R.true_rollout, SPEC, app))
  rng = np.random.RandomState(0)
  for _ in range(40):
    g = rng.randint(SPEC.num_goals)
    s = (int(np.asarray(v2.proc_states_GxL1)[g, rng.randint(SPEC.depth)])
         if rng.rand() < 0.7 else rng.randint(SPEC.first_leaf))
    a = rng.randint(SPEC.num_names)
    h = rng.randint(1, SPEC.max_horizon + 1)
    states, prog = f(g, s, a, h)
    ref_s, ref_p = _reference_rollout(v2, g, s, a, h)
    assert np.asarray(states).tolist() == ref_s and int(prog) == ref_p


def test_training_batch_layout_and_targets():
  v1, v2 = _apps()
  apps = R.to_device(R.stack_apps([v1[0], v2]))
  b = jax.jit(functools.partial(
      R.sample_batch, SPEC, batch=64, kind_probs=(0.3, 0.3, 0.4),
      off_path_prob=0.2, invalid_prob=0.1, follow_prob=0.3,
      query_weight=0.5))(apps, jax.random.PRNGKey(0))
  tok, w, kind = (np.asarray(x) for x in b)
  assert tok.shape == w.shape == (64, SPEC.seq_len)
  assert set(kind) == {0, 1, 2}
  P = SPEC.prompt_len
  tut = tok[:, 2:2 + SPEC.tutorial_len]
  assert (tut[kind == 0] == R.NOTUT).all()
  for i in range(64):
    h = tok[i, P - 1] - SPEC.roll0 + 1
    assert tok[i, P + h] - SPEC.prog0 in (0, 1, 2)
    assert (w[i, P:P + h + 1] == 1).all() and (w[i, P + h + 1:] == 0).all()
    assert (w[i, SPEC.query_slice] == 0.5).all()
    same = (tut[i, :2] == tok[i, SPEC.query_slice]).all()
    state = tok[i, P - 4] - SPEC.state0
    action = tok[i, P - 2] - SPEC.name0
    first = tok[i, P] - SPEC.state0
    steps = tut[i, 4:].reshape(-1, 2) - (SPEC.name0, SPEC.state0)
    prev = np.concatenate([[0], steps[:-1, 1]])
    taught = [n for j, n in enumerate(steps[:, 1])
              if prev[j] == state and steps[j, 0] == action]
    if kind[i] == 2:    # the goal's own tutorial (a drifted procedure)
      assert same
      # It overrides v1 where it speaks; v1 holds elsewhere.
      assert first == (taught[0] if taught else
                       np.asarray(v1[0].table_SxA)[state, action])
    else:               # v1, with another goal's tutorial or none
      assert not same or kind[i] == 0
      assert first == np.asarray(v1[0].table_SxA)[state, action]


def test_rewrite_and_dense_scores_against_numpy():
  emb = np.random.RandomState(0).randn(SPEC.vocab_size, 8).astype(np.float32)
  q = np.asarray([[SPEC.verb0, SPEC.object0 + 1, SPEC.instance0,
                   SPEC.instance0 + 3]], np.int32)
  rq = np.asarray(R.rewrite(SPEC, jnp.asarray(q)))
  assert rq.tolist() == [[SPEC.verb0, SPEC.object0 + 1, R.PAD, R.PAD]]
  tuts = np.random.RandomState(1).randint(3, SPEC.vocab_size,
                                          (5, SPEC.tutorial_len))
  got = np.asarray(R.dense_scores(jnp.asarray(emb), jnp.asarray(rq),
                                  jnp.asarray(tuts)))
  mq = emb[rq[0, :2]].mean(0)
  for c in range(5):
    mt = emb[tuts[c]].mean(0)
    ref = mq @ mt / np.linalg.norm(mq) / np.linalg.norm(mt)
    np.testing.assert_allclose(got[0, c], ref, rtol=1e-5)


def test_select_closed_forms():
  p = jnp.asarray([[[0.1, 0.6, 0.3], [0.0, 0.3, 0.7], [0.9, 0.1, 0.0]],
                   [[0.5, 0.5, 0.0], [0.4, 0.6, 0.0], [0.3, 0.7, 0.0]]])
  key = jax.random.PRNGKey(0)
  # Expected progress: row 0 (0.6, 0.85, 0.05); row 1 (0.25, 0.3, 0.35).
  assert R.select(p, 0, key).tolist() == [1, 2]
  # Absolute: row 0 levels (0.5, 1, 0) -> 1; row 1 ties at 0.5 over {1, 2}
  # (candidate 0's most likely level is 'off', the first of a tie).
  picks = [int(R.select(p, 1, jax.random.PRNGKey(i))[1]) for i in range(40)]
  assert set(picks) == {1, 2}
  assert int(R.select(p, 1, key)[0]) == 1
  rand = np.asarray([R.select(p, 2, jax.random.PRNGKey(i)) for i in range(60)])
  assert set(rand.reshape(-1)) == {0, 1, 2}


@pytest.fixture(scope='module')
def tiny():
  model = lm_model.Model(lm_model.Config(
      vocab_size=SPEC.vocab_size, d_model=16, num_heads=2, num_layers=1,
      d_ff=32, max_len=SPEC.seq_len))
  return model, model.init(jax.random.PRNGKey(0))


def test_rerank_scores_are_the_query_logprob(tiny):
  model, params = tiny
  _, v2 = _apps()
  coll = R.make_collection(SPEC, v2, 0, 1)
  tasks = R.make_tasks(SPEC, coll, 0, 3)
  q = R.raw_query(SPEC, R.to_device(v2), tasks)
  tut = coll.tutorials_CxT[:2]
  got = np.asarray(R.rerank_scores(model, params, SPEC, q,
                                   jnp.broadcast_to(tut, (3, 2, tut.shape[1]))))
  seqs = np.asarray([np.concatenate([[R.BOS, R.TUT], np.asarray(tut[k]),
                                      [R.QRY], np.asarray(q[n, :2])])
                      for n in range(3) for k in range(2)])
  lp = np.asarray(jax.nn.log_softmax(model.apply(params, jnp.asarray(seqs)),
                                     -1))
  for i, seq in enumerate(seqs):
    ref = lp[i, -3, seq[-2]] + lp[i, -2, seq[-1]]
    np.testing.assert_allclose(got[i // 2, i % 2], ref, rtol=1e-4, atol=1e-5)
  # Tasks carry an instance that none of their goal's tutorials carry.
  inst = np.asarray(coll.tutorials_CxT)[:, 2:4] - SPEC.instance0
  for g, i in zip(np.asarray(tasks.goal_N), np.asarray(tasks.instance_Nx2)):
    own = inst[np.asarray(coll.goal_C) == g]
    assert not (own == i).all(-1).any()


def test_agent_loop_ends_on_leaves_and_scores_the_goal(tiny):
  model, params = tiny
  v1, v2 = _apps()
  app = R.to_device(v2)
  goals = jnp.arange(6)
  tut = jnp.broadcast_to(R.no_tutorial(SPEC), (6, SPEC.tutorial_len))
  succ, final = jax.jit(functools.partial(
      R.run_agent, model, params, SPEC, horizon=2))(
          app, goals, tut, jax.random.PRNGKey(0), selection=0)
  final = np.asarray(final)
  # After L steps every run sits on a leaf; success iff it is the goal.
  assert (final >= SPEC.first_leaf).all()
  np.testing.assert_array_equal(np.asarray(succ),
                                final == np.asarray(goals) + SPEC.first_leaf)
