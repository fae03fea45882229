"""SGD as a tempered posterior through singular learning theory (Hennick &
De Baerdemacker, "Almost Bayesian", arXiv 2503.22478), with the local
learning coefficient estimator of Lau et al. (arXiv 2308.12108).

Pure functions; the experiment is `experiments/sgd_llc.py`.

**The local learning coefficient (LLC).** For a loss L_n (the mean negative
log-likelihood of n examples) and a local minimum w*, Lau et al. estimate

  lambda_hat(w*) = n beta (E_w[L_n(w)] - L_n(w*)),  beta = 1 / log n,  (Eq. 1)

the expectation over the tempered, localised posterior

  p(w) oc exp(-n beta L_n(w) - gamma / 2 ||w - w*||^2),               (Eq. 2)

sampled with SGLD (`blackjax.sgld`: w <- w + eps grad log p_batch(w) +
sqrt(2 eps) N(0, I), so blackjax's eps is half the paper's SGLD step) with
minibatch gradients, chains a vmapped axis (`estimate_llc`). E_w[L_n] is the
average over the post-burn-in draws of the minibatch loss at the draw (an
unbiased estimate of L_n there). For a regular model with Hessian H at w*,
Eq. 2 is Gaussian and

  E[n beta (L_n(w) - L_n(w*))] = 1/2 sum_i n beta h_i / (n beta h_i + gamma)
                               -> d / 2                               (Eq. 3)

(`regular_llc`), which the Euler-Maruyama chain biases by the factor
1 / (1 - eps a_i / 2), a_i = n beta h_i + gamma, per eigen-direction.
Deep linear networks have a known learning coefficient (Aoyagi 2024,
`dln_learning_coefficient`).

Against devinterp (timaeus-research/devinterp at a646b9d;
tests/parity/test_sgd_llc.py) the SGLD step (its lr = 2 eps,
src/devinterp/optim/sgld.py:250-253) and Eq. 1 (src/devinterp/slt/llc.py:107)
agree to float32 on the same batches and noise. Three defaults differ on
purpose: its nbeta is m / log m of the batch size m (src/devinterp/utils.py:93;
ours n / log n, Lau et al.), its L_n(w*) the mean loss of `num_chains`
minibatches (backends/default/slt/sampler.py:254; ours the full-data loss),
and it cycles a shuffled DataLoader (sampler.py:105) where `sgld_step` draws
each minibatch with replacement.

**SGD as diffusion** (the paper). Late-stage SGD displaces as
R(t) = ||w_{t0 + t} - w_{t0}|| ~ t^alpha with alpha = d_s / (2 lambda)
(Thm 3.1, the Alexander-Orbach relation d_walk = 2 lambda / d_s), so a fit of
log R on log t gives alpha (`displacement_exponent`) and the spectral
dimension d_s = 2 lambda alpha (`spectral_dimension`); Lemma 3.4 says
d_s <= lambda (alpha <= 1/2: sub-diffusion). The coarse-grained diffusion
coefficient is D_xi(w) = xi^{2 - 2 lambda(w) / d_s} (Cor. 3.1); SGD's local
steady state is p_s oc exp(-gamma L_m / D_xi) (Lemma 3.3) and for log-loss
the Bayes posterior is p(w | X_m) oc rho(w) p_s(w)^{m D_xi} (Cor. 3.2). On
clusters of solutions this reads: the posterior mass of cluster c is the SGD
mass tempered by m D_xi(lambda_c) (`temper_masses`), compared by
`kl_divergence`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from iclrjax.core import distributed
from iclrjax.core import extras

PyTree = Any
# (w, one example) -> its negative log-likelihood
ExampleLoss = Callable[[PyTree, PyTree], jax.Array]


# -- the LLC estimator (Lau et al.) -------------------------------------------


def default_beta(n: int) -> float:
  """The inverse temperature of Eq. 1, 1 / log n."""
  return 1.0 / math.log(n)


def _sq_dist(a: PyTree, b: PyTree) -> jax.Array:
  return sum(jnp.sum((x - y)**2) for x, y in
             zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def full_loss(example_loss: ExampleLoss, w: PyTree, data: PyTree
              ) -> jax.Array:
  """L_n(w): the mean of `example_loss` over the dataset."""
  return jnp.mean(jax.vmap(example_loss, in_axes=(None, 0))(w, data))


def posterior_grad(example_loss: ExampleLoss, w_star: PyTree | None, n: int,
                   beta: float, gamma: float, prior_precision: float = 0.0):
  """blackjax's gradient estimator of log p (Eq. 2) from a minibatch:
  -n beta grad L_batch(w) - gamma (w - w*) - prior_precision w.

  `w_star=None` drops the localisation (the untempered posterior of
  the paper's SGLD baseline is beta = 1, gamma = 0 with a Gaussian prior of
  precision `prior_precision`).
  """

  def logprior(w):
    out = -0.5 * prior_precision * _sq_dist(w, jax.tree.map(jnp.zeros_like, w))
    if w_star is not None and gamma:
      out = out - 0.5 * gamma * _sq_dist(w, w_star)
    return out

  # Imported here: its import starts the XLA backend.
  blackjax = extras.require('blackjax', 'stats')
  return blackjax.sgmcmc.gradients.grad_estimator(
      logprior, lambda w, ex: -beta * example_loss(w, ex), n)


def sgld_step(key: jax.Array, position: PyTree, grad_fn, data: PyTree, *,
              batch_size: int, step_size: float,
              example_loss: ExampleLoss) -> tuple[PyTree, jax.Array]:
  """One `blackjax.sgld` step of one chain on a minibatch drawn with
  replacement; returns (new position, minibatch loss at the old one)."""
  n = jax.tree.leaves(data)[0].shape[0]
  k_batch, k_step = jax.random.split(key)
  idx = distributed.shard_batch(
      jax.random.randint(k_batch, (batch_size,), 0, n))
  batch = jax.tree.map(lambda a: a[idx], data)
  loss = full_loss(example_loss, position, batch)
  blackjax = extras.require('blackjax', 'stats')
  new = blackjax.sgld(grad_fn).step(k_step, position, batch, step_size)
  return new, loss


class LLCEstimate(NamedTuple):
  """What `estimate_llc` returns: lambda_hat, L_n(w*), the posterior mean
  loss and the chains' minibatch-loss traces."""

  llc: jax.Array            # lambda_hat (Eq. 1)
  loss_star: jax.Array      # L_n(w*)
  mean_loss: jax.Array      # E_w[L_n(w)] over chains and post-burn-in draws
  trace: jax.Array          # [num_steps, num_chains] minibatch losses


def estimate_llc(key: jax.Array, example_loss: ExampleLoss, w_star: PyTree,
                 data: PyTree, *, num_chains: int, num_steps: int,
                 num_burnin: int, batch_size: int, step_size: float,
                 gamma: float, beta: float | None = None,
                 localise: bool = True) -> LLCEstimate:
  """lambda_hat(w*) (Eq. 1) by SGLD on Eq. 2, `num_chains` chains from w*
  (vmapped), the first `num_burnin` draws discarded. `beta=None`: 1 / log n.
  `localise=False` drops the gamma term (an ablation)."""
  n = jax.tree.leaves(data)[0].shape[0]
  beta = default_beta(n) if beta is None else beta
  grad_fn = posterior_grad(example_loss, w_star if localise else None, n,
                           beta, gamma)
  step = jax.vmap(lambda k, w: sgld_step(
      k, w, grad_fn, data, batch_size=batch_size, step_size=step_size,
      example_loss=example_loss))
  chains = jax.tree.map(
      lambda a: jnp.broadcast_to(a, (num_chains,) + a.shape), w_star)

  def body(w, k):
    return step(jax.random.split(k, num_chains), w)

  _, trace = jax.lax.scan(body, chains, jax.random.split(key, num_steps))
  loss_star = full_loss(example_loss, w_star, data)
  mean_loss = jnp.mean(trace[num_burnin:])
  return LLCEstimate(n * beta * (mean_loss - loss_star), loss_star,
                     mean_loss, trace)


def minimise(example_loss: ExampleLoss, w0: PyTree, data: PyTree, *,
             num_steps: int, lr: float) -> PyTree:
  """Full-batch gradient descent on L_n from w0: the local minimum w* at
  which Eq. 1 is evaluated (at a point above the minimum the chain finds
  lower loss and lambda_hat is biased low, by ~ beta d / 2 at the true
  parameter of a regular model)."""
  grad = jax.grad(lambda w: full_loss(example_loss, w, data))
  return jax.lax.fori_loop(
      0, num_steps,
      lambda _, w: jax.tree.map(lambda a, g: a - lr * g, w, grad(w)), w0)


def regular_llc(hessian_eigs: jax.Array, n: int, beta: float, gamma: float,
                step_size: float = 0.0) -> jax.Array:
  """The exact expectation of Eq. 1 for a quadratic loss (Eq. 3), with the
  stationary variance of the Euler-Maruyama chain at `step_size` (blackjax's
  eps): 1/2 sum_i n beta h_i / (a_i (1 - eps a_i / 2)), a_i = n beta h_i +
  gamma."""
  a = n * beta * hessian_eigs + gamma
  return 0.5 * jnp.sum(n * beta * hessian_eigs / (a * (1 - step_size * a / 2)))


# -- learning coefficients known in closed form -------------------------------


def _aoyagi_subset(delta: np.ndarray) -> tuple[int, ...]:
  """The index set Sigma of Aoyagi's theorem: max Delta_Sigma < min of the
  rest, sum Delta_Sigma >= ell max Delta_Sigma and sum Delta_Sigma < ell min
  of the rest (|Sigma| = ell + 1); unique when it exists."""
  m = len(delta)
  for size in range(2, m + 1):
    for sub in itertools.combinations(range(m), size):
      ell = size - 1
      inside = delta[list(sub)]
      rest = np.delete(delta, list(sub))
      s = inside.sum()
      if s < ell * inside.max():
        continue
      if rest.size and not (inside.max() < rest.min() and s < ell * rest.min()):
        continue
      return sub
  raise ValueError(f'no Aoyagi subset for Delta = {delta.tolist()}')


def dln_learning_coefficient(widths: Sequence[int], rank: int) -> float:
  """The learning coefficient of a deep linear network x -> W_M ... W_1 x
  with widths (H_1 = input, ..., H_{M+1} = output) at a true product of rank
  r (Aoyagi 2024, Thm 1): with Delta_j = H_j - r, the subset Sigma
  (`_aoyagi_subset`, |Sigma| = ell + 1), S = sum Delta_Sigma and
  a = S - (ceil(S / ell) - 1) ell,

    lambda = (r (H_1 + H_{M+1}) - r^2) / 2 + a (ell - a) / (4 ell)
             - ell (ell - 1) / 4 (S / ell)^2
             + 1/2 sum_{i<j in Sigma} Delta_i Delta_j.
  """
  h = np.asarray(widths, np.int64)
  if h.size < 2 or rank < 0 or rank > h.min():
    raise ValueError(f'need >= 2 widths and 0 <= rank <= min width, got '
                     f'widths={list(widths)}, rank={rank}')
  delta = h - rank
  sub = delta[list(_aoyagi_subset(delta))]
  ell = sub.size - 1
  s = float(sub.sum())
  a = s - (math.ceil(s / ell) - 1) * ell
  pairs = sum(float(sub[i] * sub[j])
              for i in range(sub.size) for j in range(i + 1, sub.size))
  return ((rank * (h[0] + h[-1]) - rank**2) / 2 + a * (ell - a) / (4 * ell)
          - ell * (ell - 1) / 4 * (s / ell)**2 + pairs / 2)


# -- models -------------------------------------------------------------------


class MLP(nn.Module):
  """ReLU MLP: hidden `widths`, then `out` logits."""
  widths: tuple[int, ...]
  out: int

  @nn.compact
  def __call__(self, x):
    for w in self.widths:
      x = nn.relu(nn.Dense(w)(x))
    return nn.Dense(self.out)(x)


def dln_apply(ws: Sequence[jax.Array], x: jax.Array) -> jax.Array:
  """A deep linear network: x W_1 ... W_M (ws[i]: [H_i, H_{i+1}])."""
  for w in ws:
    x = x @ w
  return x


def gaussian_nll(pred: jax.Array, y: jax.Array, sigma: float = 1.0
                 ) -> jax.Array:
  """-log N(y; pred, sigma^2 I) up to its constant (which Eq. 1 cancels)."""
  return 0.5 * jnp.sum((y - pred)**2) / sigma**2


# -- SGD displacement (Thm 3.1, Lemma 3.4) ------------------------------------


class PowerFit(NamedTuple):
  alpha: jax.Array       # slope of log R on log t
  intercept: jax.Array
  r2: jax.Array


def displacement_exponent(t: jax.Array, r: jax.Array) -> PowerFit:
  """Least-squares fit log R = alpha log t + c (Thm 3.1: alpha =
  d_s / (2 lambda)) and its r^2."""
  x, y = jnp.log(t), jnp.log(r)
  xc, yc = x - x.mean(), y - y.mean()
  alpha = jnp.sum(xc * yc) / jnp.sum(xc**2)
  resid = yc - alpha * xc
  r2 = 1.0 - jnp.sum(resid**2) / jnp.sum(yc**2)
  return PowerFit(alpha, y.mean() - alpha * x.mean(), r2)


def spectral_dimension(llc: jax.Array, alpha: jax.Array) -> jax.Array:
  """d_s = 2 lambda alpha (Thm 3.1); Lemma 3.4: d_s <= lambda."""
  return 2.0 * llc * alpha


def log_times(start: int, stop: int, num: int) -> np.ndarray:
  """`num` distinct integers log-spaced in [start, stop] (displacement
  record times)."""
  return np.unique(np.round(np.geomspace(start, stop, num)).astype(np.int64))


# -- posterior concentration (Cor. 3.1, 3.2) ----------------------------------


def diffusion_coefficient(xi, llc, d_s):
  """D_xi = xi^{2 - 2 lambda / d_s} (Cor. 3.1)."""
  return xi**(2.0 - 2.0 * llc / d_s)


def temper_masses(mass_c: jax.Array, llc_c: jax.Array, d_s, xi, m
                  ) -> jax.Array:
  """The SGD mass of each cluster tempered by m D_xi(lambda_c) (Cor. 3.2),
  normalised: q_c oc mass_c^{m D_xi(lambda_c)}."""
  logq = m * diffusion_coefficient(xi, llc_c, d_s) * jnp.log(mass_c)
  return jax.nn.softmax(logq)


def kl_divergence(p: jax.Array, q: jax.Array) -> jax.Array:
  """KL(p || q) of two distributions over clusters (0 log 0 = 0)."""
  return jnp.sum(jnp.where(p > 0, p * (jnp.log(jnp.where(p > 0, p, 1.0))
                                       - jnp.log(q)), 0.0))


def cluster_masses(labels: jax.Array, k: int, pseudo: float = 0.5
                   ) -> jax.Array:
  """Cluster frequencies with `pseudo` added to every count (a cluster SGD
  never reached keeps a finite log-mass)."""
  counts = jnp.bincount(labels, length=k) + pseudo
  return counts / counts.sum()
