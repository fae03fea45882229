"""Minibatch least squares: the template experiment for the core machinery.

Not a paper: a small real training loop that exercises every piece a paper
uses (pure init/step, scan-compiled chunks, seeds as a vmap axis, sharding,
checkpoints, metrics, plots, claims), with a closed form to test against.
This module is the method (pure functions, no I/O); the experiment (run,
claim, control, plots) is `experiments/linreg.py`.

Per seed: X ~ N(0, I) [n, d], w* ~ N(0, I), y = X w* + sigma * eps. Adam on
the mean squared error L(w) = |X_B w - y_B|^2 / (2 |B|) over minibatches B drawn
as a pure function of (key, step) (`core.data.batch_indices`), with a cosine
learning-rate decay. The claim: the iterate converges to the ordinary
least-squares solution w_ols = (X^T X)^{-1} X^T y, the unique minimiser of
the full-data loss (the normal equations).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import optax

from iclrjax.core import config as cfg_lib
from iclrjax.core import data
from iclrjax.core import distributed


class State(NamedTuple):
  """One seed's training state: the iterate, its optimizer state, the
  minibatch key, the seed's data and its closed-form solution."""

  w: jax.Array          # [d] parameters
  opt_state: Any        # optax state
  key: jax.Array        # raw uint32 key for minibatches
  X: jax.Array          # [n, d] this seed's data (part of the state: it is
  y: jax.Array          # [n]    what a replay buffer would be for RL)
  w_ols: jax.Array      # [d] closed-form solution, for the error metric


def config_schema() -> dict[str, cfg_lib.Spec]:
  """The constraints of the method's config fields (see `core.config`)."""
  return {
      'num_examples': cfg_lib.Int(min=2),
      'dim': cfg_lib.Int(min=1),
      'noise': cfg_lib.Float(min=0.0),
      'batch_size': cfg_lib.Int(min=1),
      'learning_rate': cfg_lib.Float(min=0.0, min_inclusive=False),
      'optimizer': cfg_lib.Choice('adam', 'sgd'),
      'num_steps': cfg_lib.Int(min=1),
      'chunk_size': cfg_lib.Int(min=1),
      'tolerance': cfg_lib.Float(min=0.0, min_inclusive=False),
  }


def check_config(cfg: ml_collections.ConfigDict) -> None:
  """Cross-field checks: batch_size <= num_examples >= dim."""
  cfg_lib.check(cfg.batch_size <= cfg.num_examples, 'batch_size',
                cfg.batch_size,
                f'must be <= num_examples ({cfg.num_examples})')
  cfg_lib.check(cfg.num_examples >= cfg.dim, 'num_examples', cfg.num_examples,
                f'must be >= dim ({cfg.dim}) for a unique least-squares '
                'solution')


def make_optimizer(cfg) -> optax.GradientTransformation:
  """Adam or SGD (`cfg.optimizer`) with a cosine-decayed learning rate."""
  sched = optax.cosine_decay_schedule(cfg.learning_rate, cfg.num_steps,
                                      alpha=1e-3)
  return {'adam': optax.adam, 'sgd': optax.sgd}[cfg.optimizer](sched)


def ols(X: jax.Array, y: jax.Array) -> jax.Array:
  """Closed-form least squares via the normal equations (Cholesky)."""
  gram = X.T @ X
  c = jax.scipy.linalg.cho_factor(gram)
  return jax.scipy.linalg.cho_solve(c, X.T @ y)


def make_init(cfg):
  """init(key) -> State: one seed's data X, y = X w* + noise, a small
  random w and the OLS solution. Reads cfg.num_examples, dim, noise and the
  optimizer fields."""
  tx = make_optimizer(cfg)

  def init(key: jax.Array) -> State:
    k_x, k_w, k_eps, k_w0, k_batch = jax.random.split(key, 5)
    X = jax.random.normal(k_x, (cfg.num_examples, cfg.dim))
    w_true = jax.random.normal(k_w, (cfg.dim,))
    y = X @ w_true + cfg.noise * jax.random.normal(k_eps, (cfg.num_examples,))
    w = 0.1 * jax.random.normal(k_w0, (cfg.dim,))
    return State(w, tx.init(w), k_batch, X, y, ols(X, y))

  return init


def make_step(cfg):
  """step(state, t) -> (state, {'loss', 'param_rel_error'}): one optimizer
  step on minibatch t (`core.data.batch_indices`) of the mean squared
  error."""
  tx = make_optimizer(cfg)

  def loss_fn(w, X_B, y_B):
    return 0.5 * jnp.mean((X_B @ w - y_B) ** 2)

  def step(state: State, t: jax.Array):
    idx_B = data.batch_indices(state.key, t, cfg.num_examples, cfg.batch_size)
    X_B, y_B = distributed.shard_batch((state.X[idx_B], state.y[idx_B]))
    loss, g = jax.value_and_grad(loss_fn)(state.w, X_B, y_B)
    updates, opt_state = tx.update(g, state.opt_state, state.w)
    w = optax.apply_updates(state.w, updates)
    rel_err = jnp.linalg.norm(w - state.w_ols) / jnp.linalg.norm(state.w_ols)
    return state._replace(w=w, opt_state=opt_state), {
        'loss': loss, 'param_rel_error': rel_err}

  return step
