"""Minibatch least squares: the template launcher (see configs/linreg.py)."""

from iclrjax.core import launch
from iclrjax.examples import linreg

EXPERIMENT = launch.Experiment('linreg', linreg.run,
                               schema=linreg.config_schema(),
                               check_fn=linreg.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
