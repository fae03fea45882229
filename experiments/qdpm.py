"""QDPM vs VDM and plain VE likelihoods on digits (configs/qdpm.py)."""

from iclrjax.core import launch
from iclrjax.diffusion import qdpm

EXPERIMENT = launch.Experiment('qdpm', qdpm.run,
                               schema=qdpm.experiment_schema(),
                               check_fn=qdpm.check_experiment,
                               preflight=qdpm.preflight)

if __name__ == '__main__':
  EXPERIMENT.main()
