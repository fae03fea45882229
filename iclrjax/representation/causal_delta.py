"""Causal Delta Embeddings ("Learning Robust Intervention Representations
with Delta Embeddings", Alimisis & Diou, arXiv 2508.04492).

An action (intervention) on an image pair (x, x~) is represented by the
delta of the encoder's latents, delta = phi(x~) - phi(x), and the action
classifier sees delta only (the paper's Sec. 3; the project page: "the delta
embedding serves as the sole input to an action classifier"). Training loss

  L = L_CE + alpha_contrast * L_SupCon(delta) + alpha_sparsity * L_sparsity

(the form as summarised from the paper on sciencestack.ai; the alpha values,
the temperature and the sparsity term's exact normalisation were not
extracted: our reconstruction uses the mean absolute entry of delta, Eq. S
below, and `Config`'s defaults). Two variants:

  global  phi(x) is one vector (the paper: the ViT's CLS token; here a dense
          summary of the patch tokens), delta = phi(x~) - phi(x);
  patch   per-patch deltas delta_p = phi_p(x~) - phi_p(x) over patch tokens,
          aggregated by the mean of the K patches whose delta has the largest
          L2 norm (Top-K; the paper's variant (B); the selection score and
          the mean are our reconstruction).

The baseline classifies the concatenation [phi(x), phi(x~)] (the Causal
Triplet benchmark's ERM baseline) with cross-entropy only.

The encoder is a tiny ViT-style patch embedding (a shared MLP on each
non-overlapping patch, with its learned position embedding added before the
nonlinearity, so a token knows where it is and the position does not cancel
in a patch delta): tokens [P, d]; the global phi is a dense layer on the
flattened tokens. Everything here is pure (flax modules, jnp functions).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

MODELS = ('concat', 'delta', 'cde', 'cde_patch')


@dataclasses.dataclass(frozen=True)
class Config:
  """One model of the comparison.

  model: 'concat' (baseline on [phi(x), phi(x~)], CE), 'delta' (classifier
    on the global delta, CE only), 'cde' (global delta, CE + SupCon + L1),
    'cde_patch' (Top-K patch deltas, CE + SupCon + L1).
  """
  model: str = 'cde'
  num_actions: int = 5
  image_size: int = 16
  patch_size: int = 4
  token_dim: int = 32
  embed_dim: int = 64
  hidden: int = 64
  top_k: int = 4
  alpha_contrast: float = 0.5
  alpha_sparsity: float = 1e-3
  temperature: float = 0.1

  @property
  def num_patches(self) -> int:
    return (self.image_size // self.patch_size) ** 2


def patchify(x_BxHxW: jax.Array, p: int) -> jax.Array:
  """Non-overlapping p x p patches, row-major: [B, (H/p)(W/p), p*p]."""
  B, H, W = x_BxHxW.shape
  x = x_BxHxW.reshape(B, H // p, p, W // p, p).transpose(0, 1, 3, 2, 4)
  return x.reshape(B, (H // p) * (W // p), p * p)


class Encoder(nn.Module):
  """phi: image [B, H, W] -> (global embedding [B, E], tokens [B, P, d])."""
  cfg: Config

  @nn.compact
  def __call__(self, x_BxHxW):
    c = self.cfg
    patches = patchify(x_BxHxW, c.patch_size)
    pos = self.param('pos', nn.initializers.normal(0.02),
                     (c.num_patches, c.token_dim))
    h = nn.gelu(nn.Dense(c.token_dim, name='patch_embed')(patches) + pos)
    h = nn.gelu(nn.Dense(c.token_dim, name='token_hidden')(h))
    tokens = nn.Dense(c.token_dim, name='token_out')(h)
    g = nn.gelu(nn.Dense(c.embed_dim, name='global_hidden')(
        tokens.reshape(tokens.shape[0], -1)))
    return nn.Dense(c.embed_dim, name='global_out')(g), tokens


class Classifier(nn.Module):
  """Action logits from a representation: MLP [B, D] -> [B, A]."""
  cfg: Config

  @nn.compact
  def __call__(self, z_BxD):
    h = nn.gelu(nn.Dense(self.cfg.hidden)(z_BxD))
    return nn.Dense(self.cfg.num_actions)(h)


def delta(phi_before: jax.Array, phi_after: jax.Array) -> jax.Array:
  """delta_a = phi(x~) - phi(x) (the paper's Eq. 1)."""
  return phi_after - phi_before


def topk_aggregate(delta_BxPxD: jax.Array, k: int) -> jax.Array:
  """Mean of the k patch deltas with the largest L2 norm: [B, D].

  The patch-wise variant's Top-K aggregation (our reconstruction of its
  exact scoring: the norm of each patch's delta).
  """
  norms = jnp.linalg.norm(delta_BxPxD, axis=-1)
  _, idx = jax.lax.top_k(norms, k)
  picked = jnp.take_along_axis(delta_BxPxD, idx[..., None], axis=1)
  return picked.mean(axis=1)


def representation(params, cfg: Config, x_before, x_after) -> jax.Array:
  """What the classifier sees: [phi(x), phi(x~)] (concat), the global delta
  (delta, cde) or the Top-K patch delta (cde_patch)."""
  enc = Encoder(cfg)
  g0, t0 = enc.apply(params['encoder'], x_before)
  g1, t1 = enc.apply(params['encoder'], x_after)
  if cfg.model == 'concat':
    return jnp.concatenate([g0, g1], axis=-1)
  if cfg.model == 'cde_patch':
    return topk_aggregate(delta(t0, t1), cfg.top_k)
  return delta(g0, g1)


def logits(params, cfg: Config, x_before, x_after) -> jax.Array:
  """Action logits [B, A] of image pairs [B, H, W] (before, after)."""
  return Classifier(cfg).apply(params['classifier'],
                               representation(params, cfg, x_before, x_after))


def init(key: jax.Array, cfg: Config) -> dict[str, Any]:
  """Parameters {'encoder', 'classifier'} of the model `cfg.model`."""
  if cfg.model not in MODELS:
    raise ValueError(f'model {cfg.model!r}: use one of {MODELS}')
  k_enc, k_cls = jax.random.split(key)
  x = jnp.zeros((1, cfg.image_size, cfg.image_size))
  enc = Encoder(cfg).init(k_enc, x)
  width = 2 * cfg.embed_dim if cfg.model == 'concat' else (
      cfg.token_dim if cfg.model == 'cde_patch' else cfg.embed_dim)
  cls = Classifier(cfg).init(k_cls, jnp.zeros((1, width)))
  return {'encoder': enc, 'classifier': cls}


def supcon(z_BxD: jax.Array, labels_B: jax.Array,
           temperature: float = 0.1) -> jax.Array:
  """Supervised contrastive loss, Khosla et al. 2020 Eq. 2 (L_out):

    L = mean_{i: |P(i)|>0} -1/|P(i)| sum_{p in P(i)}
        log exp(z_i.z_p/tau) / sum_{a != i} exp(z_i.z_a/tau)

  on L2-normalised z, P(i) = {p != i: y_p = y_i}; anchors without a
  positive are left out (0 when none has one).
  """
  z = z_BxD / jnp.maximum(jnp.linalg.norm(z_BxD, axis=-1, keepdims=True),
                          1e-12)
  B = z.shape[0]
  sim = z @ z.T / temperature
  self_mask = jnp.eye(B, dtype=bool)
  sim = jnp.where(self_mask, -jnp.inf, sim)
  log_prob = sim - jax.nn.logsumexp(sim, axis=1, keepdims=True)
  pos = (labels_B[:, None] == labels_B[None, :]) & ~self_mask
  n_pos = pos.sum(axis=1)
  per_anchor = -jnp.where(pos, log_prob, 0.0).sum(axis=1) / jnp.maximum(
      n_pos, 1)
  has = n_pos > 0
  return jnp.where(has, per_anchor, 0.0).sum() / jnp.maximum(has.sum(), 1)


def sparsity(delta_BxD: jax.Array) -> jax.Array:
  """L1 sparsity of the deltas, mean |delta| per entry (Eq. S; our
  reconstruction of the normalisation)."""
  return jnp.abs(delta_BxD).mean()


def loss(params, cfg: Config, x_before, x_after, labels
         ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """L_CE (+ alpha_contrast SupCon + alpha_sparsity L1 for 'cde*')."""
  z = representation(params, cfg, x_before, x_after)
  lg = Classifier(cfg).apply(params['classifier'], z)
  ce = optax.softmax_cross_entropy_with_integer_labels(lg, labels).mean()
  acc = (jnp.argmax(lg, -1) == labels).mean()
  metrics = {'ce': ce, 'accuracy': acc}
  total = ce
  if cfg.model.startswith('cde'):
    sc, sp = supcon(z, labels, cfg.temperature), sparsity(z)
    total = ce + cfg.alpha_contrast * sc + cfg.alpha_sparsity * sp
    metrics.update(supcon=sc, sparsity=sp)
  metrics['loss'] = total
  return total, metrics
