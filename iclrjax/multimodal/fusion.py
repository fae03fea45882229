"""Late vs intermediate multimodal fusion and IID's two regularisers
("Supporting Multimodal Intermediate Fusion with Informatic Constraint and
Distribution Coherence", Li, Song, Zheng, Li; ICLR 2026, OpenReview
5bxmmuRhO6).

The paper's exact loss forms were not available to us (its PDF and
supplementary code could not be read here; only the abstract and a secondary
summary, papernotes.org, were found). What the paper states: late fusion (LF)
maps each modality to logits and fuses the logits; intermediate fusion (IF)
fuses the latents and applies one shared linear target mapping; IID adds an
*informatic constraint* that keeps IF's linear target mapping within the
theory's condition, and *Wasserstein distribution cohering* between the
modalities' latents after a RIP-style random dimensionality reduction.

RECONSTRUCTION (ours, labelled as such in the experiment's claims):

  * informatic constraint: the fused representation h that the linear head
    W maps to logits should use all of its dimensions (a full-rank,
    non-redundant input to W); we penalise the off-diagonal of its
    correlation matrix, sum_{i != j} corr(h)_ij^2 / (d (d - 1)).
  * cohering: the squared sliced 2-Wasserstein distance (the fallback the
    issue names, not the paper's estimator) between the two modalities'
    latents after a fixed Gaussian random projection R in R^{d x k} with
    entries N(0, 1/k), which satisfies the RIP / Johnson-Lindenstrauss
    property with high probability.

Shapes: N samples, D features, L projection directions, C classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp


class MLP(nn.Module):
  """Dense layers with ReLU between them (none after the last)."""

  features: Sequence[int]

  @nn.compact
  def __call__(self, x):
    for i, f in enumerate(self.features):
      x = nn.Dense(f)(x)
      if i < len(self.features) - 1:
        x = nn.relu(x)
    return x


class LateFusion(nn.Module):
  """LF: a network per modality to logits; logits fused by summation,
  f(a, b) = g_a(a) + g_b(b) (additive across modalities)."""

  hidden: int
  num_classes: int
  depth: int = 2

  @nn.compact
  def __call__(self, xa_NxD, xb_NxD):
    feats = [self.hidden] * self.depth + [self.num_classes]
    return MLP(feats, name='head_a')(xa_NxD) + MLP(feats, name='head_b')(
        xb_NxD)


class IFOutputs(NamedTuple):
  """What `IntermediateFusion` returns: logits, both modalities' latents
  and the fused representation (what IID's two regularisers read)."""

  logits: jax.Array   # [N, C]
  za: jax.Array       # [N, latent] modality a's latent
  zb: jax.Array       # [N, latent]
  h: jax.Array        # [N, hidden] the fused representation the head maps


class IntermediateFusion(nn.Module):
  """IF: per-modality encoders to latents, concatenation, a fusion MLP (it
  must mix the modalities: a linear head on the concatenated latents alone
  is additive like LF) and one shared linear target mapping W."""

  hidden: int
  latent: int
  num_classes: int
  fusion_depth: int = 2

  @nn.compact
  def __call__(self, xa_NxD, xb_NxD) -> IFOutputs:
    za = MLP([self.hidden, self.latent], name='enc_a')(xa_NxD)
    zb = MLP([self.hidden, self.latent], name='enc_b')(xb_NxD)
    h = nn.relu(MLP([self.hidden] * self.fusion_depth, name='fusion')(
        jnp.concatenate([za, zb], axis=-1)))
    return IFOutputs(nn.Dense(self.num_classes, name='head')(h), za, zb, h)


def rip_projection(key: jax.Array, dim: int, k: int) -> jax.Array:
  """A [dim, k] Gaussian random projection, entries N(0, 1/k): norms of a
  fixed low-dimensional set are kept within (1 +- delta) with high
  probability (RIP / Johnson-Lindenstrauss)."""
  return jax.random.normal(key, (dim, k)) / jnp.sqrt(k)


def random_directions(key: jax.Array, num: int, dim: int) -> jax.Array:
  """[num, dim] directions uniform on the unit sphere."""
  v = jax.random.normal(key, (num, dim))
  return v / jnp.linalg.norm(v, axis=-1, keepdims=True)


def wasserstein_1d_pp(u_N: jax.Array, v_N: jax.Array, p: float = 2.0
                      ) -> jax.Array:
  """W_p(u, v)^p between two empirical 1-D measures with N equal-weight
  atoms each: the monotone (sorted) coupling is optimal."""
  if u_N.shape[-1] != v_N.shape[-1]:
    raise ValueError(f'equal sample sizes needed, got {u_N.shape[-1]} and '
                     f'{v_N.shape[-1]}')
  d = jnp.sort(u_N, axis=-1) - jnp.sort(v_N, axis=-1)
  return jnp.mean(jnp.abs(d) ** p, axis=-1)


def sliced_wasserstein_pp(x_NxD: jax.Array, y_NxD: jax.Array,
                          directions_LxD: jax.Array, p: float = 2.0
                          ) -> jax.Array:
  """SW_p^p(x, y) = mean_theta W_p^p(theta#x, theta#y) over the L given
  directions (Monte Carlo over the sphere)."""
  return jnp.mean(wasserstein_1d_pp((x_NxD @ directions_LxD.T).T,
                                    (y_NxD @ directions_LxD.T).T, p))


def sliced_wasserstein(x_NxD, y_NxD, directions_LxD, p: float = 2.0):
  """The sliced p-Wasserstein distance SW_p = (SW_p^p)^(1/p)."""
  return sliced_wasserstein_pp(x_NxD, y_NxD, directions_LxD, p) ** (1.0 / p)


def cohering_loss(za_NxD: jax.Array, zb_NxD: jax.Array, proj_DxK: jax.Array,
                  directions_LxK: jax.Array) -> jax.Array:
  """Distribution cohering (reconstruction; sliced-Wasserstein fallback):
  SW_2^2 between the two modalities' latents after the RIP projection."""
  return sliced_wasserstein_pp(za_NxD @ proj_DxK, zb_NxD @ proj_DxK,
                               directions_LxK, 2.0)


def informatic_constraint(h_NxD: jax.Array, eps: float = 1e-5) -> jax.Array:
  """Informatic constraint (reconstruction): mean squared off-diagonal
  correlation of the fused representation, 0 when its dimensions are
  pairwise uncorrelated (each carries its own information to W)."""
  d = h_NxD.shape[-1]
  hc = h_NxD - h_NxD.mean(axis=0)
  hn = hc / jnp.sqrt(jnp.mean(hc**2, axis=0) + eps)
  corr = hn.T @ hn / h_NxD.shape[0]
  off = corr - jnp.diag(jnp.diag(corr))
  return jnp.sum(off**2) / (d * (d - 1))


def cross_entropy(logits_NxC: jax.Array, labels_N: jax.Array) -> jax.Array:
  """Mean softmax cross-entropy of integer labels."""
  logp = jax.nn.log_softmax(logits_NxC)
  return -jnp.mean(jnp.take_along_axis(logp, labels_N[:, None], axis=-1))


def iid_loss(out: IFOutputs, labels_N: jax.Array, proj_DxK: jax.Array,
             directions_LxK: jax.Array, informatic_weight: float,
             cohering_weight: float) -> tuple[jax.Array, dict[str, jax.Array]]:
  """IID's objective (reconstruction): cross-entropy of the IF logits +
  informatic_weight * constraint + cohering_weight * cohering. Both
  weights 0 give plain IF."""
  ce = cross_entropy(out.logits, labels_N)
  ic = informatic_constraint(out.h)
  coh = cohering_loss(out.za, out.zb, proj_DxK, directions_LxK)
  total = ce + informatic_weight * ic + cohering_weight * coh
  return total, {'ce': ce, 'informatic': ic, 'cohering': coh}
