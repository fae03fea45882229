"""Tests for the Kinetix Lander (`rl.reach.lander`, pixel observations).

Skipped where kinetix-env is not installed (it is an optional extra, see
README). One jit of a vmapped scan drives four landers with fixed thrust:
dropped above the pad the lander lands (finished, safe, no fuel burnt);
dropped low at the far left it hits the floor; both thrusters at full power
empty the 40-unit tank in exactly 20 steps; and the frames shift through
the 3-frame stack. The slow test runs the `lander_smoke` FGE config.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('kinetix')

# pylint: disable=g-import-not-at-top,wrong-import-position
from experiments import fge as fge_exp
from configs import fge as fc
from iclrjax.rl import ppo
from iclrjax.rl.reach import base
from iclrjax.rl.reach import lander

STEPS = 30
PAD_X = 3.77  # the pad's centre in Kinetix's hard_lunar_lander


@pytest.fixture(scope='module')
def task():
  return lander.KinetixLander()


def test_spec_features_and_thrust_table(task):
  env = base.ReachEnv(task)
  assert env.spec.image_shape == task.image_shape == (62, 62, 9)
  assert env.spec.obs_shape == (62 * 62 * 9 + 1,)
  assert (env.spec.discrete, env.spec.num_actions, env.spec.max_steps) == (
      True, 9, 150)
  assert task.feature_dim == 2
  th = jnp.array([1.0, 2.0])
  np.testing.assert_allclose(base.initial_obs(task, th[None])[0],
                             task.to_box(th))
  table = np.asarray(jax.vmap(task.thrust)(jnp.arange(9)))
  assert {tuple(r) for r in table} == {(a, b) for a in (0, .5, 1)
                                       for b in (0, .5, 1)}
  # The level is where the docstring says: floor, pad, a 3-part lander.
  assert len(task.parts) == 3 and task.world == 5.0


def test_landing_crash_fuel_and_frame_stack(task):
  thetas = jnp.array([[PAD_X, 4.5], [0.5, 1.2], [2.5, 3.0], [2.5, 3.0]])
  actions = jnp.array([0, 0, 8, 0])  # none, none, both full, none

  @jax.jit
  def run():
    s0 = jax.vmap(task.init_state)(thetas)
    obs0 = jax.vmap(task.observe)(s0)

    def body(s, _):
      s, failed, finished = jax.vmap(task.step)(s, actions)
      return s, (failed, finished, s.fuel, s.frames)

    _, out = jax.lax.scan(body, s0, None, length=STEPS)
    return obs0, s0.frames, out

  obs0, frames0, (failed, finished, fuel, frames) = jax.device_get(run())
  first = lambda x: int(np.argmax(x)) if x.any() else None
  # Observation: pixels in [0, 1] then the full tank; the stack starts as
  # three copies of the first frame.
  assert obs0.shape == (4, task.obs_dim)
  assert 0.0 <= obs0[:, :-1].min() and obs0[:, :-1].max() <= 1.0
  np.testing.assert_array_equal(obs0[:, -1], 1.0)
  assert (frames0[:, 0] == frames0[:, 2]).all()
  # Above the pad, no thrust: it lands (finished before any failure).
  t_land = first(finished[:, 0])
  assert t_land is not None and (failed[:t_land + 1, 0] == 0).all()
  np.testing.assert_array_equal(fuel[:, 0], 40.0)
  # Low at the far left, no thrust: it falls on the floor, quickly.
  t_crash = first(failed[:, 1])
  assert t_crash is not None and t_crash < 15 and not finished[:, 1].any()
  # Both thrusters at full burn 2 units a step: empty (a failure) at step
  # 20, unless the lander leaves the screen or lands first.
  t_fuel = first(failed[:, 2])
  np.testing.assert_allclose(fuel[:t_fuel + 1, 2],
                             40.0 - 2.0 * np.arange(1, t_fuel + 2))
  assert t_fuel == 19 or fuel[t_fuel, 2] > 0
  # The stack shifts: frame k of step t is frame k + 1 of step t - 1, and
  # the falling lander changes the newest frame.
  np.testing.assert_array_equal(frames[1:, :, :2], frames[:-1, :, 1:])
  assert (frames[5, 3, -1] != frames0[3, -1]).any()


@pytest.mark.slow
def test_lander_smoke_config_trains(tmp_path):
  """The FGE `lander_smoke` config end to end (~3 min on 2 CPU cores:
  the pixel renderer's compile): FGE and DR train, coverage is measured."""
  cfg = fc.get_config('lander_smoke')
  out = fge_exp.EXPERIMENT.execute(cfg, tmp_path / 'run')
  for m in ('fge', 'dr'):
    cov = np.asarray(out['metrics'][f'coverage/{m}']['per_seed'])
    assert cov.shape == (2,) and ((0 <= cov) & (cov <= 1)).all()
  # The policy network is the CNN one (the spec carries the image shape).
  spec = base.ReachEnv(lander.KinetixLander()).spec
  assert ppo.actor_critic(spec, cfg.ppo).image_shape == (62, 62, 9)
