"""R-WoM's retrieval-augmented world model on a drifted app simulator ("R-WoM:
Retrieval-augmented World Model For Computer-use Agents", arXiv 2510.11892;
iclrjax/lm/rwom.py).

  python -m experiments.rwom --config=configs/rwom.py:smoke

App: a menu tree (branching 3, depth 3: home, 3 menus, 9 dialogs, 27
document states = goals) whose screens show 3 of 12 shared action names; v2
renames and moves items (3 moves to 1 rename) until 40% of the 27
procedures change. The tutorial
collection holds 3 tutorials per goal (v2 procedure, each with its own
example instance); a task's query carries an instance that only other goals'
tutorials share.

Variants:
  smoke    CI size (seconds): a 1-layer D=32 model, a few steps, 8 tasks.
  default  a 2-layer D=64 H=4 F=256 world model, 3000 steps of batch 64,
           Adam 3e-3, trained on v1 plus 64 training drifts (80% of the
           procedures changed, so most tutorial examples need reading); 200
           tasks, 3 seeds; horizons 1 and 3.
  paper    the same code at a larger scale for a GPU/TPU: branching 4, depth
           4 (256 goals), 32 names, a 6-layer D=384 model, 20k steps,
           1000 tasks (R-WoM itself prompts Claude-3.7 / Qwen2.5-VL-72B on
           OSWorld and WebArena, which is out of reach here).

Pass criteria (the paper's Sec. 4 claims, arXiv 2510.11892, at our scale):
  probe      without retrieval on v2, next-state identification >=
             claims.min_next_state while full-procedure alignment <=
             claims.max_alignment (control: the same probe on v1);
  grounding  success at horizon 3: oracle >= retrieved >= none +
             claims.min_grounding_gain (control: a distractor tutorial);
  horizon    success(h = 3) - success(h = 1) > 0 with retrieval and <= 0
             without (control: the none arm's difference);
  listwise   listwise >= absolute + claims.min_listwise_gain (reported;
             control: the random selector);
  retrieval  Recall@1 of rewrite + rerank >= raw dense +
             claims.min_recall_gain (control: rewrite + rerank by the
             untrained model).
"""

import ml_collections

VARIANTS = ('smoke', 'default', 'paper')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in VARIANTS:
    raise ValueError(f'Unknown variant {arg!r}: use one of {VARIANTS} '
                     '(e.g. --config=configs/rwom.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  c.app = ml_collections.ConfigDict(dict(
      branching=3, depth=3, num_names=12, num_instances=8, seed=0,
      drift_fraction=0.4, move_prob=0.75, tutorials_per_goal=3))
  c.model = ml_collections.ConfigDict(dict(
      d_model=64, num_heads=4, num_layers=2, d_ff=256, positions='rope',
      mlp='gelu', dtype='float32'))
  c.train = ml_collections.ConfigDict(dict(
      num_steps=3000, batch=64, learning_rate=3e-3, num_drifts=64,
      drift_fraction=0.8, kind_probs=(0.25, 0.25, 0.5), off_path_prob=0.2,
      invalid_prob=0.1, follow_prob=0.5,
      query_weight=0.5, chunk_size=500))
  c.eval = ml_collections.ConfigDict(dict(
      num_tasks=200, horizons=(1, 3), top_k=5,
      per_call=0))                # probe prompts per call (0: all)
  c.claims = ml_collections.ConfigDict(dict(
      min_next_state=0.85, max_alignment=0.65, min_grounding_gain=0.15,
      min_listwise_gain=0.01, min_recall_gain=0.10))
  c.log_every = 50
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 2
    c.model = ml_collections.ConfigDict(dict(
        d_model=32, num_heads=2, num_layers=1, d_ff=64, positions='rope',
        mlp='gelu', dtype='float32'))
    c.train.num_steps = 4
    c.train.batch = 8
    c.train.num_drifts = 2
    c.train.chunk_size = 2
    c.eval.num_tasks = 8
    c.log_every = 2
  elif variant == 'paper':
    c.app.branching = 4
    c.app.depth = 4
    c.app.num_names = 32
    c.app.num_instances = 32
    c.model = ml_collections.ConfigDict(dict(
        d_model=384, num_heads=6, num_layers=6, d_ff=1536, positions='rope',
        mlp='swiglu', dtype='bfloat16'))
    c.train.num_steps = 20_000
    c.train.batch = 256
    c.train.learning_rate = 3e-4
    c.train.num_drifts = 1024
    c.train.chunk_size = 1000
    c.eval.num_tasks = 1000
    c.eval.per_call = 1024     # memory: the probe's prompts in chunks
  return c
