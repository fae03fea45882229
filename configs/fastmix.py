"""FastMix: data-mixture search by gradient descent (arXiv 2606.14971),
against uniform, DoReMi, RegMix and an oracle.

  python -m experiments.fastmix --config=configs/fastmix.py:smoke

Part A (`synthetic`): our 4-source classifier (the target task, the
same labelling under shifted inputs, random labels, an unrelated labelling;
finite pools), a ReLU MLP; each search is one proxy run of `search_steps`
(RegMix: `num_proxies` of them), and every method's mixture then
trains a fresh model for `final_steps`, scored on the target's test set.

Variants:
  smoke    CI size (seconds): 2 seeds, tiny runs.
  default  our set-up: 5 seeds, 64 RegMix proxies of a quarter of
           the final budget, 64 oracle mixtures.
  paper    the paper's search scale: 512 RegMix proxies, 10 seeds, the
           released code's proxy LM (hidden 256, 2 layers, 8 heads) and a
           larger final LM (an accelerator's work: the Pile's 17 domains
           and a 1B model are out of reach; the LM part's sources stay
           synthetic).

FastMix's z learning rate (0.1) is larger than the released code's 1e-4:
that code updates z every 1000 steps of a 25B-token run; here a search has
a few dozen outer steps.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/fastmix.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 5
  c.checkpoint_every = 1
  c.keep_checkpoints = 1
  c.distributed = False

  f = c.fastmix = ml_collections.ConfigDict()
  f.n_inner = 20                 # inner steps per outer step (paper: ~20)
  f.z_lr = 0.1                   # Adam on z, betas (0.9, 0.95)
  f.beta = 0.2                   # L_target's training-loss weight (0.1-0.3)
  f.lam = 1e-5                   # entropy weight
  f.params = 'all'               # 'all' | 'head' (the released code)

  d = c.doremi = ml_collections.ConfigDict()
  d.eta = 1.0
  d.eps = 1e-3

  rm = c.regmix = ml_collections.ConfigDict()
  rm.num_samples = 100_000
  rm.top_k = 128

  q = c.claims = ml_collections.ConfigDict()
  q.max_noise = 0.1              # alpha of the random-label source
  q.min_useful = 0.6             # alpha_target + alpha_shifted
  q.regmix_tol = 0.02            # final loss <= RegMix (1 + tol)
  q.uniform_gain = 0.05          # and <= uniform (1 - gain)
  q.max_cost_ratio = 1 / 20      # FastMix / RegMix search cost

  a = c.synthetic = ml_collections.ConfigDict()
  a.dim = 20
  a.classes = 4
  a.teacher_width = 32
  a.teacher_scale = 3.0          # logit scale of the labelling functions
  a.pool_size = 2048             # examples per source
  a.shift = 2.0                  # S2's input mean shift (norm)
  a.shift_scale = 1.5            # and scale
  a.val_size = 2000
  a.test_size = 4000
  a.width = 64
  a.lr = 1e-3
  a.batch_size = 32              # per source and step
  a.outer_batch = 256            # FastMix's outer step: per source, and val
  a.search_steps = 750           # one proxy run (FastMix, DoReMi, RegMix)
  a.final_steps = 3000           # the final model's budget B
  a.chunk_size = 250
  a.rows_per_call = 0            # proxy / final rows trained at once (0: all)
  a.eval_every = 250             # target val/test loss (and at the end)
  a.num_proxies = 64             # RegMix proxies (each search_steps long)
  a.oracle_mixtures = 64         # Dirichlet mixtures trained final_steps

  b = c.lm = ml_collections.ConfigDict()
  b.length = 6                   # the target task: reverse 6 letters
  b.shift_length = 8             # the shifted source: reverse 8 letters
  b.pool_size = 512              # sequences per source
  b.val_size = 256
  b.test_size = 512
  b.proxy = ml_collections.ConfigDict(dict(
      d_model=32, num_heads=2, num_layers=1, d_ff=64))
  b.final = ml_collections.ConfigDict(dict(
      d_model=64, num_heads=4, num_layers=2, d_ff=128))
  b.lr = 3e-3
  b.batch_size = 8               # sequences per source and step
  b.outer_batch = 32             # sequences (per source, and val)
  b.search_steps = 400
  b.final_steps = 800
  b.chunk_size = 200
  b.rows_per_call = 0
  b.eval_every = 200
  b.num_proxies = 32
  b.oracle_mixtures = 8

  if variant == 'smoke':
    c.num_seeds = 2
    rm.num_samples = 2000
    rm.top_k = 16
    a.num_proxies = b.num_proxies = 8
    a.oracle_mixtures = b.oracle_mixtures = 2
    a.pool_size = 256
    a.val_size = a.test_size = 256
    a.width = 16
    a.search_steps = 40
    a.final_steps = 40
    a.chunk_size = 40
    a.eval_every = 40
    a.outer_batch = 32
    b.outer_batch = 8
    b.pool_size = b.val_size = b.test_size = 32
    b.proxy = ml_collections.ConfigDict(dict(
        d_model=8, num_heads=2, num_layers=1, d_ff=16))
    b.final = b.proxy
    b.search_steps = b.final_steps = b.chunk_size = b.eval_every = 20
  elif variant == 'paper':
    c.num_seeds = 10
    a.num_proxies = b.num_proxies = 512     # RegMix's proxy count
    # The released code's proxy (Llama config: hidden 256, 2 layers, 8
    # heads); the final model 4x wider in depth and width.
    b.proxy = ml_collections.ConfigDict(dict(
        d_model=256, num_heads=8, num_layers=2, d_ff=1024))
    b.final = ml_collections.ConfigDict(dict(
        d_model=512, num_heads=8, num_layers=8, d_ff=2048))
    b.pool_size = 16384
    b.batch_size = 32
    b.search_steps = 2000
    b.final_steps = 8000
    b.rows_per_call = 32       # memory: 5130 proxy rows in 161 groups
  return c
