"""Weak-to-strong generalization under spurious correlations (arXiv
2509.24005): the theory's Gaussian feature model and Enhanced-W2S on a
spurious-digits benchmark.

  python -m experiments.w2s --config=configs/w2s.py:smoke

Part A (`theory`): SFT of the teacher on n labelled points from D(eta_l), W2S
of the student on N teacher-labelled points from D(eta_u), exact excess risks
on D(eta_t), over the eta_u grid, beside the closed form
(`iclrjax/stats/w2s.py`); the control geometry gives the student the group
feature too (||mu_S|| = control_mu_s); the alignment sweep turns the
student's group frame towards the teacher's (and, as its control, by the
same angle away from both).
Part B (`digits`): `spurious_digits` (label 1{digit >= 5}, background
spurious), a small CNN teacher trained from scratch on n_l labelled digits,
a larger CNN student pre-trained on digit identity (random backgrounds),
frozen, whose linear head learns from the teacher's pseudolabels (vanilla
W2S) and is then retrained by Enhanced-W2S; the two mismatch settings
(eta_l, eta_u) = (eta_o, 0.5) and (0.5, eta_o), a group-balanced test set.

Variants:
  smoke    CI size (seconds): d_z = 8, 2 seeds, tiny training.
  default  our calibration at n = 4096 (gamma_T = 1/16), 5 seeds;
           82 s on 2 CPU cores (21d368b).
  paper    the paper's synthetic scale d_z = 2048 (d_T = 8192, n = N =
           32768: gamma_T = 1/4), one sweep point per phase, 10 seeds,
           longer digits training: 8.2 s per (point, seed) on one NVIDIA
           H200, ~40 min for the theory part (`benchmarks/w2s_paper_point`).

Pass criteria (default): the argmin over eta_u of the student's risk within
0.1 of eta_l (eta_l in {0.1, 0.3}); the risk non-decreasing in |eta_u -
eta_l| (5% tolerance) and >= 10% above its minimum at the far end; the W2S
gain at eta_u = eta_l falling with alignment, by >= 10% at align 0.9; the
simulation within 30% of the closed form everywhere; Enhanced-W2S above
vanilla W2S in >= 4 of 5 seeds in both digits settings.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/w2s.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 5
  c.checkpoint_every = 1
  c.keep_checkpoints = 1
  c.distributed = False
  c.data_dir = ''                # TFDS folder ('' : $TFDS_DATA_DIR or ~)

  t = c.theory = ml_collections.ConfigDict()
  t.d_z = 64                     # core features
  t.p = 6                        # group features
  t.p_t = 4                      # teacher: d_T = p_t d_z
  t.p_s = 2                      # student: d_S = p_s d_z
  t.mu_t = 4.0                   # ||mu_T|| / sigma_xi (teacher sees the group)
  t.control_mu_s = 4.0           # the control's ||mu_S|| (student sees it too)
  t.sigma_xi = 1.0
  t.sigma_y = 1.0
  t.n = 4096                     # labelled (gamma_T = d_T / n = 1/16)
  t.big_n = 16000                # pseudolabelled
  t.eta_t = 0.5
  t.eta_ls = (0.1, 0.3)
  t.eta_us = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
  t.aligns = (0.0, 0.5, 0.9)
  t.align_eta_l = 0.3
  t.argmin_tol = 0.1
  t.rise_tol = 0.05              # seed noise allowed in the monotone rise
  t.min_rise = 0.1               # far end >= (1 + min_rise) x the minimum
  t.min_align_drop = 0.1         # gain(align 0.9) <= (1 - drop) gain(0)
  t.closed_form_tol = 0.3
  t.points_per_phase = 0         # sweep points vmapped together (0: all)

  g = c.digits = ml_collections.ConfigDict()
  g.eta_o = 0.05                 # the benchmark's natural minority fraction
  g.num_pretrain = 800           # train digits for the student's backbone
  g.num_labelled = 100           # the teacher's labelled set (n)
  g.pretrain_steps = 1000
  g.teacher_steps = 300
  g.head_steps = 300
  g.batch_size = 64
  g.teacher_batch_size = 32
  g.lr = 3e-3
  g.head_lr = 1e-2
  g.teacher_widths = (4,)
  g.teacher_hidden = 16
  g.student_widths = (16, 32)
  g.student_hidden = 64
  g.min_wins = 4                 # of num_seeds, in both settings
  g.chunk_size = 100

  e = c.enhanced = ml_collections.ConfigDict()
  e.fraction = 0.5               # p: the lowest-entropy fraction kept
  e.q = 0.7                      # GCE
  e.labels = 'student'           # or 'teacher'
  e.grid_fractions = (0.3, 0.5, 0.8)   # reported beside the claim (p, q)
  e.grid_qs = (0.3, 0.7)

  if variant == 'smoke':
    c.num_seeds = 2
    t.d_z, t.n, t.big_n = 8, 256, 1024
    t.eta_us = (0.0, 0.1, 0.3, 0.5)
    t.aligns = (0.0, 0.9)
    g.num_pretrain, g.num_labelled = 400, 60
    g.pretrain_steps = g.teacher_steps = g.head_steps = 20
    g.chunk_size = 10
    g.student_widths, g.student_hidden = (8,), 16
    g.min_wins = 2
    e.grid_fractions, e.grid_qs = (0.3,), (0.7,)
  elif variant == 'paper':
    c.num_seeds = 10
    t.d_z = 2048
    t.n = 32768
    t.big_n = 32768
    t.points_per_phase = 1       # ~1.6 GB of features per (point, seed)
    g.pretrain_steps = 3000
    g.teacher_steps = g.head_steps = 1000
    g.min_wins = 8
  return c
