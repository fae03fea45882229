"""Weak-to-strong (W2S) generalization under spurious correlations
(Liu, Dong & Lei, arXiv 2509.24005).

Two parts, both pure functions.

**The theory's Gaussian feature model** (the set-up of Thms 1-2). D(eta)
draws a group
g ~ Bern(eta) (eta in [0, 1/2]: the minority fraction), core features
z ~ N(0, I_dz), the label y = z^T beta + sigma_y eps, and group features
xi | g ~ N(g mu_xi, sigma_xi^2 I_p). The teacher sees
phi_T = z (x) [1; T^T xi] (d_T = p_T d_z; the rotation U_T of the paper does
not change a least-squares fit, so it is the identity here) and the student
phi_S = z (x) [1; S^T xi] (d_S = p_S d_z), T [p, p_T - 1] and S [p, p_S - 1]
with orthonormal columns; the similarity is Xi = T^T S, mu_T = T^T mu_xi and
mu_S = S^T mu_xi. Both feature maps represent z^T beta exactly. SFT: the
teacher is the ridgeless (min-norm) least-squares fit of n labelled points
from D(eta_l); W2S: the student is the ridgeless fit of the teacher's
predictions on N unlabelled points from D(eta_u); excess risk on D(eta_t):

  ER(f) = E_{D(eta_t)} (f(x) - z^T beta)^2 = tr(E M_t E^T)

for a predictor z^T W v (v = [1; G^T xi]) with error E = W - [beta, 0] and
M_t = E_{D(eta_t)}[v v^T], exactly (`excess_risk`; no Monte Carlo over test
points).

`closed_form` is the risk of both models in this model. It is derived here
(the paper states its limits, Thms 1-2, as sigma_y^2 gamma_z (p_T + ...) and
sigma_y^2 gamma_z (p_{T^S} + ... + Theta(nu_z)) -- in the form a secondary
summary quotes, `quoted_limit`; the PDF's exact constants are not checked
here): with
c = sigma_y^2 d_z / (n - d_T) = sigma_y^2 gamma_z / (1 - gamma_T) (the
finite-n factor of least squares),

  ER_T = c tr(M_l^-1 M_Tt)
       = c [1 + tr(C_l^-1 C_t) + (eta_t - eta_l)^2 mu_T^T C_l^-1 mu_T],
  ER_S = c tr(M_l^-1 K_u M_Su^-1 M_St M_Su^-1 K_u^T)              (bias)
       + c tr(M_l^-1 (M_Tu - K_u M_Su^-1 K_u^T))
         d_z tr(M_St M_Su^-1) / (N - d_S)                         (variance)

with K_u = E_{D(eta_u)}[v_T v_S^T] and C_eta = sigma_xi^2 I + eta (1 - eta)
mu mu^T the group-mixture covariance. For Xi = 0 and mu_S = 0 the student's
bias is c [1 + (eta_u - eta_l)^2 mu_T^T C_l^-1 mu_T]: the paper's
(eta_u - eta_l)^2 law, minimal at eta_u = eta_l, with the shift term
saturating at (eta_u - eta_l)^2 / (eta_l (1 - eta_l)) for large ||mu_T||
(Sherman-Morrison on C_l). The student's variance term treats the
teacher-error residual as independent of phi_S (its O(nu_z) part).

**Enhanced-W2S** (the paper's remedy): after vanilla W2S, rank the
unlabelled set by the student's predictive entropy, keep the lowest-entropy
fraction p (`confident_subset`), and retrain the student on it with the
Generalized Cross-Entropy L_q = (1 - p_y(x)^q) / q (`gce_loss`, Zhang &
Sabuncu 2018).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclrjax.core import distributed


class Geometry(NamedTuple):
  """The feature model's fixed quantities (one draw of the random frames)."""
  T: jax.Array          # [p, p_T - 1] teacher's group-feature frame
  S: jax.Array          # [p, p_S - 1] student's group-feature frame
  mu_xi: jax.Array      # [p] group-feature mean of the minority group
  beta: jax.Array       # [d_z] target coefficients
  sigma_xi: jax.Array   # group-feature noise
  sigma_y: jax.Array    # label noise


ALIGN_TO = ('teacher', 'complement')


def make_geometry(key: jax.Array, d_z: int, p: int, p_t: int, p_s: int, *,
                  mu_t: float, mu_s: float = 0.0, align: float = 0.0,
                  align_to: str = 'teacher', sigma_xi: float = 1.0,
                  sigma_y: float = 1.0) -> Geometry:
  """Random orthonormal frames with a prescribed teacher-student geometry.

  An orthonormal basis Q of R^p is drawn: T is its first p_t - 1 columns,
  Q_S the next p_s - 1 and Q_X the next p_s - 1. The student's frame is
  S = sqrt(1 - align^2) Q_S + align R with R = the first p_s - 1 columns of
  T (`align_to='teacher'`: ||Xi||_F^2 = ||T^T S||_F^2 = align^2 (p_s - 1))
  or R = Q_X (`'complement'`: S turns by the same angle but Xi stays 0).
  The minority mean is mu_xi = mu_t t_last + mu_s q_S (t_last: T's last
  column, orthogonal to R; q_S: Q_S's first column), so mu_T = T^T mu_xi =
  mu_t e_last for every `align`, and mu_S = S^T mu_xi =
  sqrt(1 - align^2) mu_s e_1.
  """
  if not 1 <= p_s - 1 < p_t - 1 or p_t - 1 + 2 * (p_s - 1) > p:
    raise ValueError(f'Need 1 <= p_s - 1 < p_t - 1 and p_t + 2 p_s - 3 <= '
                     f'p, got p={p}, p_t={p_t}, p_s={p_s}.')
  if align_to not in ALIGN_TO:
    raise ValueError(f'align_to must be one of {ALIGN_TO}, got {align_to!r}.')
  kq, kb = jax.random.split(key)
  q, _ = jnp.linalg.qr(jax.random.normal(kq, (p, p)))
  t = q[:, :p_t - 1]
  q_s = q[:, p_t - 1:p_t - 1 + p_s - 1]
  rot = (t[:, :p_s - 1] if align_to == 'teacher'
         else q[:, p_t - 1 + p_s - 1:p_t - 1 + 2 * (p_s - 1)])
  s = jnp.sqrt(1.0 - align**2) * q_s + align * rot
  mu_xi = mu_t * t[:, -1] + mu_s * q_s[:, 0]
  beta = jax.random.normal(kb, (d_z,)) / jnp.sqrt(d_z)
  return Geometry(t, s, mu_xi, beta, jnp.asarray(sigma_xi, jnp.float32),
                  jnp.asarray(sigma_y, jnp.float32))


class Sample(NamedTuple):
  z: jax.Array      # [n, d_z]
  xi: jax.Array     # [n, p]
  g: jax.Array      # [n] group (1: minority)
  y: jax.Array      # [n]


def sample(key: jax.Array, geom: Geometry, n: int, eta) -> Sample:
  """n draws from D(eta); the group is 1{u < eta} for a uniform u, so one
  key gives coupled samples across eta (common random numbers)."""
  kz, kx, ku, ke = jax.random.split(key, 4)
  d_z, p = geom.beta.shape[0], geom.mu_xi.shape[0]
  # The n draws are the batch: split over the mesh's 'data' axis.
  z, u, noise_xi, noise_y = distributed.shard_batch((
      jax.random.normal(kz, (n, d_z)), jax.random.uniform(ku, (n,)),
      jax.random.normal(kx, (n, p)), jax.random.normal(ke, (n,))))
  g = (u < eta).astype(z.dtype)
  xi = g[:, None] * geom.mu_xi[None, :] + geom.sigma_xi * noise_xi
  y = z @ geom.beta + geom.sigma_y * noise_y
  return Sample(z, xi, g, y)


def group_view(frame: jax.Array, xi: jax.Array) -> jax.Array:
  """v = [1; frame^T xi], [n, p_model]."""
  return jnp.concatenate([jnp.ones_like(xi[:, :1]), xi @ frame], axis=1)


def features(z: jax.Array, v: jax.Array) -> jax.Array:
  """phi = z (x) v, [n, d_z * p_model] (row-major: index i * p_model + j)."""
  return (z[:, :, None] * v[:, None, :]).reshape(z.shape[0], -1)


def predict(w: jax.Array, z: jax.Array, v: jax.Array) -> jax.Array:
  """z^T W v for coefficient matrices W [d_z, p_model]."""
  return jnp.einsum('nd,dk,nk->n', z, w, v)


def ridgeless_fit(z: jax.Array, v: jax.Array, target: jax.Array) -> jax.Array:
  """Min-norm least squares of target on z (x) v, as W [d_z, p_model]."""
  coef = jnp.linalg.lstsq(features(z, v), target)[0]
  return coef.reshape(z.shape[1], v.shape[1])


def second_moment(geom: Geometry, frame_a: jax.Array, frame_b: jax.Array,
                  eta) -> jax.Array:
  """E_{D(eta)}[v_a v_b^T], v = [1; frame^T xi], in closed form:
  E[xi] = eta mu, E[xi xi^T] = sigma^2 I + eta mu mu^T."""
  mu_a, mu_b = frame_a.T @ geom.mu_xi, frame_b.T @ geom.mu_xi
  top = jnp.concatenate([jnp.ones((1,)), eta * mu_b])[None]
  low = jnp.concatenate(
      [eta * mu_a[:, None],
       geom.sigma_xi**2 * frame_a.T @ frame_b + eta * jnp.outer(mu_a, mu_b)],
      axis=1)
  return jnp.concatenate([top, low], axis=0)


def excess_risk(geom: Geometry, w: jax.Array, frame: jax.Array, eta_t
                ) -> jax.Array:
  """ER on D(eta_t) of z^T W v (v from `frame`): tr(E M_t E^T), exact."""
  err = w.at[:, 0].add(-geom.beta)
  return jnp.trace(err @ second_moment(geom, frame, frame, eta_t) @ err.T)


class Risks(NamedTuple):
  """Excess risks of the teacher (SFT) and of the W2S student."""

  teacher: jax.Array
  student: jax.Array


def simulate(key: jax.Array, geom: Geometry, n: int, big_n: int, eta_l,
             eta_u, eta_t) -> Risks:
  """One SFT -> W2S pipeline; the teacher's and the student's excess risks
  on D(eta_t) (the student's risk minus the teacher's is minus the W2S
  gain)."""
  k_l, k_u = jax.random.split(key)
  lab = sample(k_l, geom, n, eta_l)
  w_t = ridgeless_fit(lab.z, group_view(geom.T, lab.xi), lab.y)
  unl = sample(k_u, geom, big_n, eta_u)
  pseudo = predict(w_t, unl.z, group_view(geom.T, unl.xi))
  w_s = ridgeless_fit(unl.z, group_view(geom.S, unl.xi), pseudo)
  return Risks(excess_risk(geom, w_t, geom.T, eta_t),
               excess_risk(geom, w_s, geom.S, eta_t))


def closed_form(geom: Geometry, n: int, big_n: int, eta_l, eta_u, eta_t
                ) -> Risks:
  """Teacher's and student's excess risks in closed form (module
  docstring); requires n > d_T and N > d_S (the ridgeless fits'
  underparameterised regime)."""
  d_z = geom.beta.shape[0]
  p_t, p_s = geom.T.shape[1] + 1, geom.S.shape[1] + 1
  c = geom.sigma_y**2 * d_z / (n - d_z * p_t)
  m_l_inv = jnp.linalg.inv(second_moment(geom, geom.T, geom.T, eta_l))
  m_tt = second_moment(geom, geom.T, geom.T, eta_t)
  m_su_inv = jnp.linalg.inv(second_moment(geom, geom.S, geom.S, eta_u))
  m_st = second_moment(geom, geom.S, geom.S, eta_t)
  k_u = second_moment(geom, geom.T, geom.S, eta_u)
  teacher = c * jnp.trace(m_l_inv @ m_tt)
  proj = k_u @ m_su_inv
  bias = c * jnp.trace(m_l_inv @ proj @ m_st @ proj.T)
  resid = c * jnp.trace(
      m_l_inv @ (second_moment(geom, geom.T, geom.T, eta_u) - proj @ k_u.T))
  var = resid * d_z * jnp.trace(m_st @ m_su_inv) / (big_n - d_z * p_s)
  return Risks(teacher, bias + var)


def quoted_limit(geom: Geometry, n: int, eta_l, eta_u, eta_t) -> Risks:
  """Thms 1-2 in the form a secondary summary of the paper quotes (no finite-n factor, no
  group-mixture covariance, the Theta(nu_z) term dropped):
  ER_T = sigma_y^2 gamma_z (p_T + ||(eta_t - eta_l) mu_T||^2 / sigma_xi^2),
  ER_S = sigma_y^2 gamma_z (p_{T^S} + ||(eta_u - eta_l) mu_T
         + (eta_t - eta_u) Xi mu_S||^2 / sigma_xi^2), p_{T^S} = 1 + ||Xi||_F^2.
  The experiment's control for the closed form."""
  d_z = geom.beta.shape[0]
  gamma = d_z / n
  mu_t, mu_s = geom.T.T @ geom.mu_xi, geom.S.T @ geom.mu_xi
  xi = geom.T.T @ geom.S
  scale = geom.sigma_y**2 * gamma
  teacher = scale * (geom.T.shape[1] + 1
                     + jnp.sum(((eta_t - eta_l) * mu_t)**2) / geom.sigma_xi**2)
  shift = (eta_u - eta_l) * mu_t + (eta_t - eta_u) * xi @ mu_s
  student = scale * (1.0 + jnp.sum(xi**2) + jnp.sum(shift**2)
                     / geom.sigma_xi**2)
  return Risks(teacher, student)


# -- Enhanced-W2S -------------------------------------------------------------


def entropy(logits: jax.Array) -> jax.Array:
  """Predictive entropy -sum_k p_k log p_k of softmax(logits), [...]."""
  logp = jax.nn.log_softmax(logits, axis=-1)
  return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


def lowest_fraction(scores: jax.Array, fraction: float) -> jax.Array:
  """Boolean mask [N] of the round(fraction * N) (at least 1) lowest scores,
  ties broken by index."""
  n = scores.shape[0]
  k = max(1, int(round(fraction * n)))
  order = jnp.argsort(scores, stable=True)
  return jnp.zeros((n,), bool).at[order[:k]].set(True)


def confident_subset(logits: jax.Array, fraction: float) -> jax.Array:
  """The retraining set of Enhanced-W2S: the lowest-entropy `fraction` of
  the examples, as a boolean mask [N]."""
  return lowest_fraction(entropy(logits), fraction)


def gce_loss(logits: jax.Array, labels: jax.Array, q: float) -> jax.Array:
  """Generalized Cross-Entropy (1 - p_y^q) / q per example (Zhang &
  Sabuncu 2018; q -> 0 is the cross-entropy, q = 1 the MAE), computed as
  -expm1(q log p_y) / q for accuracy at small q."""
  logp_y = jnp.take_along_axis(jax.nn.log_softmax(logits, -1),
                               labels[..., None], -1)[..., 0]
  return -jnp.expm1(q * logp_y) / q


class Head(NamedTuple):
  """A linear classification head on frozen features (the paper fine-tunes
  only the head of frozen backbones)."""
  w: jax.Array   # [d, K]
  b: jax.Array   # [K]


def head_logits(head: Head, feats: jax.Array) -> jax.Array:
  return feats @ head.w + head.b[None, :]


def fit_head(key: jax.Array, feats: jax.Array, labels: jax.Array,
             mask: jax.Array, *, num_classes: int, steps: int, lr: float,
             batch_size: int, q: float = 0.0, init: Head | None = None
             ) -> Head:
  """Adam on the mean loss of minibatches drawn uniformly from the examples
  with mask = True: cross-entropy (q = 0) or GCE with parameter q; one
  `lax.scan`, so it jits and vmaps over seeds. Starts from `init` (else
  zeros)."""
  if init is None:
    init = Head(jnp.zeros((feats.shape[1], num_classes)),
                jnp.zeros((num_classes,)))
  tx = optax.adam(lr)
  p_idx = mask.astype(jnp.float32) / jnp.sum(mask)

  def loss_fn(head, x, y):
    logits = head_logits(head, x)
    if q > 0:
      return gce_loss(logits, y, q).mean()
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

  def step(carry, k):
    head, opt = carry
    idx = distributed.shard_batch(
        jax.random.choice(k, feats.shape[0], (batch_size,), p=p_idx))
    g = jax.grad(loss_fn)(head, feats[idx], labels[idx])
    upd, opt = tx.update(g, opt, head)
    return (optax.apply_updates(head, upd), opt), None

  (head, _), _ = jax.lax.scan(step, (init, tx.init(init)),
                              jax.random.split(key, steps))
  return head


LABEL_SOURCES = ('student', 'teacher')
SUBSETS = ('entropy', 'random')


def enhanced_w2s(key: jax.Array, feats: jax.Array, w2s_head: Head,
                 teacher_labels: jax.Array, *, fraction: float, q: float,
                 steps: int, lr: float, batch_size: int,
                 labels: str = 'student', subset: str = 'entropy') -> Head:
  """Enhanced-W2S: keep the `fraction` of the unlabelled set with
  the lowest entropy under the W2S student, and retrain the student's head
  (from the W2S head) on it with GCE(q). `labels`: the student's own hard
  labels (default) or the teacher's pseudolabels; `subset='random'` keeps a
  random subset of the same size instead (the ablation of the ranking)."""
  if labels not in LABEL_SOURCES:
    raise ValueError(f'labels must be one of {LABEL_SOURCES}, got {labels!r}.')
  if subset not in SUBSETS:
    raise ValueError(f'subset must be one of {SUBSETS}, got {subset!r}.')
  k_sub, k_fit = jax.random.split(key)
  logits = head_logits(w2s_head, feats)
  if subset == 'entropy':
    mask = confident_subset(logits, fraction)
  else:
    mask = lowest_fraction(jax.random.uniform(k_sub, logits.shape[:1]),
                           fraction)
  target = jnp.argmax(logits, -1) if labels == 'student' else teacher_labels
  return fit_head(k_fit, feats, target, mask, num_classes=logits.shape[-1],
                  steps=steps, lr=lr, batch_size=batch_size, q=q,
                  init=w2s_head)
