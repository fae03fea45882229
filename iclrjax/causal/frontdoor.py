"""Debiased front-door learners for heterogeneous effects (arXiv 2509.22531).

Observed V = (C, X, Z, Y): covariates C [n, d], a binary treatment X, a
binary mediator Z and an outcome Y; an unobserved U confounds X and Y, and Z
is unconfounded given (X, C). With the nuisances

  e_x(C) = P(X = x | C),  q(z | x, C) = P(Z = z | X = x, C),
  m(z, x, C) = E[Y | Z = z, X = x, C],

the front-door CATE is (eq. 4)

  tau_xb(C) = sum_z q(z | xb, C) sum_x e_x(C) m(z, x, C),
  tau(C) = tau_1(C) - tau_0(C).

Estimators (all on nuisance predictions, pure functions):

* `fd_pi`: the plug-in, eq. 4 with estimated nuisances.
* `fd_pseudo_outcome`: phi_1 - phi_0 of Def. 2 / Lemma 2,
    phi_xb = xi_xb (Y - m(Z, X, C)) + pi_xb (r_me(Z, C) - nu_meq(X, C))
             + s_mqxb(X, C),
    xi_xb = q(Z | xb, C) / q(Z | X, C),  pi_xb = 1{X = xb} / e_X(C),
    r_me(z, C) = sum_x m(z, x, C) e_x(C),
    nu_meq(X, C) = sum_z r_me(z, C) q(z | X, C),
    s_mqxb(X, C) = sum_z m(z, X, C) q(z | xb, C);
  E[phi_xb | C] = tau_xb(C), and the bias under estimated nuisances is a sum
  of products of nuisance errors (doubly robust). FD-DR regresses it on C.
* FD-R (Prop. 2, Thm 2, Lemma 3): the two partially linear models
    Z = a(C) + X b(C) + eps_Z,  Y = f(X, C) + Z g(X, C) + eps_Y,
  tau(C) = b(C) gamma_g(C) with gamma_g(C) = E[g(X, C) | C]; the b-stage
  R-loss sum (Z - m_Z(C) - (X - e(C)) b(C))^2, the g-stage R-loss
  sum (Y - m_Y(X, C) - (Z - q(1 | X, C)) g(X, C))^2, and the pseudo-g
    zeta = (1 - e) g(0, C) + e g(1, C) + (X - e)(g(1, C) - g(0, C)),
  whose regression on C estimates gamma_g (the first-order error in e
  cancels); tau_R = b * gamma. The b- and g-stages are linear (`r_stage`,
  the reference's 'direct' g solver; its 2-fold FD-R and its b-stage fit
  XGBoost to the ratio r_Z / r_X with weights r_X^2 instead).

The back-door pieces are separate functions that EconML checks
(tests/parity/test_frontdoor_econml.py): `aipw_pseudo_outcome` (FD-DR's
X -> Z term, `econml.dr.DRLearner`) and `r_stage` (the R-loss,
`econml.dml.LinearDML`).

Nuisance learners (`LEARNERS`, each (key, train, c_eval, x_eval) ->
`Nuisances`; cross-fitting takes any): 'linear' (logistic IRLS / ridge),
'xgb' (the reference's XGBoost: 50 trees, depth 3, learning rate 0.1,
through `jax.pure_callback`, one replication at a time under vmap) and
'mlp' (a one-hidden-layer MLP, full-batch Adam under lax.scan).

Propensities are clipped only where they divide (`clip_denominator`, to
[0.05, 0.95] as the reference code does); elsewhere only away from exact
0 / 1 (`clip_weight`). The structural nuisance noise of the paper's
simulations, `perturb_nuisances`, adds delta * eps with eps ~ N(n^-1/4,
n^-1/4) (mean and variance: not centred) to every numerator / plug-in
nuisance and none of the denominators.

Parity with the released FDCATE.py (yonghanjung/FD-CATE at 5fad3a3;
tests/parity/test_frontdoor.py, on the same data and fitted XGBoost
nuisances): FD-PI, the pseudo-outcome and FD-DR's final stage, FD-R3's
g-stage, zeta and final stage agree to float32 rounding. Deliberate
differences, each asserted there: (i) the structural noise perturbs
q(1 | x, C) once, where the reference also draws q(1 | X_obs, C) apart and
uses it in nu_meq (FDCATE.py:321, 346); (ii) FD-R3 evaluates g(x, C) on D3
with D2's z-scoring, where it was fitted (the reference re-z-scores D3 by
its own statistics, `_g_features`); (iii) FD-R3 regresses zeta on C and
multiplies by b-hat (tau = b gamma, eq. 35), where the reference regresses
b-hat * zeta on C (FDCATE.py:541-546).

The DGPs (`simulate`) are the reference code's `simulate_fd_data_md` and
`simulate_fd_data_weak_overlap` in JAX; `true_nuisances` gives their exact
nuisances (E[U | X, C] by Gauss-Hermite quadrature).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import distributed
from iclrjax.core import extras

CLIP_DENOMINATOR = 0.05   # propensities that divide: [0.05, 0.95]
CLIP_WEIGHT = 1e-6        # everywhere else: away from exact 0 / 1
KINDS = ('md', 'weak_overlap')


class Params(NamedTuple):
  """Structural coefficients of a DGP (logits of X and Z, outcome of Y)."""
  beta0: jax.Array
  beta_c: jax.Array     # [d]
  beta_u: jax.Array
  kappa_e: jax.Array    # slope multiplier of X's logit (1: md)
  alpha0: jax.Array
  alpha_c: jax.Array    # [d]
  alpha_x: jax.Array
  kappa_q: jax.Array    # Z's logit is -kappa_q (...) in weak_overlap, + in md
  theta0: jax.Array
  theta_c: jax.Array    # [d]
  theta_z: jax.Array
  theta_u: jax.Array


class Data(NamedTuple):
  """n draws of a DGP (`simulate`): V = (C, X, Z, Y), the true tau(C) and
  the DGP's coefficients."""

  c: jax.Array          # [n, d]
  x: jax.Array          # [n] in {0, 1} (float)
  z: jax.Array          # [n]
  y: jax.Array          # [n]
  tau: jax.Array        # [n] true tau(C)
  params: Params


class Nuisances(NamedTuple):
  """Nuisance predictions at n points (all [n])."""
  e1: jax.Array         # P(X = 1 | C)
  q1_1: jax.Array       # P(Z = 1 | X = 1, C)
  q1_0: jax.Array       # P(Z = 1 | X = 0, C)
  m00: jax.Array        # m(z=0, x=0, C)
  m01: jax.Array        # m(z=0, x=1, C)
  m10: jax.Array        # m(z=1, x=0, C)
  m11: jax.Array        # m(z=1, x=1, C)
  m_y: jax.Array        # E[Y | X, C] at the observed X (FD-R's g-stage)
  m_z: jax.Array        # P(Z = 1 | C) (FD-R's b-stage)


def _unit(key, d):
  w = jax.random.normal(key, (d,))
  return w / (jnp.linalg.norm(w) + 1e-12)


def make_params(key: jax.Array, d: int, kind: str = 'md',
                kappa: float = 1.0) -> Params:
  """The reference DGPs' coefficients: random unit directions w_X, w_Z, w_Y.

  md: X ~ Bern(s(0.1 + 0.7 w_X'C + 0.7 U)), Z ~ Bern(s(0.1 + 0.7 w_Z'C
  + 1.2 X)), Y = 0.7 w_Y'C + 1.4 Z - 2.4 U + N(0, 1).
  weak_overlap: X ~ Bern(s(kappa (0.2 + 1.2 w_X'C + U))), Z ~ Bern(s(-kappa
  (0.1 + 0.8 w_Z'C + 1.2 X))), Y = w_Y'C + Z + U + N(0, 1) (the reference's
  sweep sets kappa_e = kappa_q = kappa).
  """
  if kind not in KINDS:
    raise ValueError(f'Unknown DGP kind {kind!r}: use one of {KINDS}')
  kx, kz, ky = jax.random.split(key, 3)
  wx, wz, wy = _unit(kx, d), _unit(kz, d), _unit(ky, d)
  f = lambda v: jnp.asarray(v, jnp.float32)
  if kind == 'md':
    return Params(f(0.1), 0.7 * wx, f(0.7), f(1.0), f(0.1), 0.7 * wz, f(1.2),
                  f(-1.0), f(0.0), 0.7 * wy, f(1.4), f(-2.4))
  return Params(f(0.2), 1.2 * wx, f(1.0), f(kappa), f(0.1), 0.8 * wz, f(1.2),
                f(kappa), f(0.0), 1.0 * wy, f(1.0), f(1.0))


def _x_logit(p: Params, c, u):
  return p.kappa_e * (p.beta0 + c @ p.beta_c + p.beta_u * u)


def q1(p: Params, c: jax.Array, x) -> jax.Array:
  """P(Z = 1 | X = x, C) of the DGP."""
  return jax.nn.sigmoid(-p.kappa_q * (p.alpha0 + c @ p.alpha_c
                                      + p.alpha_x * x))


def true_tau(p: Params, c: jax.Array) -> jax.Array:
  """tau(C) = theta_z (q(1 | 1, C) - q(1 | 0, C)) (Z enters Y linearly)."""
  return p.theta_z * (q1(p, c, 1.0) - q1(p, c, 0.0))


def simulate(key: jax.Array, n: int, d: int = 10, kind: str = 'md',
             kappa: float = 1.0, params: Params | None = None) -> Data:
  """n draws of the DGP (its coefficients from `key` unless given).

  md keeps the reference's observational paradox: if the sample's
  E[Y | X = 1] - E[Y | X = 0] is not negative, theta_u is scaled by 1.25 and
  Y redrawn with the same noise.
  """
  kp, kc, ku, kx, kz, ke = jax.random.split(key, 6)
  p = make_params(kp, d, kind, kappa) if params is None else params
  # The n samples are the batch: split over the mesh's 'data' axis.
  c, u, eps = distributed.shard_batch((jax.random.normal(kc, (n, d)),
                                       jax.random.normal(ku, (n,)),
                                       jax.random.normal(ke, (n,))))
  x = jax.random.bernoulli(kx, jax.nn.sigmoid(_x_logit(p, c, u))).astype(
      jnp.float32)
  z = jax.random.bernoulli(kz, q1(p, c, x)).astype(jnp.float32)
  outcome = lambda th_u: (p.theta0 + c @ p.theta_c + p.theta_z * z + th_u * u
                          + eps)
  y = outcome(p.theta_u)
  if kind == 'md' and params is None:
    contrast = ((y * x).sum() / x.sum()
                - (y * (1 - x)).sum() / (1 - x).sum())
    theta_u = jnp.where(contrast >= 0, 1.25 * p.theta_u, p.theta_u)
    p = p._replace(theta_u=theta_u)
    y = outcome(theta_u)
  return Data(c, x, z, y, true_tau(p, c), p)


_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(64)  # weight exp(-u^2/2)
_GH_W = _GH_W / _GH_W.sum()                            # E over N(0, 1)


def true_nuisances(p: Params, c: jax.Array, x: jax.Array) -> Nuisances:
  """The DGP's exact nuisances at (C, observed X).

  e1(C) = E_U[s(logit(C, U))] and E[U | X, C] by 64-point Gauss-Hermite
  quadrature over U ~ N(0, 1); m(z, x, C) = theta0 + theta_c'C + theta_z z
  + theta_u E[U | X = x, C] (Z is independent of U given (X, C)).
  """
  u = jnp.asarray(_GH_X, jnp.float32)
  w = jnp.asarray(_GH_W, jnp.float32)
  s = jax.nn.sigmoid(_x_logit(p, c, 0.0)[:, None]
                     + p.kappa_e * p.beta_u * u[None, :])   # [n, K]
  e1 = s @ w
  eu1 = (s * u) @ w / e1
  eu0 = ((1 - s) * u) @ w / (1 - e1)
  base = p.theta0 + c @ p.theta_c
  m = lambda zz, eu: base + p.theta_z * zz + p.theta_u * eu
  q11, q10 = q1(p, c, 1.0), q1(p, c, 0.0)
  m_y = jnp.where(x > 0, base + p.theta_u * eu1 + p.theta_z * q11,
                  base + p.theta_u * eu0 + p.theta_z * q10)
  m_z = e1 * q11 + (1 - e1) * q10
  return Nuisances(e1, q11, q10, m(0.0, eu0), m(0.0, eu1), m(1.0, eu0),
                   m(1.0, eu1), m_y, m_z)


# -- clipping and the structural noise -----------------------------------------
def clip_weight(p: jax.Array) -> jax.Array:
  return jnp.clip(p, CLIP_WEIGHT, 1 - CLIP_WEIGHT)


def clip_denominator(p: jax.Array) -> jax.Array:
  return jnp.clip(p, CLIP_DENOMINATOR, 1 - CLIP_DENOMINATOR)


def perturb_nuisances(key: jax.Array, nu: Nuisances, delta, n_total: int
                      ) -> Nuisances:
  """delta * eps added to e1, q and m (eps ~ N(n^-1/4, n^-1/4), not centred;
  probabilities re-clipped away from 0 / 1). m_y and m_z, FD-R's residual
  baselines, are left as fitted, as in the reference code."""
  mean = float(n_total) ** -0.25
  std = float(n_total) ** -0.125          # variance n^-1/4
  keys = jax.random.split(key, 7)
  noise = lambda k, a: a + delta * (mean + std * jax.random.normal(k, a.shape))
  return nu._replace(
      e1=clip_weight(noise(keys[0], nu.e1)),
      q1_1=clip_weight(noise(keys[1], nu.q1_1)),
      q1_0=clip_weight(noise(keys[2], nu.q1_0)),
      m00=noise(keys[3], nu.m00), m01=noise(keys[4], nu.m01),
      m10=noise(keys[5], nu.m10), m11=noise(keys[6], nu.m11))


# -- the estimators on nuisance predictions ------------------------------------
def fd_pi(nu: Nuisances) -> jax.Array:
  """The plug-in tau(C) of eq. 4: e1 dq (m11 - m01) + e0 dq (m10 - m00)."""
  dq = nu.q1_1 - nu.q1_0
  return nu.e1 * dq * (nu.m11 - nu.m01) + (1 - nu.e1) * dq * (nu.m10 - nu.m00)


def _m(nu: Nuisances, z, x):
  return (z * x * nu.m11 + z * (1 - x) * nu.m10 + (1 - z) * x * nu.m01
          + (1 - z) * (1 - x) * nu.m00)


def aipw_pseudo_outcome(x: jax.Array, v: jax.Array, mu1: jax.Array,
                        mu0: jax.Array, e1_den: jax.Array) -> jax.Array:
  """The back-door AIPW pseudo-outcome of a binary X on an outcome v given C
  ([n]):

    mu1 - mu0 + X (v - mu1) / e1 - (1 - X)(v - mu0) / (1 - e1),

  mu_x = E[v | X = x, C], e1 = P(X = 1 | C) (already clipped: it divides).
  Its regression on C is the DR-learner of E[v | do(X = 1), C] - E[v |
  do(X = 0), C]; in Def. 2 it is FD-DR's X -> Z stage, with v = r_me(Z, C)
  and mu_x = nu_meq(x, C) (`fd_pseudo_outcome`).
  """
  return (mu1 - mu0 + x * (v - mu1) / e1_den
          - (1 - x) * (v - mu0) / (1 - e1_den))


def fd_pseudo_outcome(nu: Nuisances, x: jax.Array, z: jax.Array,
                      y: jax.Array, den: Nuisances | None = None
                      ) -> jax.Array:
  """phi_1 - phi_0 of Def. 2 at each point ([n]):

    (xi_1 - xi_0)(Y - m(Z, X, C)) + s_mq1 - s_mq0
    + [aipw(X -> r_me(Z, C)) - (nu_meq(1, C) - nu_meq(0, C))],

  the bracket being pi_1 (r_me - nu_meq) - pi_0 (r_me - nu_meq).
  `den`: the nuisances whose e1 and q divide (clipped to [0.05, 0.95]);
  default `nu` (the reference code freezes them before the structural
  noise, so only numerators carry it).
  """
  den = nu if den is None else den
  r1 = nu.m11 * nu.e1 + nu.m10 * (1 - nu.e1)     # r_me(1, C): m(1, x) over e_x
  r0 = nu.m01 * nu.e1 + nu.m00 * (1 - nu.e1)     # r_me(0, C): m(0, x) over e_x
  nu_meq1 = r1 * nu.q1_1 + r0 * (1 - nu.q1_1)    # nu_meq(x = 1, C)
  nu_meq0 = r1 * nu.q1_0 + r0 * (1 - nu.q1_0)
  m1x, m0x = _m(nu, 1.0, x), _m(nu, 0.0, x)
  s1 = m1x * nu.q1_1 + m0x * (1 - nu.q1_1)
  s0 = m1x * nu.q1_0 + m0x * (1 - nu.q1_0)
  q1_x_den = clip_denominator(jnp.where(x > 0, den.q1_1, den.q1_0))
  qz_den = jnp.where(z > 0, q1_x_den, 1 - q1_x_den)
  xi1 = jnp.where(z > 0, nu.q1_1, 1 - nu.q1_1) / qz_den
  xi0 = jnp.where(z > 0, nu.q1_0, 1 - nu.q1_0) / qz_den
  backdoor = aipw_pseudo_outcome(x, jnp.where(z > 0, r1, r0), nu_meq1,
                                 nu_meq0, clip_denominator(den.e1))
  return ((xi1 - xi0) * (y - _m(nu, z, x)) + s1 - s0 + backdoor
          - (nu_meq1 - nu_meq0))


def zeta(e1: jax.Array, g1: jax.Array, g0: jax.Array, x: jax.Array
         ) -> jax.Array:
  """FD-R's pseudo-g (Lemma 3): E[zeta | C] = E[g(X, C) | C]."""
  return (1 - e1) * g0 + e1 * g1 + (x - e1) * (g1 - g0)


# -- linear learners (closed forms and IRLS) -----------------------------------
def zscore_stats(c: jax.Array) -> tuple[jax.Array, jax.Array]:
  return c.mean(0), c.std(0) + 1e-12


def linear_features(c: jax.Array, stats) -> jax.Array:
  """[1, zscore(C)]."""
  mu, sd = stats
  return jnp.concatenate([jnp.ones((c.shape[0], 1)), (c - mu) / sd], 1)


def ridge(features: jax.Array, target: jax.Array, alpha: float = 1e-6,
          weights: jax.Array | None = None) -> jax.Array:
  """argmin_w sum_i weights_i (target_i - features_i w)^2 + alpha |w|^2."""
  w = jnp.ones_like(target) if weights is None else weights
  a = features.T @ (w[:, None] * features) + alpha * jnp.eye(
      features.shape[1])
  return jnp.linalg.solve(a, features.T @ (w * target))


def logistic(features: jax.Array, label: jax.Array, l2: float = 1e-4,
             steps: int = 25) -> jax.Array:
  """L2-penalised logistic regression by Newton's method (IRLS), jittable."""

  def newton(w, _):
    p = jax.nn.sigmoid(features @ w)
    g = features.T @ (p - label) + l2 * w
    h = features.T @ ((p * (1 - p))[:, None] * features) + l2 * jnp.eye(
        features.shape[1])
    return w - jnp.linalg.solve(h, g), None

  w0 = jnp.zeros(features.shape[1])
  return jax.lax.scan(newton, w0, None, length=steps)[0]


# -- linear nuisances and the final stages -------------------------------------
class LinearNuisances(NamedTuple):
  """Fitted linear nuisance models (z-scoring from their training fold)."""
  stats: tuple[jax.Array, jax.Array]
  w_e: jax.Array        # logistic X ~ [1, zC]
  w_q: jax.Array        # logistic Z ~ [1, X, zC]
  w_m: jax.Array        # ridge Y ~ [1, Z, X, ZX, zC]
  w_my: jax.Array       # ridge Y ~ [1, X, zC]
  w_mz: jax.Array       # logistic Z ~ [1, zC]


def _with(cols, base):
  """[cols..., zC] from base = [1, zC]."""
  return jnp.concatenate([jnp.stack(cols, 1), base[:, 1:]], 1)


def fit_linear(c, x, z, y, l2: float = 1e-4,
               alpha: float = 1e-6) -> LinearNuisances:
  """Logistic (IRLS) and ridge nuisances on one fold: e, q, m, m_Y, m_Z."""
  stats = zscore_stats(c)
  f = linear_features(c, stats)
  one = jnp.ones_like(x)
  return LinearNuisances(
      stats, logistic(f, x, l2), logistic(_with([one, x], f), z, l2),
      ridge(_with([one, z, x, z * x], f), y, alpha),
      ridge(_with([one, x], f), y, alpha), logistic(f, z, l2))


def predict_linear(w: LinearNuisances, c, x) -> Nuisances:
  """Nuisances of `fit_linear` at (C, observed X)."""
  f = linear_features(c, w.stats)
  one, zero = jnp.ones_like(x), jnp.zeros_like(x)
  q = lambda xx: clip_weight(jax.nn.sigmoid(_with([one, xx], f) @ w.w_q))
  m = lambda zz, xx: _with([one, zz, xx, zz * xx], f) @ w.w_m
  return Nuisances(
      e1=clip_weight(jax.nn.sigmoid(f @ w.w_e)), q1_1=q(one), q1_0=q(zero),
      m00=m(zero, zero), m01=m(zero, one), m10=m(one, zero), m11=m(one, one),
      m_y=_with([one, x], f) @ w.w_my,
      m_z=clip_weight(jax.nn.sigmoid(f @ w.w_mz)))


def final_stage(c: jax.Array, target: jax.Array, alpha: float = 1e-6
                ) -> jax.Array:
  """Ridge of `target` on [1, zscore(C)] fitted and predicted on the same
  points (the reference's final stage: linear in C)."""
  f = linear_features(c, zscore_stats(c))
  return f @ ridge(f, target, alpha)


def r_stage(features: jax.Array, r_outcome: jax.Array, r_treat: jax.Array,
            alpha: float = 1e-6) -> jax.Array:
  """The R-learner's final stage, linear in `features`: the weights w of
  argmin_w sum_i (r_outcome_i - r_treat_i features_i w)^2 + alpha |w|^2
  (the R-loss of Nie and Wager on residualised outcome and treatment).
  FD-R's b-stage (Prop. 2) with r_outcome = Z - m_Z(C), r_treat = X - e(C)
  and its g-stage with r_outcome = Y - m_Y(X, C), r_treat = Z - q(1 | X, C).
  """
  return ridge(r_treat[:, None] * features, r_outcome, alpha)


def fd_r_stages(c, x, z, y, nu: Nuisances, c_eval, x_eval, nu_eval,
                alpha_b: float = 1e-6, alpha_g: float = 1e-4):
  """FD-R's b- and g-stages fitted on (c, x, z, y) with nuisances `nu`
  (linear b(C) on [1, zC] and g(X, C) on [1, X, zC], each the argmin of its
  R-loss: the reference's 'direct' solver), then zeta at the evaluation
  points: (b_eval, zeta_eval)."""
  stats = zscore_stats(c)
  f = linear_features(c, stats)
  w_b = r_stage(f, z - nu.m_z, x - nu.e1, alpha_b)
  g_feat = _with([jnp.ones_like(x), x], f)
  w_g = r_stage(g_feat, y - nu.m_y, z - jnp.where(x > 0, nu.q1_1, nu.q1_0),
                alpha_g)
  fe = linear_features(c_eval, stats)
  one = jnp.ones_like(x_eval)
  g1 = _with([one, one], fe) @ w_g
  g0 = _with([one, 0 * one], fe) @ w_g
  return fe @ w_b, zeta(nu_eval.e1, g1, g0, x_eval)


# -- nuisance learners ---------------------------------------------------------
# A learner maps (key, train = (c, x, z, y), c_eval, x_eval) to the Nuisances
# fitted on `train` and predicted at (c_eval, x_eval): the cross-fitting code
# below takes any of `LEARNERS`.
Learner = Callable[[jax.Array, tuple[jax.Array, ...], jax.Array, jax.Array],
                   Nuisances]

# The reference code's XGBoost nuisances (`new_xgb_classifier` / `_regressor`),
# on one thread: beside XLA's threads on a busy 2-core CPU, n_jobs = 2 made a
# 10000-row fit 8 s instead of 0.12 s.
XGB_PARAMS = dict(n_estimators=50, max_depth=3, learning_rate=0.1,
                  subsample=0.9, colsample_bytree=0.9, reg_lambda=1.0,
                  tree_method='hist', n_jobs=1, verbosity=0)


def linear_learner(key, train, c_eval, x_eval) -> Nuisances:
  """`fit_linear` on `train`, `predict_linear` at (c_eval, x_eval)."""
  del key   # deterministic
  return predict_linear(fit_linear(*train), c_eval, x_eval)


def _design(cols, c):
  """[cols..., C] (C alone when `cols` is empty)."""
  return jnp.concatenate([jnp.stack(cols, 1), c], 1) if cols else c


def nuisances_by_task(fit_predict, key, train, c_eval, x_eval) -> Nuisances:
  """The five nuisance fits of the reference (`fit_nuisances_fold`), each
  one call fit_predict(key, inputs_NxK, target_N, classify, eval_MxK) ->
  [M] (a probability when `classify`): e (X ~ C), q (Z ~ X, C), m
  (Y ~ Z, X, C), m_Y (Y ~ X, C) and m_Z (Z ~ C), then evaluated at
  e(C), q(1 | x, C), m(z, x, C) for x, z in {0, 1}, m_Y(X_eval, C), m_Z(C).
  """
  c, x, z, y = train
  one, zero = jnp.ones_like(x_eval), jnp.zeros_like(x_eval)
  tasks = (([], x, True, [[]]),
           ([x], z, True, [[one], [zero]]),
           ([z, x], y, False, [[zero, zero], [zero, one], [one, zero],
                               [one, one]]),
           ([x], y, False, [[x_eval]]),
           ([], z, True, [[]]))
  preds = []
  for i, (cols, target, classify, evals) in enumerate(tasks):
    inputs_eval = jnp.concatenate([_design(e, c_eval) for e in evals], 0)
    p = fit_predict(jax.random.fold_in(key, i), _design(cols, c), target,
                    classify, inputs_eval)
    preds.append(jnp.split(p, len(evals)))
  (e1,), (q11, q10), (m00, m01, m10, m11), (m_y,), (m_z,) = preds
  return Nuisances(clip_weight(e1), clip_weight(q11), clip_weight(q10), m00,
                   m01, m10, m11, m_y, clip_weight(m_z))


def _xgb_numpy(seed, inputs, target, inputs_eval, classify: bool):
  xgboost = extras.require('xgboost', 'causal')
  if classify:
    model = xgboost.XGBClassifier(objective='binary:logistic',
                                  random_state=int(seed), **XGB_PARAMS)
    model.fit(np.asarray(inputs), np.asarray(target).astype(np.int32))
    return model.predict_proba(np.asarray(inputs_eval))[:, 1].astype(
        np.float32)
  model = xgboost.XGBRegressor(objective='reg:squarederror',
                               random_state=int(seed), **XGB_PARAMS)
  model.fit(np.asarray(inputs), np.asarray(target))
  return model.predict(np.asarray(inputs_eval)).astype(np.float32)


def xgb_fit_predict(key, inputs, target, classify: bool, inputs_eval):
  """Gradient-boosted trees (`XGB_PARAMS`, seeded from `key`) through
  `jax.pure_callback`: jittable, and vmapped one replication at a time."""
  seed = jax.random.randint(key, (), 0, 2**31 - 1)
  out = jax.ShapeDtypeStruct((inputs_eval.shape[0],), jnp.float32)
  return jax.pure_callback(functools.partial(_xgb_numpy, classify=classify),
                           out, seed, inputs, target, inputs_eval,
                           vmap_method='sequential')


class MLP(nn.Module):
  """ReLU MLP with a scalar output (a logit or a standardised mean)."""
  width: int = 32
  depth: int = 1

  @nn.compact
  def __call__(self, h_NxK):
    for _ in range(self.depth):
      h_NxK = nn.relu(nn.Dense(self.width)(h_NxK))
    return nn.Dense(1)(h_NxK)[:, 0]


def mlp_fit_predict(key, inputs, target, classify: bool, inputs_eval,
                    steps: int = 200, lr: float = 3e-3, l2: float = 1e-2,
                    model: MLP = MLP()):
  """`model` trained full-batch by Adam for `steps` steps under lax.scan on
  z-scored inputs: logistic loss when `classify`, else squared error on the
  z-scored target, plus l2 |params|^2 (without it the fit overfits: at
  n = 5000, d = 10, e's RMSE to the truth is 0.10 at l2 = 1e-4 and 0.035
  at 1e-2); predicts at `inputs_eval` on the original scale."""
  mu, sd = inputs.mean(0), inputs.std(0) + 1e-6
  t_mu, t_sd = ((0.0, 1.0) if classify
                else (target.mean(), target.std() + 1e-6))
  h, t = (inputs - mu) / sd, (target - t_mu) / t_sd
  params = model.init(key, h[:1])
  tx = optax.adam(lr)

  def loss(p):
    out = model.apply(p, h)
    fit = (optax.sigmoid_binary_cross_entropy(out, t).mean() if classify
           else jnp.mean((out - t) ** 2))
    return fit + l2 * sum(jnp.sum(w ** 2) for w in jax.tree.leaves(p))

  def step(carry, _):
    p, opt = carry
    updates, opt = tx.update(jax.grad(loss)(p), opt, p)
    return (optax.apply_updates(p, updates), opt), None

  params = jax.lax.scan(step, (params, tx.init(params)), None,
                        length=steps)[0][0]
  out = model.apply(params, (inputs_eval - mu) / sd)
  return jax.nn.sigmoid(out) if classify else t_mu + t_sd * out


def xgb_learner(key, train, c_eval, x_eval) -> Nuisances:
  """The reference's XGBoost nuisances (`XGB_PARAMS`)."""
  return nuisances_by_task(xgb_fit_predict, key, train, c_eval, x_eval)


def mlp_learner(key, train, c_eval, x_eval) -> Nuisances:
  """MLP nuisances (`mlp_fit_predict`), pure JAX."""
  return nuisances_by_task(mlp_fit_predict, key, train, c_eval, x_eval)


LEARNERS: dict[str, Learner] = {'linear': linear_learner,
                                'xgb': xgb_learner, 'mlp': mlp_learner}


# -- cross-fitting -------------------------------------------------------------
def estimate_two_fold(key: jax.Array, data: Data, delta=0.0,
                      learner: Learner = linear_learner) -> dict:
  """FD-PI, FD-DR and FD-R with 2-fold cross-fitting: nuisances (`learner`)
  from one half, pseudo-outcomes and final stages on the other, both ways.
  Returns out-of-fold tau-hat [n] per estimator (in data order); with n
  odd the second half has the extra point."""
  n = data.x.shape[0]
  kp, kn = jax.random.split(key)
  kl = jax.random.fold_in(key, 1)
  perm = jax.random.permutation(kp, n)
  halves = perm[: n // 2], perm[n // 2:]
  out = {k: jnp.zeros(n) for k in ('fd_pi', 'fd_dr', 'fd_r')}
  arrays = (data.c, data.x, data.z, data.y)
  for k, (tr, te) in enumerate(((halves[0], halves[1]),
                                (halves[1], halves[0]))):
    c, x, z, y = (a[te] for a in arrays)
    fitted = learner(jax.random.fold_in(kl, k), tuple(a[tr] for a in arrays),
                     c, x)
    nu = perturb_nuisances(jax.random.fold_in(kn, k), fitted, delta, n)
    out['fd_pi'] = out['fd_pi'].at[te].set(fd_pi(nu))
    psi = fd_pseudo_outcome(nu, x, z, y, den=fitted)
    out['fd_dr'] = out['fd_dr'].at[te].set(final_stage(c, psi))
    b, zt = fd_r_stages(c, x, z, y, nu, c, x, nu)
    out['fd_r'] = out['fd_r'].at[te].set(b * final_stage(c, zt))
  return out


def estimate_fd_r3(key: jax.Array, data: Data, delta=0.0,
                   learner: Learner = linear_learner) -> jax.Array:
  """FD-R3: three folds; nuisances (`learner`) on D1, b and g on D2, zeta
  and its regression on D3; D1 and D2 swapped and the two predictions
  averaged; D3 rotates over the folds. Returns tau-hat [n] for every point
  (the third fold takes the remainder of n / 3, as in the reference)."""
  n = data.x.shape[0]
  kp, kn = jax.random.split(key)
  kl = jax.random.fold_in(key, 1)
  k3 = n // 3
  perm = jax.random.permutation(kp, n)
  folds = [perm[:k3], perm[k3:2 * k3], perm[2 * k3:]]
  tau = jnp.zeros(n)
  arrays = (data.c, data.x, data.z, data.y)
  for t in range(3):
    d1, d2 = folds[(t + 1) % 3], folds[(t + 2) % 3]
    d3 = folds[t]
    c3, x3, _, _ = (a[d3] for a in arrays)
    preds = []
    for j, (a_idx, b_idx) in enumerate(((d1, d2), (d2, d1))):
      c2, x2, z2, y2 = (a[b_idx] for a in arrays)
      # One fit on D1, predicted at D2 and D3 together.
      both = learner(jax.random.fold_in(kl, 2 * t + j),
                     tuple(a[a_idx] for a in arrays),
                     jnp.concatenate([c2, c3]), jnp.concatenate([x2, x3]))
      m2 = b_idx.shape[0]
      nu2 = perturb_nuisances(jax.random.fold_in(kn, 10 * t + 2 * j),
                              jax.tree.map(lambda a: a[:m2], both), delta, n)
      nu3 = perturb_nuisances(jax.random.fold_in(kn, 10 * t + 2 * j + 1),
                              jax.tree.map(lambda a: a[m2:], both), delta, n)
      b, zt = fd_r_stages(c2, x2, z2, y2, nu2, c3, x3, nu3)
      preds.append(b * final_stage(c3, zt))
    tau = tau.at[d3].set(0.5 * (preds[0] + preds[1]))
  return tau


def rmse(a: jax.Array, b: jax.Array) -> jax.Array:
  """Root mean squared error, e.g. of a tau-hat against `Data.tau`."""
  return jnp.sqrt(jnp.mean((a - b) ** 2))
