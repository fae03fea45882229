"""Intermediate vs late multimodal fusion and IID's regularisers
("Supporting Multimodal Intermediate Fusion with Informatic Constraint and
Distribution Coherence", ICLR 2026, OpenReview 5bxmmuRhO6).

  python -m experiments.fusion --config=configs/fusion.py:smoke

Tasks: (1) synthetic two-modality XOR: latent z ~ N(0, I_4), modality a a
random tanh network of (z1, z3), modality b one of (z2, z4) then b <- 5 b + 3
(incoherent marginals), label 1[z1 z2 > 0] (needs both modalities); the
control label 1[z1 + z2 > 0] is additive, so LF should not lose there. (2)
scikit-learn digits two-view: the top half of one image and the bottom half
(scaled like b) of another, label = parity of the sum of their digits (each
half alone is at chance). Models: LF, IF, IID (IF + informatic constraint +
sliced-Wasserstein cohering; a reconstruction, see iclrjax/multimodal/
fusion.py), IF with a second set of seeds (the noise control of the
cohering effect), and IF seeing modality a only. Full-batch AdamW.

Variants:
  smoke    CI size (seconds): tiny nets, 20 steps, 2 seeds.
  default  our CPU pilot design: encoders 16 -> 64 -> 8, fusion MLP
           64, LF heads 64-64, n_train in {200, 2000}, 2000 steps, lr 1e-3,
           5 seeds, 5000 XOR test points.
  paper    larger networks and longer training (the paper's own tasks,
           vision-language / RGB-D / multimodal KG, are not reproduced; its
           hyperparameters were not extracted).

Pass criteria (calibrated on a CPU pilot): XOR IF >= LF +
0.30 at both n_train and LF <= 0.60; digits: IF >= LF + eval.digits_margin;
the cohering effect reported as IID - IF over seeds with a 95% CI against
the reseeded-IF control.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/fusion.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 5
  c.checkpoint_every = 1
  c.keep_checkpoints = 1
  c.distributed = False

  m = c.model = ml_collections.ConfigDict()
  m.hidden = 64
  m.latent = 8
  m.rip_dim = 8                  # k of the RIP projection
  m.num_directions = 64          # sliced-Wasserstein directions per step
  m.informatic_weight = 0.1
  m.cohering_weight = 0.1

  x = c.xor = ml_collections.ConfigDict()
  x.dim = 16                     # features per modality
  x.b_scale = 5.0                # b <- b_scale b + b_shift
  x.b_shift = 3.0
  x.n_train = (200, 2000)
  x.n_test = 5000

  d = c.digits = ml_collections.ConfigDict()
  d.n_train = 2000               # image pairs drawn from the training images
  d.n_test = 2000
  d.test_fraction = 0.3          # images held out for the test pairs

  t = c.train = ml_collections.ConfigDict()
  t.num_steps = 2000
  t.lr = 1e-3
  t.weight_decay = 1e-4
  t.chunk_size = 500

  e = c.eval = ml_collections.ConfigDict()
  e.margin = 0.30                # XOR: IF >= LF + margin
  e.lf_max = 0.60                # XOR: LF <= lf_max
  e.digits_margin = 0.10         # digits: IF >= LF + digits_margin

  if variant == 'smoke':
    c.num_seeds = 2
    m.hidden, m.latent, m.rip_dim, m.num_directions = 16, 4, 4, 8
    x.n_train, x.n_test = (48, 96), 200   # full batches split over 8
    d.n_train, d.n_test = 100, 100
    t.num_steps, t.chunk_size = 20, 10
  elif variant == 'paper':
    m.hidden, m.latent, m.rip_dim, m.num_directions = 256, 64, 32, 256
    x.n_train, x.n_test = (200, 2000, 20_000), 20_000
    d.n_train, d.n_test = 20_000, 5000
    t.num_steps, t.chunk_size = 10_000, 1000
  return c
