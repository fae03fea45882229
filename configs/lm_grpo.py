"""SFT a small decoder on a synthetic task, then GRPO (the LM substrate).

  python -m experiments.lm_grpo --config=configs/lm_grpo.py:smoke

Variants:
  smoke    CI size (a 1-layer D=32 model, a few steps of each phase).
  default  a CPU calibration of GRPO (arXiv 2402.03300): 3-digit addition,
           a 2-layer D=64 H=4 F=256 decoder, SFT of batch 128 (AdamW 3e-3)
           until greedy exact-match on a 256-prompt probe set (checked
           every 10 steps) reaches 0.2 (at most 1500 steps; 600 gave ~0.19
           there), then 200 GRPO
           steps of 32 prompts x G=8 (Adam 1e-4, clip 0.2, beta_KL 0.02),
           3 seeds; the control is the same GRPO with every reward equal.
  paper    the same code at language-model scale for a GPU/TPU: d_model
           512, 8 layers, 8 heads, F=2048, SwiGLU, 1024-token context
           (retrieval over 300 two-letter keys), 64 prompts x G=16.

Pass criterion: GRPO raises greedy exact-match on the held-out prompts
above the SFT checkpoint's by at least `min_gain` on every seed; the control
(all rewards equal: zero advantages, only the KL term) must not.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in ('smoke', 'default', 'paper'):
    raise ValueError(f'Unknown variant {arg!r}: use smoke, default or paper '
                     '(e.g. --config=configs/lm_grpo.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  # Task (iclrjax/lm/tasks.py).
  c.task = 'addition'          # addition | copy | reverse | retrieval
  c.num_digits = 3             # addition
  c.reverse_answer = False     # addition: least significant digit first
  c.length = 6                 # copy / reverse
  c.num_pairs = 4              # retrieval
  c.key_len = 1                # retrieval: letters per key (26^key_len keys)
  c.eval_size = 512            # held-out prompts (one fixed set)
  # Model (iclrjax/lm/model.py).
  c.model = ml_collections.ConfigDict(dict(
      d_model=64, num_heads=4, num_layers=2, d_ff=256, max_len=16,
      positions='rope', mlp='gelu', dtype='float32'))
  # SFT.
  c.sft_steps = 1500           # at most: the probe usually stops it first
  c.sft_batch = 128
  c.sft_learning_rate = 3e-3
  c.sft_weight_decay = 0.0
  c.sft_target = 0.2           # a seed's SFT stops once its greedy probe
  c.probe_size = 256           # accuracy reaches this (GRPO needs 0.1-0.6;
  c.probe_every = 10           # its calibration started GRPO at 0.185)
  # GRPO (iclrjax/lm/grpo.py).
  c.grpo_steps = 200
  c.prompts_per_step = 32
  c.num_generations = 8
  c.grpo_learning_rate = 1e-4
  c.temperature = 1.0
  c.clip_eps = 0.2
  c.kl_beta = 0.02
  c.std_normalize = True
  c.adv_ddof = 1
  c.adv_eps = 1e-4
  c.loss_aggregation = 'sequence'
  c.num_inner_steps = 1
  c.micro_batch = 0            # rows per accumulated gradient chunk, SFT
                               # and GRPO (0: the whole batch at once)
  # Loop and records.
  c.chunk_size = 50
  c.log_every = 10
  c.checkpoint_every = 2
  c.keep_checkpoints = 2
  c.distributed = False
  # Claim.
  c.min_gain = 0.05            # exact-match points GRPO must add per seed
  if variant == 'smoke':
    c.num_seeds = 2
    c.num_digits = 1
    c.eval_size = 32
    c.probe_size = 16
    c.probe_every = 2
    c.model = ml_collections.ConfigDict(dict(
        d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=16,
        positions='rope', mlp='gelu', dtype='float32'))
    c.sft_steps = 20
    c.sft_batch = 32
    c.grpo_steps = 4
    c.prompts_per_step = 4
    c.num_generations = 4
    c.chunk_size = 10
    c.log_every = 5
  elif variant == 'paper':
    c.num_seeds = 3
    c.task = 'retrieval'
    c.num_pairs = 300          # prompt 1 + 900 + 3 tokens
    c.key_len = 2
    c.eval_size = 1024
    c.model = ml_collections.ConfigDict(dict(
        d_model=512, num_heads=8, num_layers=8, d_ff=2048, max_len=1024,
        positions='rope', mlp='swiglu', dtype='bfloat16'))
    c.micro_batch = 8          # 256 SFT rows, 64 x 16 completions per seed
    c.sft_steps = 20000
    c.sft_batch = 256
    c.sft_learning_rate = 3e-4
    c.sft_weight_decay = 0.1
    c.grpo_steps = 1000
    c.prompts_per_step = 64
    c.num_generations = 16
    c.grpo_learning_rate = 1e-6
    c.chunk_size = 100
    c.log_every = 10
  return c
