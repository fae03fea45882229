"""A learned masked diffusion LM: MDLM training, ReMDM remasking, revision.

The learned demo next to the exact round model
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
batch (MDLM's low-discrepancy sampler) and floored at `t_min`, or (config
`time_sampling='count'`) the number of masked tokens m is stratified over
{1..L} with t = m / L: the same NELBO with less variance (`corrupt`).

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
  'mdlm'   ancestral, alpha on the uniform grid t_k = 1 - k/K: each masked
           token unmasks independently, so the number decoded per step is
           random (Binomial) -- the MDLM and ReMDM papers' sampler.
  'mdlm_fixed'  the same grid, but exactly round(L alpha_s) - round(L
           alpha_t) uniformly chosen masked tokens are decoded per step (one
           per step at K = L: ancestral sampling in a random order, exact
           with the exact denoiser).
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

Against the released ReMDM code (kuleshov-group/remdm at f830d659,
diffusion.py; tests/parity/test_dlm.py) `step_trans` gives the same
per-position laws for the MDLM, ReMDM-cap, -rescale and -loop steps. On
purpose it differs in: (i) the grid ends at t = 0 (theirs at eps = 1e-5,
then an extra call that takes the argmax of the still-masked tokens,
diffusion.py:858-860, 885-892; ours takes that argmax in the last step,
`Sampler.final_argmax`, so K stays the number of model calls); (ii) the loop evaluates
the piecewise alpha(t) at both ends of a step, where theirs picks the
branch from t alone (diffusion.py:757-768), so off-grid t_on / t_off
steps ramp alpha_s past alpha_on or stay in the loop, and caps the loop's
sigma at sigma_max (theirs uses eta as is, diffusion.py:774); (iii)
confidence rates carry the N_dec factor above and masked tokens unmask at
u_t(sigma_t), where ReMDM-conf uses sigma = 0 there, i.e. MDLM's rate
(diffusion.py:736-742), and may run inside the loop (theirs: uniform).
Nucleus (top-p) truncation of x_theta (diffusion.py:668-676) is
`Sampler.top_p`; the `Sampler` defaults are the release's ReMDM-loop
settings (uniform, eta 0.02, top_p 0.9, final argmax; remdm-loop.sh).

Metrics: validity rate (`is_valid`), the NELBO against the exact
log-count log N (`nelbo`; >= log N, = log N for the exact denoiser) and,
for 'onehot'/'exactk', the TV distance between the empirical law of the
samples and the uniform law on valid strings (`empirical_tv`; with its
finite-sample floor: the TV of as many exact uniform draws, `tv_floor`).
The exact denoiser of the language (`oracle_logits_fn`, the true
conditional marginals by enumeration) separates what a sampler costs from
what the training costs. The experiment (claims, sweeps, plots) is
`experiments/dlm.py`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.diffusion import train as train_lib

# pylint: disable=invalid-name

LANGUAGES = ('onehot', 'exactk', 'latin')
SAMPLERS = ('mdlm', 'mdlm_fixed', 'remdm', 'revise')
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


OFF_SUPPORT = ('nearest', 'uniform')


def oracle_logits_fn(strings: np.ndarray, vocab: int,
                     off_support: str = 'nearest'
                     ) -> Callable[[jax.Array], jax.Array]:
  """The exact denoiser of the uniform law on `strings`: z [N, L] ->
  log p(x^i = v | visible tokens of z) [N, L, V] by enumeration.

  On the support (some string agrees with every visible token) this is the
  true conditional law whatever `off_support` says. Off it -- a state no
  training string reaches, which only remasking and revision samplers visit
  after an inconsistent draw -- the exact law is undefined, and:
    'nearest'  the conditional of the strings with the fewest mismatches on
               the visible tokens (the limit of a denoiser that reads visible
               tokens as noisy; it steers masked positions towards a valid
               completion, as a trained model does);
    'uniform'  uniform over the vocabulary (a denoiser that gives up).
  """
  if off_support not in OFF_SUPPORT:
    raise ValueError(f'off_support must be one of {OFF_SUPPORT}, got '
                     f'{off_support!r}')
  S_KxL = jnp.asarray(strings, jnp.int32)
  hot_KxLxV = jax.nn.one_hot(S_KxL, vocab)

  def logits_fn(z_NxL: jax.Array) -> jax.Array:
    # Mismatches on the visible tokens = visible - matches, the matches one
    # matmul of one-hots (MASK = vocab is the zero row); integer counts,
    # exact in float32.
    match_NxK = jnp.einsum('nlv,klv->nk', jax.nn.one_hot(z_NxL, vocab),
                           hot_KxLxV)
    miss_NxK = jnp.sum(z_NxL != vocab, -1, keepdims=True) - match_NxK
    best_Nx1 = jnp.min(miss_NxK, axis=-1, keepdims=True)
    if off_support == 'nearest':
      w_NxK = (miss_NxK == best_Nx1).astype(jnp.float32)
    else:
      w_NxK = (miss_NxK == 0).astype(jnp.float32)
    marg = jnp.einsum('nk,klv->nlv', w_NxK, hot_KxLxV)
    z_N = jnp.sum(w_NxK, -1)[:, None, None]
    p = jnp.where(z_N > 0, marg / jnp.maximum(z_N, 1.0), 1.0 / vocab)
    return jnp.log(p)

  return logits_fn


def substitution_oracle_logits_fn(strings: np.ndarray, vocab: int,
                                  sub_rate: float
                                  ) -> Callable[[jax.Array], jax.Array]:
  """The Bayes denoiser of `make_trainer`'s training law with substitution
  rate r = `sub_rate` > 0 (`substitute`): z [N, L] -> log p(x^i = v | z)
  [N, L, V], by enumeration over the uniform law on `strings`.

  Each visible token is the clean one w.p. 1 - r + r / V and any other
  given token w.p. r / V, so p(x | z) is proportional to
  prod_{i visible} (1 - r + r / V if z_i = x_i else r / V), defined on and
  off the support. A model trained with substitution converges to this,
  not to `oracle_logits_fn`, so its NELBO under pure masking (`nelbo`) sits
  above log N by this denoiser's NELBO - log N: the floor a gate on the
  trained NELBO must be measured from.
  """
  if not 0.0 < sub_rate < 1.0:
    raise ValueError(f'sub_rate must be in (0, 1), got {sub_rate}')
  S_KxL = jnp.asarray(strings, jnp.int32)
  hot_KxLxV = jax.nn.one_hot(S_KxL, vocab)
  hit, miss = math.log(1 - sub_rate + sub_rate / vocab), math.log(
      sub_rate / vocab)

  def logits_fn(z_NxL: jax.Array) -> jax.Array:
    z_Nx1xL = z_NxL[:, None]
    lw_NxK = jnp.sum(jnp.where(z_Nx1xL == vocab, 0.0, jnp.where(
        z_Nx1xL == S_KxL, hit, miss)), axis=-1)
    w_NxK = jax.nn.softmax(lw_NxK, axis=-1)
    return jnp.log(jnp.einsum('nk,klv->nlv', w_NxK, hot_KxLxV) + 1e-30)

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


def corrupt(key: jax.Array, x0_BxL: jax.Array, vocab: int, t_min: float,
            count: bool = False) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(z_t, mask, t) for the MDLM loss.

  Continuous (`count=False`): t stratified over the batch in [t_min, 1],
  each token masked independently w.p. 1 - alpha_t = t.
  `count=True`: the number of masked tokens m is stratified over the batch
  in {1..L} and exactly m uniformly chosen positions are masked; t = m / L.
  The same NELBO with less variance: given t the masked set is a uniform
  m-subset with m ~ Binomial(L, t), and E_{t~U(0,1)}[P(m | t) / t] =
  C(L, m) B(m, L - m + 1) = 1/m, so E_t (1/t) sum_{i in M} l_i =
  sum_m (1/m) E_{|M|=m} sum_{i in M} l_i, whose one-draw estimate with
  m ~ U{1..L} is (L/m) sum_{i in M} l_i = (1/t) sum_{i in M} l_i: the same
  `mdlm_loss`, for any denoiser of z alone (t_min -> 0; tested). It is the
  any-order autoregressive form of the NELBO (no 1/t blow-up near t = 0).
  """
  B, L = x0_BxL.shape
  k_t, k_m = jax.random.split(key)
  u = (jax.random.uniform(k_t) + jnp.arange(B) / B) % 1.0
  if count:
    m_B = 1 + jnp.floor(u * L).astype(jnp.int32)
    rank = jnp.argsort(jnp.argsort(jax.random.uniform(k_m, (B, L)), -1), -1)
    mask_BxL = rank < m_B[:, None]
    t_B = m_B.astype(jnp.float32) / L
  else:
    t_B = t_min + (1.0 - t_min) * u
    mask_BxL = jax.random.uniform(k_m, x0_BxL.shape) < t_B[:, None]
  return jnp.where(mask_BxL, vocab, x0_BxL), mask_BxL, t_B


def substitute(key: jax.Array, z_BxL: jax.Array, vocab: int,
               rate: float) -> jax.Array:
  """Each visible token of z (not MASK = vocab) replaced w.p. `rate` by a
  uniform draw from the vocabulary (possibly itself)."""
  k_u, k_v = jax.random.split(key)
  hit = (jax.random.uniform(k_u, z_BxL.shape) < rate) & (z_BxL != vocab)
  return jnp.where(hit, jax.random.randint(k_v, z_BxL.shape, 0, vocab),
                   z_BxL)


def nelbo(logits_fn: Callable[[jax.Array], jax.Array], strings: jax.Array,
          vocab: int, key: jax.Array, reps: int = 32, t_min: float = 1e-3,
          count: bool = True) -> tuple[jax.Array, jax.Array]:
  """(mean, standard error) of the MDLM NELBO in nats per string under the
  uniform law on `strings` [N, L]: `reps` draws of (t, z_t) per string
  (stratified within each pass over the N strings; `corrupt`'s `count`
  form by default, the lower-variance one), one pass per rep
  under `lax.map`. It bounds -log p(x) from above, so it is >= log N, with
  equality for the exact denoiser (tested)."""
  x0 = jnp.asarray(strings, jnp.int32)

  def one(k):
    z, mask, t = corrupt(k, x0, vocab, t_min, count)
    return mdlm_loss(logits_fn(z), x0, mask, t)

  loss = jax.lax.map(one, jax.random.split(key, reps)).reshape(-1)
  return jnp.mean(loss), jnp.std(loss) / jnp.sqrt(loss.size)


TrainState = train_lib.TrainState


def make_trainer(model: Denoiser, strings: np.ndarray, c: Any,
                 num_steps: int | None = None):
  """(init, step) training `model` with the MDLM loss on minibatches drawn
  (epoch-wise without replacement, `core.data.batch_indices`) from the
  valid `strings`. Fields of `c`: batch_size, learning_rate, warmup_steps,
  ema_decay, t_min; optional lr_decay ('constant' after the warm-up, or
  'cosine' to 1% at `num_steps`), time_sampling ('count' or
  'continuous', see `corrupt`; default 'count') and sub_rate (default 0:
  pure masking). With sub_rate > 0 each visible input token is replaced by
  a uniform random token w.p. sub_rate (`substitute`) while the loss stays
  the masked positions' -log p(x0): the model also sees the off-support
  contexts that remasking samplers create after an inconsistent draw, and
  learns to complete them towards valid strings (our addition; MDLM and
  ReMDM train on pure masking).

  `strings` [N, L] gives the shapes only: `step(state, t, strings)` takes
  them as its `data` argument (`r.train(..., data=strings)`), an input of
  the compiled loop rather than a constant of it."""
  n, length = np.shape(strings)
  warm = max(1, c.warmup_steps)
  if c.get('lr_decay', 'constant') == 'cosine':
    if num_steps is None:
      raise ValueError("lr_decay='cosine' needs num_steps (its horizon)")
    lr = optax.warmup_cosine_decay_schedule(
        0.0, c.learning_rate, warm, max(warm + 1, num_steps),
        end_value=0.01 * c.learning_rate)
  else:
    lr = optax.linear_schedule(0.0, c.learning_rate, warm)
  count = c.get('time_sampling', 'count') == 'count'
  sub_rate = float(c.get('sub_rate', 0.0))
  tx = optax.chain(optax.clip_by_global_norm(1.0),
                   optax.adamw(lr, weight_decay=0.0))

  def init_params(key: jax.Array):
    # Flax initialises from shapes only: any tokens give the same params.
    return model.init(key, jnp.zeros((1, length), jnp.int32))

  def loss_fn(params, x0_BxL, key, frozen):
    del frozen
    k_c, k_s = jax.random.split(key)
    z_BxL, mask_BxL, t_B = corrupt(k_c, x0_BxL, model.vocab, c.t_min, count)
    if sub_rate > 0:
      z_BxL = substitute(k_s, z_BxL, model.vocab, sub_rate)
    loss_B = mdlm_loss(model.apply(params, z_BxL), x0_BxL, mask_BxL, t_B)
    return jnp.mean(loss_B)

  # `data` keeps the caller's dtype; the loss and the MASK id are int32.
  return train_lib.make_trainer(
      init_params, loss_fn, tx, ema_decay=c.ema_decay,
      batch_fn=train_lib.minibatch(n, c.batch_size, jnp.int32))


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
  """A sampler with K model calls; see the module docstring.

  The defaults are the released ReMDM-loop's (kuleshov-group/remdm at
  f830d659, scripts/remdm-loop.sh): uniform remasking (conf=False),
  eta = 0.02, nucleus top_p = 0.9 and an argmax for the tokens still masked
  at the end (final_argmax). conf=True (confidence-weighted rates) and
  larger eta are options."""
  kind: str = 'mdlm'          # 'mdlm' | 'mdlm_fixed' | 'remdm' | 'revise'
  num_steps: int = 16         # K
  eta: float = 0.02           # sigma_t = min(eta, sigma_max)
  conf: bool = False          # confidence-based sigma (remdm, revise)
  t_on: float = 0.55          # remdm loop window [t_off, t_on]
  t_off: float = 0.05
  alpha_on: float = 0.9       # alpha held in the loop
  top_p: float = 0.9          # nucleus truncation of x_theta (1: none)
  final_argmax: bool = True   # the last step decodes its masks by argmax


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
  if s.kind in ('mdlm', 'mdlm_fixed'):
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


def unmask_counts(s: Sampler, length: int = LENGTH) -> np.ndarray:
  """Tokens decoded by each step of 'mdlm_fixed' [K]: round(L alpha_s) -
  round(L alpha_t), so the counts sum to L and follow the expected counts of
  the random-count sampler; -1 (random count) for the other kinds."""
  if s.kind != 'mdlm_fixed':
    return np.full(s.num_steps, -1, np.int32)
  a_t, a_s, _ = schedule(s)
  return (np.round(length * a_s) - np.round(length * a_t)).astype(np.int32)


def sampler_arrays(s: Sampler, length: int = LENGTH) -> dict[str, jax.Array]:
  """The traced inputs of `sample_arrays` for `s` (one compilation serves
  every sampler with the same K)."""
  a_t, a_s, sig = schedule(s)
  if not 0.0 < s.top_p <= 1.0:
    raise ValueError(f'top_p must be in (0, 1], got {s.top_p}')
  last = np.arange(s.num_steps) == s.num_steps - 1
  return {'alpha_t': jnp.asarray(a_t, jnp.float32),
          'alpha_s': jnp.asarray(a_s, jnp.float32),
          'sigma': jnp.asarray(sig, jnp.float32),
          'count': jnp.asarray(unmask_counts(s, length)),
          'argmax': jnp.asarray(last & s.final_argmax),
          'revise': jnp.asarray(s.kind == 'revise'),
          'conf': jnp.asarray(s.conf),
          'top_p': jnp.asarray(s.top_p, jnp.float32)}


def nucleus(probs: jax.Array, top_p: jax.Array | float) -> jax.Array:
  """Top-p truncation of per-position laws [..., V], the ReMDM release's
  rule (kuleshov-group/remdm diffusion.py, `nucleus_p`): keeps the sorted
  tokens whose cumulative probability is <= top_p, and always the most
  likely one, renormalised. The token that crosses top_p is dropped (unlike
  the HF-style rule): with V = 2 and top_p < 1 it is always greedy.
  top_p >= 1 leaves the law unchanged; ties keep the sort's order."""
  order = jnp.argsort(-probs, axis=-1, stable=True)
  sorted_p = jnp.take_along_axis(probs, order, -1)
  keep_sorted = (jnp.cumsum(sorted_p, -1) <= top_p) | (
      jnp.asarray(top_p) >= 1.0)
  keep_sorted = keep_sorted.at[..., 0].set(True)
  keep = jnp.zeros_like(keep_sorted).at[
      tuple(jnp.indices(order.shape)[:-1]) + (order,)].set(keep_sorted)
  kept = jnp.where(keep, probs, 0.0)
  return kept / jnp.maximum(jnp.sum(kept, -1, keepdims=True), 1e-30)


def sample_arrays(logits_fn: Callable[[jax.Array], jax.Array], key: jax.Array,
                  num: int, vocab: int, arrays: dict[str, jax.Array],
                  length: int = LENGTH) -> SampleOut:
  """`sample` with the sampler given as traced arrays (`sampler_arrays`)."""
  revise, conf = arrays['revise'], arrays['conf']
  top_p = arrays.get('top_p', jnp.float32(1.0))

  def body(carry, inp):
    z, psi, key, n_rev = carry
    alpha_t, alpha_s, sigma, count, argmax = inp
    key, k_rev, k_draw, k_pick, k_tok = jax.random.split(key, 5)
    sig_tok = jnp.where(conf, token_sigma(z, psi, sigma, vocab, True),
                        token_sigma(z, psi, sigma, vocab, False))
    # Revision picks its tokens before the call and hides them from it.
    chosen = revise & (jax.random.uniform(k_rev, z.shape) < sig_tok)
    z_in = jnp.where(chosen, vocab, z)
    probs = nucleus(
        jax.nn.softmax(logits_fn(z_in).astype(jnp.float32), axis=-1), top_p)
    trans = step_trans(z_in, probs, jnp.where(revise, 0.0, sig_tok),
                       alpha_t, alpha_s, jnp.where(revise, 0.0, sigma))
    # A revised position is redrawn from x_theta right away (token -> token).
    full = jnp.concatenate([probs, jnp.zeros(probs.shape[:-1] + (1,))], -1)
    trans = jnp.where(chosen[..., None], full, trans)
    new = jax.random.categorical(k_draw, jnp.log(trans), axis=-1)
    # Fixed count: exactly `count` masked positions, uniformly at random,
    # each drawn from x_theta (the random-count step's law given how many).
    masked = z_in == vocab
    score = jnp.where(masked, jax.random.uniform(k_pick, z.shape), 2.0)
    rank = jnp.argsort(jnp.argsort(score, axis=-1), axis=-1)
    pick = masked & (rank < count)
    tok = jax.random.categorical(k_tok, jnp.log(probs), axis=-1)
    new = jnp.where(count >= 0, jnp.where(pick, tok, z_in), new)
    # The last step of the release: tokens masked before it are decoded by
    # the argmax of x_theta (no MASK is left).
    new = jnp.where(argmax & (z_in == vocab),
                    jnp.argmax(probs, -1).astype(new.dtype), new)
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
      (arrays['alpha_t'], arrays['alpha_s'], arrays['sigma'],
       arrays['count'],
       arrays.get('argmax', jnp.zeros_like(arrays['count'], bool))))
  return SampleOut(z, frac, n_rev)


def sample(logits_fn: Callable[[jax.Array], jax.Array], key: jax.Array,
           num: int, vocab: int, s: Sampler, length: int = LENGTH
           ) -> SampleOut:
  """Draws `num` strings with exactly K = s.num_steps calls of
  `logits_fn(z [num, L]) -> [num, L, V]` (one per step, under lax.scan)."""
  return sample_arrays(logits_fn, key, num, vocab,
                       sampler_arrays(s, length), length)


__all__: Sequence[str] = [
    'Denoiser', 'LANGUAGES', 'LENGTH', 'OFF_SUPPORT', 'SAMPLERS', 'SampleOut',
    'Sampler', 'TrainState', 'corrupt', 'empirical_tv', 'is_valid',
    'language_strings', 'latin_squares', 'make_trainer', 'mdlm_loss', 'nelbo',
    'nucleus', 'oracle_logits_fn', 'sample', 'sample_arrays',
    'sampler_arrays', 'schedule', 'sigma_max', 'step_trans', 'string_ids',
    'substitute', 'substitution_oracle_logits_fn', 'token_sigma',
    'tv_floor', 'unmask_counts', 'vocab_size']
