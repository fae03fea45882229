"""MARC ("Memory-Augmented RL Token Compression for Efficient Video
Understanding", arXiv 2510.07915): the Visual Memory Retriever and C-GRPO on
synthetic event videos (iclrjax/lm/marc.py).

  python -m experiments.marc --config=configs/marc.py:smoke

A video is T = 32 frames x P = 4 patch tokens (d = 16) with E = 5 events;
the query names one event, whose class (one of 8) is written into 2 of its
frames; the other 4 events are distractors (`video.num_distractors` of them
may carry other classes: with 2, the teacher did not learn to bind the class
to the queried event in 600 steps, its loss stayed at ln 3 per class token,
so the default has none). The teacher (a 2-layer
D = 64 decoder over 128 projected frame tokens + the query token) is trained
by SFT on full videos; the student starts from it and sees the VMR output:
top-3 retrieved clips merged down to one frame (P = 4 tokens). Arms at equal
steps from the teacher: no training, SFT on the compressed input, SFT on
4 randomly subsampled tokens (control), GRPO (accuracy + format reward),
C-GRPO (+ gated r_c, tau 0.6), C-GRPO ungated.

Variants:
  smoke    CI size (seconds): a 1-layer D = 16 model, a few steps.
  default  a CPU design of the paper's Sec. 3 set-up (arXiv 2510.07915), 3 seeds.
  paper    the paper's layout at a GPU size: 64 frames, 8 events, a
           D = 512 8-layer decoder, G = 8, 5K RL questions (the paper's
           student is Qwen2.5-VL-3B on real videos; not run here).

Pass criteria: segmentation F1 and top-3 recall >= 0.95; the untrained
student on the compressed input <= teacher - 15 points; random subsampling
>= 10 points below VMR (SFT students); C-GRPO >= 0.9 x teacher and >= GRPO -
1 point (mean of 3 seeds). Whether C-GRPO beats GRPO is a claim that may
fail; whether the ungated arm reward-hacks is reported in its evidence.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/marc.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  c.checkpoint_every = 1
  c.keep_checkpoints = 1
  c.distributed = False

  v = c.video = ml_collections.ConfigDict()   # lm/marc.py VideoConfig
  v.num_frames = 32
  v.num_patches = 4
  v.d_scene = 8
  v.d_attr = 8
  v.num_events = 5
  v.min_event_len = 4
  v.num_classes = 8
  v.attr_frames = 2
  v.attr_scale = 1.0
  v.num_distractors = 0          # distractor events that carry a class
  v.patch_jitter = 0.15
  v.frame_noise = 0.1
  v.query_noise = 0.8

  r = c.vmr = ml_collections.ConfigDict()     # lm/marc.py VMRConfig
  r.threshold = 0.5
  r.top_k = 3
  r.frames_per_segment = 1
  r.target_frames = 1

  c.model = ml_collections.ConfigDict(dict(
      d_model=64, num_heads=4, num_layers=2, d_ff=128, max_len=144,
      positions='rope', mlp='gelu', dtype='float32'))

  t = c.teacher = ml_collections.ConfigDict()
  t.steps = 300
  t.batch = 64
  t.learning_rate = 3e-3

  s = c.student = ml_collections.ConfigDict()
  s.steps = 150                  # every arm
  s.sft_batch = 64
  s.sft_learning_rate = 1e-3
  s.prompts_per_step = 16
  s.num_generations = 8          # G (the paper's)
  s.rl_learning_rate = 1e-3
  s.temperature = 1.0
  s.clip_eps = 0.2
  s.kl_beta = 0.02
  s.adv_eps = 1e-4
  s.alpha = 1.0                  # r_c = alpha * max(0, eta - tau)
  s.tau = 0.6
  s.format_weight = 0.5          # r_i = acc + format_weight * format

  e = c.eval = ml_collections.ConfigDict()
  e.size = 512
  e.per_call = 0                 # examples per greedy call (0: all)
  e.latency_batch = 64
  e.latency_repeats = 7

  k = c.claims = ml_collections.ConfigDict()
  k.min_f1 = 0.95
  k.min_recall = 0.95
  k.min_penalty = 0.15           # untrained student <= teacher - this
  k.min_random_gap = 0.10        # random subsampling <= VMR - this
  k.teacher_fraction = 0.9       # C-GRPO >= this x teacher
  k.grpo_margin = 0.01           # C-GRPO >= GRPO - this

  c.chunk_size = 100
  c.log_every = 20
  c.micro_batch = 0              # SFT rows per accumulated gradient chunk
  if variant == 'smoke':
    c.num_seeds = 2
    v.num_frames = 16
    v.num_events = 3
    c.model = ml_collections.ConfigDict(dict(
        d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=72,
        positions='rope', mlp='gelu', dtype='float32'))
    t.steps = 2
    t.batch = 8
    s.steps = 2
    s.sft_batch = 8
    s.prompts_per_step = 4       # divides the data axis of 8 devices
    s.num_generations = 4
    e.size = 16
    e.latency_batch = 4
    e.latency_repeats = 5
    c.chunk_size = 2
    c.log_every = 1
  elif variant == 'paper':
    v.num_frames = 64
    v.num_patches = 16
    v.d_scene = 16
    v.d_attr = 16
    v.num_events = 8
    v.min_event_len = 6
    v.num_classes = 16
    c.model = ml_collections.ConfigDict(dict(
        d_model=512, num_heads=8, num_layers=8, d_ff=2048, max_len=1040,
        positions='rope', mlp='swiglu', dtype='bfloat16'))
    c.micro_batch = 16
    t.steps = 20000
    t.batch = 128
    t.learning_rate = 3e-4
    s.steps = 5000 // 16
    s.sft_batch = 128
    s.prompts_per_step = 16
    s.rl_learning_rate = 1e-6
    e.size = 2048
    e.per_call = 64                # memory: 64 videos at a time
    c.chunk_size = 100
    c.log_every = 10
  return c
