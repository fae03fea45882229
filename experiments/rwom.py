"""R-WoM's retrieval-augmented world model on a drifted app ("R-WoM:
Retrieval-augmented World Model For Computer-use Agents", arXiv 2510.11892;
configs/rwom.py).

  python -m experiments.rwom --config=configs/rwom.py:smoke

The method is `iclrjax/lm/rwom.py`. Phase `world_model` trains one decoder
per seed (the vmapped axis) on v1 transitions (no tutorial, or a
distractor) and on tutorial-following examples from training drifts of v1.
Then, on the host, with one tutorial collection and one task set for all
seeds (the test drift v2, never used in training):

  * retrieval: Recall@1 of raw dense retrieval, rewrite only, and rewrite +
    listwise rerank (top k) by the trained world model and by the untrained
    one (the control);
  * agent: success in the true v2 app of the R-WoM loop (m = branching
    visible candidates, a rollout of h steps per candidate, the reward picks
    one) with no tutorial, a distractor tutorial (control), raw-dense
    retrieval, the full pipeline, and the oracle tutorial; at h = 1 and
    h = max; listwise vs absolute vs random selection;
  * probe: next-state identification and full-procedure alignment without
    retrieval on v2 and on v1 (control), and with the oracle tutorials.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import plots
from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import loop as loop_lib
from iclrjax.lm import grpo
from iclrjax.lm import model as lm_model
from iclrjax.lm import rwom

EVAL_SEED = 12345   # the tutorial collection and the tasks
ARMS = ('none', 'distractor', 'raw_dense', 'retrieved', 'oracle')


def make_spec(c: ml_collections.ConfigDict) -> rwom.Spec:
  a = c.app
  return rwom.Spec(branching=a.branching, depth=a.depth,
                   num_names=a.num_names, num_instances=a.num_instances,
                   max_horizon=max(c.eval.horizons))


def make_model(c: ml_collections.ConfigDict) -> lm_model.Model:
  spec = make_spec(c)
  return lm_model.Model(lm_model.Config(
      vocab_size=spec.vocab_size, max_len=spec.seq_len, **c.model.to_dict()))


@functools.lru_cache(maxsize=None)
def _apps(spec: rwom.Spec, seed: int, fraction: float, num_drifts: int,
          train_fraction: float, move_prob: float):
  v1 = rwom.make_app(spec, seed)
  v2 = rwom.drift(spec, v1, 2 * seed + 1, fraction, move_prob)
  train = [rwom.drift(spec, v1, 2 * (seed + 1 + k), train_fraction,
                       move_prob) for k in range(num_drifts)]
  return v1[0], v2, rwom.stack_apps([v1[0]] + train)


def make_apps(c):
  """(v1, v2, training versions [K + 1] with v1 first), host numpy. The
  training drifts (even seeds; v2 has an odd one) change train.drift_fraction
  of the procedures, so that most tutorial examples need the tutorial."""
  return _apps(make_spec(c), c.app.seed, c.app.drift_fraction,
               c.train.num_drifts, c.train.drift_fraction,
               c.app.move_prob)


class State(NamedTuple):
  train: grpo.TrainState
  key: jax.Array


def make_training(c: ml_collections.ConfigDict):
  """init(key) -> State, step(state, t, apps): one teacher-forced step on a
  fresh batch (a function of (seed, t)) from the training versions `apps` =
  make_apps(c)[2] (passed as data)."""
  spec, model = make_spec(c), make_model(c)
  opt = optax.adam(c.train.learning_rate)
  sft_step = grpo.make_sft_step(model, opt)
  tr = c.train

  def init(key):
    params = model.init(jax.random.fold_in(key, 0))
    return State(grpo.init_state(params, opt), jax.random.fold_in(key, 1))

  def step(state, t, apps):
    b = rwom.sample_batch(
        spec, apps, jax.random.fold_in(state.key, t),
        tr.batch, kind_probs=tuple(tr.kind_probs),
        off_path_prob=tr.off_path_prob, invalid_prob=tr.invalid_prob,
        follow_prob=tr.follow_prob, query_weight=tr.query_weight)
    train, metrics = sft_step(state.train, b.tokens_BxL, b.weights_BxL)
    return state._replace(train=train), metrics

  return init, step


class EvalData(NamedTuple):
  coll: rwom.Collection
  tasks: rwom.Tasks
  query_NxQ: jax.Array


def eval_data(c) -> EvalData:
  spec = make_spec(c)
  v2 = make_apps(c)[1]
  coll = rwom.make_collection(spec, v2, EVAL_SEED, c.app.tutorials_per_goal)
  tasks = rwom.make_tasks(spec, coll, EVAL_SEED + 1, c.eval.num_tasks)
  return EvalData(coll, tasks, rwom.raw_query(spec, rwom.to_device(v2),
                                              tasks))


RETRIEVERS = {'raw_dense': (False, False), 'rewrite_dense': (True, False),
              'raw_rerank': (False, True), 'rewrite_rerank': (True, True)}


@functools.lru_cache(maxsize=None)
def _retrieve_fn(model, spec, top_k):
  def one(params, query, coll):
    return {name: rwom.retrieve(model, params, spec, query, coll,
                                rewrite_query=rw, rerank=rr, top_k=top_k)
            for name, (rw, rr) in RETRIEVERS.items()}
  return jax.jit(jax.vmap(one, in_axes=(0, None, None)))


def retrieval(c, params_S, data: EvalData) -> tuple[dict, dict]:
  """(picked tutorial per retriever [S, N], Recall@1 per retriever [S])."""
  f = _retrieve_fn(make_model(c), make_spec(c), c.eval.top_k)
  picked = f(params_S, data.query_NxQ, data.coll)
  recall = {k: np.asarray((data.coll.goal_C[v] == data.tasks.goal_N[None])
                          .mean(-1)) for k, v in picked.items()}
  return picked, recall


def arm_tutorials(c, data: EvalData, picked: dict, num_seeds: int) -> dict:
  """[S, N, T] tutorials of each arm."""
  spec = make_spec(c)
  S, N = num_seeds, data.tasks.goal_N.shape[0]
  g = data.tasks.goal_N
  per = c.app.tutorials_per_goal
  other = (g + 1 + jnp.arange(N) % (spec.num_goals - 1)) % spec.num_goals
  full = lambda x: jnp.broadcast_to(x, (S,) + x.shape)
  return {
      'none': full(jnp.broadcast_to(rwom.no_tutorial(spec),
                                    (N, spec.tutorial_len))),
      'distractor': full(data.coll.tutorials_CxT[other * per]),
      'raw_dense': data.coll.tutorials_CxT[picked['raw_dense']],
      'retrieved': data.coll.tutorials_CxT[picked['rewrite_rerank']],
      'oracle': full(data.coll.tutorials_CxT[g * per]),
  }


@functools.lru_cache(maxsize=None)
def _agent_fn(model, spec, horizon):
  def one(params, app, goal, tut, key, selection):
    return rwom.run_agent(model, params, spec, app, goal, tut, key,
                          horizon=horizon, selection=selection)[0].mean()
  return jax.jit(jax.vmap(one, in_axes=(0, None, None, 0, None, None)))


def agent_success(c, params_S, data: EvalData, tutorials_SxNxT, horizon: int,
                  selection: str) -> np.ndarray:
  """Success rate in the true v2 app per seed [S]."""
  f = _agent_fn(make_model(c), make_spec(c), horizon)
  v2 = rwom.to_device(make_apps(c)[1])
  out = f(params_S, v2, data.tasks.goal_N, tutorials_SxNxT,
          jax.random.PRNGKey(EVAL_SEED + 2),
          jnp.int32(rwom.SELECTIONS.index(selection)))
  return np.asarray(distributed.to_host(out))


@functools.lru_cache(maxsize=None)
def _probe_fn(model, spec, per_call=0):
  def one(params, app, tut):
    return rwom.transition_probe(model, params, spec, app, tut, per_call)
  return jax.jit(jax.vmap(one, in_axes=(0, None, None)))


def probe(c, params_S, version: str, oracle: bool = False):
  """(next-state identification [S], full-procedure alignment [S]) on
  version 'v1' | 'v2', without a tutorial or with each goal's own."""
  spec = make_spec(c)
  v1, v2, _ = make_apps(c)
  app = rwom.to_device(v1 if version == 'v1' else v2)
  tut = jnp.broadcast_to(rwom.no_tutorial(spec),
                         (spec.num_goals, spec.tutorial_len))
  if oracle:
    tut = jax.vmap(lambda g: rwom.tutorial_tokens(
        spec, app, g, jnp.arange(rwom.INSTANCE_LEN)))(
            jnp.arange(spec.num_goals))
  ident, align = _probe_fn(make_model(c), spec, c.eval.per_call)(
      params_S, app, tut)
  return np.asarray(ident), np.asarray(align)


def untrained_params(c):
  """The world models' parameters before training (the training keys)."""
  init, _ = make_training(c)
  return loop_lib.init_states(
      init, loop_lib.seed_keys(c.seed, c.num_seeds)).train.params


def _fmt(x) -> str:
  return ', '.join(f'{v:.3f}' for v in np.atleast_1d(x))


def _m(x) -> float:
  return float(np.mean(x))


def evaluate_claims(c, m: dict[str, np.ndarray]) -> list[launch.Claim]:
  """m: per-seed numbers 'probe/next_state/v2', 'probe/alignment/v2', the
  same for v1 (control), 'probe/next_state/untrained'; 'success/h{h}/{arm}'
  (listwise) for the arms at h = H (all) and h = 1 ('none', 'retrieved');
  'success/h{H}/retrieved_absolute', 'success/h{H}/retrieved_random';
  'recall/{retriever}' and 'recall/rewrite_rerank_untrained'."""
  cl, H = c.claims, max(c.eval.horizons)
  claims = []

  ns, al = m['probe/next_state/v2'], m['probe/alignment/v2']
  ns1, al1 = m['probe/next_state/v1'], m['probe/alignment/v1']
  probe_ok = lambda n, a: bool(_m(n) >= cl.min_next_state
                               and _m(a) <= cl.max_alignment)
  claims.append(launch.Claim(
      claim=(f'Probe: without retrieval on the drifted app, next-state '
             f'identification is >= {cl.min_next_state} while full-procedure '
             f'alignment is <= {cl.max_alignment}.'),
      holds=probe_ok(ns, al),
      evidence=(f'v2: next-state {_m(ns):.3f} ({_fmt(ns)}), alignment '
                f'{_m(al):.3f} ({_fmt(al)})'),
      control=launch.control_text(
          'the same probe on v1 (no drift)', f'next-state {_m(ns1):.3f}, '
          f'alignment {_m(al1):.3f}', probe_ok(ns1, al1)),
      paper='next-state > 75%, planning alignment <= 65% (LLMs, no RAG)'))

  s = lambda arm, h=H: m[f'success/h{h}/{arm}']
  none, ret, orc, dis = s('none'), s('retrieved'), s('oracle'), s('distractor')
  g = cl.min_grounding_gain
  claims.append(launch.Claim(
      claim=(f'Grounding helps, monotonically: success at horizon {H}, '
             f'oracle >= retrieved >= none + {g:.2f}.'),
      holds=bool(_m(orc) >= _m(ret) >= _m(none) + g),
      evidence=(f'oracle {_m(orc):.3f} ({_fmt(orc)}), retrieved '
                f'{_m(ret):.3f} ({_fmt(ret)}), none {_m(none):.3f} '
                f'({_fmt(none)}); raw dense retrieval '
                f'{_m(s("raw_dense")):.3f}'),
      control=launch.control_text(
          'a distractor tutorial (another goal\'s) in the retrieved slot',
          f'{_m(dis):.3f} (gain over none {_m(dis) - _m(none):+.3f})',
          bool(_m(dis) >= _m(none) + g)),
      paper='none < retrieved < oracle (Fig. 4); OSWorld 38.54 vs 31.24'))

  d_ret = _m(ret) - _m(s('retrieved', 1))
  d_none = _m(none) - _m(s('none', 1))
  claims.append(launch.Claim(
      claim=(f'Longer horizons help grounded rollouts: success(h = {H}) - '
             f'success(h = 1) > 0 with retrieval and <= 0 without.'),
      holds=bool(d_ret > 0 and d_none <= 0),
      evidence=(f'retrieved: h=1 {_m(s("retrieved", 1)):.3f} -> h={H} '
                f'{_m(ret):.3f} ({d_ret:+.3f}); none: h=1 '
                f'{_m(s("none", 1)):.3f} -> h={H} {_m(none):.3f} '
                f'({d_none:+.3f})'),
      control=launch.control_text(
          'the ungrounded (WebDreamer-style) world model', f'{d_none:+.3f}',
          bool(d_none > 0)),
      paper='best horizon about 3 for R-WoM; WebDreamer degrades after 2'))

  ab, rnd = s('retrieved_absolute'), s('retrieved_random')
  gl = cl.min_listwise_gain
  claims.append(launch.Claim(
      claim=(f'Listwise reward selection beats absolute {{0, 0.5, 1}} '
             f'scoring by >= {gl:.2f} (retrieved tutorials, h = {H}).'),
      holds=bool(_m(ret) >= _m(ab) + gl),
      evidence=(f'listwise {_m(ret):.3f} ({_fmt(ret)}) vs absolute '
                f'{_m(ab):.3f} ({_fmt(ab)}): {_m(ret) - _m(ab):+.3f}'),
      control=launch.control_text(
          'a random selector in the listwise slot',
          f'{_m(rnd):.3f} ({_m(rnd) - _m(ab):+.3f})',
          bool(_m(rnd) >= _m(ab) + gl)),
      paper='listwise +2-3 points over absolute (Table 14)'))

  rr, raw = m['recall/rewrite_rerank'], m['recall/raw_dense']
  un = m['recall/rewrite_rerank_untrained']
  gr = cl.min_recall_gain
  claims.append(launch.Claim(
      claim=(f'Retrieval: Recall@1 of rewrite + rerank >= raw dense '
             f'retrieval + {gr:.2f} on the distractor-laden collection.'),
      holds=bool(_m(rr) >= _m(raw) + gr),
      evidence=(f'rewrite + rerank {_m(rr):.3f} ({_fmt(rr)}) vs raw dense '
                f'{_m(raw):.3f} ({_fmt(raw)}); rewrite only '
                f'{_m(m["recall/rewrite_dense"]):.3f}, raw + rerank '
                f'{_m(m["recall/raw_rerank"]):.3f}'),
      control=launch.control_text(
          'rewrite + rerank by the untrained world model',
          f'{_m(un):.3f} ({_m(un) - _m(raw):+.3f})',
          bool(_m(un) >= _m(raw) + gr)),
      paper='Recall@1 49.0%, Recall@5 79.6% (OSWorld, rewrite + rerank)'))
  return claims


def run(r: launch.Run) -> launch.Result:
  c = r.config
  init, step = make_training(c)
  res = r.train(init, step, num_steps=c.train.num_steps,
                chunk_size=min(c.train.chunk_size, c.train.num_steps),
                phase='world_model', log_every=c.log_every,
                data=make_apps(c)[2],
                postfix_keys=('loss',))
  params = jax.tree.map(jnp.asarray, distributed.to_host(
      res.state.train.params))
  S, H = c.num_seeds, max(c.eval.horizons)
  data = eval_data(c)
  m = {}
  logging.info('rwom: retrieval')
  picked, recall = retrieval(c, params, data)
  m.update({f'recall/{k}': v for k, v in recall.items()})
  untrained = untrained_params(c)
  m['recall/rewrite_rerank_untrained'] = retrieval(c, untrained, data)[1][
      'rewrite_rerank']
  logging.info('rwom: agent')
  tuts = arm_tutorials(c, data, picked, S)
  for arm in ARMS:
    m[f'success/h{H}/{arm}'] = agent_success(c, params, data, tuts[arm], H,
                                             'listwise')
  for h in sorted(set(c.eval.horizons) - {H}):
    for arm in ARMS:
      m[f'success/h{h}/{arm}'] = agent_success(c, params, data, tuts[arm], h,
                                               'listwise')
  for sel in ('absolute', 'random'):
    for arm in ('none', 'retrieved'):
      m[f'success/h{H}/{arm}_{sel}'] = agent_success(
          c, params, data, tuts[arm], H, sel)
  logging.info('rwom: probes')
  for version in ('v1', 'v2'):
    ident, align = probe(c, params, version)
    m[f'probe/next_state/{version}'] = ident
    m[f'probe/alignment/{version}'] = align
  ident, align = probe(c, params, 'v2', oracle=True)
  m['probe/next_state/v2_oracle'] = ident
  m['probe/alignment/v2_oracle'] = align
  m['probe/next_state/untrained'] = probe(c, untrained, 'v2')[0]
  spec = make_spec(c)
  v1, v2, _ = make_apps(c)
  changed = rwom.changed_goals(v1, v2)
  plots.plot_run(r, ['world_model/loss'], 'train_loss', logy=True,
                 title='teacher-forced cross-entropy')
  extra = {'app': {'num_goals': spec.num_goals,
                   'changed_procedures': int(changed.sum()),
                   'collection_size': int(data.coll.goal_C.shape[0])}}
  return launch.Result(metrics=m, claims=evaluate_claims(c, m), extra=extra)


PAPER_SCALE = (
    'R-WoM (arXiv 2510.11892) trains nothing: it prompts frozen frontier '
    'LLMs/VLMs (Claude-3.5 to 4.5, Qwen2.5-VL-72B) as policy, world model '
    'and listwise reranker on an 87-task OSWorld subset and 113 WebArena '
    'templates (top-5 retrieved tutorial chunks, rollouts of about 3 steps, '
    '3 candidates).')


def app_shapes(spec: rwom.Spec, *lead: int) -> rwom.App:
  """Shapes of an `App` (stacked over `lead` versions); nothing is built."""
  S, G, L = spec.num_states, spec.num_goals, spec.depth
  i32 = lambda *shape: jax.ShapeDtypeStruct(lead + shape, jnp.int32)
  return rwom.App(i32(S, spec.num_names), i32(S, spec.branching), i32(G, L),
                  i32(G, L + 1), i32(G), i32(G))


def programs(c, sharded: bool = False) -> list[loop_lib.Program]:
  """The world model's training chunk and the evaluation (retrieval, the
  agent at each horizon, the transition probes) at the config's shapes
  (`benchmarks/paper_variants.py`); nothing is computed."""
  S, N, spec, model = c.num_seeds, c.eval.num_tasks, make_spec(c), make_model(c)
  i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)
  init, step = make_training(c)
  train = loop_lib.train_program(
      'train/world_model', init, step, num_seeds=S,
      num_steps=c.train.num_steps,
      chunk_size=min(c.train.chunk_size, c.train.num_steps),
      data=app_shapes(spec, c.train.num_drifts + 1), sharded=sharded)
  train = dataclasses.replace(train, note=(
      'the app versions (v1 and its training drifts) are built on the host '
      '(numpy), as are the tutorial collection and the tasks'))
  params_S = jax.eval_shape(jax.vmap(model.init),
                            jax.ShapeDtypeStruct((S, 2), jnp.uint32))
  ev = functools.partial(loop_lib.Program,
                         params=loop_lib.count_params(params_S) // S)
  coll = rwom.Collection(
      i32(spec.num_goals * c.app.tutorials_per_goal, spec.tutorial_len),
      i32(spec.num_goals * c.app.tutorials_per_goal))
  v2, key = app_shapes(spec), jax.ShapeDtypeStruct((2,), jnp.uint32)
  agent_args = (params_S, v2, i32(N), i32(S, N, spec.tutorial_len), key,
                i32())
  H = max(c.eval.horizons)
  progs = [train, ev('eval/retrieve x2',
                     _retrieve_fn(model, spec, c.eval.top_k),
                     (params_S, i32(N, 4), coll), calls=2,
                     note='trained and untrained world models')]
  for h in sorted(set(c.eval.horizons), reverse=True):
    calls = len(ARMS) + (4 if h == H else 0)   # + absolute / random arms
    progs.append(ev(f'eval/agent h={h}', _agent_fn(model, spec, h),
                    agent_args, calls=calls))
  progs.append(ev('eval/transition_probe',
                  _probe_fn(model, spec, c.eval.per_call),
                  (params_S, v2, i32(spec.num_goals, spec.tutorial_len)),
                  calls=4, note='v1, v2, v2 with oracle tutorials, untrained'))
  return progs


def check_config(c: ml_collections.ConfigDict) -> None:
  a = c.app
  cfg_lib.check(a.num_names >= a.branching + 1, 'app.num_names',
                a.num_names, f'use >= app.branching + 1 ({a.branching + 1})')
  cfg_lib.check(a.num_instances >= rwom.INSTANCE_LEN + 1, 'app.num_instances',
                a.num_instances, f'use >= {rwom.INSTANCE_LEN + 1}')
  cfg_lib.check(len(c.train.kind_probs) == len(rwom.KINDS)
                and abs(sum(c.train.kind_probs) - 1.0) < 1e-6
                and min(c.train.kind_probs) >= 0, 'train.kind_probs',
                c.train.kind_probs,
                f'use {len(rwom.KINDS)} probabilities {rwom.KINDS} summing '
                'to 1')
  tr = c.train
  cfg_lib.check(tr.invalid_prob + tr.follow_prob <= 1.0, 'train.follow_prob',
                tr.follow_prob, f'use <= 1 - train.invalid_prob '
                f'({1 - tr.invalid_prob:g})')
  cfg_lib.check(len(c.eval.horizons) >= 1 and min(c.eval.horizons) >= 1,
                'eval.horizons', c.eval.horizons,
                'use horizons >= 1, e.g. (1, 3)')
  cfg_lib.check(1 in c.eval.horizons, 'eval.horizons', c.eval.horizons,
                'include h = 1 (the horizon claim\'s control)')
  top = a.tutorials_per_goal * a.branching ** a.depth
  cfg_lib.check(c.eval.top_k <= top, 'eval.top_k', c.eval.top_k,
                f'use <= the collection size {top}')
  make_model(c)   # raises on a bad model field, naming it


EXPERIMENT = launch.Experiment('rwom', run, schema={
    'app.branching': cfg_lib.Int(min=2), 'app.depth': cfg_lib.Int(min=1),
    'app.tutorials_per_goal': cfg_lib.Int(min=1),
    'app.drift_fraction': cfg_lib.Float(min=0.0, max=1.0),
    'app.move_prob': cfg_lib.Float(min=0.0, max=1.0),
    'train.num_steps': cfg_lib.Int(min=1), 'train.batch': cfg_lib.Int(min=1),
    'eval.per_call': cfg_lib.Int(min=0),
    'train.chunk_size': cfg_lib.Int(min=1),
    'train.num_drifts': cfg_lib.Int(min=1),
    'train.drift_fraction': cfg_lib.Float(min=0.0, max=1.0),
    'train.learning_rate': cfg_lib.Float(min=0.0, min_inclusive=False),
    'train.off_path_prob': cfg_lib.Float(min=0.0, max=1.0),
    'train.invalid_prob': cfg_lib.Float(min=0.0, max=1.0),
    'train.follow_prob': cfg_lib.Float(min=0.0, max=1.0),
    'eval.num_tasks': cfg_lib.Int(min=1), 'eval.top_k': cfg_lib.Int(min=1),
}, check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
