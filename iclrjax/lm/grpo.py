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
  stop_tokens: tuple[int, ...] = ()
  pad_token: int = 0

  def __post_init__(self):
    if self.loss_aggregation not in AGGREGATIONS:
      raise ValueError(f'GRPOConfig.loss_aggregation='
                       f'{self.loss_aggregation!r}: use one of '
                       f'{AGGREGATIONS}')
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


def policy_loss(logp_NxT: jax.Array, old_logp_NxT: jax.Array,
                ref_logp_NxT: jax.Array, adv_N: jax.Array,
                mask_NxT: jax.Array, *, clip_eps: float, kl_beta: float,
                loss_aggregation: str = 'sequence'
                ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Eq. 3 (negated, to minimise) on completion tokens, and its parts."""
  ratio = jnp.exp(logp_NxT - old_logp_NxT)
  a = adv_N[:, None]
  surrogate = jnp.minimum(ratio * a,
                          jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * a)
  kl = k3_kl(logp_NxT, ref_logp_NxT)
  loss = -_aggregate(surrogate - kl_beta * kl, mask_NxT, loss_aggregation)
  clipped = (jnp.abs(ratio - 1) > clip_eps).astype(jnp.float32)
  return loss, {'kl': _aggregate(kl, mask_NxT, loss_aggregation),
                'clip_fraction': _aggregate(clipped, mask_NxT,
                                            loss_aggregation)}


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
             attn_mask_NxLxL: jax.Array | None = None) -> jax.Array:
  """Mean cross-entropy of the tokens where target_mask is True (or the
  target_mask-weighted mean, for float weights), each given the tokens
  before it (position 0 cannot be a target), under `attn_mask_NxLxL`
  (default causal)."""
  logp = lm_sample.sequence_logprobs(model, params, tokens_NxL,
                                     attn_mask_NxLxL)
  m = target_mask_NxL[:, 1:].astype(jnp.float32)
  return -jnp.sum(logp * m) / jnp.maximum(m.sum(), 1.0)


class TrainState(NamedTuple):
  """Parameters, optimizer state and step count of SFT and GRPO."""

  params: Any
  opt_state: Any
  step: jax.Array


def init_state(params, optimizer: optax.GradientTransformation) -> TrainState:
  """The `TrainState` of `params` at step 0."""
  return TrainState(params, optimizer.init(params), jnp.zeros((), jnp.int32))


def make_sft_step(model: lm_model.Model,
                  optimizer: optax.GradientTransformation) -> Callable:
  """(state, tokens_NxL, target_mask_NxL[, attn_mask_NxLxL]) -> (state,
  {'loss'}), unjitted."""

  def step(state: TrainState, tokens, target_mask, attn_mask=None):
    tokens, target_mask, attn_mask = distributed.shard_batch(
        (tokens, target_mask, attn_mask))
    loss, g = jax.value_and_grad(
        lambda p: sft_loss(model, p, tokens, target_mask, attn_mask))(
            state.params)
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
    old = jax.lax.stop_gradient(
        completion_logprobs(model, state.params, prompts, toks,
                            cfg.temperature))
    ref = jax.lax.stop_gradient(
        completion_logprobs(model, ref_params, prompts, toks,
                            cfg.temperature))

    def loss_fn(p):
      logp = completion_logprobs(model, p, prompts, toks, cfg.temperature)
      return policy_loss(logp, old, ref, adv, mask, clip_eps=cfg.clip_eps,
                         kl_beta=cfg.kl_beta,
                         loss_aggregation=cfg.loss_aggregation)

    def inner(st, _):
      (loss, aux), g = jax.value_and_grad(loss_fn, has_aux=True)(st.params)
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
