"""Diffusion LMs as parallel samplers + learned MDLM/ReMDM demo (configs/dlm.py)."""

from iclrjax.core import launch
from iclrjax.diffusion import dlm_learned

EXPERIMENT = launch.Experiment('dlm', dlm_learned.run,
                               schema=dlm_learned.config_schema(),
                               check_fn=dlm_learned.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
