"""A learned masked diffusion LM: MDLM training, ReMDM remasking, revision.

The learned demo of issue 9 (gen.md Sec. 6.4) next to the exact round model
of `dlm.py` (arXiv 2512.25014, "Diffusion Language Models are Provably
Optimal Parallel Samplers"): does letting a DLM undo tokens (remasking,
revision) buy validity on constrained languages at a small number of model
calls K?

Data (`language`): all valid strings of a constrained language, length 16,
enumerated offline (the training law is uniform over them):
  'onehot'  binary strings with exactly one 1 (16 strings);
  'exactk'  binary strings with exactly k ones (C(16, k) strings);
  'latin'   4x4 Latin squares, row-major, vocab 4 (all 576).
Token ids are 0..V-1; `MASK` is the extra id V (model input only).

Model: a bidirectional pre-LN transformer (`Denoiser`; 2 layers, width 128,
no time input: the mask ratio is visible) with the SUBS parameterisation of
MDLM (Sahoo et al., arXiv 2406.07524): logits over the V tokens only (the
MASK logit is -inf), and a decoded token is carried over unchanged.

Loss (MDLM, Eq. 10 of 2406.07524 with the linear schedule alpha_t = 1 - t,
so -alpha'_t / (1 - alpha_t) = 1 / t):
  L = E_{t ~ U(0,1)} E_{z_t ~ q(.|x)} (1/t) sum_{i: z_t^i = MASK}
      -log p_theta(x^i | z_t),
a per-sequence NELBO in nats (`mdlm_loss`); t is drawn stratified over the
batch (MDLM's low-discrepancy sampler) and floored at `t_min`.

One sampling step from t to s < t (alpha_t < alpha_s) is a table
`trans [..., L, V + 1]` of independent per-position laws (the round model
of `dlm.py`; the last column is MASK), from a single model call
x_theta = p_theta(. | z_t) (`step_trans`). ReMDM (Wang et al., arXiv
2503.00307, Eq. 6/Sec. 3) with remasking rate sigma_t:
  decoded i:  (1 - sigma_t^i) delta_{z_t^i} + sigma_t^i MASK
  masked i:   u_t x_theta^i + (1 - u_t) MASK,
              u_t = (alpha_s - (1 - sigma_t) alpha_t) / (1 - alpha_t),
with 0 <= sigma_t <= sigma_max = min(1, (1 - alpha_s) / alpha_t); given the
clean x in place of x_theta this keeps the forward marginals
q(z_s^i | x) = alpha_s delta_x + (1 - alpha_s) MASK (checked exactly in
tests). sigma_t = 0 is MDLM's ancestral step (no revision). Samplers, all
with exactly K model calls (`sample`):
  'mdlm'   ancestral, alpha on the uniform grid t_k = 1 - k/K.
  'remdm'  ReMDM-loop (2503.00307 Sec. 4.1): alpha rises 0 -> alpha_on on
           t in [1, t_on] and alpha_on -> 1 on [0, t_off] with MDLM steps;
           on [t_off, t_on] alpha is held at alpha_on and every step
           remasks with sigma_t = min(eta, sigma_max) and re-decodes, a
           corrector loop at a fixed noise level. With `conf` the rate is
           spread by confidence: psi^i = x_theta^i(z^i) at the step that
           decoded i, eta_conf^i = softmax_{decoded}(-psi)^i (the paper's
           ReMDM-conf weights) and sigma_t^i = min(1, sigma_t N_dec
           eta_conf^i), N_dec the number of decoded tokens: low-confidence
           tokens are remasked first. (The paper's literal sigma_t
           eta_conf^i sums to sigma_t over the sequence, i.e. 1/N_dec of
           the uniform schedule's remasks; the N_dec factor keeps the
           expected number of remasks, hence the expected number of masks
           after the step, equal to the uniform schedule's, which is what
           the marginal-preserving u_t assumes.)
  'revise' revision (2512.25014's third variant: a token may change to
           another token in one round): on the MDLM grid, decoded tokens
           are picked with the same confidence-based rates (sigma_t =
           min(eta, sigma_max)) BEFORE the model call, hidden from it
           (shown as MASK) and overwritten by a fresh draw from x_theta in
           the same step, while masked tokens unmask at MDLM's rate. No
           token is left masked by a revision, so the number of decoded
           tokens follows MDLM's schedule exactly.

Metrics: validity rate (`is_valid`) and, for 'onehot'/'exactk', the TV
distance between the empirical law of the samples and the uniform law on
valid strings (`empirical_tv`; with its finite-sample floor: the TV of as
many exact uniform draws, `tv_floor`). Every sampler also runs with the
exact denoiser of the language (`oracle_logits_fn`, the true conditional
marginals by enumeration): it separates what the sampler costs from what
the training costs.

Measured (default config, 3 seeds x 512 samples; learned / exact
denoiser): validity at K = 4, one-hot MDLM 0.711 / 0.706, ReMDM-loop
0.708 / 0.695, revision 0.697 / 0.691; Latin squares MDLM 0.031 / 0.152,
ReMDM-loop 0.003 / 0.023, revision 0.031 / 0.151. At K = 16 MDLM reaches
0.907 / 0.909 (one-hot) and 0.201 / 0.613 (Latin): even a perfect
denoiser misses the 0.95 gate at K = n, because ~1 token per step on
average still means several tokens drawn independently in some steps (the
factorisation error of the exact part, now with random unmasking). The
issue's "ReMDM >= MDLM + 0.10 at K = n/4" does not reproduce, with either
denoiser: with 4 calls the loop schedule decodes 90% of the tokens in the
first two steps and its single loop step (sigma = 0.02 per token on
average) cannot repair that.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from absl import logging
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import data as data_lib
from iclrjax.core import distributed
from iclrjax.diffusion import nets

# pylint: disable=invalid-name

LANGUAGES = ('onehot', 'exactk', 'latin')
SAMPLERS = ('mdlm', 'remdm', 'revise')
LENGTH = 16


# -- languages ------------------------------------------------------------------------
def vocab_size(language: str) -> int:
  return 4 if language == 'latin' else 2


@functools.lru_cache(maxsize=None)
def _latin_squares(m: int) -> np.ndarray:
  perms = np.asarray(list(itertools.permutations(range(m))), np.int32)
  idx = np.stack(np.meshgrid(*[np.arange(len(perms))] * m, indexing='ij'),
                 -1).reshape(-1, m)
  sq = perms[idx]                                          # [P^m, m, m]
  cols = np.sort(sq, axis=1)
  ok = np.all(cols == np.arange(m)[None, :, None], axis=(1, 2))
  return sq[ok].reshape(-1, m * m)


def latin_squares(m: int = 4) -> np.ndarray:
  """All m x m Latin squares over {0..m-1}, row-major [N, m * m] (576 for
  m = 4): rows are permutations, kept when every column is one too."""
  return _latin_squares(m).copy()


def language_strings(language: str, k: int = 2) -> np.ndarray:
  """Every valid string of `language` (length 16), [N, 16] int32."""
  if language == 'onehot':
    return np.eye(LENGTH, dtype=np.int32)
  if language == 'exactk':
    rows = [np.isin(np.arange(LENGTH), c).astype(np.int32)
            for c in itertools.combinations(range(LENGTH), k)]
    return np.stack(rows)
  if language == 'latin':
    return latin_squares(4)
  raise ValueError(f'language must be one of {LANGUAGES}, got {language!r}')


def is_valid(language: str, x: jax.Array, k: int = 2) -> jax.Array:
  """[...] whether each string x [..., 16] is in the language (a MASK or
  out-of-vocab id is invalid)."""
  x = jnp.asarray(x)
  V = vocab_size(language)
  ok = jnp.all((x >= 0) & (x < V), axis=-1)
  if language == 'onehot':
    return ok & (jnp.sum(x == 1, axis=-1) == 1)
  if language == 'exactk':
    return ok & (jnp.sum(x == 1, axis=-1) == k)
  if language == 'latin':
    sq = x.reshape(x.shape[:-1] + (4, 4))
    hit = sq[..., None] == jnp.arange(4)                   # [..., r, c, v]
    rows = jnp.all(jnp.sum(hit, axis=-2) == 1, axis=(-1, -2))
    cols = jnp.all(jnp.sum(hit, axis=-3) == 1, axis=(-1, -2))
    return ok & rows & cols
  raise ValueError(f'language must be one of {LANGUAGES}, got {language!r}')


def string_ids(x: np.ndarray, vocab: int) -> np.ndarray:
  """Base-`vocab` integer id of each string [N, L] (ids < vocab)."""
  x = np.asarray(x, np.int64)
  return x @ (vocab ** np.arange(x.shape[-1] - 1, -1, -1, dtype=np.int64))


def empirical_tv(samples: np.ndarray, support: np.ndarray,
                 vocab: int) -> float:
  """TV(empirical law of `samples`, uniform on the rows of `support`).

  Samples off the support (invalid or masked) count fully towards the TV.
  """
  samples = np.asarray(samples)
  valid_ids = string_ids(support, vocab)
  ok = np.all((samples >= 0) & (samples < vocab), axis=-1)
  ids = string_ids(np.where(ok[:, None], samples, 0), vocab)
  inside = ok & np.isin(ids, valid_ids)
  counts = np.zeros(len(valid_ids))
  pos = np.searchsorted(np.sort(valid_ids), ids[inside])
  np.add.at(counts, pos, 1.0)
  p = counts / len(samples)
  return float(0.5 * (np.abs(p - 1.0 / len(valid_ids)).sum()
                      + (1.0 - inside.mean())))


def tv_floor(num_valid: int, num_samples: int, seed: int = 0,
             reps: int = 64) -> float:
  """Mean TV between `num_samples` exact uniform draws and the uniform law
  on `num_valid` strings: what a perfect sampler scores (finite N)."""
  rng = np.random.default_rng(seed)
  c = rng.multinomial(num_samples, np.full(num_valid, 1.0 / num_valid), reps)
  return float(np.mean(0.5 * np.abs(c / num_samples - 1.0 / num_valid).sum(1)))


def oracle_logits_fn(strings: np.ndarray, vocab: int
                     ) -> Callable[[jax.Array], jax.Array]:
  """The perfect denoiser of the uniform law on `strings`: z [N, L] ->
  log p(x^i = v | visible tokens of z) [N, L, V] by enumeration (uniform
  over the vocab when no string matches z: off the support)."""
  S_KxL = jnp.asarray(strings, jnp.int32)
  hot_KxLxV = jax.nn.one_hot(S_KxL, vocab)

  def logits_fn(z_NxL: jax.Array) -> jax.Array:
    ok_NxK = jnp.all((z_NxL[:, None] == vocab) | (z_NxL[:, None] == S_KxL),
                     axis=-1).astype(jnp.float32)
    marg = jnp.einsum('nk,klv->nlv', ok_NxK, hot_KxLxV)
    z_N = jnp.sum(ok_NxK, -1)[:, None, None]
    p = jnp.where(z_N > 0, marg / jnp.maximum(z_N, 1.0), 1.0 / vocab)
    return jnp.log(p)

  return logits_fn


# -- the denoiser ------------------------------------------------------------------------
class Denoiser(nn.Module):
  """Bidirectional pre-LN transformer: z [B, L] ids in 0..V (V = MASK) ->
  logits [B, L, V] over tokens (SUBS: MASK is never predicted)."""
  vocab: int
  length: int = LENGTH
  width: int = 128
  depth: int = 2
  heads: int = 4
  mlp_ratio: int = 4

  @nn.compact
  def __call__(self, z_BxL: jax.Array) -> jax.Array:
    h_BxLxD = nn.Embed(self.vocab + 1, self.width, name='embed')(z_BxL)
    pos_LxD = self.param('pos', nn.initializers.normal(0.02),
                         (self.length, self.width))
    h_BxLxD = h_BxLxD + pos_LxD
    for i in range(self.depth):
      y = nn.LayerNorm(name=f'ln_attn_{i}')(h_BxLxD)
      y = nn.MultiHeadDotProductAttention(num_heads=self.heads,
                                          name=f'attn_{i}')(y, y)
      h_BxLxD = h_BxLxD + y
      y = nn.LayerNorm(name=f'ln_mlp_{i}')(h_BxLxD)
      y = nn.Dense(self.mlp_ratio * self.width, name=f'mlp_in_{i}')(y)
      y = nn.Dense(self.width, name=f'mlp_out_{i}')(nn.gelu(y))
      h_BxLxD = h_BxLxD + y
    h_BxLxD = nn.LayerNorm(name='ln_out')(h_BxLxD)
    return nn.Dense(self.vocab, name='logits')(h_BxLxD)


# -- MDLM loss -------------------------------------------------------------------------
def mdlm_loss(logits_BxLxV: jax.Array, x0_BxL: jax.Array, mask_BxL: jax.Array,
              t_B: jax.Array) -> jax.Array:
  """(1/t) sum_{masked i} -log p_theta(x0^i | z_t), per sequence [B]."""
  logp = jax.nn.log_softmax(logits_BxLxV, axis=-1)
  nll_BxL = -jnp.take_along_axis(logp, x0_BxL[..., None], axis=-1)[..., 0]
  return jnp.sum(jnp.where(mask_BxL, nll_BxL, 0.0), axis=-1) / t_B


def corrupt(key: jax.Array, x0_BxL: jax.Array, vocab: int, t_min: float
            ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(z_t, mask, t): t stratified over the batch in [t_min, 1], each token
  masked independently w.p. 1 - alpha_t = t."""
  B = x0_BxL.shape[0]
  k_t, k_m = jax.random.split(key)
  u = (jax.random.uniform(k_t) + jnp.arange(B) / B) % 1.0
  t_B = t_min + (1.0 - t_min) * u
  mask_BxL = jax.random.uniform(k_m, x0_BxL.shape) < t_B[:, None]
  return jnp.where(mask_BxL, vocab, x0_BxL), mask_BxL, t_B


class TrainState(NamedTuple):
  params: Any
  opt_state: Any
  ema: Any          # EMA of params (sampling uses it)
  key: jax.Array    # raw key: minibatches and masks, folded with the step


def make_trainer(model: Denoiser, strings: np.ndarray, c: Any):
  """(init, step) training `model` with the MDLM loss on minibatches drawn
  (epoch-wise without replacement, `core.data.batch_indices`) from the
  valid `strings`. Fields of `c`: batch_size, learning_rate, warmup_steps,
  ema_decay, t_min.

  `strings` [N, L] gives the shapes only: `step(state, t, strings)` takes
  them as its `data` argument (`r.train(..., data=strings)`), an input of
  the compiled loop rather than a constant of it."""
  n, length = np.shape(strings)
  tx = optax.chain(
      optax.clip_by_global_norm(1.0),
      optax.adamw(optax.linear_schedule(0.0, c.learning_rate,
                                        max(1, c.warmup_steps)),
                  weight_decay=0.0))

  def init(key: jax.Array) -> TrainState:
    k_init, k_run = jax.random.split(key)
    # Flax initialises from shapes only: any tokens give the same params.
    params = model.init(k_init, jnp.zeros((1, length), jnp.int32))
    return TrainState(params, tx.init(params), params, k_run)

  def loss_fn(params, x0_BxL, key):
    z_BxL, mask_BxL, t_B = corrupt(key, x0_BxL, model.vocab, c.t_min)
    loss_B = mdlm_loss(model.apply(params, z_BxL), x0_BxL, mask_BxL, t_B)
    return jnp.mean(loss_B)

  def step(state: TrainState, t: jax.Array, strings: jax.Array):
    k_batch, k_mask = jax.random.split(state.key)
    idx = data_lib.batch_indices(k_batch, t, n, c.batch_size)
    # `data` keeps the caller's dtype; the loss and the MASK id are int32.
    x0_BxL = distributed.shard_batch(jnp.asarray(strings[idx], jnp.int32))
    loss, g = jax.value_and_grad(loss_fn)(state.params, x0_BxL,
                                          jax.random.fold_in(k_mask, t))
    updates, opt_state = tx.update(g, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    ema = nets.ema_update(state.ema, params,
                          nets.ema_decay_warmup(t, c.ema_decay))
    return TrainState(params, opt_state, ema, state.key), {
        'loss': loss, 'grad_norm': optax.tree.norm(g)}

  return init, step


# -- one sampling step ------------------------------------------------------------------
def sigma_max(alpha_t, alpha_s):
  """The largest marginal-preserving remasking rate min(1, (1-a_s)/a_t)."""
  return jnp.minimum(1.0, (1.0 - alpha_s) / jnp.maximum(alpha_t, 1e-12))


def token_sigma(z_NxL: jax.Array, psi_NxL: jax.Array, sigma: jax.Array,
                vocab: int, conf: bool) -> jax.Array:
  """Per-position remasking rates [N, L] (0 at masked positions).

  Uniform: sigma at every decoded position. `conf`: sigma N_dec
  softmax_{decoded}(-psi), capped at 1 (see the module docstring).
  """
  dec = z_NxL != vocab
  if not conf:
    return jnp.where(dec, sigma, 0.0)
  logit = jnp.where(dec, -psi_NxL, -jnp.inf)
  n_dec = jnp.sum(dec, axis=-1, keepdims=True)
  w = jnp.exp(logit - jnp.max(jnp.where(dec, logit, -1e30), -1, keepdims=True))
  eta = w / jnp.maximum(jnp.sum(w, -1, keepdims=True), 1e-30)
  return jnp.where(dec, jnp.minimum(1.0, sigma * n_dec * eta), 0.0)


def step_trans(z_NxL: jax.Array, probs_NxLxV: jax.Array, sig_NxL: jax.Array,
               alpha_t, alpha_s, sigma) -> jax.Array:
  """ReMDM's per-position laws trans [N, L, V + 1] (last column: MASK).

  Decoded i: stay w.p. 1 - sig^i, MASK w.p. sig^i. Masked i: x_theta^i
  w.p. u = (alpha_s - (1 - sigma) alpha_t) / (1 - alpha_t), else MASK.
  sigma = 0 is the MDLM ancestral step.
  """
  V = probs_NxLxV.shape[-1]
  dec = (z_NxL != V)[..., None]
  u = (alpha_s - (1.0 - sigma) * alpha_t) / jnp.maximum(1.0 - alpha_t, 1e-12)
  u = jnp.clip(u, 0.0, 1.0)
  stay = jax.nn.one_hot(jnp.where(z_NxL == V, 0, z_NxL), V + 1)
  mask_col = jax.nn.one_hot(V, V + 1)
  keep = (1.0 - sig_NxL)[..., None] * stay + sig_NxL[..., None] * mask_col
  fill = jnp.concatenate([u * probs_NxLxV,
                          jnp.full(probs_NxLxV.shape[:-1] + (1,), 1.0 - u)],
                         axis=-1)
  return jnp.where(dec, keep, fill)


# -- schedules and samplers ---------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Sampler:
  """A sampler with K model calls; see the module docstring."""
  kind: str = 'mdlm'          # 'mdlm' | 'remdm' | 'revise'
  num_steps: int = 16         # K
  eta: float = 1.0            # sigma_t = min(eta, sigma_max)
  conf: bool = True           # confidence-based sigma (remdm, revise)
  t_on: float = 0.55          # remdm loop window [t_off, t_on]
  t_off: float = 0.05
  alpha_on: float = 0.9       # alpha held in the loop


def schedule(s: Sampler) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(alpha_t [K], alpha_s [K], sigma [K]) of the K steps, float64."""
  if s.kind not in SAMPLERS:
    raise ValueError(f'sampler kind must be one of {SAMPLERS}, got {s.kind!r}')
  t = 1.0 - np.arange(s.num_steps + 1) / s.num_steps         # 1 -> 0
  if s.kind == 'remdm':
    a_on = s.alpha_on
    alpha = np.where(
        t >= s.t_on, a_on * (1.0 - t) / (1.0 - s.t_on),
        np.where(t > s.t_off, a_on,
                 a_on + (1.0 - a_on) * (s.t_off - t) / s.t_off))
  else:
    alpha = 1.0 - t
  a_t, a_s = alpha[:-1], alpha[1:]
  if s.kind == 'mdlm':
    sig = np.zeros(s.num_steps)
  elif s.kind == 'remdm':  # remask only inside the loop (alpha held)
    loop = np.isclose(a_t, s.alpha_on) & np.isclose(a_s, s.alpha_on)
    sig = np.where(loop, np.minimum(s.eta, np.minimum(
        1.0, (1.0 - a_s) / np.maximum(a_t, 1e-12))), 0.0)
  else:
    sig = np.minimum(s.eta, np.minimum(1.0, (1.0 - a_s) / np.maximum(
        a_t, 1e-12)))
  return a_t, a_s, sig


class SampleOut(NamedTuple):
  x: jax.Array            # [N, L] final ids (MASK = V only if never decoded)
  masked_frac: jax.Array  # [K] fraction of MASK after each step
  revised: jax.Array      # [] tokens changed token -> token (revise)


def sampler_arrays(s: Sampler) -> dict[str, jax.Array]:
  """The traced inputs of `sample_arrays` for `s` (one compilation serves
  every sampler with the same K)."""
  a_t, a_s, sig = schedule(s)
  return {'alpha_t': jnp.asarray(a_t, jnp.float32),
          'alpha_s': jnp.asarray(a_s, jnp.float32),
          'sigma': jnp.asarray(sig, jnp.float32),
          'revise': jnp.asarray(s.kind == 'revise'),
          'conf': jnp.asarray(s.conf)}


def sample_arrays(logits_fn: Callable[[jax.Array], jax.Array], key: jax.Array,
                  num: int, vocab: int, arrays: dict[str, jax.Array],
                  length: int = LENGTH) -> SampleOut:
  """`sample` with the sampler given as traced arrays (`sampler_arrays`)."""
  revise, conf = arrays['revise'], arrays['conf']

  def body(carry, inp):
    z, psi, key, n_rev = carry
    alpha_t, alpha_s, sigma = inp
    key, k_rev, k_draw = jax.random.split(key, 3)
    sig_tok = jnp.where(conf, token_sigma(z, psi, sigma, vocab, True),
                        token_sigma(z, psi, sigma, vocab, False))
    # Revision picks its tokens before the call and hides them from it.
    chosen = revise & (jax.random.uniform(k_rev, z.shape) < sig_tok)
    z_in = jnp.where(chosen, vocab, z)
    probs = jax.nn.softmax(logits_fn(z_in).astype(jnp.float32), axis=-1)
    trans = step_trans(z_in, probs, jnp.where(revise, 0.0, sig_tok),
                       alpha_t, alpha_s, jnp.where(revise, 0.0, sigma))
    # A revised position is redrawn from x_theta right away (token -> token).
    full = jnp.concatenate([probs, jnp.zeros(probs.shape[:-1] + (1,))], -1)
    trans = jnp.where(chosen[..., None], full, trans)
    new = jax.random.categorical(k_draw, jnp.log(trans), axis=-1)
    fresh = (new != vocab) & (z_in == vocab)
    conf_new = jnp.take_along_axis(
        probs, jnp.minimum(new, vocab - 1)[..., None], -1)[..., 0]
    psi = jnp.where(fresh, conf_new, jnp.where(new == vocab, jnp.inf, psi))
    n_rev = n_rev + jnp.sum(chosen & (new != z))
    return (new, psi, key, n_rev), jnp.mean(new == vocab)

  z0 = jnp.full((num, length), vocab, jnp.int32)
  psi0 = jnp.full((num, length), jnp.inf, jnp.float32)
  (z, _, _, n_rev), frac = jax.lax.scan(
      body, (z0, psi0, key, jnp.int32(0)),
      (arrays['alpha_t'], arrays['alpha_s'], arrays['sigma']))
  return SampleOut(z, frac, n_rev)


def sample(logits_fn: Callable[[jax.Array], jax.Array], key: jax.Array,
           num: int, vocab: int, s: Sampler, length: int = LENGTH
           ) -> SampleOut:
  """Draws `num` strings with exactly K = s.num_steps calls of
  `logits_fn(z [num, L]) -> [num, L, V]` (one per step, under lax.scan)."""
  return sample_arrays(logits_fn, key, num, vocab, sampler_arrays(s), length)


# -- the experiment ---------------------------------------------------------------------
def config_schema() -> dict[str, Any]:
  from iclrjax.core import config as cfg_lib  # pylint: disable=g-import-not-at-top
  pos = cfg_lib.Float(min=0.0, min_inclusive=False)
  unit = cfg_lib.Float(min=0.0, max=1.0)
  return {
      'languages': cfg_lib.Seq(item=cfg_lib.Choice(*LANGUAGES), min_len=1),
      'exactk_k': cfg_lib.Int(min=1, max=LENGTH - 1),
      'samplers': cfg_lib.Seq(item=cfg_lib.Choice(*SAMPLERS), min_len=1),
      'num_steps': cfg_lib.Seq(item=cfg_lib.Int(min=1), min_len=1,
                               help='sampling budgets K (model calls)'),
      'headline_steps': cfg_lib.Int(min=1, help='K of the ReMDM claim'),
      'gate_steps': cfg_lib.Int(min=1, help='K of the MDLM quality gate'),
      'gate_validity': unit,
      'margin': unit,
      'num_samples': cfg_lib.Int(min=1, help='samples per seed and sampler'),
      'remdm_eta': unit,
      'remdm_t_on': unit,
      'remdm_t_off': unit,
      'remdm_alpha_on': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                                      max_inclusive=False),
      'revise_eta': unit,
      'width': cfg_lib.Int(min=1),
      'depth': cfg_lib.Int(min=1),
      'heads': cfg_lib.Int(min=1),
      'train_steps': cfg_lib.Int(min=1),
      'batch_size': cfg_lib.Int(min=1),
      'learning_rate': pos,
      'warmup_steps': cfg_lib.Int(min=0),
      'ema_decay': cfg_lib.Float(min=0.0, max=1.0, max_inclusive=False),
      't_min': cfg_lib.Float(min=0.0, max=1.0, min_inclusive=False,
                             max_inclusive=False),
      'steps_per_chunk': cfg_lib.Int(min=1),
      'log_every': cfg_lib.Int(min=1),
  }


def check_config(c) -> None:
  from iclrjax.core import config as cfg_lib  # pylint: disable=g-import-not-at-top
  cfg_lib.check(c.width % c.heads == 0, 'heads', c.heads,
                f'must divide width={c.width}')
  cfg_lib.check(c.remdm_t_off < c.remdm_t_on, 'remdm_t_off', c.remdm_t_off,
                f'must be < remdm_t_on={c.remdm_t_on}')
  for f in ('headline_steps', 'gate_steps'):
    cfg_lib.check(c[f] in c.num_steps, f, c[f],
                  f'must be one of num_steps={tuple(c.num_steps)}')


def samplers_of(cfg, K: int) -> dict[str, Sampler]:
  """The configured samplers at budget K."""
  out = {'mdlm': Sampler('mdlm', K),
         'remdm': Sampler('remdm', K, eta=cfg.remdm_eta, conf=cfg.conf,
                          t_on=cfg.remdm_t_on, t_off=cfg.remdm_t_off,
                          alpha_on=cfg.remdm_alpha_on),
         'revise': Sampler('revise', K, eta=cfg.revise_eta, conf=cfg.conf)}
  return {k: out[k] for k in cfg.samplers}


def _tag(language: str, sampler: str, K: int) -> str:
  return f'{language}_{sampler}_K{K}'


def evaluate(language: str, cfg, logits_fn_of: Callable, params: Any,
             keys: jax.Array, prefix: str) -> dict[str, np.ndarray]:
  """validity (and TV) per seed of every sampler and K. `params` has a
  leading seed axis; `logits_fn_of(p)` -> logits_fn."""
  V = vocab_size(language)
  support = language_strings(language, cfg.exactk_k)
  out = {}
  for K in cfg.num_steps:
    draw = jax.jit(jax.vmap(lambda p, k, a: sample_arrays(
        logits_fn_of(p), k, cfg.num_samples, V, a).x, in_axes=(0, 0, None)))
    logging.info('dlm: %s%s, K = %d: sampling %s', prefix, language, K,
                 ', '.join(cfg.samplers))
    for name, smp in samplers_of(cfg, K).items():
      x = np.asarray(draw(params, keys, sampler_arrays(smp)))  # [S, N, L]
      tag = _tag(language, name, K)
      out[f'{prefix}validity/{tag}'] = np.asarray(
          is_valid(language, x, cfg.exactk_k), float).mean(-1)
      if language != 'latin':
        out[f'{prefix}tv/{tag}'] = np.array(
            [empirical_tv(xs, support, V) for xs in x])
  return out


def run(r):
  """Trains an MDLM per language (seeds vmapped), samples it with every
  sampler at every K, does the same with the exact (oracle) denoiser, and
  adds the exact round-model claims of `dlm.summary()`."""
  from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
  from iclrjax.diffusion import dlm  # pylint: disable=g-import-not-at-top
  cfg = r.config
  metrics: dict[str, np.ndarray] = {}
  S = cfg.num_seeds
  for li, language in enumerate(cfg.languages):
    V = vocab_size(language)
    strings = language_strings(language, cfg.exactk_k)
    model = Denoiser(vocab=V, width=cfg.width, depth=cfg.depth,
                     heads=cfg.heads)
    init, step = make_trainer(model, strings, cfg)
    out = r.train(init, step, num_steps=cfg.train_steps, data=strings,
                  chunk_size=min(cfg.steps_per_chunk, cfg.train_steps),
                  phase=language, log_every=cfg.log_every,
                  postfix_keys=('loss',))
    ema = jax.tree.map(lambda a: a[:S], out.state.ema)
    keys = jax.vmap(lambda i: jax.random.fold_in(
        jax.random.key(cfg.seed + 7919 * (li + 1)), i))(jnp.arange(S))
    metrics.update(evaluate(language, cfg,
                            lambda p: lambda z: model.apply(p, z), ema, keys,
                            ''))
    oracle = oracle_logits_fn(strings, V)
    metrics.update(evaluate(language, cfg, lambda p: oracle,
                            jnp.zeros(S), keys, 'oracle_'))
    rows = [row for row in r.rows() if f'{language}/loss' in row]
    if rows:
      metrics[f'final_loss/{language}'] = np.asarray(
          rows[-1][f'{language}/loss'], float)[:S]
    if language != 'latin':
      metrics[f'tv_floor/{language}'] = np.full(
          S, tv_floor(len(strings), cfg.num_samples))
  exact = dlm.summary()
  _plots(r, cfg, metrics)
  table = validity_table(cfg, metrics)
  (r.workdir / 'validity_table.md').write_text(table + '\n')
  claims = exact_claims(exact) + learned_claims(cfg, metrics)
  return launch.Result(metrics=metrics, claims=claims,
                       extra={'exact': _jsonable(exact),
                              'validity_table': table.split('\n')})


def validity_table(cfg, m: dict[str, np.ndarray]) -> str:
  """Markdown: validity (mean over seeds) per language, sampler and K,
  learned / exact denoiser."""
  Ks = sorted(cfg.num_steps)
  lines = ['| language | sampler | ' + ' | '.join(f'K={K}' for K in Ks)
           + ' |', '|---|---|' + '---|' * len(Ks)]
  for lang in cfg.languages:
    for name in cfg.samplers:
      cells = [f"{m[f'validity/{_tag(lang, name, K)}'].mean():.3f} / "
               f"{m[f'oracle_validity/{_tag(lang, name, K)}'].mean():.3f}"
               for K in Ks]
      lines.append(f'| {lang} | {name} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def _jsonable(obj):
  if isinstance(obj, dict):
    return {str(k): _jsonable(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [_jsonable(v) for v in obj]
  if isinstance(obj, (np.floating, np.integer)):
    return obj.item()
  return obj


def exact_claims(ex: dict[str, dict]) -> list[Any]:
  """The exact round-model claims (gen.md 6.3) from `dlm.summary()`."""
  from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
  nr, rv = ex['onehot_norevision'], ex['onehot_revision']
  gap = all(all(t > 1e-6 for t in v['tv'][:-1]) and v['tv'][-1] < 1e-12
            for v in nr.values())
  rev = all(v['tv'] < 1e-12 and v['rounds'] == 2 for v in rv.values())
  par = ex['parity']
  ring = ex['ring']
  ring_ok = all(
      v['remask']['peak_unmasked'] == v['remask']['width']
      and v['noremask']['peak_unmasked'] == v['noremask']['size']
      and v['remask']['tv_output'] < 1e-12 and v['noremask']['tv_output']
      < 1e-12 and v['remask']['rounds'] == v['remask']['depth'] + 1
      and v['noremask']['rounds'] == v['noremask']['depth'] + 1
      for v in ring.values())
  fmt = lambda xs: '[' + ', '.join(f'{x:.3f}' for x in xs) + ']'
  return [
      launch.Claim(
          claim=('Uniform one-hot law, oracle predictor, no revision: TV > 0 '
                 'for every r < n rounds (0 at r = n); with revision TV = 0 '
                 'in 2 rounds (exact, n = 4, 8).'),
          holds=bool(gap and rev),
          evidence='; '.join(
              f'n={n}: no-revision TV r=1..n {fmt(v["tv"])}, revision TV '
              f'{rv[n]["tv"]:.1e} in {rv[n]["rounds"]} rounds'
              for n, v in nr.items())),
      launch.Claim(
          claim=('CoT simulation: a depth-d randomized circuit (XOR tree, '
                 '(U, PARITY(U))) is sampled exactly in d + 1 rounds.'),
          holds=all(v['tv'] < 1e-12 and v['rounds'] == v['depth'] + 1
                    for v in par.values()),
          evidence='; '.join(f'n={n}: depth {v["depth"]}, {v["rounds"]} '
                             f'rounds, TV {v["tv"]:.1e}'
                             for n, v in par.items())),
      launch.Claim(
          claim=('Space: the CoT footprint (peak unmasked tokens) is the '
                 'circuit size without remasking and the width with '
                 'remasking, in d + 1 rounds with the exact output law.'),
          holds=bool(ring_ok),
          evidence='; '.join(
              f'{k}: peak {v["noremask"]["peak_unmasked"]} (size '
              f'{v["noremask"]["size"]}) vs {v["remask"]["peak_unmasked"]} '
              f'(width {v["remask"]["width"]}), rounds '
              f'{v["remask"]["rounds"]}' for k, v in ring.items())),
  ]


def learned_claims(cfg, m: dict[str, np.ndarray]) -> list[Any]:
  from iclrjax.core import launch  # pylint: disable=g-import-not-at-top
  claims = []
  get = lambda k: float(np.mean(m[k]))
  Kg, Kh = cfg.gate_steps, cfg.headline_steps
  gates = {}
  for lang in cfg.languages:
    if 'mdlm' not in cfg.samplers:
      continue
    v = get(f'validity/{_tag(lang, "mdlm", Kg)}')
    o = get(f'oracle_validity/{_tag(lang, "mdlm", Kg)}')
    gates[lang] = v >= cfg.gate_validity
    claims.append(launch.Claim(
        claim=(f'[{lang}] model quality gate: MDLM validity at K = {Kg} >= '
               f'{cfg.gate_validity:.2f}.'),
        holds=bool(gates[lang]),
        evidence=(f'learned {v:.3f}; the exact (oracle) denoiser with the '
                  f'same sampler {o:.3f}')))
    gaps = {K: get(f'validity/{_tag(lang, "mdlm", K)}')
            - get(f'oracle_validity/{_tag(lang, "mdlm", K)}')
            for K in cfg.num_steps}
    claims.append(launch.Claim(
        claim=(f'[{lang}] the learned denoiser is as good as the exact one '
               'under MDLM sampling: validity within 0.05 of the exact '
               "denoiser's at every K."),
        holds=bool(max(abs(g) for g in gaps.values()) <= 0.05),
        evidence='learned - exact: ' + ', '.join(
            f'K={K} {g:+.3f}' for K, g in gaps.items())))
  if {'mdlm', 'remdm'} <= set(cfg.samplers):
    parts, ok = [], True
    for lang in ('onehot', 'latin'):
      if lang not in cfg.languages:
        continue
      a = get(f'validity/{_tag(lang, "mdlm", Kh)}')
      b = get(f'validity/{_tag(lang, "remdm", Kh)}')
      oa = get(f'oracle_validity/{_tag(lang, "mdlm", Kh)}')
      ob = get(f'oracle_validity/{_tag(lang, "remdm", Kh)}')
      ok = ok and b >= a + cfg.margin and gates.get(lang, False)
      parts.append(f'{lang}: MDLM {a:.3f} -> ReMDM {b:.3f} ({b - a:+.3f}; '
                   f'oracle denoiser {oa:.3f} -> {ob:.3f}); gate '
                   f'{"holds" if gates.get(lang) else "fails"}')
    claims.append(launch.Claim(
        claim=(f'At K = {Kh} model calls ReMDM-loop remasking raises validity '
               f'by >= {cfg.margin:.2f} absolute over MDLM ancestral sampling '
               'on one-hot strings and on 4x4 Latin squares (with the MDLM '
               'quality gate holding).'),
        holds=bool(ok and parts), evidence='; '.join(parts)))
  return claims


def _plots(r, cfg, metrics) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  r.plots_dir.mkdir(parents=True, exist_ok=True)
  Ks = sorted(cfg.num_steps)
  for field, langs in (('validity', cfg.languages),
                       ('tv', [l for l in cfg.languages if l != 'latin'])):
    if not langs:
      continue
    fig, axes = plt.subplots(1, len(langs), figsize=(3.6 * len(langs), 3.0),
                             squeeze=False)
    for ax, lang in zip(axes[0], langs):
      for i, name in enumerate(cfg.samplers):
        for prefix, style in (('', '-'), ('oracle_', ':')):
          vals = [metrics[f'{prefix}{field}/{_tag(lang, name, K)}']
                  for K in Ks]
          ax.errorbar(Ks, [v.mean() for v in vals],
                      yerr=[v.std() for v in vals], fmt='o' + style,
                      color=f'C{i}', ms=3, capsize=2,
                      label=name + (' (oracle)' if prefix else ''))
      if field == 'tv' and f'tv_floor/{lang}' in metrics:
        ax.axhline(metrics[f'tv_floor/{lang}'].mean(), color='gray', lw=0.8,
                   label='finite-N floor')
      ax.set_xscale('log', base=2)
      ax.set_xticks(Ks, [str(k) for k in Ks])
      ax.set_xlabel('model calls K')
      ax.set_title(lang, fontsize=9)
    axes[0, 0].set_ylabel('validity rate' if field == 'validity'
                          else 'TV to uniform on valid strings')
    axes[0, -1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(r.plots_dir / f'{field}_vs_K.png', dpi=120)
    plt.close(fig)


__all__: Sequence[str] = [
    'Denoiser', 'LANGUAGES', 'LENGTH', 'SAMPLERS', 'SampleOut', 'Sampler',
    'TrainState', 'check_config', 'config_schema', 'corrupt', 'empirical_tv',
    'evaluate', 'exact_claims', 'is_valid', 'language_strings',
    'latin_squares', 'learned_claims', 'make_trainer', 'mdlm_loss',
    'oracle_logits_fn', 'run', 'sample', 'sample_arrays', 'sampler_arrays',
    'samplers_of', 'schedule',
    'sigma_max', 'step_trans', 'string_ids', 'token_sigma', 'tv_floor',
    'validity_table', 'vocab_size']
