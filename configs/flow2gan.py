"""Flow2GAN: endpoint flow matching + GAN fine-tuning (arXiv 2512.23278).

  python -m experiments.flow2gan --config=configs/flow2gan.py
  python -m experiments.flow2gan --config=configs/flow2gan.py:smoke --workdir=/tmp/f2g
  python -m experiments.flow2gan --config=configs/flow2gan.py:paper \
      --config.data_dir=/data/LibriTTS --workdir=/tmp/f2g_paper

Mel-conditioned waveform generation on synthetic harmonic clips (8 kHz,
0.5 s, exact-zero gaps, a quiet -30 dB high tone). Stage 1 trains four flow
matching generators (seeds vmapped): endpoint vs velocity estimation (both
with spectral-energy loss scaling), endpoint with plain MSE, and a
single-branch (Vocos-like) endpoint model at the multi-branch parameter
count. Stage 2 GAN-fine-tunes the endpoint teacher unrolled to 1 (and 2)
Euler steps, and fine-tunes it the same way on the mel L1 alone (the
mel-only control of (iii): adversarial and feature-matching weights 0).
Metrics on fixed test clips: LSD (overall, quiet bins), RMS in the silent
gaps, multi-resolution STFT loss.

Variants:
  smoke    (CI) the endpoint model only, tiny two-branch nets without
           ConvNeXt blocks, 0.13 s clips, a few steps, the GAN stage
           without its mel-only control, flat optimisers, 1 seed.
  default  (CPU, 14.5 min idle on 2 cores) branches (128,64)/(64,32)/
           (32,16), channels 48/32/24, 2 ConvNeXt layers, batch 8, 600 FM +
           100 GAN and 100 mel-only steps; 3 seeds.
  branches the default's endpoint multi- and single-branch models only, 16
           seeds: criterion (iv) as a paired 95% CI (~20 min busy).
  paper    the paper's 24 kHz sizes (3 branches 768/512/384 x 8 layers,
           100 mels, 1.5 s clips, batch 64; 92k FM + 110k GAN steps) on
           LibriTTS (dataset='libritts'): 24 kHz WAVs in a folder you give,
           --config.data_dir=DIR holding <subset>/<speaker>/<chapter>/*.wav
           (e.g. train-clean-100/ and test-clean/; nothing is downloaded,
           the launcher stops before any compute if DIR has no .wav files).
           Training cuts clips_per_file random 1.5 s segments per file of
           the training subsets (a fixed pool, drawn in epochs); the
           num_test evaluation clips come from test-* (else dev-*) subsets,
           else from the eval_fraction of files with the smallest name
           hash. The silent "gaps" of real speech are its mel_hop blocks
           quiet_db below the clip's loudest.

Pass criteria (issue): (i) at 2 Euler steps endpoint gives >= 2x lower
gap RMS than velocity, and lower LSD; (ii) spectral scaling lowers the
quiet-bin LSD by >= 10% vs plain MSE at equal steps; (iii) the 1-step GAN
generator's LSD <= the 4-step teacher's and < the mel-only-tuned 1-step
generator's (the 45x mel L1 is close to what LSD measures: the GAN terms
must add to it); (iv) multi-branch LSD < single-branch LSD at matched
parameters, as a paired 95% CI over seeds (the branches variant; "no
difference" when the CI covers 0).

Budget (fm_steps 600, 16 branch seeds). The default run at 3f70e19 took
868 s on an idle 2-core machine. At 14b389d the default run (300 FM
steps x 4 variants x 3 seeds, 100 GAN steps) took 1543 s on a busy 2-core
machine (935 s idle at 4cc4ef4) and the branches run (8 seeds) 374 s.
Timed per step on the same 2 cores under load (jit, 3 seeds vmapped): an
FM step 0.16 s (multi-branch) / 0.11 s (single-branch), so 0.59 s for the
four variants; a GAN step 3.1 s (compile 106 s); a mel-only step 0.23 s
(compile 71 s); an evaluator ~6 s to compile, < 1 s to run. These add up
to ~850 s for the 14b389d default, whose load was thus ~1.8x the timing's:
scaled by it, the mel-only stage adds ~170 s and each FM step ~1.07 s, so
600 FM steps bring the default to ~2040 s (34 min; ~21 min at the idle
rate). The branches run at the timing's rates: ~215 s of FM (8 seeds x 300
steps) and ~100 s of compiles and evaluation, ~1.2x less than its 374 s;
at 16 seeds x 600 steps its FM work is 4x, ~1130 s (19 min) at the 374 s
run's load; 24 seeds would be ~27 min.
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'branches', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/flow2gan.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  # Stage-1 variants (see experiments/flow2gan.py FM_VARIANTS) and GAN step counts.
  c.fm_variants = ('endpoint', 'velocity', 'endpoint_mse', 'single')
  c.gan_num_steps = (1,)
  c.gan_stages = ('gan', 'melonly')   # the GAN and its mel-only control
  c.eval_steps = (1, 2, 4)
  c.headline_steps = 2          # claims (i), (ii), (iv)
  c.teacher_steps = 4           # claim (iii)
  # Data: 'synthetic' (harmonic clips drawn in the step) or 'libritts'
  # (WAVs at data_dir/<subset>/<speaker>/<chapter>/*.wav).
  c.dataset = 'synthetic'
  c.data_dir = ''
  c.eval_fraction = 0.05        # held out by name hash without test-*/dev-*
  c.clips_per_file = 1          # training segments cut from each file
  # Audio.
  c.sample_rate = 8000
  c.clip_length = 4000
  c.mel_n_fft = 256
  c.mel_hop = 64
  c.n_mels = 32
  # Generator.
  c.n_ffts = (128, 64, 32)
  c.hops = (64, 32, 16)
  c.channels = (48, 32, 24)
  c.num_layers = 2
  c.kernel = 7
  c.hidden_factor = 3
  c.cond_channels = 32
  c.cond_layers = 2
  c.time_dim = 32
  c.single_n_fft = 256          # Vocos: n_fft = 4 hop
  c.single_hop = 64
  c.single_channels = 0         # 0: match the multi-branch parameter count
  # Flow matching.
  c.noise_scale = 0.1
  c.branch_dropout = 0.05
  c.loss_n_fft = 256
  c.loss_hop = 64
  c.loss_n_filters = 64
  c.loss_power = 0.5
  c.fm_steps = 600              # 300 until 14b389d; cost: module docstring
  c.batch_size = 8
  c.learning_rate = 2e-3
  c.warmup_steps = 200          # a third of the run, as 100 of 300 were
  c.b1 = 0.9
  c.b2 = 0.99
  c.grad_clip = 1.0
  # Each optimiser on its parameters raveled into one vector (optax.flatten):
  # the same updates (the clip norm summed in another order), the GAN step
  # compiles ~2x faster. Off in every variant but smoke (the recorded runs
  # ran per leaf).
  c.flat_optimizer = False
  # EMA (bias-corrected): horizon 1 / (1 - d) steps, ~10% of each run.
  c.ema_decay = 0.985           # FM: 67 of 600 steps
  # GAN.
  c.gan_steps = 100
  c.disc_warmup = 20
  c.gan_ema_decay = 0.97        # 33 of the generator's 80 steps
  c.gen_lr = 2e-4
  c.disc_lr = 1e-3
  c.mel_noise = 0.2
  c.periods = (2, 3, 5)
  c.mp_channels = (8, 16, 32, 32)
  c.mr_n_ffts = (64, 128, 256)
  c.mr_channels = 8
  c.mel_loss_n_ffts = (32, 64, 128, 256, 512)
  c.mel_loss_n_mels = (5, 10, 20, 40, 80)
  c.gan_weights = ml_collections.ConfigDict(dict(
      adv_mp=1.0, adv_mr=0.1, fm_mp=1.0, fm_mr=0.1, mel=45.0, disc_mp=1.0,
      disc_mr=0.1))
  # Evaluation.
  c.test_seed = 12345
  c.num_test = 64
  c.eval_batch = 32
  c.lsd_n_fft = 256
  c.quiet_db = -40.0
  c.steps_per_chunk = 100
  c.log_every = 10
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 1
    c.flat_optimizer = True
    c.fm_variants = ('endpoint',)
    c.eval_steps = (1,)
    c.headline_steps = 1
    c.teacher_steps = 1
    c.gan_stages = ('gan',)      # the mel-only run is the same program with
                                 # the discriminators off (unit-tested)
    c.n_ffts = (128, 64)         # two branches: the smallest multi-branch
    c.hops = (64, 32)            # generator (each branch adds ~20% compile)
    c.channels = (8, 8)
    c.num_layers = 0             # no ConvNeXt blocks (-30% compile; the
                                 # blocks are unit-tested)
    c.cond_channels = 8
    c.cond_layers = 1
    c.time_dim = 8
    c.fm_steps = 4
    c.gan_steps = 2
    c.disc_warmup = 0            # the generator moves at step 1 (its
                                 # first update has lr 0: GANSettings)
    c.batch_size = 8             # divides 8 devices (the data axis)
    c.clip_length = 1024         # 0.13 s: the -O0 test build runs a GAN
                                 # step in 0.8 s instead of 2.8 s
    c.warmup_steps = 1
    c.periods = (2,)
    c.mp_channels = (4, 4)
    c.mr_n_ffts = (64,)
    c.mr_channels = 4
    c.mel_loss_n_ffts = (32, 64)
    c.mel_loss_n_mels = (5, 10)
    c.num_test = 4
    c.eval_batch = 4
    c.steps_per_chunk = 2
    c.log_every = 2
  elif variant == 'branches':
    c.num_seeds = 16
    c.fm_variants = ('endpoint', 'single')
    c.gan_num_steps = ()
    c.eval_steps = (2,)
    c.teacher_steps = 2
  elif variant == 'paper':
    c.dataset = 'libritts'      # set --config.data_dir
    c.gan_num_steps = (1, 2)
    c.sample_rate = 24000
    c.clip_length = 36000       # 1.5 s segments
    c.mel_n_fft = 1024
    c.mel_hop = 256
    c.n_mels = 100
    c.n_ffts = (512, 256, 128)
    c.hops = (256, 128, 64)
    c.channels = (768, 512, 384)
    c.num_layers = 8
    c.cond_channels = 512
    c.cond_layers = 4
    c.time_dim = 512
    c.single_n_fft = 1024
    c.single_hop = 256
    c.loss_n_fft = 1024
    c.loss_hop = 256
    c.loss_n_filters = 256
    c.fm_steps = 92_000
    c.batch_size = 64
    c.learning_rate = 2e-4
    c.warmup_steps = 1000
    c.gan_steps = 110_000
    c.ema_decay = 0.999
    c.gan_ema_decay = 0.999
    c.disc_warmup = 1000
    c.periods = (2, 3, 5, 7, 11)   # the release's multi-period discriminator
    c.mp_channels = (32, 128, 512, 1024, 1024)
    c.mr_n_ffts = (512, 1024, 2048)
    c.mr_channels = 32
    c.mel_loss_n_ffts = (32, 64, 128, 256, 512, 1024, 2048)
    c.mel_loss_n_mels = (5, 10, 20, 40, 80, 160, 320)
    c.num_test = 256
    c.lsd_n_fft = 1024
    c.steps_per_chunk = 1000
    c.log_every = 100
  return c
