"""BWCache block-wise caching of DiT features (configs/bwcache.py)."""

from iclrjax.core import launch
from iclrjax.diffusion import bwcache

EXPERIMENT = launch.Experiment('bwcache', bwcache.run,
                               schema=bwcache.config_schema(),
                               check_fn=bwcache.check_config)

if __name__ == '__main__':
  EXPERIMENT.main()
