"""OFTSR: one-step flow super-resolution, tunable fidelity-realism (arXiv 2412.09465).

  python -m experiments.oftsr --config=configs/oftsr.py
  python -m experiments.oftsr --config=configs/oftsr.py:smoke --workdir=/tmp/oftsr

2x super-resolution of 8x8 digits from 4x4 (2x2 average pool, measurement
noise sigma_y = 0.3, nearest upsampling). Trains a noise-augmented
conditional rectified-flow teacher per sigma_p (0 and 0.1; L1 flow loss),
distils the sigma_p = 0.1 teacher into a one-step student with OFTSR's
losses (v_boot + 0.1 boundary + 0.01 alignment, RK2 midpoint teacher,
dt = 0.05), then scores PSNR vs HR and the Frechet distance (FD) to real
digits in a digits classifier's features at knob t in {0.01, ..., 0.99}.

Variants:
  smoke    (CI, ~30 s) tiny nets, a few dozen steps, one seed, only the
           sigma_p = 0.1 teacher.
  default  (CPU, ~10-15 min) residual MLP width 256 x 4 blocks; teachers
           2500 steps (Adam 1e-3), student 2000 steps (Adam 2e-4); 3 seeds;
           360 test digits x 5 degradations.
  paper    a larger MLP (512 x 6), 20k teacher and 10k student steps.

Pass criteria (gen.md 3.4 / issue 9): (i) PSNR(student t=0.99, teacher
32-step endpoint) >= 27 dB; (ii) PSNR(t=0.01) > PSNR(t=0.99) and
FD(0.99) <= 0.8 FD(0.01); (iii) FD(sigma_p=0 teacher) >= 1.5 FD(sigma_p=0.1
teacher); (iv) FD(student t=0.99) <= 0.2 FD(undistilled one-step jump).
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/oftsr.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  # Task.
  c.factor = 2                 # 8x8 HR from 4x4 LR
  c.sigma_y = 0.3              # LR measurement noise (the pilot's)
  c.sigma_ps = (0.0, 0.1)      # teachers' noise augmentation
  c.student_sigma_p = 0.1      # the teacher the student is distilled from
  # Network (nets.ResMLP on concat(x, y)).
  c.width = 256
  c.blocks = 4
  c.emb_dim = 64
  c.hidden_mult = 1
  # Training.
  c.batch_size = 128
  c.teacher_steps = 2500
  c.teacher_lr = 1e-3
  c.student_steps = 2000
  c.student_lr = 2e-4
  c.warmup_steps = 0
  c.grad_clip = 1.0
  c.ema_decay = 0.999
  # Distillation (the official defaults).
  c.t_min = 0.01
  c.t_max = 0.99
  c.dt = 0.05
  c.rk2_r = 0.5                # midpoint
  c.lambda_distill = 1.0
  c.lambda_boundary = 0.1
  c.lambda_align = 0.01
  # Evaluation.
  c.knob_ts = (0.01, 0.25, 0.5, 0.75, 0.99)
  c.teacher_eval_steps = 32
  c.num_eval = 360
  c.eval_draws = 5
  c.classifier_steps = 2000
  # Loop.
  c.steps_per_chunk = 500
  c.log_every = 50
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 1
    c.sigma_ps = (0.1,)        # one teacher: claim (iii) is not scored
    c.width = 32
    c.blocks = 1
    c.emb_dim = 16
    c.batch_size = 32
    c.teacher_steps = 20
    c.student_steps = 10
    c.knob_ts = (0.01, 0.5, 0.99)
    c.teacher_eval_steps = 4
    c.num_eval = 64
    c.eval_draws = 1
    c.classifier_steps = 200
    c.steps_per_chunk = 20
    c.log_every = 5
    c.checkpoint_every = 0     # only the final checkpoint
  elif variant == 'paper':
    c.width = 512
    c.blocks = 6
    c.hidden_mult = 2
    c.teacher_steps = 20_000
    c.student_steps = 10_000
    c.warmup_steps = 500
    c.ema_decay = 0.9999
    c.steps_per_chunk = 1000
  return c
