"""Uni-CoT's macro/micro chain of thought against the long chain ("Uni-CoT:
Towards Unified Chain-of-Thought Reasoning Across Text and Vision", arXiv
2508.05606) on the grid walk of iclrjax/lm/unicot.py.

  python -m experiments.unicot --config=configs/unicot.py:smoke

Task: a G x G grid, a start cell (the input's visual state: G row tokens),
M sub-goals "go <direction>", each T unit moves clipped at the border; a
micro step is [STEP, action, next state, eval] plus the state re-encoded; the
summary is the final state (exact-match). Training mixes M in
[train.min_subgoals, train.max_subgoals]; a `train.corrupt_fraction` of
every batch is the self-check view (states corrupted with probability
`train.corrupt_prob`, only the eval tokens trained). The Uni-CoT model and
the long chain get the same initialisation, batches, steps and tokens; only
the attention mask differs.

Variants:
  smoke    CI size (seconds): a 1-layer D=32 model, a few steps, tiny
           evaluation.
  default  4 x 4 grid, T = 2, trained on M in {2, 3}, tested on M = 3 and
           M = 5 (length generalisation); a 2-layer D=64 H=4 F=256 decoder,
           1000 steps of batch 32, Adam 3e-3; 3 seeds.
  paper    the same code at a larger scale for a GPU/TPU: 8 x 8 grid, T = 4,
           trained on M in {2 .. 4}, tested on M = 4 and 8; an 8-layer
           D=512 decoder (Uni-CoT itself fine-tunes the 7B BAGEL-MoT on 31K
           multimodal samples, which is out of reach here).

Pass criteria (the paper's Sec. 3 claims, arXiv 2508.05606, at our scale):
  mask   gradient probes (jit and not): exactly zero from a step-t row to
         step t - 2 and to earlier sub-goals' intermediates, non-zero to step
         t - 1's state and to z_i; the causal mask (control) leaks;
  cost   allowed (q, k) pairs grow within cost.window when M doubles, the
         causal mask's by more than cost.causal_min;
  short  on M = eval.short_subgoals the Uni-CoT model is within
         claims.max_short_gap of the long chain (untrained control);
  long   on M = eval.long_subgoals it is ahead by claims.min_long_gain
         (control: the same Uni-CoT weights under the causal mask);
  check  the self-check loop (R = eval.rounds, sampling at
         eval.temperature) adds claims.min_check_gain to the single pass;
         the always-ok checker and a blind checker at the learned FIX rate
         are the controls.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/unicot.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  c.task = ml_collections.ConfigDict(dict(grid=4, steps=2))
  c.model = ml_collections.ConfigDict(dict(
      d_model=64, num_heads=4, num_layers=2, d_ff=256, positions='rope',
      mlp='gelu', dtype='float32'))
  c.train = ml_collections.ConfigDict(dict(
      num_steps=1000, batch=32, learning_rate=3e-3, min_subgoals=2,
      max_subgoals=3, corrupt_fraction=0.25, corrupt_prob=0.3,
      chunk_size=250, micro_batch=0))
  c.eval = ml_collections.ConfigDict(dict(
      size=256, short_subgoals=3, long_subgoals=5, check_subgoals=5,
      rounds=4, temperature=1.0, per_call=0))   # walks per call (0: all)
  c.cost = ml_collections.ConfigDict(dict(
      subgoals=5, window=(1.9, 2.1), causal_min=3.5))
  c.claims = ml_collections.ConfigDict(dict(
      max_short_gap=0.02, min_long_gain=0.05, min_check_gain=0.05))
  c.log_every = 50
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 2
    c.task.grid = 3
    c.model = ml_collections.ConfigDict(dict(
        d_model=32, num_heads=2, num_layers=1, d_ff=64, positions='rope',
        mlp='gelu', dtype='float32'))
    c.train.num_steps = 6
    c.train.batch = 8
    c.train.chunk_size = 3
    c.eval.size = 4
    c.eval.check_subgoals = 3
    c.eval.long_subgoals = 3     # one layout: one compiled generation
    c.eval.rounds = 2
    c.log_every = 3
  elif variant == 'paper':
    c.task = ml_collections.ConfigDict(dict(grid=8, steps=4))
    c.model = ml_collections.ConfigDict(dict(
        d_model=512, num_heads=8, num_layers=8, d_ff=2048, positions='rope',
        mlp='swiglu', dtype='bfloat16'))
    c.train.num_steps = 20_000
    c.train.batch = 256
    c.train.learning_rate = 3e-4
    c.train.max_subgoals = 4
    c.train.chunk_size = 1000
    c.eval.size = 1024
    c.eval.short_subgoals = 4
    c.eval.long_subgoals = 8
    c.eval.check_subgoals = 8
    c.eval.per_call = 64       # memory: 64 walks at a time
    c.train.micro_batch = 32   # rows per accumulated gradient chunk
  return c
