"""Kernel PPO: NPG with a one-step TD critic vs clip-PPO (configs/kernel_ppo.py)."""

from iclrjax.core import launch
from iclrjax.rl import kernel_ppo

EXPERIMENT = launch.Experiment('kernel_ppo', kernel_ppo.run,
                               schema=kernel_ppo.config_schema(),
                               check_fn=kernel_ppo.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
