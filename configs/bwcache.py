"""BWCache: block-wise caching for diffusion transformers (arXiv 2509.13789).

  python -m experiments.bwcache --config=configs/bwcache.py
  python -m experiments.bwcache --config=configs/bwcache.py:smoke --workdir=/tmp/bwc

Trains an AdaLN-zero DiT on 8x8 digits per objective (rectified flow,
sampled by Euler; VP v-prediction, sampled by DDIM), then samples the same
noise uncached, with BWCache over a delta x R sweep, and with fewer uniform
steps at the block budget BWCache used; PSNR against the converged ODE
solution, Frechet distance to the data.

Variants:
  smoke    (CI, ~1 min) tiny DiT, a few training steps, the flow case.
  default  (CPU, ~30 min) DiT width 64 x 4 blocks, 1500 steps, 3 seeds; the
           flow, cfg (guidance 1.5) and vp_v cases; T in {20, 50}; deltas
           0.01-0.15; R = 10% of T; 256 noises; converged reference: 200
           Heun steps (flow, cfg) / 1000 DDIM steps (vp_v). `vp_eps` (the
           eps-prediction VP model) is a case too, but its 50-step DDIM is
           ~19 dB from its own converged solution, so it fails the
           convergence gate and no claim compares on it.
  paper    CIFAR-10 (32x32x3, 10 classes) from a local TFDS folder (prepare
           it elsewhere: `tfds build cifar10 --file_format=array_record`,
           then --config.data_dir), DiT-S/2 (width 384 x 12 blocks, 6
           heads, 256 tokens), 100k steps, 3 seeds, 512 noises; FD in fixed
           random-conv features. The paper's models are pretrained video
           DiTs of 1-13B parameters (not downloadable here); BWCache is
           training-free, so any trained DiT exercises the same algorithm.

Claims (experiments/bwcache.py), per case, made only where the uncached
sampler is within `min_uncached_psnr` dB of the converged solution: (i) the
paper's defaults (delta 0.15, R = 10% of T = 50): >= 1.5x fewer block
evaluations at a Frechet distance to the data within `fd_margin` of the
uncached sampler's and below that of fewer uniform steps at the same block
budget (control: that uniform sampler, which keeps FD within the margin
too); (ii) at T in num_steps, BWCache closer to
the converged ODE solution than fewer uniform steps at the same budget (the
paper's Table 3); (iii) at `binding_delta` the indicator rejects some of the
windows the schedule allows and places the rest better than the schedule
alone (control: the same number of windows at the first allowed steps).
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
  c.dataset = 'digits'          # or 'cifar10' (read from data_dir)
  c.data_dir = ''
  c.num_seeds = 3
  c.cases = ('flow', 'cfg', 'vp_v')
  c.num_steps = (20, 50)
  c.deltas = (0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.15)
  c.reuse_fractions = (0.1,)          # R = max(1, round(f T))
  c.headline_delta = 0.15             # the paper's defaults
  c.headline_reuse_fraction = 0.1
  c.headline_steps = 50
  c.binding_delta = 0.02              # below most steps' indicator at T = 50
  c.guidance = 1.5                    # CFG scale w of the cfg case
  c.label_dropout = 0.1
  c.reference_steps = 200             # Heun (velocity models)
  c.ddim_reference_steps = 1000       # DDIM (VP): first order, needs more
  c.fd_margin = 0.10
  c.min_uncached_psnr = 30.0          # dB to the converged solution
  c.timing_repeats = 5
  c.random_placements = 8             # per seed: (iii)'s control
  c.num_samples = 256
  c.classifier_steps = 2000           # the digits FD classifier
  c.patch = 2
  c.width = 64
  c.depth = 4
  c.heads = 4
  c.train_steps = 1500
  c.batch_size = 128
  c.learning_rate = 1e-3
  # EMA (bias-corrected): horizon 1 / (1 - d) steps, ~10% of the run.
  c.ema_decay = 0.995             # 200 of 1500 steps
  c.steps_per_chunk = 250
  c.log_every = 25
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 1
    c.cases = ('flow',)
    c.num_steps = (10,)
    c.headline_steps = 10
    c.deltas = (0.05, 0.15)
    c.binding_delta = 0.05
    c.reference_steps = 20
    c.ddim_reference_steps = 20
    c.timing_repeats = 1
    c.random_placements = 2
    c.num_samples = 16
    c.classifier_steps = 100
    c.width = 16
    c.depth = 2
    c.heads = 2
    c.train_steps = 20
    c.batch_size = 32
    c.steps_per_chunk = 10
    c.log_every = 5
  elif variant == 'paper':
    c.dataset = 'cifar10'
    c.num_seeds = 3
    c.num_samples = 512
    c.patch = 2
    c.width = 384
    c.depth = 12
    c.heads = 6
    c.train_steps = 100_000
    c.learning_rate = 1e-4     # DiT's AdamW lr
    c.ema_decay = 0.9999
  return c
