"""FastMix: data-mixture search as bilevel optimisation (arXiv 2606.14971),
with the DoReMi and RegMix baselines.

Sampling source i with probability alpha_i is, in expectation, uniform
sampling with per-source loss weights (the paper's reformulation):

  L_train(w | alpha) = sum_i alpha_i L_i(w),      alpha = softmax(z),
  min_alpha L_target(w*(alpha)),  w*(alpha) = argmin_w L_train(w | alpha),
  L_target(w) = l_val(w) + beta Lbar_train(w) + lam sum_i alpha_i log alpha_i.

Alg. 1 alternates n_1 inner optimiser steps on w (alpha fixed) with one
outer step on z, whose one-step-unroll gradient has a closed form: with
w' = w - eta_w sum_j alpha_j grad L_j(w),

  d L_target(w') / d alpha_i = -eta_w <grad T(w'), grad L_i(w)>
                               + lam (log alpha_i + 1),
  T = l_val + beta Lbar_train,

chained to z through the softmax Jacobian diag(alpha) - alpha alpha^T, and
applied with Adam (the released code: AdamW, betas (0.9, 0.95), no decay).
Lbar_train is the sources' unweighted mean, so that T depends on alpha only
through w' (the released code sets beta = lam = 0). For plain SGD the closed
form is the exact derivative of the unrolled step (tests/stats). The inner
products may be restricted to a parameter subset (`param_mask`); the
released code uses only the output head.

Deliberate difference from the released code (hrtan/fastmix at b2a4051,
pretrain/train_fastmix_val.py:381-429): it takes the validation gradient at
the current weights w, not at the unrolled w', i.e. the first-order
approximation grad T(w) of grad T(w'). Ours defaults to w' (the exact
derivative of the unroll); `val_at='current'` reproduces the release
(tests/parity/test_fastmix.py). Its entropy term, dead code there
(lambda_reg = 0, :455), differentiates +entropy (:448), the opposite sign of
the lam sum alpha log alpha used here.

Every loss function here is per example: `loss_fn(params, batch) -> [B]`.
Source batches carry a leading source axis [K, ...].
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclrjax.core import extras

PyTree = Any
LossFn = Callable[[PyTree, Any], jax.Array]     # per-example losses [B]


def source_losses(loss_fn: LossFn, params: PyTree, batches_K: Any
                  ) -> jax.Array:
  """Mean loss of each source's batch: [K]."""
  return jax.vmap(lambda b: loss_fn(params, b).mean())(batches_K)


def mixed_loss(loss_fn: LossFn, params: PyTree, batches_K: Any,
               alpha_K: jax.Array) -> jax.Array:
  """sum_i alpha_i L_i(w): the reformulated training loss."""
  return jnp.dot(alpha_K, source_losses(loss_fn, params, batches_K))


def param_mask(params: PyTree, subset: str) -> PyTree:
  """Static bool pytree: 'all', or the leaves whose path names `subset`
  (e.g. 'head': the output layer, as in the released code)."""
  if subset == 'all':
    return jax.tree.map(lambda _: True, params)
  mask = jax.tree_util.tree_map_with_path(
      lambda path, _: any(getattr(k, 'key', getattr(k, 'name', None)) == subset
                          for k in path), params)
  if not any(jax.tree.leaves(mask)):
    raise ValueError(f'fastmix.param_mask: no parameter path contains '
                     f'{subset!r}; use "all" or a module name of the model')
  return mask


def _restrict(tree: PyTree, mask: PyTree) -> PyTree:
  # Static zeros: XLA drops the backward pass of the masked-out leaves.
  return jax.tree.map(lambda x, m: x if m else jnp.zeros_like(x), tree, mask)


def _dot(a: PyTree, b: PyTree) -> jax.Array:
  return sum(jnp.vdot(x, y) for x, y in zip(jax.tree.leaves(a),
                                            jax.tree.leaves(b)))


def softmax_vjp(alpha_K: jax.Array, g_alpha_K: jax.Array) -> jax.Array:
  """(diag(alpha) - alpha alpha^T) g: d/dz of alpha = softmax(z)."""
  return alpha_K * (g_alpha_K - jnp.dot(alpha_K, g_alpha_K))


class OuterGrad(NamedTuple):
  grad_z: jax.Array       # [K]
  grad_alpha: jax.Array   # [K]
  inner: jax.Array        # [K] <grad T(w'), grad L_i(w)>
  val_loss: jax.Array     # l_val(w')


def outer_grad(loss_fn: LossFn, params: PyTree, batches_K: Any,
               val_batch: Any, z_K: jax.Array, *, eta_w: float,
               beta: float = 0.0, lam: float = 0.0,
               mask: PyTree | None = None,
               val_at: str = 'unrolled') -> OuterGrad:
  """The closed-form one-step-unroll gradient of L_target w.r.t. z (Alg. 1).

  `mask` (from `param_mask`) restricts the unrolled step and both gradients
  to a parameter subset; None is every parameter. `val_at` is where grad T
  is taken: 'unrolled' (w', the default) or 'current' (w, as the released
  pretrain/train_fastmix_val.py:381-429 does; `val_loss` is then l_val(w)).
  """
  if val_at not in ('unrolled', 'current'):
    raise ValueError(f"fastmix.outer_grad: val_at must be 'unrolled' or "
                     f"'current', got {val_at!r}")
  mask = jax.tree.map(lambda _: True, params) if mask is None else mask
  alpha = jax.nn.softmax(z_K)
  g_K = jax.vmap(lambda b: _restrict(
      jax.grad(lambda p: loss_fn(p, b).mean())(params), mask))(batches_K)
  step = jax.tree.map(lambda g: jnp.tensordot(alpha, g, 1), g_K)
  w_next = jax.tree.map(lambda w, s: w - eta_w * s, params, step)

  def target(p):
    val = loss_fn(p, val_batch).mean()
    return val + beta * source_losses(loss_fn, p, batches_K).mean(), val

  at = w_next if val_at == 'unrolled' else params
  v, val_loss = jax.grad(target, has_aux=True)(at)
  v = _restrict(v, mask)
  inner = jax.vmap(lambda g: _dot(v, g))(g_K)
  g_alpha = -eta_w * inner + lam * (jnp.log(alpha) + 1.0)
  return OuterGrad(softmax_vjp(alpha, g_alpha), g_alpha, inner, val_loss)


def z_optimizer(lr: float) -> optax.GradientTransformation:
  """The released code's optimiser on z: AdamW(lr, (0.9, 0.95), wd 0)."""
  return optax.adam(lr, b1=0.9, b2=0.95)


class SearchState(NamedTuple):
  """A FastMix search: the proxy's parameters and optimizer state, the
  mixture logits z (alpha = softmax(z)) and their optimizer state."""

  params: PyTree
  opt_state: PyTree
  z: jax.Array
  z_opt_state: PyTree
  alpha_sum: jax.Array    # running sum of alpha over outer steps


def init_search(params: PyTree, tx: optax.GradientTransformation,
                z_tx: optax.GradientTransformation, num_sources: int
                ) -> SearchState:
  """z initialised to ones (uniform alpha), as the released code."""
  z = jnp.ones((num_sources,))
  return SearchState(params, tx.init(params), z, z_tx.init(z),
                     jnp.zeros((num_sources,)))


def inner_step(loss_fn: LossFn, tx: optax.GradientTransformation,
               params: PyTree, opt_state: PyTree, batches_K: Any,
               alpha_K: jax.Array) -> tuple[PyTree, PyTree, jax.Array]:
  """One optimiser step on sum_i alpha_i L_i(w)."""
  loss, g = jax.value_and_grad(
      lambda p: mixed_loss(loss_fn, p, batches_K, alpha_K))(params)
  updates, opt_state = tx.update(g, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, loss


def search_step(loss_fn: LossFn, tx: optax.GradientTransformation,
                z_tx: optax.GradientTransformation, state: SearchState,
                t: jax.Array, batches_K: Any, outer_batches_K: Any,
                val_batch: Any, *, n_inner: int, eta_w: float,
                beta: float, lam: float, mask: PyTree | None,
                val_at: str = 'unrolled'
                ) -> tuple[SearchState, dict[str, jax.Array]]:
  """Alg. 1: an inner step on w every t; an outer step on z when
  t % n_inner == n_inner - 1 (after n_inner inner steps). `val_at`: as
  `outer_grad`."""
  alpha = jax.nn.softmax(state.z)
  params, opt_state, loss = inner_step(loss_fn, tx, state.params,
                                       state.opt_state, batches_K, alpha)

  def outer(s):
    og = outer_grad(loss_fn, s.params, outer_batches_K, val_batch, s.z,
                    eta_w=eta_w, beta=beta, lam=lam, mask=mask,
                    val_at=val_at)
    upd, zo = z_tx.update(og.grad_z, s.z_opt_state, s.z)
    z = optax.apply_updates(s.z, upd)
    return s._replace(z=z, z_opt_state=zo,
                      alpha_sum=s.alpha_sum + jax.nn.softmax(z)), og.val_loss

  state = state._replace(params=params, opt_state=opt_state)
  state, val = jax.lax.cond(t % n_inner == n_inner - 1, outer,
                            lambda s: (s, jnp.nan), state)
  return state, {'train_loss': loss, 'val_loss': val}


def search_cost(num_steps: int, n_inner: int, num_sources: int, batch: int,
                outer_batch: int, beta: float) -> int:
  """Per-example gradient evaluations of a FastMix search: K x batch per
  inner step; per outer step K x outer_batch source gradients at w, then
  the target's gradient at w' (outer_batch validation examples, and the K
  source batches again when beta > 0)."""
  outer = num_sources * outer_batch + outer_batch + (
      num_sources * outer_batch if beta else 0)
  return num_steps * num_sources * batch + (num_steps // n_inner) * outer


# -- DoReMi (Xie et al. 2023; sangmichaelxie/doremi update_domain_weights) ---


def doremi_update(alpha_K: jax.Array, excess_K: jax.Array, *, eta: float,
                  eps: float) -> jax.Array:
  """log alpha += eta lambda; softmax; smooth with eps / K (Alg. 1)."""
  a = jax.nn.softmax(jnp.log(alpha_K) + eta * excess_K)
  return (1.0 - eps) * a + eps / alpha_K.shape[0]


def excess_losses(loss_fn: LossFn, params: PyTree, ref_params: PyTree,
                  batches_K: Any) -> jax.Array:
  """lambda_i: mean over source i's examples of max(l_proxy - l_ref, 0)."""
  f = lambda b: jnp.maximum(loss_fn(params, b) - loss_fn(ref_params, b),
                            0.0).mean()
  return jax.vmap(f)(batches_K)


class DoremiState(NamedTuple):
  """A DoReMi run: the proxy's parameters and optimizer state and the
  current mixture alpha."""

  params: PyTree
  opt_state: PyTree
  alpha: jax.Array
  alpha_sum: jax.Array


def doremi_step(loss_fn: LossFn, tx: optax.GradientTransformation,
                state: DoremiState, ref_params: PyTree, batches_K: Any, *,
                eta: float, eps: float
                ) -> tuple[DoremiState, dict[str, jax.Array]]:
  """One DoReMi step: update alpha from the proxy's excess losses, then a
  proxy step on the alpha-weighted loss. The mixture DoReMi returns is the
  average of alpha over training (`alpha_sum / steps`)."""
  lam_K = excess_losses(loss_fn, state.params, ref_params, batches_K)
  alpha = doremi_update(state.alpha, lam_K, eta=eta, eps=eps)
  params, opt_state, loss = inner_step(loss_fn, tx, state.params,
                                       state.opt_state, batches_K, alpha)
  return (DoremiState(params, opt_state, alpha, state.alpha_sum + alpha),
          {'train_loss': loss})


# -- RegMix (Liu et al. 2024; sail-sg/regmix regression_fitting) -------------

REGMIX_LGBM = dict(boosting_type='gbdt', objective='regression',
                   n_estimators=1000, learning_rate=1e-2, verbosity=-1,
                   n_jobs=1)   # a few hundred rows: threads only add overhead


def regmix_fit(mixtures_MxK: np.ndarray, losses_M: np.ndarray, *,
               seed: int = 0, holdout: float = 0.125, **lgbm_kwargs):
  """LightGBM regressor mixture -> target loss, with the released
  notebook's settings (1000 rounds, lr 1e-2, early stopping after 3 rounds
  on a held-out split); min_child_samples is LightGBM's 20 from 160 training
  mixtures up, rows / 8 below (at 56 rows the default allows two splits)."""
  lgb = extras.require('lightgbm', 'stats')
  rng = np.random.default_rng(seed)
  m = len(losses_M)
  idx = rng.permutation(m)
  n_val = max(1, int(round(holdout * m)))
  val, tr = idx[:n_val], idx[n_val:]
  kw = dict(REGMIX_LGBM, random_state=seed,
            min_child_samples=max(2, min(20, len(tr) // 8)))
  kw.update(lgbm_kwargs)
  reg = lgb.LGBMRegressor(**kw)
  reg.fit(mixtures_MxK[tr], losses_M[tr],
          eval_X=(mixtures_MxK[val],), eval_y=(losses_M[val],),
          eval_metric='l2',
          callbacks=[lgb.early_stopping(3, verbose=False)])
  return reg


def regmix_search(reg, num_sources: int, *, seed: int = 0,
                  num_samples: int = 100_000, top_k: int = 128,
                  prior: np.ndarray | None = None) -> np.ndarray:
  """The mean of the top_k of num_samples Dirichlet(prior) mixtures by
  predicted loss (the released notebook: 100k samples, k = 128)."""
  rng = np.random.default_rng(seed)
  prior = np.ones(num_sources) if prior is None else np.asarray(prior)
  cand = rng.dirichlet(prior, num_samples)
  pred = reg.predict(cand)
  return cand[np.argsort(pred)[:top_k]].mean(0)
