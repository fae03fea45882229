"""Token-Guard: token-level hallucination scoring fused into a foresight beam
search ("TOKEN-GUARD: Towards Token-Level Hallucination Control via
Self-Checking Decoding", arXiv 2601.21969; configs/token_guard.py).

  python -m experiments.token_guard --config=configs/token_guard.py:smoke

The method is `iclrjax/lm/token_guard.py` (training-free: a fixed function
of a frozen LM's hidden states and probabilities, inside a phi-decoding
search).

Task: context-grounded multi-step fact retrieval with ground truth. The
context binds `num_pairs` keys (letters) to values (`value_len` digits);
the query names `num_queries` distinct keys and the answer lists their
values in order, one segment per value ('v1>v2>v3$': the value, then a
separator, EOS after the last), the "reasoning steps" Token-Guard scores.
A segment is correct when it equals the bound value (and separator), else
hallucinated. With `shuffle_keys=False` the keys appear in alphabetical
order (a, b, c, ...): a lookup a 2-layer model learns in a few hundred steps
(with shuffled keys it sits on the associative-recall plateau of small transformers).

Phase `train`: one LM per seed (the vmapped axis) trained by teacher forcing
on the answers until its greedy per-segment accuracy on a probe set reaches
`train.target` (each seed freezes there), so it hallucinates. Then, on
held-out prompts:

  * detection: one temperature-1 answer per prompt; every segment scored by
    F_seg (Eq. 9), by F_seg without the hidden-state terms (lam = 0, beta =
    gamma = 0) and by the segment's log-probability; AUROC for "segment
    correct" (rank formula, ties averaged);
  * decoding arms, each with its forward passes counted per prompt (token
    positions evaluated beyond the prompt): greedy, temperature sampling,
    best-of-N by sequence log-probability, phi-decoding (lambda_TG = 0),
    Token-Guard, and Token-Guard without the hidden-state terms; exact match
    (all segments right) and hallucination rate (wrong segments).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import plots
from iclrjax.core import config as cfg_lib
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import loop
from iclrjax.lm import grpo
from iclrjax.lm import model as lm_model
from iclrjax.lm import sample as lm_sample
from iclrjax.lm import tasks
from iclrjax.lm import token_guard as tg

EVAL_SEED = 24680      # held-out prompts: one set for every seed and arm
ARMS = ('greedy', 'temperature', 'best_of_n', 'phi', 'token_guard',
        'token_guard_no_hidden')
SEP = '>'


def layout(c) -> tg.Layout:
  t = c.task
  P = 1 + t.num_pairs * (1 + t.value_len) + 1 + t.num_queries + 1
  return tg.Layout(P, t.value_len + 1, t.num_queries)


def fact_retrieval(key: jax.Array, batch: int, num_pairs: int,
                   num_queries: int, value_len: int,
                   shuffle_keys: bool) -> tasks.Batch:
  """'^a37b12c90d45?cad=' -> '90>37>45$': num_pairs key -> value bindings
  (keys distinct letters, alphabetical unless shuffled; values value_len
  random digits), num_queries distinct query keys, the answer their values
  in order, each followed by SEP (EOS after the last)."""
  tok = tasks.TOKENIZER.id

  def one(k):
    kk, kv, kq = jax.random.split(k, 3)
    keys = (jax.random.permutation(kk, 26)[:num_pairs] if shuffle_keys
            else jnp.arange(num_pairs)) + tok('a')
    vals = jax.random.randint(kv, (num_pairs, value_len), 0, 10) + tok('0')
    q = jax.random.permutation(kq, num_pairs)[:num_queries]
    pairs = jnp.concatenate([keys[:, None], vals], 1).reshape(-1)
    prompt = jnp.concatenate([
        jnp.asarray([tasks.BOS]), pairs, jnp.asarray([tok('?')]), keys[q],
        jnp.asarray([tok('=')])])
    sep = jnp.asarray([tok(SEP)] * (num_queries - 1) + [tasks.EOS])
    answer = jnp.concatenate([vals[q], sep[:, None]], 1).reshape(-1)
    return prompt.astype(jnp.int32), answer.astype(jnp.int32)

  p, a = jax.vmap(one)(jax.random.split(key, batch))
  return tasks.Batch(p, a)


def make_task(c):
  t = c.task
  return functools.partial(fact_retrieval, num_pairs=t.num_pairs,
                           num_queries=t.num_queries, value_len=t.value_len,
                           shuffle_keys=t.shuffle_keys)


def make_model(c) -> lm_model.Model:
  return lm_model.Model(lm_model.Config(
      vocab_size=tasks.TOKENIZER.vocab_size, **c.model.to_dict()))


def tg_config(c) -> tg.TokenGuardConfig:
  """The reference's constants; the search's budget is `eval.search_budget`
  times greedy's forward passes."""
  lay = layout(c)
  return tg.TokenGuardConfig(**c.token_guard.to_dict(), max_passes=float(
      c.eval.search_budget * lay.seg_len * lay.num_segments))


def segment_correct(answer_NxT, target_NxT, lay: tg.Layout) -> jax.Array:
  """[N, K]: segment k equals the bound value and its separator."""
  N = answer_NxT.shape[0]
  eq = answer_NxT == target_NxT
  return eq.reshape(N, lay.num_segments, lay.seg_len).all(-1)


class State(NamedTuple):
  train: grpo.TrainState
  key: jax.Array
  steps: jax.Array      # steps taken before the probe froze it
  frozen: jax.Array
  probe: jax.Array      # last probe's greedy per-segment accuracy


def greedy(model, params, prompt_BxP, num_new):
  return lm_sample.sample(model, params, prompt_BxP, jax.random.PRNGKey(0),
                          max_new_tokens=num_new, greedy=True).tokens_NxT


def probe_batch(c) -> tasks.Batch:
  """The training probe's prompts (one fixed set), passed to the step as
  data."""
  return make_task(c)(jax.random.PRNGKey(EVAL_SEED + 1), c.train.probe_size)


def make_train(c):
  """init(key), step(state, t, probe) with probe = `probe_batch(c)`."""
  model, task = make_model(c), make_task(c)
  opt = optax.adamw(c.train.lr, weight_decay=c.train.weight_decay)
  sft_step = grpo.make_sft_step(model, opt, c.train.micro_batch)
  lay = layout(c)

  def probe_accuracy(params, probe):
    def correct(b):   # its prompts split over 'data', a chunk at a time
      out = greedy(model, params, b.prompt_BxP, b.target_BxT.shape[1])
      return segment_correct(out, b.target_BxT, lay)
    return grpo.chunked(correct, distributed.shard_batch(probe),
                        c.eval.prompts_per_call).mean()

  def init(key):
    params = model.init(jax.random.fold_in(key, 0))
    return State(grpo.init_state(params, opt), jax.random.fold_in(key, 1),
                 jnp.zeros((), jnp.int32), jnp.zeros((), bool), jnp.zeros(()))

  def step(state, t, probe):
    """One teacher-forced step unless the probe froze this seed (its greedy
    per-segment accuracy reached train.target: the hallucinating model)."""
    tokens, mask = tasks.sft_sequences(
        task(jax.random.fold_in(state.key, t), c.train.batch_size))
    new, metrics = sft_step(state.train, tokens, mask)
    train = jax.tree.map(lambda a, b: jnp.where(state.frozen, b, a), new,
                         state.train)
    acc = jax.lax.cond((t + 1) % c.train.probe_every == 0,
                       lambda: probe_accuracy(train.params, probe),
                       lambda: state.probe)
    return state._replace(
        train=train, steps=state.steps + (~state.frozen),
        frozen=state.frozen | (acc >= c.train.target), probe=acc), {
            **metrics, 'probe_accuracy': acc}

  return init, step


# -- evaluation --------------------------------------------------------------

@functools.partial(jax.jit, static_argnums=(0, 1, 6))
def _detect(model, lay, params_S, batch, key, cfg, per_call=0):
  """Per seed: segment labels [N, K] and scores (F_seg, F_seg without the
  hidden terms, segment log-prob) of one temperature-1 answer per prompt,
  `per_call` prompts at a time (0: all)."""
  T = batch.target_BxT.shape[1]

  def one(params, b, key):
    out = lm_sample.sample(model, params, b.prompt_BxP, key,
                           max_new_tokens=T).tokens_NxT
    rows = jnp.concatenate([b.prompt_BxP, out], 1)
    cv = jnp.ones(b.prompt_BxP.shape, bool)
    sc = tg.score_rows(model, params, rows, lay, cv, cfg)
    lik = tg.score_rows(model, params, rows, lay, cv, cfg.without_hidden())
    return (segment_correct(out, b.target_BxT, lay), sc.seg.f_seg,
            lik.seg.f_seg, sc.logp_K)

  return jax.vmap(lambda p: grpo.chunked(functools.partial(one, p), batch,
                                         per_call, key))(params_S)


def detection(c, params_S) -> dict[str, np.ndarray]:
  lay = layout(c)
  b = make_task(c)(jax.random.PRNGKey(EVAL_SEED + 2), c.eval.detect_prompts)
  lab, fseg, lik, logp = distributed.to_host(_detect(
      make_model(c), lay, params_S, b, jax.random.PRNGKey(EVAL_SEED + 3),
      tg_config(c), c.eval.prompts_per_call))
  au = lambda s: np.asarray([tg.auroc(s[i], lab[i]) for i in range(len(s))])
  return {'auroc_fseg': au(fseg), 'auroc_logp': au(logp),
          'auroc_fseg_no_hidden': au(lik),
          'segment_accuracy': lab.reshape(len(lab), -1).mean(-1)}


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 7, 8))
def _decode_baselines(model, lay, n_best, params_S, prompts, targets, key,
                      temperature, per_call=0):
  """greedy, temperature sampling and best-of-n (by the sequence log-prob
  under the model) answers: three [S, B, T] arrays, `per_call` prompts at a
  time (0: all)."""
  T = targets.shape[1]

  def one(params, prompts, key):
    B = prompts.shape[0]
    g = greedy(model, params, prompts, T)
    t = lm_sample.sample(model, params, prompts, key, max_new_tokens=T,
                         temperature=temperature).tokens_NxT
    s = lm_sample.sample(model, params, prompts, jax.random.fold_in(key, 1),
                         max_new_tokens=T, num_samples=n_best).tokens_NxT
    rows = jnp.concatenate([jnp.repeat(prompts, n_best, 0), s], 1)
    lp = lm_sample.sequence_logprobs(model, params, rows)[:, -T:].sum(-1)
    best = jnp.argmax(lp.reshape(B, n_best), -1)
    return g, t, s.reshape(B, n_best, T)[jnp.arange(B), best]

  del lay
  return jax.vmap(lambda p: grpo.chunked(functools.partial(one, p), prompts,
                                         per_call, key))(params_S)


@functools.partial(jax.jit, static_argnums=(0, 1, 6))
def _decode_search(model, lay, params_S, prompts, key, cfg, per_call=0):
  """foresight_search on every prompt for every seed: (answers [S, B, T],
  passes [S, B], F_global [S, B], refinement calls [S, B]); `per_call`
  prompts at a time (0: all; a prompt's key is the same either way)."""
  cv = jnp.ones((prompts.shape[1],), bool)
  keys = jax.random.split(key, prompts.shape[0])

  def one(params, b):
    out = jax.vmap(lambda p, k: tg.foresight_search(
        model, params, p, cv, k, lay, cfg))(*b)
    return (out.tokens_L[:, lay.prompt_len:], out.passes, out.f_global,
            out.refined)

  return jax.vmap(lambda p: grpo.chunked(functools.partial(one, p),
                                         (prompts, keys), per_call))(params_S)


def decoding(c, params_S) -> dict[str, dict[str, np.ndarray]]:
  """Per arm and seed: exact match, hallucination rate, forward passes per
  prompt, and their ratio to greedy's."""
  lay, model, cfg = layout(c), make_model(c), tg_config(c)
  b = make_task(c)(jax.random.PRNGKey(EVAL_SEED + 4), c.eval.decode_prompts)
  key = jax.random.PRNGKey(EVAL_SEED + 5)
  T = b.target_BxT.shape[1]
  answers = dict(zip(ARMS[:3], _decode_baselines(
      model, lay, c.eval.best_of_n, params_S, b.prompt_BxP, b.target_BxT, key,
      c.eval.temperature, c.eval.prompts_per_call)))
  passes = {'greedy': T, 'temperature': T, 'best_of_n': c.eval.best_of_n * T}
  extra = {}
  for arm, conf in (('phi', cfg.phi_decoding()), ('token_guard', cfg),
                    ('token_guard_no_hidden', cfg.without_hidden())):
    ans, p, g, n_ref = _decode_search(model, lay, params_S, b.prompt_BxP,
                                      key, conf, c.eval.prompts_per_call)
    answers[arm] = ans
    passes[arm] = np.asarray(p).mean(-1)
    extra[arm] = {'f_global': np.asarray(g).mean(-1),
                  'refine_calls': np.asarray(n_ref).mean(-1)}
  out = {}
  S = c.num_seeds
  for arm in ARMS:
    seg = np.asarray(segment_correct(
        jnp.asarray(answers[arm]).reshape(-1, T),
        jnp.tile(b.target_BxT, (S, 1)), lay)).reshape(S, -1, lay.num_segments)
    p = np.broadcast_to(np.asarray(passes[arm], float), (S,))
    out[arm] = {'exact_match': seg.all(-1).mean(-1),
                'hallucination': 1 - seg.mean((1, 2)),
                'passes': p, 'passes_ratio': p / T, **extra.get(arm, {})}
  return out


# -- claims ------------------------------------------------------------------

def _fmt(x):
  return ', '.join(f'{v:.3f}' for v in np.asarray(x))


def evaluate_claims(c, det, dec) -> list[launch.Claim]:
  e = c.eval
  S = len(det['auroc_fseg'])
  claims = []
  fseg, logp, lik = (det['auroc_fseg'], det['auroc_logp'],
                     det['auroc_fseg_no_hidden'])
  ok = (fseg >= e.min_auroc) & (fseg >= logp + e.auroc_margin)
  claims.append(launch.Claim(
      claim=(f'F_seg (Eq. 9, hidden states + probabilities) detects '
             f'hallucinated segments: AUROC >= {e.min_auroc} and >= the '
             f'segment log-probability\'s AUROC + {e.auroc_margin} on every '
             f'one of {S} seeds.'),
      holds=bool(ok.all()),
      evidence=(f'AUROC of F_seg {_fmt(fseg)}; of the segment log-prob '
                f'{_fmt(logp)} (per seed) over {e.detect_prompts} '
                f'temperature-1 answers x {c.task.num_queries} segments, '
                f'segment accuracy {_fmt(det["segment_accuracy"])}; passes '
                f'on {int(ok.sum())}/{S} seeds'
                + ('' if ok.any() else
                   ': latent terms add nothing at this scale')),
      control=launch.control_text(
          'F_seg without the hidden-state terms (lam = 0, beta = gamma = 0: '
          'a softmax-weighted mean of token probabilities) against the same '
          'bar', f'AUROC {_fmt(lik)}',
          bool(((lik >= e.min_auroc) & (lik >= logp + e.auroc_margin)).all())),
      paper='the latent terms drive hallucination detection on HaluEval, '
            'RAGTruth, FinanceBench etc. (Llama-3.1-8B)'))

  def wins(arm):
    d, g = dec[arm], dec['greedy']
    return ((d['hallucination'] <= e.max_halluc_ratio * g['hallucination'])
            & (d['exact_match'] >= g['exact_match'] + e.min_em_gain)
            & (d['passes_ratio'] <= e.max_passes_ratio))

  def txt(arm):
    d = dec[arm]
    return (f'exact match {_fmt(d["exact_match"])}, hallucination '
            f'{_fmt(d["hallucination"])}, {np.mean(d["passes_ratio"]):.2f}x '
            'greedy\'s passes')

  tgw = wins('token_guard')
  claims.append(launch.Claim(
      claim=(f'Token-Guard decoding cuts the hallucination rate to <= '
             f'{e.max_halluc_ratio}x greedy\'s and raises exact match by >= '
             f'{e.min_em_gain} within {e.max_passes_ratio}x greedy\'s forward '
             f'passes, on every one of {S} seeds.'),
      holds=bool(tgw.all()),
      evidence=(f'Token-Guard: {txt("token_guard")}; greedy: {txt("greedy")}'
                f'; best-of-{e.best_of_n} by log-prob: {txt("best_of_n")}; '
                f'temperature {e.temperature}: {txt("temperature")} '
                f'({e.decode_prompts} held-out prompts, per seed)'),
      control=launch.control_text(
          'phi-decoding (the same search with lambda_TG = 0: no scoring, no '
          'refinement)', txt('phi'), bool(wins('phi').all())),
      paper='Token-Guard lowers hallucination on HALU benchmarks over '
            'phi-decoding and other decoders (Llama-3.1-8B)'))

  em = {a: dec[a]['exact_match'] for a in ARMS}
  gap_phi = em['token_guard'] - em['phi']
  gap_lik = em['token_guard'] - em['token_guard_no_hidden']
  gap_ctl = em['token_guard_no_hidden'] - em['phi']
  claims.append(launch.Claim(
      claim=('Token-Guard\'s exact match exceeds both ablations, '
             'phi-decoding (lambda_TG = 0) and Token-Guard without the '
             f'hidden-state terms, by >= {e.min_ablation_gap} (mean over '
             'seeds).'),
      holds=bool(gap_phi.mean() >= e.min_ablation_gap
                 and gap_lik.mean() >= e.min_ablation_gap),
      evidence=(f'exact match Token-Guard {_fmt(em["token_guard"])}, phi '
                f'{_fmt(em["phi"])}, without hidden terms '
                f'{_fmt(em["token_guard_no_hidden"])}; gaps to phi '
                f'{_fmt(gap_phi)}, to the likelihood-only ablation '
                f'{_fmt(gap_lik)}'),
      control=launch.control_text(
          'the likelihood-only Token-Guard against phi-decoding (what the '
          'search and probability scoring give without hidden states)',
          f'gap {_fmt(gap_ctl)}', bool(gap_ctl.mean() >= e.min_ablation_gap)
      )))
  return claims


def run(r: launch.Run) -> launch.Result:
  c = r.config
  init, step = make_train(c)
  out = r.train(init, step, num_steps=c.train.num_steps,
                chunk_size=c.train.chunk_size, phase='train',
                data=probe_batch(c),
                log_every=c.train.log_every, postfix_keys=('loss',))
  params = out.state.train.params
  steps = np.asarray(distributed.to_host(out.state.steps), float)
  probe = np.asarray(distributed.to_host(out.state.probe), float)
  det = detection(c, params)
  dec = decoding(c, params)
  plots.plot_run(r, ['train/loss'], 'train_loss', logy=True,
                 title='teacher-forced cross-entropy')
  plots.plot_bars({a: dec[a]['exact_match'] for a in ARMS},
                  r.plots_dir / 'decoding.png', bounds=(0.0, 1.0),
                  highlight=('token_guard',), ylabel='exact match',
                  title='decoding arms')
  metrics = {'train/steps_taken': steps, 'train/probe_accuracy': probe,
             **{f'detect/{k}': v for k, v in det.items()}}
  for arm, d in dec.items():
    metrics.update({f'{k}/{arm}': v for k, v in d.items()})
  return launch.Result(metrics=metrics,
                       claims=evaluate_claims(c, det, dec))


def check_config(c: ml_collections.ConfigDict) -> None:
  t, m, k = c.task, c.model, c.token_guard
  mb, n = c.train.micro_batch, c.train.batch_size
  cfg_lib.check(not mb or n % mb == 0, 'train.micro_batch', mb,
                f'must divide train.batch_size = {n} (or be 0)')
  cfg_lib.check(t.num_queries <= t.num_pairs, 'task.num_queries',
                t.num_queries, f'<= task.num_pairs = {t.num_pairs} (distinct '
                'query keys)')
  cfg_lib.check(t.num_pairs <= 26, 'task.num_pairs', t.num_pairs,
                '<= 26 (the keys are distinct letters)')
  L = layout(c).length
  cfg_lib.check(L <= m.max_len, 'model.max_len', m.max_len,
                f'must hold prompt + answer ({L} tokens): raise it')
  cfg_lib.check(m.d_model % m.num_heads == 0, 'model.d_model', m.d_model,
                f'divisible by model.num_heads = {m.num_heads}')
  cfg_lib.check(m.num_layers >= 2, 'model.num_layers', m.num_layers,
                '>= 2 (Token-Guard reads the second-to-last layer)')
  cfg_lib.check(k.num_rollout * k.step_beams >= 2,
                'token_guard.num_rollout', k.num_rollout,
                'step_beams x num_rollout >= 2 (a search needs candidates)')


PAPER_SCALE = (
    'Token-Guard (arXiv 2601.21969) trains nothing: its released code '
    '(rhq945/Token-Guard) decodes with a frozen Meta-Llama-3.1-8B-Instruct '
    'on seven hallucination QA sets (HaluEval, RAGTruth, FinanceBench, '
    'PubMedQA, CovidQA, DROP History/NFL), a phi-decoding search of 4 step '
    'beams x 10 rollouts per reasoning step.')


def programs(c, sharded: bool = False) -> list[loop.Program]:
  """The training chunk (the hallucinating LM) and the evaluation:
  detection, the decoding baselines and the foresight search (one program
  for Token-Guard and its two ablations, the config traced), at the
  config's shapes (`benchmarks/paper_variants.py`); nothing is computed."""
  S, model, lay, e = c.num_seeds, make_model(c), layout(c), c.eval
  key = jax.ShapeDtypeStruct((2,), jnp.uint32)
  init, step = make_train(c)
  train = loop.train_program(
      'train', init, step, num_seeds=S, num_steps=c.train.num_steps,
      chunk_size=c.train.chunk_size,
      data=jax.eval_shape(lambda: probe_batch(c)), sharded=sharded)
  train.note = (f'the greedy probe on {c.train.probe_size} prompts (a cond) '
                f'is counted every step; it runs every {c.train.probe_every}')
  params_S = jax.eval_shape(jax.vmap(model.init),
                            jax.ShapeDtypeStruct((S, 2), jnp.uint32))
  n = loop.count_params(params_S) // S
  task = lambda size: jax.eval_shape(lambda k: make_task(c)(k, size), key)
  det, dec = task(e.detect_prompts), task(e.decode_prompts)
  cfg = jax.eval_shape(lambda: tg_config(c))   # traced: one search program
  n_call = e.prompts_per_call
  detect = jax.jit(lambda p, b, k, f: _detect(model, lay, p, b, k, f, n_call))
  baselines = jax.jit(lambda p, x, y, k: _decode_baselines(
      model, lay, e.best_of_n, p, x, y, k, e.temperature, n_call))
  search = jax.jit(lambda p, x, k, f: _decode_search(model, lay, p, x, k, f,
                                                     n_call))
  return [
      train,
      loop.Program('eval/detect', detect, (params_S, det, key, cfg),
                   params=n, note='AUROC on the host'),
      loop.Program('eval/decode_baselines', baselines,
                   (params_S, dec.prompt_BxP, dec.target_BxT, key),
                   params=n),
      loop.Program('eval/foresight_search x3', search,
                   (params_S, dec.prompt_BxP, key, cfg), calls=3, params=n,
                   note='phi-decoding, Token-Guard, without hidden terms')]


_POS = cfg_lib.Float(min=0.0, min_inclusive=False)
_UNIT = cfg_lib.Float(min=0.0, max=1.0)

EXPERIMENT = launch.Experiment('token_guard', run, schema={
    'num_seeds': cfg_lib.Int(min=1),
    'task.num_pairs': cfg_lib.Int(min=1),
    'task.num_queries': cfg_lib.Int(min=2),
    'task.value_len': cfg_lib.Int(min=1),
    'model.num_layers': cfg_lib.Int(min=1),
    'train.num_steps': cfg_lib.Int(min=1),
    'train.batch_size': cfg_lib.Int(min=1),
    'train.micro_batch': cfg_lib.Int(min=0),
    'eval.prompts_per_call': cfg_lib.Int(min=0),
    'train.lr': _POS,
    'train.chunk_size': cfg_lib.Int(min=1),
    'train.probe_every': cfg_lib.Int(min=1),
    'train.probe_size': cfg_lib.Int(min=1),
    'train.target': _UNIT,
    'token_guard.lambda_val': _UNIT,
    'token_guard.tau_global': _UNIT,
    'token_guard.tg_lambda': cfg_lib.Float(min=0.0),
    'token_guard.m_max': cfg_lib.Int(min=0),
    'token_guard.max_retries': cfg_lib.Int(min=0),
    'token_guard.step_beams': cfg_lib.Int(min=1),
    'token_guard.num_rollout': cfg_lib.Int(min=1),
    'token_guard.rollout_temperature': _POS,
    'token_guard.refine_temperature': _POS,
    'token_guard.rollout_top_p': cfg_lib.Float(min=0.0, max=1.0,
                                               min_inclusive=False),
    'token_guard.refine_top_p': cfg_lib.Float(min=0.0, max=1.0,
                                              min_inclusive=False),
    'eval.detect_prompts': cfg_lib.Int(min=2),
    'eval.decode_prompts': cfg_lib.Int(min=1),
    'eval.best_of_n': cfg_lib.Int(min=1),
    'eval.temperature': _POS,
    'eval.search_budget': _POS,
}, check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
