"""FGE vs DR / PLR / RARL on parameter-robust avoid problems (configs/fge.py)."""

from iclrjax.core import launch
from iclrjax.rl import fge

EXPERIMENT = launch.Experiment('fge', fge.run,
                               schema=fge.experiment_schema(),
                               check_fn=fge.check_experiment)

if __name__ == '__main__':
  EXPERIMENT.main()
