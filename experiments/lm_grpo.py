"""SFT a small decoder on a synthetic task, then GRPO (see configs/lm_grpo.py).

  python -m experiments.lm_grpo --config=configs/lm_grpo.py:smoke

The substrate is `iclrjax/lm` (model, sample, grpo, tasks); this file wires
it through the core launcher: phase `sft` (teacher-forced cross-entropy on
the answer; each seed stops, its parameters frozen, once its greedy
exact-match on a probe set reaches `sft_target`, so GRPO starts from an
intermediate checkpoint), then from each seed's SFT parameters phase `grpo`
(G sampled
completions per prompt, exact-match reward, eq. 3 of DeepSeekMath with a k3
KL to the frozen SFT model) and the control phase `grpo_equal_rewards`
(the same update with every reward 1: zero advantages, only the KL term).
Greedy exact-match is measured on one fixed held-out prompt set.
"""

from __future__ import annotations

import dataclasses
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

EVAL_SEED = 12345   # the held-out prompts: one set for every seed and phase


def make_model(cfg) -> lm_model.Model:
  return lm_model.Model(lm_model.Config(
      vocab_size=tasks.TOKENIZER.vocab_size, **cfg.model.to_dict()))


def make_task(cfg):
  kwargs = {'addition': dict(num_digits=cfg.num_digits,
                             reverse_answer=cfg.reverse_answer),
            'copy': dict(length=cfg.length), 'reverse': dict(length=cfg.length),
            'retrieval': dict(num_pairs=cfg.num_pairs,
                                    key_len=cfg.key_len)}[cfg.task]
  return tasks.make_task(cfg.task, **kwargs)


def task_shapes(cfg) -> tasks.Batch:
  """Shapes of one task batch (traced only, nothing computed)."""
  key = jax.ShapeDtypeStruct((2,), jnp.uint32)  # no backend needed
  return jax.eval_shape(lambda k: make_task(cfg)(k, 1), key)


def grpo_config(cfg) -> grpo.GRPOConfig:
  target_len = task_shapes(cfg).target_BxT.shape[1]
  return grpo.GRPOConfig(
      num_generations=cfg.num_generations, max_new_tokens=target_len,
      temperature=cfg.temperature, clip_eps=cfg.clip_eps,
      kl_beta=cfg.kl_beta, std_normalize=cfg.std_normalize,
      adv_ddof=cfg.adv_ddof, adv_eps=cfg.adv_eps,
      loss_aggregation=cfg.loss_aggregation,
      num_inner_steps=cfg.num_inner_steps, micro_batch=cfg.micro_batch,
      stop_tokens=(tasks.EOS,),
      pad_token=tasks.PAD)


class State(NamedTuple):
  train: grpo.TrainState
  ref_params: object   # the frozen reference (GRPO); the SFT init otherwise
  key: jax.Array
  equal_rewards: jax.Array   # 1.0: the control (every reward 1)
  sft_steps: jax.Array       # SFT: steps taken before the probe froze it
  frozen: jax.Array          # SFT: the probe reached sft_target
  probe_accuracy: jax.Array  # SFT: the last probe's greedy exact-match


def _sft_optimizer(cfg):
  return optax.adamw(cfg.sft_learning_rate, weight_decay=cfg.sft_weight_decay)


def _grpo_optimizer(cfg):
  return optax.adam(cfg.grpo_learning_rate)


def probe_batch(cfg) -> tasks.Batch:
  """The SFT probe prompts (one fixed set), passed to the SFT step as data."""
  return make_task(cfg)(jax.random.PRNGKey(EVAL_SEED + 1), cfg.probe_size)


def make_sft(cfg):
  """init(key), step(state, t, probe) with probe = `probe_batch(cfg)`."""
  model, task, opt = make_model(cfg), make_task(cfg), _sft_optimizer(cfg)
  sft_step = grpo.make_sft_step(model, opt, cfg.micro_batch)

  def init(key):
    params = model.init(jax.random.fold_in(key, 0))
    return State(grpo.init_state(params, opt), params,
                 jax.random.fold_in(key, 1), jnp.zeros(()),
                 jnp.zeros((), jnp.int32), jnp.zeros((), bool),
                 jnp.zeros(()))

  def step(state, t, probe):
    """One SFT step, unless this seed's greedy probe accuracy has reached
    sft_target (then its parameters stay: GRPO starts from an intermediate
    checkpoint on every seed, not from a solved or a hopeless one). The
    probe runs every `probe_every` steps (a real branch: t is shared by the
    seeds), after the update, its prompts split over 'data'."""
    tokens, mask = tasks.sft_sequences(
        task(jax.random.fold_in(state.key, t), cfg.sft_batch))
    new, metrics = sft_step(state.train, tokens, mask)
    train = jax.tree.map(lambda a, b: jnp.where(state.frozen, b, a), new,
                         state.train)
    acc = jax.lax.cond(
        (t + 1) % cfg.probe_every == 0,
        lambda: _greedy_accuracy(model, train.params,
                                 distributed.shard_batch(probe),
                                 cfg.micro_batch),
        lambda: state.probe_accuracy)
    frozen = state.frozen | (acc >= cfg.sft_target)
    steps = state.sft_steps + (~state.frozen).astype(jnp.int32)
    # metrics['loss'] is the loss of the parameters the step started from:
    # a frozen seed's logs its kept parameters on a fresh batch.
    return state._replace(train=train, sft_steps=steps, frozen=frozen,
                          probe_accuracy=acc), {
        **metrics, 'probe_accuracy': acc,
        'frozen': state.frozen.astype(jnp.float32)}

  return init, step


def make_grpo(cfg):
  """GRPO from the SFT parameters; init(key, (sft_params, equal_rewards)).

  The control's flag lives in the state, so GRPO and its control are one
  program (compiled once with a compilation cache).
  """
  model, task, opt = make_model(cfg), make_task(cfg), _grpo_optimizer(cfg)
  gcfg = grpo_config(cfg)

  def init(key, args):
    sft_params, equal = args
    return State(grpo.init_state(sft_params, opt), sft_params,
                 jax.random.fold_in(key, 2), equal,
                 jnp.zeros((), jnp.int32), jnp.ones((), bool), jnp.zeros(()))

  def step(state, t):
    def reward(prompts, toks, mask, target):
      del prompts, mask
      r = tasks.exact_match(toks, target)
      return jnp.where(state.equal_rewards > 0, jnp.ones_like(r), r)

    rl_step = grpo.make_grpo_step(model, opt, reward, gcfg)
    k_task, k_sample = jax.random.split(jax.random.fold_in(state.key, t))
    b = task(k_task, cfg.prompts_per_step)
    train, metrics = rl_step(state.train, state.ref_params, b.prompt_BxP,
                             b.target_BxT, k_sample)
    return state._replace(train=train), metrics

  return init, step


def _greedy_accuracy(model, params, b: tasks.Batch, micro_batch: int = 0
                     ) -> jax.Array:
  """Greedy exact-match, `micro_batch` prompts at a time (0: all)."""
  def correct(b):
    s = lm_sample.sample(model, params, b.prompt_BxP, jax.random.PRNGKey(0),
                         max_new_tokens=b.target_BxT.shape[1], greedy=True,
                         stop_tokens=(tasks.EOS,), pad_token=tasks.PAD)
    return tasks.exact_match(s.tokens_NxT, b.target_BxT)
  return grpo.chunked(correct, b, micro_batch).mean()


def eval_accuracy(cfg, params_S) -> np.ndarray:
  """Greedy exact-match per seed on the fixed held-out prompts: [S]."""
  b = make_task(cfg)(jax.random.PRNGKey(EVAL_SEED), cfg.eval_size)
  return np.asarray(distributed.to_host(_eval_accuracy(
      make_model(cfg), cfg.micro_batch, params_S, b.prompt_BxP,
      b.target_BxT)))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _eval_accuracy(model, micro_batch, params_S, prompt_BxP, target_BxT):
  """One compiled program for every phase's evaluation."""
  b = tasks.Batch(prompt_BxP, target_BxT)
  return jax.vmap(lambda p: _greedy_accuracy(model, p, b, micro_batch)
                  )(params_S)


def evaluate_claims(cfg, acc: dict[str, np.ndarray],
                    sft_steps: np.ndarray | None = None
                    ) -> list[launch.Claim]:
  gain = acc['grpo'] - acc['sft']
  c_gain = acc['grpo_equal_rewards'] - acc['sft']
  S = len(gain)
  fmt = lambda x: ', '.join(f'{v:.3f}' for v in x)
  return [launch.Claim(
      claim=(f'GRPO from a partly trained SFT checkpoint raises greedy '
             f'exact-match on {cfg.task} by at least {cfg.min_gain} on '
             f'every one of {S} seeds.'),
      holds=bool((gain >= cfg.min_gain).all()),
      evidence=(f'SFT {acc["sft"].mean():.3f} -> GRPO {acc["grpo"].mean():.3f}'
                f' (per seed SFT {fmt(acc["sft"])}; GRPO {fmt(acc["grpo"])};'
                f' gain {fmt(gain)}) after {cfg.grpo_steps} steps of '
                f'{cfg.prompts_per_step} prompts x G={cfg.num_generations}'
                + ('' if sft_steps is None else
                   '; SFT stopped at greedy probe accuracy >= '
                   f'{cfg.sft_target} after {", ".join(map(str, sft_steps))}'
                   f' of {cfg.sft_steps} steps')),
      control=launch.control_text(
          'the same GRPO with every reward equal (zero advantages; only the '
          'KL term)', f'gain {fmt(c_gain)}',
          bool((c_gain >= cfg.min_gain).all())))]


def run(r: launch.Run) -> launch.Result:
  cfg = r.config
  sft_init, sft_step = make_sft(cfg)
  sft = r.train(sft_init, sft_step, num_steps=cfg.sft_steps,
                chunk_size=cfg.chunk_size, phase='sft', data=probe_batch(cfg),
                log_every=cfg.log_every, postfix_keys=('loss',))
  sft_params = sft.state.train.params
  acc = {'sft': eval_accuracy(cfg, sft_params)}
  sft_steps = np.asarray(distributed.to_host(sft.state.sft_steps))
  init, step = make_grpo(cfg)
  for phase, equal in (('grpo', 0.0), ('grpo_equal_rewards', 1.0)):
    flags = jnp.full((cfg.num_seeds,), equal, jnp.float32)
    out = r.train(init, step, num_steps=cfg.grpo_steps,
                  chunk_size=cfg.chunk_size, phase=phase,
                  log_every=cfg.log_every, init_args=(sft_params, flags),
                  postfix_keys=('reward',))
    acc[phase] = eval_accuracy(cfg, out.state.train.params)
  plots.plot_run(r, ['sft/loss'], 'sft_loss', logy=True,
                 title='SFT cross-entropy')
  plots.plot_run(r, ['grpo/reward', 'grpo_equal_rewards/reward'],
                 'grpo_reward',
                 labels=['GRPO (exact-match reward)',
                         'equal rewards (control)'],
                 title='mean reward of the sampled completions')
  plots.plot_run(r, ['grpo/kl'], 'grpo_kl', title='k3 KL to the SFT model')
  return launch.Result(
      metrics={**{f'greedy_exact_match/{k}': v for k, v in acc.items()},
               'sft_steps_taken': sft_steps.astype(float)},
      claims=evaluate_claims(cfg, acc, sft_steps))


def check_config(cfg: ml_collections.ConfigDict) -> None:
  cfg_lib.check(cfg.task in tasks.TASKS, 'task', cfg.task,
                f'use one of {tasks.TASKS}')
  b = task_shapes(cfg)
  total = b.prompt_BxP.shape[1] + b.target_BxT.shape[1]
  cfg_lib.check(total <= cfg.model.max_len, 'model.max_len',
                cfg.model.max_len,
                f'must hold prompt + answer ({total} tokens): raise it')
  cfg_lib.check(cfg.num_generations >= 2, 'num_generations',
                cfg.num_generations, 'a group needs >= 2 samples')
  for n in (cfg.sft_batch, cfg.prompts_per_step * cfg.num_generations):
    cfg_lib.check(not cfg.micro_batch or n % cfg.micro_batch == 0,
                  'micro_batch', cfg.micro_batch,
                  f'must divide the batch of {n} rows (or be 0)')
  make_model(cfg)   # raises on a bad model field, naming it


PAPER_SCALE = (
    'DeepSeekMath (arXiv 2402.03300, Sec. 4.2) trains DeepSeekMath-Instruct '
    '7B with GRPO on ~144K chain-of-thought GSM8K/MATH questions: 64 samples '
    'per question, batch 1024, max length 1024, policy lr 1e-6, KL weight '
    '0.04, one update per exploration stage.')


def programs(cfg, sharded: bool = False) -> list[loop.Program]:
  """SFT and GRPO chunks and the greedy evaluation at the config's shapes
  (`benchmarks/paper_variants.py`); nothing is computed."""
  S, model = cfg.num_seeds, make_model(cfg)
  key = jax.ShapeDtypeStruct((2,), jnp.uint32)
  probe = jax.eval_shape(lambda: probe_batch(cfg))
  params_S = jax.eval_shape(jax.vmap(model.init),
                            jax.ShapeDtypeStruct((S, 2), jnp.uint32))
  sft_init, sft_step = make_sft(cfg)
  sft = loop.train_program(
      'train/sft', sft_init, sft_step, num_seeds=S, num_steps=cfg.sft_steps,
      chunk_size=cfg.chunk_size, data=probe, sharded=sharded)
  sft = dataclasses.replace(sft, note=(
      f'the greedy probe on {cfg.probe_size} prompts (a cond) is counted '
      f'every step; it runs every {cfg.probe_every}'))
  init, step = make_grpo(cfg)
  rl = loop.train_program(
      'train/grpo x2', init, step, num_seeds=S, num_steps=cfg.grpo_steps,
      chunk_size=cfg.chunk_size, sharded=sharded,
      init_args=(params_S, jax.ShapeDtypeStruct((S,), jnp.float32)))
  rl = dataclasses.replace(rl, calls=2 * rl.calls,
                           note='grpo and grpo_equal_rewards (a state flag)')
  b = jax.eval_shape(lambda k: make_task(cfg)(k, cfg.eval_size), key)
  ev = loop.Program(
      'eval/greedy_accuracy',
      jax.jit(lambda p, x, y: _eval_accuracy(model, cfg.micro_batch, p, x,
                                             y)),
      (params_S, b.prompt_BxP, b.target_BxT), calls=3,
      params=loop.count_params(params_S) // S)
  return [sft, rl, ev]


EXPERIMENT = launch.Experiment('lm_grpo', run, schema={
    'sft_steps': cfg_lib.Int(min=1), 'grpo_steps': cfg_lib.Int(min=1),
    'sft_batch': cfg_lib.Int(min=1), 'prompts_per_step': cfg_lib.Int(min=1),
    'micro_batch': cfg_lib.Int(min=0),
    'eval_size': cfg_lib.Int(min=1), 'chunk_size': cfg_lib.Int(min=1),
    'probe_size': cfg_lib.Int(min=1), 'probe_every': cfg_lib.Int(min=1),
    'sft_target': cfg_lib.Float(min=0.0, max=1.0),
    'sft_learning_rate': cfg_lib.Float(min=0.0, min_inclusive=False),
    'grpo_learning_rate': cfg_lib.Float(min=0.0, min_inclusive=False),
    'loss_aggregation': cfg_lib.Choice(*grpo.AGGREGATIONS),
}, check_fn=check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
