"""The causal autoregressive buffer for transformer neural processes
("Efficient Autoregressive Inference for Transformer Probabilistic Models",
arXiv 2510.09477): GP meta-learning, held-out GP and diabetes tasks, and the
sampling cost against re-encoding.

  python -m experiments.arbuffer --config=configs/arbuffer.py:smoke

Training: GP function draws (RBF, lengthscale ~ U(0.2, 1), noise ~
logU(0.05, 1) per task, x ~ U(-2, 2)), N_c ~ U{3 .. 16} context points
(padded, masked), a buffer of K = 8 points and N_t = 16 targets (the first 8
in AR mode, the rest in set mode), one pass per batch (the paper's training
objective). Evaluation: held-out tasks with N_c in `eval.context_sizes` and
`eval.num_target` targets scored jointly by the buffer (one pass), the
re-encoding baseline (the same weights), the independent marginal and the
exact GP with the task's kernel; the same on scikit-learn's diabetes (BMI ->
progression) as a real meta-test. Speed: joint sampling of
`speed.num_target` targets given `speed.num_context` context points.

Variants:
  smoke    CI size (seconds): a tiny model, 30 steps, small evaluation.
  default  our CPU design: d_model 64, 4 layers, 4 heads, 5
           components, batch 64, 3000 Adam steps, 3 seeds.
  paper    AR-nanoTabPFN's trainer (`ar_tabpfn/configs/
           train_tabular_online.yaml`): d_model 128, 12 layers, d_ff 256,
           K = 32, 20 components, N_c = 64, N_t = 512, batch 64, lr 1e-3
           with 2000 warm-up steps, 20k steps, AdamW (0.9, 0.95), clip 1 (a
           GPU run; the paper's GP-task tables are not extracted).

Pass criteria: joint NLL per target of the
buffer within `eval.margin` nats of re-encoding and below the marginal NLL
on tasks with few context points; sampling >= `speed.min_ratio` x faster
than re-encoding.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/arbuffer.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  c.checkpoint_every = 1
  c.keep_checkpoints = 1
  c.distributed = False

  m = c.model = ml_collections.ConfigDict()
  m.d_model = 64
  m.num_heads = 4
  m.num_layers = 4
  m.d_ff = 128
  m.buffer_size = 8              # K
  m.num_components = 5

  d = c.data = ml_collections.ConfigDict()
  d.lengthscale = (0.2, 1.0)     # U(lo, hi)
  d.noise = (0.05, 1.0)          # log-uniform
  d.context_min = 3
  d.context_max = 16
  d.num_target = 16              # 2 K: half AR mode, half set mode

  t = c.train = ml_collections.ConfigDict()
  t.batch_size = 64
  t.num_steps = 3000
  t.lr = 3e-4
  t.warmup_steps = 200
  t.b2 = 0.999
  t.weight_decay = 0.0
  t.grad_clip = 1.0
  t.chunk_size = 500

  e = c.eval = ml_collections.ConfigDict()
  e.num_tasks = 256              # per context size
  e.context_sizes = (2, 4, 8)    # few context points
  e.num_target = 8               # scored jointly (<= K)
  e.margin = 0.05                # nats per target
  e.diabetes_context_sizes = (4, 8)
  e.plot_samples = 32

  s = c.speed = ml_collections.ConfigDict()
  s.num_context = 256
  s.num_target = 64
  s.num_samples = 16
  s.bucket = 8                   # re-encoding grows its sequence per bucket
  s.repeats = 5
  s.min_ratio = 5.0

  if variant == 'smoke':
    c.num_seeds = 2
    m.d_model, m.num_heads, m.num_layers, m.d_ff = 16, 2, 1, 32
    m.buffer_size, m.num_components = 4, 3
    d.context_max, d.num_target = 8, 8
    t.batch_size, t.num_steps, t.chunk_size, t.warmup_steps = 8, 30, 15, 5
    e.num_tasks, e.context_sizes, e.num_target = 16, (4,), 4
    e.diabetes_context_sizes, e.plot_samples = (4,), 4
    s.num_context, s.num_target, s.num_samples = 16, 8, 2
    s.bucket, s.repeats = 4, 2
  elif variant == 'paper':
    m.d_model, m.num_heads, m.num_layers, m.d_ff = 128, 4, 12, 256
    m.buffer_size, m.num_components = 32, 20
    d.context_min = d.context_max = 64
    d.num_target = 512
    t.batch_size, t.num_steps, t.lr = 64, 20_000, 1e-3
    t.warmup_steps, t.b2, t.chunk_size = 2000, 0.95, 1000
    e.num_target = 32
    e.context_sizes = (8, 16, 64)
    e.diabetes_context_sizes = (16, 64)
    s.num_context, s.num_target, s.num_samples = 1024, 256, 64
  return c
