"""Guidance watermarking of a digits flow model (configs/guidance_wm.py)."""

from iclrjax.core import launch
from iclrjax.diffusion import guidance_wm

EXPERIMENT = launch.Experiment('guidance_wm', guidance_wm.run,
                               schema=guidance_wm.config_schema(),
                               check_fn=guidance_wm.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
