"""BWCache: block-wise caching for diffusion transformers (arXiv 2509.13789).

  python -m experiments.bwcache --config=configs/bwcache.py
  python -m experiments.bwcache --config=configs/bwcache.py:smoke --workdir=/tmp/bwc

Trains an AdaLN-zero DiT on 8x8 digits per objective (rectified flow,
sampled by Euler; VP eps-prediction, sampled by DDIM), then samples the same
noise uncached, with BWCache over a delta x R sweep, and with fewer uniform
steps at the block budget BWCache used; PSNR against the uncached samples.

Variants:
  smoke    (CI, ~1 min) tiny DiT, a few training steps.
  default  (CPU, ~15 min) DiT width 64 x 4 blocks, 1500 steps, 2 seeds;
           T in {20, 50}; deltas 0.02-0.3; R = 4% and 10% of T.
  paper    a larger DiT (width 96 x 6 blocks), 3000 steps, 3 seeds.

Pass criteria: (i) delta 0.15, R = 10% (the paper's defaults) on the flow
DiT at T = 50: >= 1.5x fewer block evaluations at >= 30 dB; (ii) reported
per sampler and T: does caching beat fewer uniform steps at equal budget;
(iii) every delta sweep is monotone.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/bwcache.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 2
  c.objectives = ('flow', 'vp_eps')
  c.num_steps = (20, 50)
  c.deltas = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
  c.reuse_fractions = (0.04, 0.1)     # R = max(1, round(f T))
  c.headline_delta = 0.15             # the paper's defaults
  c.headline_reuse_fraction = 0.1
  c.headline_steps = 50
  c.num_samples = 256
  c.patch = 2
  c.width = 64
  c.depth = 4
  c.heads = 4
  c.train_steps = 1500
  c.batch_size = 128
  c.learning_rate = 1e-3
  c.ema_decay = 0.999
  c.steps_per_chunk = 250
  c.log_every = 25
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 1
    c.objectives = ('flow',)
    c.num_steps = (10,)
    c.headline_steps = 10
    c.deltas = (0.05, 0.15)
    c.reuse_fractions = (0.1,)
    c.num_samples = 16
    c.width = 16
    c.depth = 2
    c.heads = 2
    c.train_steps = 20
    c.batch_size = 32
    c.steps_per_chunk = 10
    c.log_every = 5
  elif variant == 'paper':
    c.num_seeds = 3
    c.width = 96
    c.depth = 6
    c.train_steps = 3000
  return c
