"""Parameter-robust avoid problems (the FGE tasks), by name."""

from __future__ import annotations

from typing import Any

from iclrjax.core import extras
from iclrjax.rl.reach.base import GymnaxTask, ReachEnv, ReachTask  # noqa: F401

TASKS = ('toylevels', 'pendulum', 'hopper', 'dubins', 'lander')


def task_class(name: str) -> type[ReachTask]:
  """The task class of 'toylevels' | 'pendulum' | 'hopper' | 'dubins' |
  'lander' (MJX and Kinetix: imported only when asked for)."""
  # pylint: disable=g-import-not-at-top
  if name == 'toylevels':
    from iclrjax.rl.reach import toylevels
    return toylevels.ToyLevels
  if name == 'pendulum':
    from iclrjax.rl.reach import pendulum
    return pendulum.PendulumAvoid
  if name == 'dubins':
    from iclrjax.rl.reach import dubins
    return dubins.DubinsCircle
  if name == 'hopper':
    extras.require('mujoco', 'rl')  # a one-line error when it is absent
    from iclrjax.rl.reach import hopper
    return hopper.HopperTerrain
  if name == 'lander':
    from iclrjax.rl.reach import lander
    return lander.KinetixLander
  raise ValueError(f'Unknown reach task {name!r}: use one of {TASKS}')


def make_task(name: str, **kwargs: Any) -> ReachTask:
  """Task `name` (one of `TASKS`) built with `kwargs`."""
  return task_class(name)(**kwargs)
