"""Flow2GAN endpoint flow matching + GAN fine-tuning (configs/flow2gan.py)."""

from iclrjax.core import launch
from iclrjax.diffusion import flow2gan

EXPERIMENT = launch.Experiment('flow2gan', flow2gan.run,
                               schema=flow2gan.config_schema(),
                               check_fn=flow2gan.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
