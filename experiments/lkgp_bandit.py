"""LK-GP-UCB / LK-GP-TS and baselines (see configs/lkgp_bandit.py)."""

from iclrjax.bandits import lkgp
from iclrjax.core import launch

EXPERIMENT = launch.Experiment('lkgp_bandit', lkgp.run,
                               schema=lkgp.config_schema(),
                               check_fn=lkgp.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
