"""Minibatch least squares: the template launcher (see configs/linreg.py)."""

from iclrjax.core import launch
from iclrjax.examples import linreg

if __name__ == '__main__':
  launch.main('linreg', linreg.run, schema=linreg.config_schema(),
              check_fn=linreg.check_config)
