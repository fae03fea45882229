"""Group Relative Policy Optimisation (GRPO) and the SFT step, for `lm.model`.

GRPO (Shao et al. 2024, DeepSeekMath, eqs. 3-4): for each prompt q, G
completions o_1..o_G are sampled from the old policy and scored r_1..r_G;
every token of o_i gets the group-relative advantage

    A_i = (r_i - mean(r)) / (std(r) + eps)                         (eq. 4)

(without std normalisation, Dr. GRPO's r_i - mean(r)), and the loss is

    L = -1/G sum_i 1/|o_i| sum_t [ min(rho_it A_i,
          clip(rho_it, 1 - e, 1 + e) A_i) - beta KL_it ]           (eq. 3)

with rho_it = pi(o_it | q, o_i<t) / pi_old(o_it | ...) and the k3 estimator
KL_it = pi_ref / pi - log(pi_ref / pi) - 1 (Schulman 2020), >= 0, of the KL
to a frozen reference. Prompt tokens and tokens after a stop are masked out
of the sum. `loss_aggregation='sequence'` is eq. 3's per-sequence mean;
'token' averages over all completion tokens of the batch (DAPO's choice).

A group whose rewards are all equal has A = 0 (with eps > 0): then only the
KL term moves the parameters (a control in the tests).

Against google-tunix v0.1.7 (tests/parity/test_grpo_tunix.py) the
advantages, the loss in both aggregations and its gradient agree to float32;
tunix differs on purpose in four places (file:line at v0.1.7): its
advantage eps is 1e-6 (tunix/rl/algo_core.py:566; ours defaults to 1e-4);
it clips each log-ratio to [-20, 20] before exp (algo_core.py:414; ours does
not); its 'sequence-mean-token-mean' divides by the number of non-empty
completions (tunix/rl/common.py:565; ours by N: a completion always keeps at
least its first token, `sample.Samples`); and its `GRPOConfig` defaults to
the k1 KL estimate log pi - log pi_ref (tunix/rl/grpo/grpo_learner.py:96;
ours is eq. 3's k3).

SFT is the cross-entropy of the target tokens given everything before them,
masked to the target span.

Both steps take `micro_batch` (gradient accumulation): the loss is a sum of
per-token terms with weights fixed by the whole batch's mask (`token_weights`),
so summing the value and gradient of each chunk of rows is the whole batch's,
up to float rounding, at 1 / (N / micro_batch) of the activation memory.
Chunk c takes rows c, c + k, c + 2k, ... (`microbatches`), so every chunk
spreads over the 'data' axis as the batch does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclrjax.core import distributed
from iclrjax.lm import model as lm_model
from iclrjax.lm import sample as lm_sample

AGGREGATIONS = ('sequence', 'token')


@dataclasses.dataclass(frozen=True)
class GRPOConfig:
  """GRPO's hyperparameters (a hashable dataclass: a jit static arg): G
  samples per prompt, sampling, the clip and KL weights of eq. 3 and the
  advantage normalisation of eq. 4."""

  num_generations: int = 8       # G
  max_new_tokens: int = 4
  temperature: float = 1.0
  clip_eps: float = 0.2
  kl_beta: float = 0.02
  std_normalize: bool = True     # False: Dr. GRPO's mean-centred advantage
  adv_ddof: int = 1              # tunix: ddof=1 (std + 1e-6 there)
  adv_eps: float = 1e-4
  loss_aggregation: str = 'sequence'
  num_inner_steps: int = 1       # mu: updates per sampled batch
  micro_batch: int = 0           # completions per accumulated chunk (0: all)
  stop_tokens: tuple[int, ...] = ()
  pad_token: int = 0

  def __post_init__(self):
    if self.loss_aggregation not in AGGREGATIONS:
      raise ValueError(f'GRPOConfig.loss_aggregation='
                       f'{self.loss_aggregation!r}: use one of '
                       f'{AGGREGATIONS}')
    if self.micro_batch < 0:
      raise ValueError(f'GRPOConfig.micro_batch must be >= 0 (0: the whole '
                       f'batch), got {self.micro_batch}')
    if self.num_generations < 2:
      raise ValueError('GRPOConfig.num_generations must be >= 2 (a group '
                       f'needs a spread), got {self.num_generations}')


def group_advantages(rewards_N: jax.Array, group_size: int, *,
                     std_normalize: bool = True, ddof: int = 1,
                     eps: float = 1e-4) -> jax.Array:
  """Eq. 4 over consecutive groups of `group_size` rewards: [N] -> [N]."""
  r = rewards_N.astype(jnp.float32).reshape(-1, group_size)
  a = r - r.mean(-1, keepdims=True)
  if std_normalize:
    a = a / (r.std(-1, ddof=ddof, keepdims=True) + eps)
  return a.reshape(-1)


def k3_kl(logp_NxT: jax.Array, ref_logp_NxT: jax.Array) -> jax.Array:
  """exp(ref - logp) - (ref - logp) - 1 per token (unbiased, >= 0)."""
  d = ref_logp_NxT - logp_NxT
  return jnp.exp(d) - d - 1.0


def _aggregate(x_NxT, mask_NxT, how):
  m = mask_NxT.astype(x_NxT.dtype)
  if how == 'token':
    return jnp.sum(x_NxT * m) / jnp.maximum(m.sum(), 1.0)
  per_seq = jnp.sum(x_NxT * m, -1) / jnp.maximum(m.sum(-1), 1.0)
  return per_seq.mean()


def token_weights(mask_NxT: jax.Array, how: str) -> jax.Array:
  """Per-token weights w with sum(w * x) the aggregation of x: eq. 3's mean
  over tokens of each sequence then over sequences ('sequence'), or over
  every token of the batch ('token')."""
  m = mask_NxT.astype(jnp.float32)
  if how == 'token':
    return m / jnp.maximum(m.sum(), 1.0)
  return m / (jnp.maximum(m.sum(-1, keepdims=True), 1.0) * m.shape[0])


def microbatches(tree: Any, micro_batch: int) -> Any:
  """[N, ...] -> [N / micro_batch, micro_batch, ...]; chunk c holds rows c,
  c + k, c + 2k, ... (k = N / micro_batch), so a batch split in blocks over
  'data' gives every device its share of every chunk."""
  def split(x):
    n = x.shape[0]
    if n % micro_batch:
      raise ValueError(f'micro_batch={micro_batch} does not divide the batch '
                       f'of {n}: choose a divisor')
    x = x.reshape((micro_batch, n // micro_batch) + x.shape[1:])
    return jnp.swapaxes(x, 0, 1)
  return jax.tree.map(split, tree)


def accumulate(loss_fn: Callable, params, batch: Any, micro_batch: int = 0):
  """value_and_grad (has_aux) of sum_chunks loss_fn(params, chunk), scanning
  over `microbatches(batch, micro_batch)` (one pass when micro_batch is 0 or
  the whole batch). loss_fn must be a sum over rows (weights fixed by the
  whole batch); its aux is summed too."""
  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
  n = jax.tree.leaves(batch)[0].shape[0]
  if not micro_batch or micro_batch >= n:
    return grad_fn(params, batch)

  def body(acc, chunk):
    out = grad_fn(params, distributed.shard_batch(chunk))
    return jax.tree.map(jnp.add, acc, out), None

  zero = jax.tree.map(jnp.zeros_like, jax.eval_shape(
      grad_fn, params, jax.tree.map(lambda x: x[:micro_batch], batch)))
  return jax.lax.scan(body, zero, microbatches(batch, micro_batch))[0]


def chunked(fn: Callable, batch: Any, micro_batch: int = 0,
            key: jax.Array | None = None) -> Any:
  """fn(chunk[, key]) -> [rows, ...] over `microbatches` of the batch
  (lax.map), back in row order: a forward pass at a chunk's memory. Rows
  are padded (repeating the last) to a multiple of micro_batch. With
  `key`, chunk i draws from fold_in(key, i) (the whole batch from `key`):
  chunking then changes the draws, not their distribution."""
  n = jax.tree.leaves(batch)[0].shape[0]
  if not micro_batch or micro_batch >= n:
    return fn(batch) if key is None else fn(batch, key)
  pad = -n % micro_batch
  batch = jax.tree.map(
      lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, 0)]), batch)

  def one(x):
    chunk, i = x
    chunk = distributed.shard_batch(chunk)
    return fn(chunk) if key is None else fn(chunk, jax.random.fold_in(key, i))

  chunks = microbatches(batch, micro_batch)
  out = jax.lax.map(one, (chunks, jnp.arange((n + pad) // micro_batch)))
  return jax.tree.map(lambda y: jnp.swapaxes(y, 0, 1).reshape(
      (n + pad,) + y.shape[2:])[:n], out)


def policy_loss(logp_NxT: jax.Array, old_logp_NxT: jax.Array,
                ref_logp_NxT: jax.Array, adv_N: jax.Array,
                mask_NxT: jax.Array, *, clip_eps: float, kl_beta: float,
                loss_aggregation: str = 'sequence', weights_NxT=None
                ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Eq. 3 (negated, to minimise) on completion tokens, and its parts.

  `weights_NxT` replaces the aggregation by sum(w * x): a chunk of
  `token_weights` of the whole batch, to sum chunks (micro-batches).
  """
  if weights_NxT is None:
    agg = lambda x: _aggregate(x, mask_NxT, loss_aggregation)
  else:
    agg = lambda x: jnp.sum(weights_NxT * x)
  ratio = jnp.exp(logp_NxT - old_logp_NxT)
  a = adv_N[:, None]
  surrogate = jnp.minimum(ratio * a,
                          jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * a)
  kl = k3_kl(logp_NxT, ref_logp_NxT)
  loss = -agg(surrogate - kl_beta * kl)
  clipped = (jnp.abs(ratio - 1) > clip_eps).astype(jnp.float32)
  return loss, {'kl': agg(kl), 'clip_fraction': agg(clipped)}


def completion_logprobs(model: lm_model.Model, params, prompts_NxP,
                        completions_NxT, temperature: float = 1.0
                        ) -> jax.Array:
  """log pi(o_t | q, o_<t) of each completion token: [N, T], pi the policy
  the completions are sampled from (logits / `temperature`, as tunix's
  `common.compute_per_token_logps` at google/tunix v0.1.7
  tunix/rl/common.py:380)."""
  seq = jnp.concatenate([prompts_NxP, completions_NxT], 1)
  P = prompts_NxP.shape[1]
  return lm_sample.sequence_logprobs(model, params, seq,
                                     temperature=temperature)[:, P - 1:]


def sft_loss(model: lm_model.Model, params, tokens_NxL: jax.Array,
             target_mask_NxL: jax.Array,
             attn_mask_NxLxL: jax.Array | None = None, *,
             total: jax.Array | float | None = None) -> jax.Array:
  """Mean cross-entropy of the tokens where target_mask is True (or the
  target_mask-weighted mean, for float weights), each given the tokens
  before it (position 0 cannot be a target), under `attn_mask_NxLxL`
  (default causal). `total` replaces the denominator (the whole batch's
  target weight, to sum chunks of it)."""
  logp = lm_sample.sequence_logprobs(model, params, tokens_NxL,
                                     attn_mask_NxLxL)
  m = target_mask_NxL[:, 1:].astype(jnp.float32)
  return -jnp.sum(logp * m) / (jnp.maximum(m.sum(), 1.0) if total is None
                               else total)


class TrainState(NamedTuple):
  """Parameters, optimizer state and step count of SFT and GRPO."""

  params: Any
  opt_state: Any
  step: jax.Array


def init_state(params, optimizer: optax.GradientTransformation) -> TrainState:
  """The `TrainState` of `params` at step 0."""
  return TrainState(params, optimizer.init(params), jnp.zeros((), jnp.int32))


def make_sft_step(model: lm_model.Model,
                  optimizer: optax.GradientTransformation,
                  micro_batch: int = 0) -> Callable:
  """(state, tokens_NxL, target_mask_NxL[, attn_mask_NxLxL]) -> (state,
  {'loss'}), unjitted; `micro_batch` rows per accumulated chunk (0: all)."""

  def step(state: TrainState, tokens, target_mask, attn_mask=None):
    batch = distributed.shard_batch((tokens, target_mask, attn_mask))
    total = jnp.maximum(batch[1][:, 1:].astype(jnp.float32).sum(), 1.0)
    loss_fn = lambda p, b: (sft_loss(model, p, *b, total=total), ())
    (loss, _), g = accumulate(loss_fn, state.params, batch, micro_batch)
    updates, opt = optimizer.update(g, state.opt_state, state.params)
    return TrainState(optax.apply_updates(state.params, updates), opt,
                      state.step + 1), {'loss': loss}

  return step


RewardFn = Callable[[jax.Array, jax.Array, jax.Array, Any], jax.Array]


def make_grpo_step(model: lm_model.Model,
                   optimizer: optax.GradientTransformation,
                   reward_fn: RewardFn, cfg: GRPOConfig) -> Callable:
  """The whole RL step, unjitted (jit or scan it):

  (state, ref_params, prompts_BxP, batch_info, key) -> (state, metrics).
  Samples G completions per prompt from the current policy (it is pi_old),
  scores them with reward_fn(prompts_NxP, tokens_NxT, mask_NxT, info_N)
  -> [N] (info repeated per sample), and takes `num_inner_steps` optimizer
  steps on eq. 3. Prompts (and their G samples) shard over 'data'.
  """
  G = cfg.num_generations

  def step(state: TrainState, ref_params, prompts_BxP, info, key):
    prompts_BxP, info = distributed.shard_batch((prompts_BxP, info))
    s = lm_sample.sample(
        model, state.params, prompts_BxP, key,
        max_new_tokens=cfg.max_new_tokens, num_samples=G,
        temperature=cfg.temperature, stop_tokens=cfg.stop_tokens,
        pad_token=cfg.pad_token)
    prompts = jnp.repeat(prompts_BxP, G, 0)
    info_n = jax.tree.map(lambda x: jnp.repeat(x, G, 0), info)
    toks, mask = distributed.shard_batch((s.tokens_NxT, s.mask_NxT))
    rewards = reward_fn(prompts, toks, mask, info_n)
    adv = group_advantages(rewards, G, std_normalize=cfg.std_normalize,
                           ddof=cfg.adv_ddof, eps=cfg.adv_eps)
    mb = cfg.micro_batch
    logprobs = lambda p: lambda b: completion_logprobs(
        model, p, b[0], b[1], cfg.temperature)
    old = jax.lax.stop_gradient(
        chunked(logprobs(state.params), (prompts, toks), mb))
    ref = jax.lax.stop_gradient(
        chunked(logprobs(ref_params), (prompts, toks), mb))
    batch = (prompts, toks, old, ref, adv, mask,   # weights: chunks only
             token_weights(mask, cfg.loss_aggregation) if mb else None)

    def loss_fn(p, b):
      prompts, toks, old, ref, adv, mask, w = b
      return policy_loss(logprobs(p)((prompts, toks)), old, ref, adv, mask,
                         clip_eps=cfg.clip_eps, kl_beta=cfg.kl_beta,
                         loss_aggregation=cfg.loss_aggregation, weights_NxT=w)

    def inner(st, _):
      (loss, aux), g = accumulate(loss_fn, st.params, batch, mb)
      updates, opt = optimizer.update(g, st.opt_state, st.params)
      return TrainState(optax.apply_updates(st.params, updates), opt,
                        st.step), (loss, aux)

    state, (loss, aux) = jax.lax.scan(inner, state, None,
                                      length=cfg.num_inner_steps)
    state = state._replace(step=state.step + 1)
    return state, {'loss': loss[-1], 'reward': rewards.mean(),
                   'kl': aux['kl'][-1],
                   'clip_fraction': aux['clip_fraction'][-1],
                   'completion_length': mask.sum(-1).mean()}

  return step
