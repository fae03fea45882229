"""Diffusion LMs as parallel samplers (arXiv 2512.25014) + ReMDM (2503.00307).

  python -m experiments.dlm --config=configs/dlm.py
  python -m experiments.dlm --config=configs/dlm.py:smoke --workdir=/tmp/dlm

Exact part (no training, < 5 s): `dlm.summary()` -- the one-hot expressivity
gap (no revision vs revision), CoT circuit simulation in depth + 1 rounds,
and the CoT footprint (size without remasking, width with it).
Learned part: an MDLM (linear schedule, 2-layer width-128 bidirectional
transformer, 16 tokens) trained on every valid string of a constrained
language, sampled with K in {2, 4, 8, 16} model calls by MDLM ancestral
sampling, ReMDM-loop (confidence-based sigma; the paper's loop defaults
t_on 0.55, t_off 0.05, alpha_on 0.9, eta 0.02) and a revision sampler;
the same samplers also run with the exact (oracle) denoiser of the language
as a reference.

Variants:
  smoke    (CI, < 1 min) one-hot only, K = 4, a tiny net, 30 steps.
  default  (CPU, ~15 min) one-hot and Latin squares, 3 seeds, 800 steps.
  paper    + exactly-2-ones, 3000 steps, 4096 samples per seed.

Pass criteria (gen.md 6.4): (i) the exact claims hold; (ii) MDLM validity
at K = 16 >= 0.95 (quality gate) on one-hot and Latin squares, and at
K = 4 ReMDM validity >= MDLM validity + 0.10 on both (margin not
calibrated by a pilot; kept as given).
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/dlm.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  c.languages = ('onehot', 'latin')
  c.exactk_k = 2
  c.samplers = ('mdlm', 'remdm', 'revise')
  c.num_steps = (2, 4, 8, 16)        # K = model calls
  c.headline_steps = 4               # K = n / 4
  c.gate_steps = 16                  # K = n
  c.gate_validity = 0.95
  c.margin = 0.10
  c.num_samples = 512
  c.remdm_eta = 0.02                 # ReMDM-loop defaults (remdm-loop.sh)
  c.remdm_t_on = 0.55
  c.remdm_t_off = 0.05
  c.remdm_alpha_on = 0.9
  c.revise_eta = 0.1
  c.conf = True
  c.width = 128
  c.depth = 2
  c.heads = 4
  c.train_steps = 800
  c.batch_size = 64
  c.learning_rate = 1e-3
  c.warmup_steps = 50
  c.ema_decay = 0.99
  c.t_min = 1e-3
  c.steps_per_chunk = 100
  c.log_every = 20
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 1
    c.languages = ('onehot',)
    c.num_steps = (4,)
    c.headline_steps = 4
    c.gate_steps = 4
    c.num_samples = 64
    c.width = 32
    c.heads = 2
    c.depth = 1
    c.train_steps = 30
    c.batch_size = 32
    c.warmup_steps = 5
    c.steps_per_chunk = 15
    c.log_every = 5
  elif variant == 'paper':
    c.languages = ('onehot', 'exactk', 'latin')
    c.train_steps = 3000
    c.batch_size = 128
    c.ema_decay = 0.999
    c.num_samples = 4096
    c.steps_per_chunk = 250
  return c
