"""R-WoM: a retrieval-augmented world model for computer-use agents (Mei et
al., "R-WoM: Retrieval-augmented World Model For Computer-use Agents", arXiv
2510.11892, ICLR 2026), on a drifted app simulator.

The app is a menu tree of depth L with `branching` items per screen (home ->
menus -> dialogs -> document states). States are tokens; every non-leaf
screen shows `branching` action names from a shared pool (one name leads to
different screens on different screens), so the app is a transition table

    T[state, action] -> state          (an invisible action is a no-op)

A goal is a leaf (a document state, described by a (verb, object) pair) and
its procedure is the action path from home. Version v1 is the training app;
`drift` builds v2 by renaming items (a new name from the pool) and moving
items with their sub-trees between screens of the same level until a
fraction (about 40%) of the procedures change: new compositions of v1's
screens and names, so a tutorial can teach them and nothing else can.

Tutorials are token sequences [verb obj inst inst a_1 s_1 ... a_L s_L]: the
v2 procedure with example instance tokens (file names); the collection
holds several per goal, so for a task's query [verb obj inst inst] the
tutorials of other goals that share its instance tokens are distractors.

The pipeline at each step i (Fig. 2 of the paper):

  * reasoning-aware retrieval: the query is rewritten into a generic one
    (`rewrite`: the instance tokens are stripped), dense retrieval ranks the
    collection by the cosine of mean token embeddings (`dense_scores`, the
    world model's embeddings as the encoder) and the world model reranks the
    top k listwise, E = f_rank(C_k, q), by the log-likelihood it gives the
    rewritten query after each tutorial (`rerank_scores`);
  * the policy proposes m candidate actions (the screen's visible items);
  * the world model simulates a k-step rollout per candidate in ONE
    autoregressive sequence conditioned on E,
        tau_hat = pi_w(o_i, a_i^j; E) = [s_{i+1} .. s_{i+k} <prog>]
    (`rollout`, KV-cached greedy sampling from lm/sample.py), where <prog>
    is WebDreamer's progress judgement OFF / ON-TRACK / DONE (0, 0.5, 1);
  * the listwise reward compares the candidates jointly, a softmax over
    their expected progress sum_v v p_j(v) (Table 14's listwise scoring),
    against absolute scoring, where each candidate gets its own {0, 0.5, 1}
    (its most likely level) and ties break at random; the argmax is
    executed in the true v2 app (`run_agent`).

R-WoM itself trains nothing (a frontier LLM reads the tutorial). The tiny
world model here stands in for that reading ability: it is trained on v1
transitions without a tutorial or with a distractor (targets from v1), and on
procedures of randomly drifted copies of v1 with their tutorial in context
(`sample_batch`), so it learns to follow a relevant tutorial and to fall back
on its v1 prior otherwise. The test drift v2 is a draw that training never
uses.

Rollout ground truth (training targets, `true_rollout`): s_{i+1} = T[s_i,
a]; if that step advanced along the goal's procedure path, the agent then
follows the procedure (the goal absorbs), else (off the path, or a no-op) it
stays put; <prog> = DONE if s_{i+k} is the goal, ON if s_{i+k} is further
along the path than s_i, else OFF.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.core import distributed
from iclrjax.lm import grpo
from iclrjax.lm import model as lm_model
from iclrjax.lm import sample as lm_sample

PAD, BOS, TUT, NOTUT, QRY, STATE, ACT = range(7)
PROG_LEVELS = ('off', 'on', 'done')
PROG_VALUES = (0.0, 0.5, 1.0)      # WebDreamer's absolute scores
KINDS = ('none', 'distractor', 'tutorial')   # training example kinds
SELECTIONS = ('listwise', 'absolute', 'random')
INSTANCE_LEN = 2


@dataclasses.dataclass(frozen=True)
class Spec:
  """The app's shape and the token layout (hashable: a jit static arg)."""
  branching: int = 3
  depth: int = 3
  num_names: int = 12
  num_instances: int = 8
  max_horizon: int = 3

  def __post_init__(self):
    if self.num_names < self.branching + 1:
      raise ValueError(f'Spec.num_names={self.num_names}: needs at least '
                       f'branching + 1 = {self.branching + 1} (renames)')

  @property
  def num_states(self) -> int:
    return sum(self.branching ** d for d in range(self.depth + 1))

  @property
  def num_goals(self) -> int:
    return self.branching ** self.depth

  @property
  def first_leaf(self) -> int:
    return self.num_states - self.num_goals

  @property
  def num_verbs(self) -> int:
    return self.branching

  @property
  def num_objects(self) -> int:
    return self.num_goals // self.branching

  # Token offsets.
  @property
  def roll0(self) -> int:
    return ACT + 1

  @property
  def prog0(self) -> int:
    return self.roll0 + self.max_horizon

  @property
  def state0(self) -> int:
    return self.prog0 + len(PROG_LEVELS)

  @property
  def name0(self) -> int:
    return self.state0 + self.num_states

  @property
  def verb0(self) -> int:
    return self.name0 + self.num_names

  @property
  def object0(self) -> int:
    return self.verb0 + self.num_verbs

  @property
  def instance0(self) -> int:
    return self.object0 + self.num_objects

  @property
  def vocab_size(self) -> int:
    return self.instance0 + self.num_instances

  @property
  def tutorial_len(self) -> int:
    return 2 + INSTANCE_LEN + 2 * self.depth

  @property
  def prompt_len(self) -> int:
    """[BOS TUT tutorial QRY verb obj STATE s ACT a ROLL_h]."""
    return 2 + self.tutorial_len + 3 + 4 + 1

  @property
  def seq_len(self) -> int:
    return self.prompt_len + self.max_horizon + 1

  @property
  def query_slice(self) -> slice:
    """The rewritten query's (verb, obj) positions in a prompt."""
    start = 2 + self.tutorial_len + 1
    return slice(start, start + 2)


class App(NamedTuple):
  """One app version (leading axes may stack versions).

  table_SxA: next state of every (state, name); visible_SxB: the names a
  screen shows (-1 at leaves); proc_actions_GxL / proc_states_GxL1: each
  goal's procedure (home, ..., leaf); goal_verb_G / goal_object_G: its
  description (fixed across versions).
  """
  table_SxA: jax.Array
  visible_SxB: jax.Array
  proc_actions_GxL: jax.Array
  proc_states_GxL1: jax.Array
  goal_verb_G: jax.Array
  goal_object_G: jax.Array


# --------------------------------------------------------------------------
# The app and its drift (host-side numpy: the apps are data).


def _children(spec: Spec) -> list[list[int]]:
  """Breadth-first numbering: the children of each state."""
  b, out, nxt = spec.branching, [], 1
  for s in range(spec.num_states):
    if s >= spec.first_leaf:
      out.append([])
    else:
      out.append(list(range(nxt, nxt + b)))
      nxt += b
  return out


def _build(spec: Spec, children, names, verb, obj) -> App:
  S, A = spec.num_states, spec.num_names
  table = np.tile(np.arange(S)[:, None], (1, A))
  visible = np.full((S, spec.branching), -1)
  parent = {}
  for s, (kids, nm) in enumerate(zip(children, names)):
    for c, n in zip(kids, nm):
      table[s, n] = c
      parent[c] = (s, n)
    if kids:
      visible[s] = nm
  leaves = sorted(s for s in range(S) if not children[s])
  acts, states = [], []
  for leaf in leaves:
    path, a = [leaf], []
    while path[-1] in parent:
      p, n = parent[path[-1]]
      path.append(p)
      a.append(n)
    states.append(path[::-1])
    acts.append(a[::-1])
  goal_of_leaf = np.asarray(leaves)
  order = np.argsort(goal_of_leaf)     # goals indexed by leaf id
  return App(table_SxA=table.astype(np.int32),
             visible_SxB=visible.astype(np.int32),
             proc_actions_GxL=np.asarray(acts, np.int32)[order],
             proc_states_GxL1=np.asarray(states, np.int32)[order],
             goal_verb_G=np.asarray(verb, np.int32),
             goal_object_G=np.asarray(obj, np.int32))


def make_app(spec: Spec, seed: int):
  """v1: (App, children, names) from a seed: random names per screen and a
  random (verb, object) description per goal."""
  rng = np.random.RandomState(seed)
  children = _children(spec)
  names = [list(rng.choice(spec.num_names, spec.branching, replace=False))
           if kids else [] for kids in children]
  pairs = rng.permutation(spec.num_goals)
  verb, obj = pairs % spec.num_verbs, pairs // spec.num_verbs
  return _build(spec, children, names, verb, obj), children, names


def changed_goals(a: App, b: App) -> np.ndarray:
  """[G] bool: whose procedure (actions or screens) differs."""
  return ((np.asarray(a.proc_actions_GxL) != np.asarray(b.proc_actions_GxL))
          .any(-1) | (np.asarray(a.proc_states_GxL1)
                      != np.asarray(b.proc_states_GxL1)).any(-1))


def drift(spec: Spec, v1, seed: int, fraction: float,
          move_prob: float = 0.5) -> App:
  """A new version of `v1` = make_app(...) in which round(fraction * G)
  procedures (up to + 2) changed: random renames (an item gets a name from
  the pool that its screen does not show) and, with probability
  `move_prob` per edit, moves (two screens of one level swap an item with its
  sub-tree, each keeping the slot's name unless it clashes); each edit picks
  a level uniformly, then a screen on it. Screens, names and descriptions
  all come from v1."""
  app1, children, names = v1
  rng = np.random.RandomState(seed)
  G = spec.num_goals
  lo = int(round(fraction * G))
  hi = lo + 2
  children = [list(k) for k in children]
  names = [list(n) for n in names]
  verb, obj = np.asarray(app1.goal_verb_G), np.asarray(app1.goal_object_G)
  inner = [s for s in range(spec.num_states) if children[s]]
  level = np.zeros(spec.num_states, int)
  for s in inner:
    for c in children[s]:
      level[c] = level[s] + 1
  app = app1
  for _ in range(10_000):
    n_changed = changed_goals(app1, app).sum()
    if n_changed >= lo:
      break
    ch, nm = [list(k) for k in children], [list(n) for n in names]
    lvl = rng.randint(spec.depth)
    at = [q for q in inner if level[q] == lvl]
    p = at[rng.randint(len(at))]
    i = rng.randint(spec.branching)
    if rng.rand() >= move_prob:      # rename
      free = [n for n in range(spec.num_names) if n not in nm[p]]
      nm[p][i] = free[rng.randint(len(free))]
    else:                     # move: swap with a screen of the same level
      peers = [q for q in inner if level[q] == level[p] and q != p]
      if not peers:
        continue
      q = peers[rng.randint(len(peers))]
      j = rng.randint(spec.branching)
      ch[p][i], ch[q][j] = ch[q][j], ch[p][i]
      for s, k in ((p, i), (q, j)):
        if nm[s].count(nm[s][k]) > 1:
          free = [n for n in range(spec.num_names) if n not in nm[s]]
          nm[s][k] = free[rng.randint(len(free))]
    new = _build(spec, ch, nm, verb, obj)
    if changed_goals(app1, new).sum() <= hi:
      children, names, app = ch, nm, new
  return app


def stack_apps(apps) -> App:
  return App(*(np.stack(x) for x in zip(*apps)))


def to_device(app: App) -> App:
  return App(*(jnp.asarray(x) for x in app))


# --------------------------------------------------------------------------
# Tokens.


def tutorial_tokens(spec: Spec, app: App, goal, instance_2) -> jax.Array:
  """[verb obj inst inst a_1 s_1 .. a_L s_L] describing `goal`'s procedure
  in `app` (jnp; goal may be traced)."""
  acts = app.proc_actions_GxL[goal] + spec.name0
  states = app.proc_states_GxL1[goal, 1:] + spec.state0
  pairs = jnp.stack([acts, states], -1).reshape(-1)
  head = jnp.stack([app.goal_verb_G[goal] + spec.verb0,
                    app.goal_object_G[goal] + spec.object0])
  return jnp.concatenate([head, instance_2 + spec.instance0, pairs]
                         ).astype(jnp.int32)


def no_tutorial(spec: Spec) -> jax.Array:
  return jnp.full((spec.tutorial_len,), NOTUT, jnp.int32)


def prompt_tokens(spec: Spec, tutorial, verb, obj, state, action, horizon
                  ) -> jax.Array:
  """[BOS TUT tutorial QRY verb obj STATE s ACT a ROLL_h] (ids are app
  indices; horizon in 1 .. max_horizon)."""
  return jnp.concatenate([
      jnp.asarray([BOS, TUT], jnp.int32), tutorial,
      jnp.stack([jnp.int32(QRY), verb + spec.verb0, obj + spec.object0,
                 jnp.int32(STATE), state + spec.state0, jnp.int32(ACT),
                 action + spec.name0, spec.roll0 + horizon - 1]
                ).astype(jnp.int32)])


def path_index(app: App, goal, state) -> jax.Array:
  """Position of `state` on `goal`'s procedure path (0 = home), -1 off it."""
  on = app.proc_states_GxL1[goal] == state
  return jnp.where(on.any(), jnp.argmax(on), -1)


def true_rollout(spec: Spec, app: App, goal, state, action, horizon):
  """(states [max_horizon] (the first `horizon` are the rollout), progress
  level) under `app` (see the module doc)."""
  L = spec.depth
  path_s = app.proc_states_GxL1[goal]
  s1 = app.table_SxA[state, action]
  j0 = path_index(app, goal, state)
  moved_on = path_index(app, goal, s1) > j0   # else off the path or a no-op

  def nxt(x, _):
    j = path_index(app, goal, x)
    y = jnp.where(moved_on & (j < L), path_s[jnp.minimum(j + 1, L)], x)
    return y, y

  _, rest = jax.lax.scan(nxt, s1, None, length=spec.max_horizon - 1)
  states = jnp.concatenate([s1[None], rest])
  last = states[horizon - 1]
  j1 = path_index(app, goal, last)
  prog = jnp.where(last == path_s[L], 2, jnp.where(j1 > j0, 1, 0))
  return states, prog


# --------------------------------------------------------------------------
# Training data.


class Batch(NamedTuple):
  tokens_BxL: jax.Array
  weights_BxL: jax.Array
  kind_B: jax.Array


def sample_example(spec: Spec, apps: App, key, *, kind_probs, off_path_prob,
                   invalid_prob, follow_prob, query_weight):
  """One training sequence. apps: [K + 1] stacked versions, index 0 = v1,
  1..K the training drifts (never the test drift). kind 'none': v1, no
  tutorial; 'distractor': v1 with another goal's tutorial from a random
  version; 'tutorial': the goal's procedure in a random drifted version,
  its tutorial in context, and v1's transitions elsewhere. The candidate action is the procedure's next one with
  probability `follow_prob` (on the path), an arbitrary name (a no-op when
  the screen does not show it) with `invalid_prob`, else one of the
  screen's items. Targets: the rollout states and <prog> (weight 1), the query
  (weight `query_weight`: the reranker's likelihood)."""
  ks = jax.random.split(key, 10)
  K1 = apps.table_SxA.shape[0]
  kind = jax.random.choice(ks[0], len(KINDS), p=jnp.asarray(kind_probs))
  env_i = jnp.where(kind == 2, jax.random.randint(ks[1], (), 1, K1), 0)
  env = jax.tree.map(lambda x: x[env_i], apps)
  G, L = spec.num_goals, spec.depth
  goal = jax.random.randint(ks[2], (), 0, G)
  # v1's table with the goal's drifted procedure written in: what the
  # tutorial teaches changes, everything else is the v1 prior.
  path = env.proc_states_GxL1[goal]
  env = env._replace(table_SxA=apps.table_SxA[0].at[
      path[:L], env.proc_actions_GxL[goal]].set(path[1:]))
  on_state = env.proc_states_GxL1[goal, jax.random.randint(ks[3], (), 0, L)]
  off_state = jax.random.randint(ks[4], (), 0, spec.first_leaf)
  state = jnp.where(jax.random.uniform(ks[5]) < off_path_prob, off_state,
                    on_state)
  vis = env.visible_SxB[state]
  u = jax.random.uniform(ks[6])
  j = path_index(env, goal, state)
  action = jnp.where(
      u < invalid_prob, jax.random.randint(ks[7], (), 0, spec.num_names),
      vis[jax.random.randint(ks[8], (), 0, spec.branching)])
  action = jnp.where((u > 1 - follow_prob) & (j >= 0),
                     env.proc_actions_GxL[goal, jnp.clip(j, 0, L - 1)],
                     action)
  horizon = jax.random.randint(ks[9], (), 1, spec.max_horizon + 1)
  kd = jax.random.split(jax.random.fold_in(key, 1), 3)
  other = (goal + jax.random.randint(kd[0], (), 1, G)) % G
  d_env = jax.tree.map(lambda x: x[jax.random.randint(kd[1], (), 0, K1)],
                       apps)
  inst = jax.random.choice(kd[2], spec.num_instances, (INSTANCE_LEN,),
                           replace=False)
  tut = jnp.where(kind == 2, tutorial_tokens(spec, env, goal, inst),
                  tutorial_tokens(spec, d_env, other, inst))
  tut = jnp.where(kind == 0, no_tutorial(spec), tut)
  states, prog = true_rollout(spec, env, goal, state, action, horizon)
  prompt = prompt_tokens(spec, tut, env.goal_verb_G[goal],
                         env.goal_object_G[goal], state, action, horizon)
  H = spec.max_horizon
  t = jnp.arange(H + 1)
  rollout = jnp.where(t < horizon, jnp.append(states, 0) + spec.state0,
                      PAD)
  rollout = jnp.where(t == horizon, spec.prog0 + prog, rollout)
  tokens = jnp.concatenate([prompt, rollout.astype(jnp.int32)])
  w = jnp.zeros(spec.seq_len).at[spec.query_slice].set(query_weight)
  w = w.at[spec.prompt_len:].set((t <= horizon).astype(jnp.float32))
  return tokens, w, kind


def sample_batch(spec: Spec, apps: App, key, batch: int, **kw) -> Batch:
  """`batch` examples; inside a training step on a mesh their keys (and so
  the examples) split over 'data' (`distributed.shard_batch`)."""
  keys = distributed.shard_batch(jax.random.split(key, batch))
  toks, w, kind = jax.vmap(
      lambda k: sample_example(spec, apps, k, **kw))(keys)
  return Batch(toks, w, kind)


# --------------------------------------------------------------------------
# Tutorials, tasks, retrieval.


class Collection(NamedTuple):
  tutorials_CxT: jax.Array
  goal_C: jax.Array


class Tasks(NamedTuple):
  goal_N: jax.Array
  instance_Nx2: jax.Array


def make_collection(spec: Spec, app: App, seed: int, per_goal: int
                    ) -> Collection:
  """`per_goal` tutorials of each goal's procedure in `app`, each with its
  own random example instance."""
  rng = np.random.RandomState(seed)
  rows, goals = [], []
  for g in range(spec.num_goals):
    for _ in range(per_goal):
      inst = rng.choice(spec.num_instances, INSTANCE_LEN, replace=False)
      rows.append(np.asarray(tutorial_tokens(spec, app, g, jnp.asarray(inst))))
      goals.append(g)
  return Collection(jnp.asarray(np.stack(rows)), jnp.asarray(goals, jnp.int32))


def make_tasks(spec: Spec, coll: Collection, seed: int, n: int) -> Tasks:
  """n tasks: a uniform goal and an instance that its own tutorials do not
  carry but other goals' tutorials do (the distractors share it)."""
  rng = np.random.RandomState(seed)
  tut = np.asarray(coll.tutorials_CxT)
  goal_c = np.asarray(coll.goal_C)
  inst_c = [tuple(r) for r in tut[:, 2:2 + INSTANCE_LEN] - spec.instance0]
  goals, insts = [], []
  for _ in range(n):
    g = rng.randint(spec.num_goals)
    own = {inst_c[c] for c in np.flatnonzero(goal_c == g)}
    pool = sorted({inst_c[c] for c in np.flatnonzero(goal_c != g)} - own)
    goals.append(g)
    insts.append(pool[rng.randint(len(pool))])
  return Tasks(jnp.asarray(goals, jnp.int32), jnp.asarray(insts, jnp.int32))


def raw_query(spec: Spec, app: App, tasks: Tasks) -> jax.Array:
  """[N, 4] the task as the agent gets it: verb, object, instance tokens."""
  return jnp.concatenate([
      (app.goal_verb_G[tasks.goal_N] + spec.verb0)[:, None],
      (app.goal_object_G[tasks.goal_N] + spec.object0)[:, None],
      tasks.instance_Nx2 + spec.instance0], 1).astype(jnp.int32)


def rewrite(spec: Spec, query_NxQ: jax.Array) -> jax.Array:
  """Reasoning-aware query rewriting: the de-contextualised 'how to' query,
  the instance tokens replaced by PAD (ignored by the encoder)."""
  is_inst = query_NxQ >= spec.instance0
  return jnp.where(is_inst, PAD, query_NxQ)


def mean_embedding(embed_VxD, tokens_NxT) -> jax.Array:
  """Mean embedding of the non-PAD tokens."""
  m = (tokens_NxT != PAD).astype(jnp.float32)[..., None]
  return (embed_VxD[tokens_NxT] * m).sum(-2) / jnp.maximum(m.sum(-2), 1.0)


def dense_scores(embed_VxD, query_NxQ, tutorials_CxT) -> jax.Array:
  """Cosine of the mean token embeddings: [N, C]."""
  q = mean_embedding(embed_VxD, query_NxQ)
  t = mean_embedding(embed_VxD, tutorials_CxT)
  q = q / jnp.linalg.norm(q, axis=-1, keepdims=True).clip(1e-9)
  t = t / jnp.linalg.norm(t, axis=-1, keepdims=True).clip(1e-9)
  return q @ t.T


def rerank_scores(model: lm_model.Model, params, spec: Spec,
                  query_NxQ: jax.Array, tutorials_NxKxT: jax.Array
                  ) -> jax.Array:
  """log p_w(verb, obj | [BOS TUT tutorial QRY]) of each candidate tutorial:
  [N, K] (the listwise reranker reads all K and keeps the argmax)."""
  N, K, T = tutorials_NxKxT.shape
  q = jnp.broadcast_to(query_NxQ[:, None, :2], (N, K, 2))
  seq = jnp.concatenate([
      jnp.full((N, K, 2), jnp.asarray([BOS, TUT], jnp.int32)),
      tutorials_NxKxT, jnp.full((N, K, 1), QRY, jnp.int32), q], -1)
  lp = lm_sample.sequence_logprobs(model, params, seq.reshape(N * K, -1))
  return lp[:, -2:].sum(-1).reshape(N, K)


def retrieve(model: lm_model.Model, params, spec: Spec, query_NxQ,
             coll: Collection, *, rewrite_query: bool, rerank: bool,
             top_k: int) -> jax.Array:
  """Index of the tutorial the pipeline picks for each query: [N]."""
  q = rewrite(spec, query_NxQ) if rewrite_query else query_NxQ
  s = dense_scores(params['embed']['embedding'], q, coll.tutorials_CxT)
  if not rerank:
    return jnp.argmax(s, -1)
  _, top = jax.lax.top_k(s, top_k)                         # [N, k]
  r = rerank_scores(model, params, spec, rewrite(spec, query_NxQ),
                    coll.tutorials_CxT[top])
  return jnp.take_along_axis(top, jnp.argmax(r, -1)[:, None], -1)[:, 0]


def recall_at_1(coll: Collection, picked_N, goal_N) -> jax.Array:
  return (coll.goal_C[picked_N] == goal_N).mean()


# --------------------------------------------------------------------------
# World-model rollouts, rewards and the agent loop.


def rollout(model: lm_model.Model, params, spec: Spec, prompts_NxP,
            horizon: int):
  """One autoregressive sequence per prompt: greedy states s_{i+1} ..
  s_{i+h} (lm/sample.py), then the distribution over <prog> levels at the
  next position. Returns (states [N, h] as app indices, p_prog [N, 3])."""
  s = lm_sample.sample(model, params, prompts_NxP, jax.random.PRNGKey(0),
                       max_new_tokens=horizon, greedy=True)
  seq = jnp.concatenate([prompts_NxP, s.tokens_NxT], 1)
  logits = model.apply(params, seq)[:, -1]
  lv = logits[:, spec.prog0:spec.prog0 + len(PROG_LEVELS)]
  return s.tokens_NxT - spec.state0, jax.nn.softmax(lv, -1)


def select(p_prog_NxMx3: jax.Array, selection: jax.Array, key: jax.Array,
           temperature: float = 1.0) -> jax.Array:
  """The executed candidate per row [N] (selection: index into SELECTIONS).

  listwise: argmax of softmax_j(E_j / temperature), E_j = sum_v v p_j(v)
  (one joint ranking of all candidates); absolute: each candidate scored
  alone by its most likely level in {0, 0.5, 1}, ties broken uniformly;
  random: uniform (the control)."""
  vals = jnp.asarray(PROG_VALUES)
  expected = p_prog_NxMx3 @ vals
  listwise = jnp.argmax(jax.nn.softmax(expected / temperature, -1), -1)
  noise = jax.random.uniform(key, expected.shape)
  absolute = jnp.argmax(vals[jnp.argmax(p_prog_NxMx3, -1)] + 0.1 * noise, -1)
  rand = jnp.argmax(noise, -1)
  return jnp.stack([listwise, absolute, rand])[selection]


def run_agent(model: lm_model.Model, params, spec: Spec, app: App,
              goal_N, tutorials_NxT, key, *, horizon: int, selection,
              budget: int | None = None):
  """The R-WoM loop in the true app: at each of `budget` (default L) steps
  the m = branching visible items are the candidates, each is rolled out
  `horizon` steps conditioned on the task's tutorial, the rewards select
  one, and `app` executes it. Returns (success [N], final state [N])."""
  N, B = goal_N.shape[0], spec.branching
  verb, obj = app.goal_verb_G[goal_N], app.goal_object_G[goal_N]
  goal_state = app.proc_states_GxL1[goal_N, -1]
  build = jax.vmap(functools.partial(prompt_tokens, spec),
                   in_axes=(None, None, None, None, 0, None))

  def step(state_N, k):
    cands = app.visible_SxB[state_N]                          # [N, B]
    prompts = jax.vmap(build, in_axes=(0, 0, 0, 0, 0, None))(
        tutorials_NxT, verb, obj, state_N, jnp.maximum(cands, 0), horizon)
    _, p = rollout(model, params, spec, prompts.reshape(N * B, -1), horizon)
    pick = select(p.reshape(N, B, -1), selection, k)
    a = jnp.take_along_axis(cands, pick[:, None], -1)[:, 0]
    leaf = cands[:, 0] < 0
    return jnp.where(leaf, state_N, app.table_SxA[state_N,
                                                  jnp.maximum(a, 0)]), None

  state0 = jnp.zeros((N,), jnp.int32)
  final, _ = jax.lax.scan(step, state0,
                          jax.random.split(key, budget or spec.depth))
  return (final == goal_state).astype(jnp.float32), final


# --------------------------------------------------------------------------
# Probes (no tutorial unless given).


def transition_probe(model: lm_model.Model, params, spec: Spec, app: App,
                     tutorials_GxT=None, per_call: int = 0):
  """(next-state identification accuracy, full-procedure alignment) of the
  world model on `app`.

  Identification: for every goal and every visible (screen, item) pair of
  `app`, the greedy first rollout state equals T[screen, item]. Alignment:
  the fraction of goals for which the model predicts every step of the
  goal's procedure (s_j, a_j) -> s_{j+1} correctly (the whole procedure
  agrees with the reference). `per_call` prompts roll out at a time (0:
  all; the rollouts are greedy, so the numbers are the same)."""
  G, L, B = spec.num_goals, spec.depth, spec.branching
  first = lambda p: grpo.chunked(
      lambda x: rollout(model, params, spec, x, 1)[0][:, 0], p, per_call)
  tut = (jnp.broadcast_to(no_tutorial(spec), (G, spec.tutorial_len))
         if tutorials_GxT is None else tutorials_GxT)
  verb, obj = app.goal_verb_G, app.goal_object_G
  inner = jnp.arange(spec.first_leaf)
  acts = app.visible_SxB[inner]                              # [I, B]
  I = inner.shape[0]
  build = jax.vmap(functools.partial(prompt_tokens, spec),
                   in_axes=(None, None, None, 0, 0, None))
  per_goal = jax.vmap(build, in_axes=(0, 0, 0, None, None, None))
  p = per_goal(tut, verb, obj, jnp.repeat(inner, B), acts.reshape(-1), 1)
  states = first(p.reshape(G * I * B, -1))
  truth = app.table_SxA[inner[:, None], acts].reshape(-1)
  ident = (states.reshape(G, I * B) == truth[None]).mean()
  proc_s = app.proc_states_GxL1[:, :L]
  proc_p = jax.vmap(jax.vmap(
      functools.partial(prompt_tokens, spec),
      in_axes=(None, None, None, 0, 0, None)),
      in_axes=(0, 0, 0, 0, 0, None))(tut, verb, obj, proc_s,
                                     app.proc_actions_GxL, 1)
  st = first(proc_p.reshape(G * L, -1))
  ok = st.reshape(G, L) == app.proc_states_GxL1[:, 1:]
  return ident, ok.all(-1).mean()
