"""SGD as a tempered posterior ("Almost Bayesian", arXiv 2503.22478): the
local learning coefficient estimator, late-stage sub-diffusion and posterior
concentration on two moons.

  python -m experiments.sgd_llc --config=configs/sgd_llc.py:smoke

Part A (`llc`): the LLC estimator of Lau et al. (beta = 1/log n, SGLD from
blackjax, chains vmapped) at the data's minimum of regular linear regression
(d = 10), a rank-deficient design (control), y = a b x at (a, b) = (1, 0),
the regular y = a x_1 + b x_2 (control) and a deep linear network (Aoyagi's
coefficient), `num_seeds` datasets each.
Part B (`moons`): `num_runs` ReLU MLPs 2-16-16-2 on sklearn's two moons,
constant-lr SGD, the late displacement fit after `warmup_steps`; SGLD of the
posterior (beta = 1, no localisation) from the same inits; LLC at every
endpoint; function-space k-means and the tempered cluster masses.

Variants:
  smoke    CI size (seconds): tiny chains, 8 runs of 300 steps.
  default  n = 4000 for the estimator (5 seeds); 64 moons runs of 5k + 10k
           steps (batch 64, noise 0.3); 87 s on 2 CPU cores (8d864ce).
  paper    our set-up: 200 runs, lr 0.05, batch 256, 5k warm-up + 20k
           late steps, n = 2000 (appendix G's exact values are not
           reproduced here), longer LLC chains.

Pass criteria (default): lambda_hat within 15% of d/2 = 5 (regular) and
within 0.15 of 1/2 (product model), each control outside; late alpha in
(0, 0.5) with r^2 > 0.95 and d_s <= lambda_hat in >= 80% of runs (early-window
control outside); mean LLC of SGD below SGLD's by 2 s.e.; held-out
KL(SGLD || tempered SGD) below KL(SGLD || raw SGD).
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/sgd_llc.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 5
  c.checkpoint_every = 1
  c.keep_checkpoints = 1
  c.distributed = False

  l = c.llc = ml_collections.ConfigDict()
  l.n = 4000                     # examples per calibration dataset
  l.d = 10                       # regular regression: lambda = d / 2
  l.rank = 5                     # the rank-deficient control's design rank
  l.product_a = 1.0              # y = a b x at (a, b) = (product_a, 0)
  l.dln_widths = (5, 4, 3, 5)    # input, hidden..., output
  l.dln_rank = 2
  l.num_chains = 8
  l.num_steps = 4000
  l.num_burnin = 1000
  l.batch_size = 256
  l.step_size = 5e-5             # blackjax's eps (the paper's SGLD step / 2)
  l.gamma = 10.0                 # localisation
  l.minimise_steps = 2000        # full-batch GD to the minimum w*
  l.minimise_lr = 0.1
  l.regular_tol = 0.15           # relative, regular model
  l.singular_tol = 0.15          # absolute, product model

  m = c.moons = ml_collections.ConfigDict()
  m.n = 2000
  m.noise = 0.3
  m.widths = (16, 16)
  m.lr = 0.05
  m.batch_size = 64
  m.warmup_steps = 5000          # t0: the late window starts here
  m.late_steps = 10000
  m.num_runs = 64
  m.chunk_size = 1000
  m.num_records = 40             # log-spaced displacement records per window
  m.early_window = 100           # control: fit over steps [1, early_window]
  m.late_window_start = 100      # fit over tau in [late_window_start, late]
  m.prior_precision = 1.0        # SGLD posterior's Gaussian prior
  m.llc_num_chains = 4
  m.llc_num_steps = 1000
  m.llc_num_burnin = 300
  m.llc_step_size = 1e-4
  m.llc_gamma = 10.0
  m.probe_grid = 30              # 30 x 30 probe points
  m.num_clusters = 4
  m.power_range = (0.01, 100.0)  # m D_xi of the mean-LLC cluster, scanned
  m.num_powers = 41
  m.r2_min = 0.95
  m.min_fraction = 0.8

  if variant == 'smoke':
    c.num_seeds = 2
    l.n, l.num_chains, l.num_steps, l.num_burnin = 500, 2, 200, 50
    l.minimise_steps = 100
    m.n, m.num_runs = 400, 8
    m.warmup_steps, m.late_steps, m.chunk_size = 100, 200, 100
    m.early_window, m.late_window_start = 20, 10
    m.num_records = 10
    m.llc_num_chains, m.llc_num_steps, m.llc_num_burnin = 2, 50, 10
    m.probe_grid, m.num_clusters = 8, 2
    m.num_powers = 9
  elif variant == 'paper':
    m.batch_size = 256
    m.warmup_steps, m.late_steps = 5000, 20000
    m.num_runs = 200
    m.llc_num_steps, m.llc_num_burnin = 4000, 1000
  return c
