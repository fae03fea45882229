"""Uni-CoT's macro/micro chain of thought against the long chain ("Uni-CoT:
Towards Unified Chain-of-Thought Reasoning Across Text and Vision", arXiv
2508.05606; configs/unicot.py).

  python -m experiments.unicot --config=configs/unicot.py:smoke

The method is `iclrjax/lm/unicot.py`. Phases `unicot` and `long_chain`
train one decoder per seed (the vmapped axis) on the grid walk with the same
initialisation, batches and steps; only the attention mask differs (the
macro/micro mask, the causal mask). Then, on the host:

  * mask: gradient probes of a trained Uni-CoT model (jit and not) from a
    step-t row and from the summary, and the same probe under the causal
    mask (the control);
  * cost: allowed (q, k) pairs of both masks at M and 2M sub-goals;
  * accuracy: greedy exact-match of the summary's final state on held-out
    walks with M = eval.short_subgoals and eval.long_subgoals, for both
    models, the untrained model and the Uni-CoT weights under the causal
    mask (controls);
  * self-check: sampled generation (eval.temperature) of the Uni-CoT model
    with the learned eval token deciding revisions (R = eval.rounds), the
    always-ok checker (the single pass) and a blind checker that says FIX
    at the learned checker's rate.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, NamedTuple

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
from iclrjax.lm import unicot

KINDS = ('unicot', 'long_chain')
EVAL_SEED = 12345   # held-out walks and sampling keys: one set for all


def make_model(c: ml_collections.ConfigDict) -> lm_model.Model:
  longest = max(c.eval.short_subgoals, c.eval.long_subgoals,
                c.eval.check_subgoals, c.train.max_subgoals)
  return lm_model.Model(lm_model.Config(
      vocab_size=unicot.vocab_size(c.task.grid),
      max_len=unicot.seq_len(longest, c.task.steps, c.task.grid),
      **c.model.to_dict()))


class State(NamedTuple):
  train: grpo.TrainState
  key: jax.Array
  causal: jax.Array   # True: the long chain (the causal mask)


def make_training(c: ml_collections.ConfigDict):
  """init(key, causal) -> State, step(state, t): one teacher-forced step on a
  fresh batch under the state's mask. The batch depends on (seed, t) only,
  so both models see the same walks (equal budget), and one program trains
  both (the mask is chosen by the state's flag)."""
  model, opt = make_model(c), optax.adam(c.train.learning_rate)
  sft_step = grpo.make_sft_step(model, opt, c.train.micro_batch)
  tr = c.train

  def init(key, causal):
    params = model.init(jax.random.fold_in(key, 0))
    return State(grpo.init_state(params, opt), jax.random.fold_in(key, 1),
                 causal)

  def step(state, t):
    b = unicot.sample_batch(
        jax.random.fold_in(state.key, t), tr.batch,
        min_subgoals=tr.min_subgoals, max_subgoals=tr.max_subgoals,
        steps=c.task.steps, grid=c.task.grid,
        corrupt_fraction=tr.corrupt_fraction, corrupt_prob=tr.corrupt_prob)
    mask = jnp.where(state.causal, unicot.long_chain_mask(b.layout),
                     unicot.subgoal_mask(b.layout))
    train, metrics = sft_step(state.train, b.tokens_BxL, b.weights_BxL, mask)
    return state._replace(train=train), metrics

  return init, step


@functools.lru_cache(maxsize=None)
def _generate_fn(model, num_subgoals, steps, grid, per_call=0):
  """A jitted (params_S, mask, tokens, answer, key, rounds, greedy, checker,
  fix_rate, temperature) -> (accuracy [S], revisions [S], FIX verdicts [S]
  per sequence), vmapped over seeds, `per_call` walks at a time (0: all):
  one program per layout."""
  lay = unicot.layout(num_subgoals, steps, grid)

  def one(params, mask, tokens, answer, key, rounds, greedy, checker,
          fix_rate, temperature):
    def rows(b, key):
      g = unicot.generate(model, params, b[0], mask, lay, key, rounds=rounds,
                          temperature=temperature, greedy=greedy,
                          checker=checker, fix_rate=fix_rate)
      return unicot.answer_accuracy(g, b[1]), g.revisions_B, g.checks_B
    out = grpo.chunked(rows, (tokens, answer), per_call, key)
    return tuple(x.mean() for x in out)

  return jax.jit(jax.vmap(one, in_axes=(0,) + (None,) * 9))


def evaluate(c, params_S, num_subgoals: int, kind: str, *, rounds: int = 1,
             greedy: bool = True, checker: str = 'always_ok',
             fix_rate: float = 0.0) -> dict[str, np.ndarray]:
  """Exact-match of the final state on held-out walks with M sub-goals under
  `kind`'s mask, per seed, and the mean revisions and FIX verdicts per
  sequence."""
  T, G = c.task.steps, c.task.grid
  b = unicot.eval_batch(jax.random.PRNGKey(EVAL_SEED + num_subgoals),
                        c.eval.size, num_subgoals=num_subgoals, steps=T,
                        grid=G)
  mask = unicot.MASKS[kind](unicot.layout(num_subgoals, T, G))
  f = _generate_fn(make_model(c), num_subgoals, T, G, c.eval.per_call)
  out = f(params_S, mask, b.tokens_BxL, b.answer_BxG,
          jax.random.PRNGKey(EVAL_SEED + 1), jnp.int32(rounds),
          jnp.asarray(greedy), jnp.int32(unicot.CHECKERS.index(checker)),
          jnp.float32(fix_rate), jnp.float32(c.eval.temperature))
  acc, rev, fix = (np.asarray(distributed.to_host(x)) for x in out)
  return {'accuracy': acc, 'revisions': rev, 'fixes': fix}


_jit_embedding_gradients = jax.jit(unicot.embedding_gradients,
                                   static_argnums=0)


def gradient_probe(c, params, kind: str, eager: bool = True
                   ) -> dict[str, float]:
  """Max gradient norm on each probe set (`unicot.probe_sets`) from the last
  step of the last sub-goal and from the summary, of a layout with
  M = eval.short_subgoals sub-goals of max(task.steps, 3) steps (so that
  step t - 2 is in the same sub-goal); '/max' is the larger of jit and
  not (`eager`; else jit alone), '/min_jit_or_not' the smaller."""
  M, T, G = c.eval.short_subgoals, max(c.task.steps, 3), c.task.grid
  lay = unicot.layout(M, T, G)
  sets = unicot.probe_sets(lay, M, T)
  mask = unicot.MASKS[kind](lay)
  model = make_model(c)
  tokens = unicot.eval_batch(jax.random.PRNGKey(EVAL_SEED), 1,
                             num_subgoals=M, steps=T, grid=G).tokens_BxL[0]
  direction = jax.random.normal(jax.random.PRNGKey(EVAL_SEED + 2),
                                (model.cfg.vocab_size,))
  out = {}
  for row_name in ('row', 'summary_row'):
    args = (model, params, tokens, mask, int(sets[row_name][0]), direction)
    runs = [np.asarray(_jit_embedding_gradients(*args))]
    if eager:
      runs.append(np.asarray(unicot.embedding_gradients(*args)))
    g, low = np.maximum(runs[0], runs[-1]), np.minimum(runs[0], runs[-1])
    prefix = 'step' if row_name == 'row' else 'summary'
    for name, idx in sets.items():
      if name in ('row', 'summary_row') or not len(idx):
        continue
      out[f'{prefix}/{name}/max'] = float(g[idx].max())
      out[f'{prefix}/{name}/min_jit_or_not'] = float(low[idx].max())
  return out


def pair_counts(c) -> dict[str, int]:
  """Allowed (q, k) pairs of both masks at cost.subgoals and twice that."""
  M = c.cost.subgoals
  out = {}
  for m in (M, 2 * M):
    lay = unicot.layout(m, c.task.steps, c.task.grid)
    for kind in KINDS:
      out[f'{kind}/M{m}'] = unicot.allowed_pairs(unicot.MASKS[kind](lay))
  return out


def untrained_params(c):
  model = make_model(c)
  keys = loop_lib.seed_keys(c.seed, c.num_seeds)
  return jax.lax.map(lambda k: model.init(jax.random.fold_in(k, 0)), keys)


def _fmt(x) -> str:
  return ', '.join(f'{v:.3f}' for v in np.atleast_1d(x))


def evaluate_claims(c, acc: dict[str, np.ndarray], probe: dict[str, Any],
                    pairs: dict[str, int]) -> list[launch.Claim]:
  """acc: per-seed accuracies 'short/unicot', 'short/long_chain',
  'short/untrained', 'long/unicot', 'long/long_chain',
  'long/unicot_causal_mask', 'check/single', 'check/learned',
  'check/random'; probe: {'unicot': .., 'causal': ..} of `gradient_probe`;
  pairs: `pair_counts`."""
  cl = c.claims
  ms, ml, mc = (c.eval.short_subgoals, c.eval.long_subgoals,
                c.eval.check_subgoals)
  claims = []

  # Mask correctness.
  zero_keys = ('step/step_t_minus_2', 'step/step_t_minus_1_generation',
               'step/earlier_intermediates', 'summary/intermediates')
  live_keys = ('step/state_t_minus_1', 'step/subgoal', 'summary/finals',
               'summary/subgoal')

  def exact(p):
    zeros = max(p[f'{k}/max'] for k in zero_keys)
    live = min(p[f'{k}/min_jit_or_not'] for k in live_keys)
    return zeros, live, zeros == 0.0 and live > 0.0

  z, live, ok = exact(probe['unicot'])
  cz, clive, cok = exact(probe['causal'])
  claims.append(launch.Claim(
      claim=('The macro/micro mask is exact: the gradient of a step-t row '
             'to step t - 2, to step t - 1\'s generation rows and to earlier '
             'sub-goals\' intermediates is exactly 0 (also from the summary '
             'row), while it is non-zero to step t - 1\'s state and to the '
             'sub-goal (and to the final outputs from the summary), with and '
             'without jit.'),
      holds=ok,
      evidence=(f'trained Uni-CoT model, M = {ms}: max |grad| on the hidden '
                f'sets {z:.3g}; min over the visible sets of the max |grad| '
                f'{live:.3g}'),
      control=launch.control_text(
          'the causal (long-chain) mask', f'max |grad| on the hidden sets '
          f'{cz:.3g}', cok)))

  # Linear cost.
  M = c.cost.subgoals
  ratio = {k: pairs[f'{k}/M{2 * M}'] / pairs[f'{k}/M{M}'] for k in KINDS}
  lo, hi = c.cost.window
  in_window = lambda r: lo <= r <= hi
  claims.append(launch.Claim(
      claim=(f'Attention cost is linear in the number of sub-goals: the '
             f'allowed (q, k) pairs grow {lo}-{hi}x when M doubles, the '
             f'causal mask\'s more than {c.cost.causal_min}x.'),
      holds=in_window(ratio['unicot'])
      and ratio['long_chain'] > c.cost.causal_min,
      evidence=(f'M = {M} -> {2 * M} ({c.task.steps} steps of '
                f'{2 * c.task.grid + 3} tokens per micro step): Uni-CoT '
                f'{pairs[f"unicot/M{M}"]} -> {pairs[f"unicot/M{2 * M}"]} '
                f'({ratio["unicot"]:.3f}x); causal '
                f'{pairs[f"long_chain/M{M}"]} -> '
                f'{pairs[f"long_chain/M{2 * M}"]} '
                f'({ratio["long_chain"]:.3f}x)'),
      control=launch.control_text(
          'the causal mask in the linear window',
          f'{ratio["long_chain"]:.3f}x', in_window(ratio['long_chain']))))

  # Equal budget, in-distribution length.
  gap = acc['short/unicot'].mean() - acc['short/long_chain'].mean()
  ugap = acc['short/untrained'].mean() - acc['short/long_chain'].mean()
  claims.append(launch.Claim(
      claim=(f'With an equal training budget, on M = {ms} sub-goals the '
             f'macro/micro model is within {cl.max_short_gap} of the long '
             f'chain\'s exact-match.'),
      holds=bool(gap >= -cl.max_short_gap),
      evidence=(f'greedy final-state exact-match, Uni-CoT '
                f'{acc["short/unicot"].mean():.3f} ({_fmt(acc["short/unicot"])})'
                f' vs long chain {acc["short/long_chain"].mean():.3f} '
                f'({_fmt(acc["short/long_chain"])}): gap {gap:+.3f}'),
      control=launch.control_text(
          'the untrained model', f'{acc["short/untrained"].mean():.3f} '
          f'(gap {ugap:+.3f})', bool(ugap >= -cl.max_short_gap))))

  # Equal budget, longer chains.
  gain = acc['long/unicot'].mean() - acc['long/long_chain'].mean()
  cgain = (acc['long/unicot_causal_mask'].mean()
           - acc['long/long_chain'].mean())
  claims.append(launch.Claim(
      claim=(f'On longer chains (M = {ml} sub-goals, trained on '
             f'{c.train.min_subgoals}-{c.train.max_subgoals}) the macro/micro '
             f'model beats the long chain by at least {cl.min_long_gain}.'),
      holds=bool(gain >= cl.min_long_gain),
      evidence=(f'Uni-CoT {acc["long/unicot"].mean():.3f} '
                f'({_fmt(acc["long/unicot"])}) vs long chain '
                f'{acc["long/long_chain"].mean():.3f} '
                f'({_fmt(acc["long/long_chain"])}): gain {gain:+.3f}'),
      control=launch.control_text(
          'the same Uni-CoT weights under the causal mask',
          f'{acc["long/unicot_causal_mask"].mean():.3f} (gain {cgain:+.3f})',
          bool(cgain >= cl.min_long_gain))))

  # Self-check.
  g = acc['check/learned'].mean() - acc['check/single'].mean()
  g_ok = 0.0   # the always-ok checker never revises: the single pass
  g_rand = acc['check/random'].mean() - acc['check/single'].mean()
  claims.append(launch.Claim(
      claim=(f'The micro self-check loop (eval -> revise, R <= '
             f'{c.eval.rounds}) adds at least {cl.min_check_gain} to the '
             f'single pass, and an always-ok checker removes the gain.'),
      holds=bool(g >= cl.min_check_gain),
      evidence=(f'M = {mc}, sampling at T = {c.eval.temperature}: single '
                f'pass {acc["check/single"].mean():.3f} '
                f'({_fmt(acc["check/single"])}) -> self-check '
                f'{acc["check/learned"].mean():.3f} '
                f'({_fmt(acc["check/learned"])}): gain {g:+.3f}'),
      control=launch.control_text(
          'always-ok checker / blind checker at the learned FIX rate',
          f'gain {g_ok:+.3f} / {g_rand:+.3f}',
          bool(max(g_ok, g_rand) >= cl.min_check_gain))))
  return claims


def run(r: launch.Run) -> launch.Result:
  c = r.config
  init, step = make_training(c)
  params = {}
  for kind in KINDS:
    flags = jnp.full((c.num_seeds,), kind == 'long_chain')
    res = r.train(init, step, num_steps=c.train.num_steps,
                  chunk_size=min(c.train.chunk_size, c.train.num_steps),
                  phase=kind, log_every=c.log_every, init_args=flags,
                  postfix_keys=('loss',))
    params[kind] = jax.tree.map(jnp.asarray, distributed.to_host(
        res.state.train.params))
  ms, ml, mc = (c.eval.short_subgoals, c.eval.long_subgoals,
                c.eval.check_subgoals)
  logging.info('unicot: greedy evaluation')
  acc, extra = {}, {}
  for kind in KINDS:
    acc[f'short/{kind}'] = evaluate(c, params[kind], ms, kind)['accuracy']
    acc[f'long/{kind}'] = evaluate(c, params[kind], ml, kind)['accuracy']
  acc['short/untrained'] = evaluate(c, untrained_params(c), ms,
                                    'unicot')['accuracy']
  acc['long/unicot_causal_mask'] = evaluate(c, params['unicot'], ml,
                                            'long_chain')['accuracy']
  logging.info('unicot: self-check loop')
  sampled = functools.partial(evaluate, c, params['unicot'], mc, 'unicot',
                              greedy=False)
  single = sampled(rounds=1)
  learned = sampled(rounds=c.eval.rounds, checker='learned')
  steps = mc * c.task.steps
  fix_rate = float(learned['fixes'].mean()) / (
      steps + float(learned['revisions'].mean()))
  blind = sampled(rounds=c.eval.rounds, checker='random', fix_rate=fix_rate)
  acc['check/single'] = single['accuracy']
  acc['check/learned'] = learned['accuracy']
  acc['check/random'] = blind['accuracy']
  extra['self_check'] = {
      'learned_revisions_per_sequence': learned['revisions'].tolist(),
      'blind_revisions_per_sequence': blind['revisions'].tolist(),
      'learned_fix_rate': fix_rate}
  p0 = jax.tree.map(lambda a: a[0], params['unicot'])
  probe = {'unicot': gradient_probe(c, p0, 'unicot'),
           'causal': gradient_probe(c, p0, 'long_chain', eager=False)}
  pairs = pair_counts(c)
  extra.update(gradient_probe=probe, pair_counts=pairs)
  plots.plot_run(r, [f'{k}/loss' for k in KINDS], 'train_loss', logy=True,
                 labels=['Uni-CoT mask', 'long chain (causal)'],
                 title='teacher-forced cross-entropy')
  names = {'short': f'accuracy_m{ms}', 'long': f'accuracy_m{ml}',
           'check': f'selfcheck_m{mc}'}
  metrics = {f'{names[k.split("/")[0]]}/{k.split("/")[1]}': v
             for k, v in acc.items()}
  metrics['revisions/learned'] = learned['revisions']
  return launch.Result(metrics=metrics,
                       claims=evaluate_claims(c, acc, probe, pairs),
                       extra=extra)


PAPER_SCALE = (
    'Uni-CoT (arXiv 2508.05606) fine-tunes the 7B BAGEL-MoT unified '
    'understanding/generation model on 31K multimodal samples (11K '
    'macro-level, 20K micro-level; text cross-entropy plus flow-matching '
    'image loss); we did not find its step count or batch size.')


def programs(c, sharded: bool = False) -> list[loop_lib.Program]:
  """The training chunk (both masks: one program, the mask a state flag),
  the generation per evaluated layout and the gradient probe, at the
  config's shapes (`benchmarks/paper_variants.py`); nothing is computed."""
  S, T, G, model = c.num_seeds, c.task.steps, c.task.grid, make_model(c)
  init, step = make_training(c)
  train = loop_lib.train_program(
      'train/sft x2', init, step, num_seeds=S, num_steps=c.train.num_steps,
      chunk_size=min(c.train.chunk_size, c.train.num_steps),
      init_args=np.zeros((S,), bool), sharded=sharded)   # host flags
  progs = [dataclasses.replace(train, calls=2 * train.calls,
                               note='unicot and long_chain (a state flag)')]
  params_S = jax.eval_shape(jax.vmap(model.init),
                            jax.ShapeDtypeStruct((S, 2), jnp.uint32))
  ev = functools.partial(loop_lib.Program,
                         params=loop_lib.count_params(params_S) // S)
  sds = jax.ShapeDtypeStruct
  scalar = lambda dt: sds((), dt)
  # generate calls per layout: 3 at M short (both kinds, untrained), 3 at M
  # long (both kinds, the causal-mask control), 3 self-check runs at M check.
  e = c.eval
  calls = collections.Counter(
      [e.short_subgoals] * 3 + [e.long_subgoals] * 3 + [e.check_subgoals] * 3)
  for M, n in sorted(calls.items()):
    L = unicot.seq_len(M, T, G)
    progs.append(ev(
        f'eval/generate M={M}', _generate_fn(model, M, T, G, e.per_call),
        (params_S, sds((L, L), bool), sds((e.size, L), jnp.int32),
         sds((e.size, G), jnp.int32), sds((2,), jnp.uint32),
         scalar(jnp.int32), scalar(bool), scalar(jnp.int32),
         scalar(jnp.float32), scalar(jnp.float32)), calls=n,
        note='the self-check rounds are a while loop (counted once)'))
  L = unicot.seq_len(e.short_subgoals, max(T, 3), G)
  params = jax.tree.map(lambda a: sds(a.shape[1:], a.dtype), params_S)
  probe = jax.jit(lambda p, x, m, r, d: unicot.embedding_gradients(
      model, p, x, m, r, d))
  progs.append(ev(
      'eval/gradient_probe', probe,
      (params, sds((L,), jnp.int32), sds((L, L), bool), scalar(jnp.int32),
       sds((model.cfg.vocab_size,), jnp.float32)), calls=6,
      note='4 under jit, 2 more eagerly'))
  return progs


def check_config(c: ml_collections.ConfigDict) -> None:
  t = c.task
  mb, n = c.train.micro_batch, c.train.batch
  cfg_lib.check(not mb or n % mb == 0, 'train.micro_batch', mb,
                f'must divide train.batch = {n} (or be 0)')
  cfg_lib.check(2 <= t.grid <= unicot.MAX_GRID, 'task.grid', t.grid,
                f'use 2 .. {unicot.MAX_GRID}')
  cfg_lib.check(1 <= t.steps <= unicot.MAX_STEPS, 'task.steps', t.steps,
                f'use 1 .. {unicot.MAX_STEPS}')
  tr = c.train
  cfg_lib.check(1 <= tr.min_subgoals <= tr.max_subgoals, 'train.min_subgoals',
                tr.min_subgoals, f'use 1 .. train.max_subgoals '
                f'({tr.max_subgoals})')
  for name in ('short_subgoals', 'long_subgoals', 'check_subgoals'):
    cfg_lib.check(1 <= c.eval[name] <= unicot.MAX_SUBGOALS, f'eval.{name}',
                  c.eval[name], f'use 1 .. {unicot.MAX_SUBGOALS}')
  cfg_lib.check(
      tr.max_subgoals <= unicot.MAX_SUBGOALS, 'train.max_subgoals',
      tr.max_subgoals, f'use <= {unicot.MAX_SUBGOALS}')
  cfg_lib.check(c.eval.short_subgoals >= 2
                and c.eval.short_subgoals * t.steps >= 3,
                'eval.short_subgoals', c.eval.short_subgoals,
                'the probes need an earlier sub-goal and a step t - 2: use '
                '>= 2 sub-goals and >= 3 steps in all')
  cfg_lib.check(len(c.cost.window) == 2 and c.cost.window[0]
                <= c.cost.window[1], 'cost.window', c.cost.window,
                'use (low, high) with low <= high')
  make_model(c)   # raises on a bad model field, naming it


EXPERIMENT = launch.Experiment('unicot', run, schema={
    'train.num_steps': cfg_lib.Int(min=1), 'train.batch': cfg_lib.Int(min=1),
    'train.micro_batch': cfg_lib.Int(min=0),
    'train.chunk_size': cfg_lib.Int(min=1),
    'train.learning_rate': cfg_lib.Float(min=0.0, min_inclusive=False),
    'train.corrupt_fraction': cfg_lib.Float(min=0.0, max=1.0),
    'train.corrupt_prob': cfg_lib.Float(min=0.0, max=1.0),
    'eval.size': cfg_lib.Int(min=1), 'eval.rounds': cfg_lib.Int(min=1),
    'eval.per_call': cfg_lib.Int(min=0),
    'eval.temperature': cfg_lib.Float(min=0.0, min_inclusive=False),
    'cost.subgoals': cfg_lib.Int(min=1),
}, check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
