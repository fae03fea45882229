"""Minibatch least squares: the template experiment (see configs/linreg.py).

  python -m experiments.linreg --config=configs/linreg.py:smoke

The method is `iclrjax/examples/linreg.py`; this file trains it through the
core launcher, checks the claim against the closed form, and states the
control that fails it (the untrained initial iterate).
"""

import jax
import jax.numpy as jnp

from experiments import plots
from iclrjax.core import distributed
from iclrjax.core import launch
from iclrjax.core import loop
from iclrjax.examples import linreg


def run(r: launch.Run) -> launch.Result:
  cfg = r.config
  init = linreg.make_init(cfg)
  out = r.train(init, linreg.make_step(cfg), num_steps=cfg.num_steps,
                chunk_size=cfg.chunk_size, postfix_keys=('loss',))
  # Control: the untrained initial iterate of the same seeds.
  start = jax.vmap(init)(loop.seed_keys(cfg.seed, cfg.num_seeds))
  init_err = distributed.to_host(
      jnp.linalg.norm(start.w - start.w_ols, axis=-1) /
      jnp.linalg.norm(start.w_ols, axis=-1))
  # Final metrics on device (the seed axis may span hosts), then to host.
  state = out.state
  sq_loss = jax.vmap(lambda w, X, y: 0.5 * jnp.mean((X @ w - y) ** 2))
  rel_err, full_loss, ols_loss = distributed.to_host((
      jnp.linalg.norm(state.w - state.w_ols, axis=-1) /
      jnp.linalg.norm(state.w_ols, axis=-1),
      sq_loss(state.w, state.X, state.y),
      sq_loss(state.w_ols, state.X, state.y)))
  plots.plot_run(r, ['loss'], 'loss', logy=True, title='minibatch loss')
  plots.plot_run(r, ['param_rel_error'], 'param_rel_error', logy=True,
                 title='|w - w_ols| / |w_ols|')
  holds = bool(rel_err.max() < cfg.tolerance)
  claim = launch.Claim(
      claim=('Minibatch training on the squared loss converges to the '
             'closed-form least-squares solution (normal equations).'),
      holds=holds,
      evidence=(f'max over {cfg.num_seeds} seeds of |w - w_ols|/|w_ols| = '
                f'{rel_err.max():.2e} (tolerance {cfg.tolerance:g}); '
                f'final full-data loss {full_loss.mean():.5f} vs OLS '
                f'{ols_loss.mean():.5f}'),
      control=(f'the untrained initial iterate: max |w0 - w_ols|/|w_ols| = '
               f'{init_err.max():.2e}, fails the tolerance'
               if init_err.min() >= cfg.tolerance else
               f'the untrained initial iterate passes the tolerance '
               f'({init_err.min():.2e}): the claim is vacuous'))
  return launch.Result(
      metrics={f'param_rel_error/{cfg.optimizer}': rel_err,
               f'full_loss/{cfg.optimizer}': full_loss,
               'full_loss/ols': ols_loss,
               'param_rel_error/untrained': init_err},
      claims=[claim])


def programs(cfg, sharded: bool = False) -> list[loop.Program]:
  """The compiled training chunk (`benchmarks/paper_variants.py`)."""
  return [loop.train_program(
      'train', linreg.make_init(cfg), linreg.make_step(cfg),
      num_seeds=cfg.num_seeds, num_steps=cfg.num_steps,
      chunk_size=cfg.chunk_size, sharded=sharded, params=cfg.dim)]


EXPERIMENT = launch.Experiment('linreg', run, schema=linreg.config_schema(),
                               check_fn=linreg.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
