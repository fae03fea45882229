"""Sampling from `lm.model.Model` under `lax.scan`: greedy, temperature,
top-k / top-p, n samples per prompt, stop tokens, log-probabilities.

One key per step (`jax.random.split(key, max_new_tokens)`), so a sample is a
pure function of (params, prompts, key). The KV-cached path prefills each
prompt once and repeats its cache for the n samples; `use_cache=False`
recomputes the whole sequence every step (the reference the cache is
benchmarked and tested against).
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from iclrjax.lm import model as lm_model


class Samples(NamedTuple):
  """tokens_NxT: the new tokens (pad after a stop token); logprobs_NxT:
  log-probability of each under the distribution it was drawn from (for
  greedy, the model's softmax); mask_NxT: True up to and including the
  first stop token; N = prompts x num_samples, prompt b's samples at rows
  b*n .. b*n + n - 1."""
  tokens_NxT: jax.Array
  logprobs_NxT: jax.Array
  mask_NxT: jax.Array


def filter_logits(logits_BxV: jax.Array, temperature: float = 1.0,
                  top_k: int | None = None,
                  top_p: float | None = None) -> jax.Array:
  """Tempered logits with the tokens outside the top-k and the nucleus
  (smallest set whose probability reaches top_p, Holtzman et al. 2020) set
  to -inf. The most likely token is always kept."""
  x = logits_BxV.astype(jnp.float32) / temperature
  if top_k is not None:
    kth = jax.lax.top_k(x, top_k)[0][..., -1:]
    x = jnp.where(x < kth, -jnp.inf, x)
  if top_p is not None:
    order = jnp.argsort(-x, axis=-1)
    sorted_x = jnp.take_along_axis(x, order, -1)
    p = jax.nn.softmax(sorted_x, -1)
    keep_sorted = (jnp.cumsum(p, -1) - p) < top_p      # mass before it < p
    keep = jnp.zeros_like(keep_sorted).at[
        jnp.arange(x.shape[0])[:, None], order].set(keep_sorted)
    x = jnp.where(keep, x, -jnp.inf)
  return x


def extend_mask(prompt_mask_BxPxP: jax.Array, total: int) -> jax.Array:
  """The [B, total, total] mask the cached sampler implies: the prompt's own
  mask, then each new position attends to the prompt keys the last prompt
  row attends to (plus that position) and causally to the new ones."""
  B, P, _ = prompt_mask_BxPxP.shape
  last = prompt_mask_BxPxP[:, -1].at[:, -1].set(True)          # [B, P]
  new_rows = jnp.concatenate(
      [jnp.broadcast_to(last[:, None], (B, total - P, P)),
       jnp.broadcast_to(lm_model.causal_mask(total)[P:, P:],
                        (B, total - P, total - P))], -1)
  top = jnp.pad(prompt_mask_BxPxP, ((0, 0), (0, 0), (0, total - P)))
  return jnp.concatenate([top, new_rows], 1)


def _pick(key, logits_BxV, greedy, temperature, top_k, top_p):
  if greedy:
    tok = jnp.argmax(logits_BxV, -1)
    logp = jax.nn.log_softmax(logits_BxV.astype(jnp.float32), -1)
  else:
    x = filter_logits(logits_BxV, temperature, top_k, top_p)
    tok = jax.random.categorical(key, x, -1)
    logp = jax.nn.log_softmax(x, -1)
  return tok.astype(jnp.int32), jnp.take_along_axis(logp, tok[:, None], -1)[:, 0]


@functools.partial(jax.jit, static_argnames=(
    'model', 'max_new_tokens', 'num_samples', 'greedy', 'temperature',
    'top_k', 'top_p', 'stop_tokens', 'pad_token', 'use_cache'))
def sample(model: lm_model.Model, params, prompts_BxP: jax.Array,
           key: jax.Array, *, max_new_tokens: int, num_samples: int = 1,
           greedy: bool = False, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None,
           stop_tokens: Sequence[int] = (), pad_token: int = 0,
           prompt_mask_BxPxP: jax.Array | None = None,
           use_cache: bool = True,
           prompt_embeds_BxPxD: jax.Array | None = None) -> Samples:
  """`num_samples` completions of `max_new_tokens` for each prompt.

  `prompt_embeds_BxPxD` replaces the prompt's token lookup (continuous
  inputs such as frame features; `prompts_BxP` may then be None); the new
  tokens are embedded as usual. It needs the cached path.
  """
  if prompt_embeds_BxPxD is not None and not use_cache:
    raise ValueError('sample: prompt_embeds_BxPxD needs use_cache=True')
  B, P = (prompts_BxP if prompt_embeds_BxPxD is None
          else prompt_embeds_BxPxD).shape[:2]
  n, T = num_samples, max_new_tokens
  total = P + T
  if total > model.cfg.max_len and model.cfg.positions == 'learned':
    raise ValueError(f'sample: prompt {P} + max_new_tokens {T} exceeds '
                     f'Config.max_len={model.cfg.max_len} (learned positions)')
  pm = (jnp.broadcast_to(lm_model.causal_mask(P), (B, P, P))
        if prompt_mask_BxPxP is None else prompt_mask_BxPxP)
  stops = jnp.asarray(tuple(stop_tokens) or (-1,), jnp.int32)
  keys = jax.random.split(key, T)
  pick = functools.partial(_pick, greedy=greedy, temperature=temperature,
                           top_k=top_k, top_p=top_p)

  def emit(done, tok, logp):
    tok = jnp.where(done, pad_token, tok)
    live = ~done
    return tok, jnp.where(done, 0.0, logp), live, done | jnp.isin(tok, stops)

  done0 = jnp.zeros((B * n,), bool)
  if use_cache:
    cache = lm_model.repeat_cache(
        model.prefill(params, prompts_BxP, pm, cache_len=total,
                      embeds_BxLxD=prompt_embeds_BxPxD), n)

    def step(carry, k):
      cache, done = carry
      tok, logp = pick(k, cache.logits_BxV)
      tok, logp, live, done = emit(done, tok, logp)
      _, cache = model.decode_step(params, cache, tok)
      return (cache, done), (tok, logp, live)

    _, (toks, logps, live) = jax.lax.scan(step, (cache, done0), keys)
  else:
    mask = jnp.repeat(extend_mask(pm, total), n, 0)
    buf = jnp.zeros((B * n, total), jnp.int32).at[:, :P].set(
        jnp.repeat(prompts_BxP, n, 0))

    def step(carry, xs):
      buf, done = carry
      k, t = xs
      logits = model.apply(params, buf, mask)
      tok, logp = pick(k, jax.lax.dynamic_index_in_dim(
          logits, P + t - 1, 1, keepdims=False))
      tok, logp, live, done = emit(done, tok, logp)
      buf = jax.lax.dynamic_update_slice(buf, tok[:, None], (0, P + t))
      return (buf, done), (tok, logp, live)

    _, (toks, logps, live) = jax.lax.scan(step, (buf, done0),
                                          (keys, jnp.arange(T)))
  return Samples(tokens_NxT=toks.T, logprobs_NxT=logps.T, mask_NxT=live.T)


def sequence_logprobs(model: lm_model.Model, params, tokens_NxL: jax.Array,
                      mask_NxLxL: jax.Array | None = None,
                      temperature: float = 1.0) -> jax.Array:
  """log p(token_i | tokens_<i) for i = 1 .. L-1 under the model with its
  logits divided by `temperature` (the distribution `sample` draws from at
  that temperature, without top-k / top-p): [N, L-1] (the teacher-forced
  scores a GRPO update ratios against)."""
  logits = model.apply(params, tokens_NxL, mask_NxLxL)[:, :-1]
  logp = jax.nn.log_softmax(logits.astype(jnp.float32) / temperature, -1)
  return jnp.take_along_axis(logp, tokens_NxL[:, 1:, None], -1)[..., 0]
