"""Group state tracking with diagonal SSMs (configs/dcd_ssm.py)."""

from iclrjax.core import launch
from iclrjax.ssm import state_tracking

EXPERIMENT = launch.Experiment('dcd_ssm', state_tracking.run,
                               schema=state_tracking.config_schema(),
                               check_fn=state_tracking.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
