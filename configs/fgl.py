"""Forest-based graph learning ("Forest-Based Graph Learning for
Semi-Supervised Node Classification", ICLR 2026, OpenReview 5asbtzIVpS):
homophily-biased spanning forests, the two-pass tree filter, and GCN / MLP
baselines on contextual SBM graphs and Zachary's karate club.

  python -m experiments.fgl --config=configs/fgl.py:smoke

Per setting (graph homophily h, feature SNR) and seed: one CSBM graph
(n nodes, 5 classes, average degree 6, d = 32, 20 labels per class, 500
validation nodes), an MLP, a 2-layer GCN and FGL with K trees per forest
drawn uniformly (w = 1), from the estimator (w = h_e ** beta, h_e from the
MLP, then refined `forest.rounds` times from FGL's own predictions), from
the shuffled estimator (the control) and from the true labels (the
oracle). Full-batch AdamW, test accuracy at the best validation step.

Variants:
  smoke    CI size (seconds): n = 150, 2 trees, 20 steps, 2 seeds.
  default  our CPU pilot: n = 2000, K = 8, beta = 4,
           200 steps (validation every 5), 5 seeds; h in {0.8, 0.6} at SNR 0.3 and h = 0.6 at
           SNR 0.6 (the FGL >= GCN gate).
  paper    Planetoid Cora with its public split (the files in
           `data.data_dir`; the paper's tables are not extracted), 10 seeds.

Pass criteria (calibrated on a CPU pilot): DP ==
path products < 1e-9 (float64); tree-edge homophily of uniform trees
within 0.02 of the graph's, estimator trees >= graph + 0.08, oracle >=
0.98; accuracy uniform < estimated < oracle on every seed; FGL-est >= GCN
at h = 0.6, SNR 0.6.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/fgl.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 5
  c.checkpoint_every = 1
  c.keep_checkpoints = 1
  c.distributed = False

  d = c.data = ml_collections.ConfigDict()
  d.dataset = 'csbm'               # or cora / citeseer / pubmed
  d.data_dir = '~/iclrjax_data/planetoid'
  d.num_nodes = 2000
  d.num_classes = 5
  d.dim = 32
  d.avg_degree = 6.0
  d.homophily = (0.8, 0.6, 0.6)    # one setting per (homophily, snr) pair
  d.snr = (0.3, 0.3, 0.6)
  d.train_per_class = 20
  d.num_val = 500
  d.karate = True
  d.karate_train_per_class = 3

  f = c.forest = ml_collections.ConfigDict()
  f.num_trees = 8                  # K
  f.sampler = 'kruskal'            # perturb-and-MAP; or 'wilson' (exact)
  f.beta = 4.0
  f.weight_floor = 0.05
  f.a_max = 0.9
  f.rounds = 2                     # estimator refinement rounds

  t = c.train = ml_collections.ConfigDict()
  t.hidden = 64
  t.dropout = 0.5
  t.lr = 1e-2
  t.weight_decay = 5e-4
  t.num_steps = 200
  t.chunk_size = 100
  t.eval_every = 5                 # steps between validation checks

  e = c.eval = ml_collections.ConfigDict()
  e.dp_nodes = 300
  e.dp_trees = 4
  e.dp_tol = 1e-9
  e.uniform_tol = 0.02
  e.est_margin = 0.08
  e.oracle_min = 0.98
  e.gate_homophily = 0.6
  e.gate_snr = 0.6
  e.cost_sizes = (1000, 4000, 16000)
  e.dense_sizes = (250, 500, 1000)
  e.max_slope = 1.3

  if variant == 'smoke':
    c.num_seeds = 2
    d.karate = False
    d.num_nodes, d.num_classes, d.dim = 150, 3, 8
    d.train_per_class, d.num_val = 5, 40
    d.homophily, d.snr = (0.8,), (0.3,)
    f.num_trees, f.rounds = 4, 1     # K trees split over the data axis
    t.hidden, t.num_steps, t.chunk_size, t.eval_every = 8, 20, 10, 2
    e.dp_nodes, e.dp_trees = 40, 2
    e.cost_sizes, e.dense_sizes = (200, 400), (50, 100)
    e.gate_homophily, e.gate_snr = 0.8, 0.3
  elif variant == 'paper':
    c.num_seeds = 10
    d.dataset = 'cora'
    d.karate = False
    f.num_trees = 16
    f.rounds = 3
  return c
