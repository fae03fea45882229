"""OFTSR one-step flow super-resolution (configs/oftsr.py)."""

from iclrjax.core import launch
from iclrjax.diffusion import oftsr

EXPERIMENT = launch.Experiment('oftsr', oftsr.run,
                               schema=oftsr.config_schema(),
                               check_fn=oftsr.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
