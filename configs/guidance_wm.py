"""Guidance watermarking for diffusion models (arXiv 2509.22126).

  python -m experiments.guidance_wm --config=configs/guidance_wm.py
  python -m experiments.guidance_wm --config=configs/guidance_wm.py:smoke --workdir=/tmp/gwm

Per seed (vmapped): trains a rectified-flow residual MLP on 8x8 digits and a
HiDDeN-style post-hoc watermark (encoder/decoder, M = 16 bits, identity +
Gaussian-noise augmentation only), freezes and whitens the decoder (on
held-out unguided generations by default; `whiten_on='real'` for real
digits, which leaves generated p-values miscalibrated), then samples with
Euler (50 steps) unguided and with watermark guidance in the last W steps
(W in `windows`; the paper: guidance over too few final steps is too weak),
Eq. 9 norm control over the whole PCGrad set (`budget='shared'`, the
paper's; 'per_task' gives every augmentation its own unit, so a 5-task set
moves the sample up to 5x as far), the gradient projected onto the clip
box, and the paper's completion x0 estimate ('complete'; 'tweedie' is the
one-step estimate). Post-hoc encoders, one trained at each strength of
`posthoc_strengths`, mark the same unguided generations: the baseline at
matched Frechet distance.

Variants:
  smoke    (CI, ~30 s) tiny nets, a few dozen training steps.
  default  (CPU, ~10-25 min) 3 seeds; generator 256 x 3 blocks, 3000 steps;
           decoder 1500 steps (one per post-hoc strength); windows 10 / 25 /
           40 of 50 x omega 2-32.
  paper    CIFAR-10 (32x32x3) from a local TFDS folder (prepare it elsewhere:
           `tfds build cifar10 --file_format=array_record`, then
           --config.data_dir); generator 2048 x 4 blocks, 100k steps;
           decoder M = 48 bits (Stable Signature's), 20k steps; 10k
           calibration and 2k guided samples per seed (a GPU run), the
           decoder called on 500 images at a time (decode_batch). The
           paper's generators are pretrained latent diffusion models (SD2,
           Sana, Flux) that cannot be downloaded here; the guidance rule,
           decoder, whitening and metrics are the same code.

Claims (experiments/guidance_wm.py, each with a control): (i) p-values of
unwatermarked generations uniform (KS p > 0.01, FPR at 1e-2 in [0.5%, 2%]);
(ii) identity guidance: bit accuracy >= 0.95; (iii) adding 1-pixel shifts to
the guidance raises bit accuracy under a shift attack by >= `shift_gain`
over identity guidance at the same FD (control: as many non-shift tasks,
`nonshift_augs`); (iv) the
classifier label is unchanged for >= 90% of samples; (v) FD to real digits
rises by <= 10%; (vi) guided reads more bits than post-hoc at the same FD,
without and under the shift attack.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/guidance_wm.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  c.dataset = 'digits'          # or 'cifar10' (read from data_dir)
  c.data_dir = ''
  # Generator: rectified flow, ResMLP velocity, AdamW + EMA (flow.make_trainer).
  c.gen_width = 256
  c.gen_blocks = 3
  c.gen_emb_dim = 64
  c.gen_train_steps = 3000
  c.gen_batch_size = 128
  c.gen_learning_rate = 1e-3
  # EMA (bias-corrected): horizon 1 / (1 - d) steps, ~10% of the run.
  c.gen_ema_decay = 0.997         # 333 of 3000 steps
  # Post-hoc watermark (HiDDeN-style), trained with identity + noise only.
  c.num_bits = 16
  c.dec_channels = 16
  c.dec_train_steps = 1500
  c.dec_batch_size = 128
  c.dec_learning_rate = 3e-3
  c.dec_noise_std = 0.1
  c.dec_image_weight = 0.1
  c.enc_strength = 0.2
  c.classifier_steps = 2000
  # Sampling and guidance.
  c.num_steps = 50
  c.windows = (10, 25, 40)            # guidance in the last W steps
  c.headline_window = 25
  c.budget = 'shared'                 # Eq. 9 over all tasks, or 'per_task'
  c.posthoc_strengths = (0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
  c.estimates = ('tweedie', 'complete')
  c.headline_estimate = 'complete'    # the paper's x0 estimate
  c.omegas = (2.0, 4.0, 8.0, 16.0, 32.0)
  c.headline_omega = 8.0
  c.eta = 1e-3                        # Eq. 9 norm floor
  c.tau = 1.0                         # element-wise clip of the gradient
  c.guidance_noise_std = 0.1
  c.base_augs = ('identity',)
  c.whiten_on = 'generated'           # or 'real' (see the claim evidence)
  c.clip_x0 = True                    # guidance sees the clipped image
  c.robust_augs = ('identity', 'shift_right', 'shift_left', 'shift_down',
                   'shift_up')
  # The control of the shift claim: as many tasks, none a shift.
  c.nonshift_augs = ('identity', 'noise', 'brightness', 'contrast', 'blur')
  c.shift_gain = 0.05
  c.num_calibration = 2000
  c.num_guided = 500
  c.decode_batch = 0                   # images per decoder call (0: all)
  c.steps_per_chunk = 1000
  c.log_every = 50
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 1
    c.gen_width = 32
    c.gen_blocks = 1
    c.gen_emb_dim = 16
    c.gen_train_steps = 30
    c.gen_batch_size = 32
    c.dec_channels = 8
    c.dec_train_steps = 30
    c.dec_batch_size = 32
    c.classifier_steps = 100
    c.num_steps = 8
    c.windows = (4,)
    c.headline_window = 4
    c.posthoc_strengths = (0.1, 0.2)
    c.estimates = ('tweedie',)
    c.headline_estimate = 'tweedie'
    c.omegas = (8.0,)
    c.num_calibration = 64
    c.num_guided = 16
    c.steps_per_chunk = 15
    c.log_every = 5
  elif variant == 'paper':
    c.dataset = 'cifar10'
    c.gen_width = 2048
    c.gen_blocks = 4
    c.gen_emb_dim = 256
    c.gen_train_steps = 100_000
    c.gen_learning_rate = 2e-4
    c.gen_ema_decay = 0.9999
    c.num_bits = 48               # Stable Signature's M
    c.dec_channels = 64
    c.dec_train_steps = 20000
    c.classifier_steps = 10000
    c.num_calibration = 10000
    c.num_guided = 2000
    c.omegas = (1.0, 2.0, 4.0, 8.0, 16.0)
    c.windows = (10, 25, 40)
    c.decode_batch = 500          # decoder calls of 3 x 500 images
  return c
