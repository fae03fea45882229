"""Token-Guard on a small LM that hallucinates on context-grounded multi-step
fact retrieval (experiments/token_guard.py).

  python -m experiments.token_guard --config=configs/token_guard.py:smoke

Variants:
  smoke    CI size: a 2-layer D=16 model, a few training steps, a handful
           of prompts, a 2 x 2 search.
  default  4 key -> 2-digit value bindings (keys in alphabetical order), 3
           queried keys (three answer segments of value + separator); a
           2-layer D=64 H=4 F=256 decoder trained (batch 128, AdamW 3e-3)
           until its greedy per-segment accuracy on 256 probe prompts
           reaches 0.5 (checked every 5 steps), 3 seeds; detection on 700
           temperature-1 answers (2,100 segments), decoding on 300
           held-out prompts: greedy, temperature 1, best-of-8 by
           log-prob, phi-decoding (2 beams x 2 rollouts, lambda_TG = 0),
           Token-Guard (lambda_TG = 2, refinement within a budget of 8x
           greedy's forward passes) and Token-Guard without the
           hidden-state terms.
  paper    the reference's scale for a GPU/TPU: a 16-layer D=1024 decoder,
           26 bindings (every letter) of 4-digit values behind shuffled
           keys, 5 queried keys, the reference's search (step_beams 4 x num_rollout 10).

Token-Guard's constants are the reference's `TokenGuardConfig` (lam 0.6,
tau_token 0.4, alpha/beta/gamma 0.5/0.3/0.2, tau_seg 0.55/0.75, tau_global
0.7, delta_tau 0.1, M_max 2, 3 retries at T 0.7 / top-p 0.9, lambda_TG 2,
selection temperature 0.3; rollouts at T 0.7 / top-p 0.95 and low-sigma
pruning at 0.8 as in guard/generation_utils.py and run_guard.py). The
reference's TF-IDF clustering and keyword /
length bonuses are text heuristics and are not used (see
iclrjax/lm/token_guard.py).

Pass criteria (ours, on the paper's measures): AUROC(F_seg) >= 0.70 and >= AUROC(segment
log-prob) + 0.02 on every seed; Token-Guard's hallucination rate <= 0.75x
greedy's and exact match >= greedy + 0.05 within 8x greedy's forward
passes on every seed; its exact-match gaps to phi-decoding and to the
likelihood-only ablation.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or 'default'
  if variant not in ('smoke', 'default', 'paper'):
    raise ValueError(f'Unknown variant {arg!r}: use smoke, default or paper '
                     '(e.g. --config=configs/token_guard.py:smoke)')
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_seeds = 3
  c.task = ml_collections.ConfigDict(dict(
      num_pairs=4, num_queries=3, value_len=2, shuffle_keys=False))
  c.model = ml_collections.ConfigDict(dict(
      d_model=64, num_heads=4, num_layers=2, d_ff=256, max_len=32,
      positions='rope', mlp='gelu', dtype='float32'))
  c.train = ml_collections.ConfigDict(dict(
      num_steps=400, batch_size=128, lr=3e-3, weight_decay=0.0,
      chunk_size=50, log_every=10, probe_every=5, probe_size=256,
      target=0.5, micro_batch=0))
  c.token_guard = ml_collections.ConfigDict(dict(
      lambda_val=0.6, tau_token=0.4, alpha=0.5, beta=0.3, gamma=0.2,
      tau_seg_low=0.55, tau_seg_high=0.75, tau_global=0.7, delta_tau=0.1,
      softmin_tau=0.1, tg_lambda=2.0, refine_temperature=0.7,
      refine_top_p=0.9, rollout_temperature=0.7, rollout_top_p=0.95,
      sigma_rate=0.8,
      select_temperature=0.3, m_max=2, max_retries=3, cutoff_back=2,
      step_beams=2, num_rollout=2))
  c.eval = ml_collections.ConfigDict(dict(
      detect_prompts=700, decode_prompts=300, best_of_n=8, temperature=1.0,
      search_budget=8.0, prompts_per_call=0,   # 0: every prompt at once
      min_auroc=0.70, auroc_margin=0.02, max_halluc_ratio=0.75,
      min_em_gain=0.05, max_passes_ratio=8.0, min_ablation_gap=0.01))
  c.checkpoint_every = 1
  c.keep_checkpoints = 2
  c.distributed = False
  if variant == 'smoke':
    c.num_seeds = 2
    c.model.update(d_model=16, num_heads=2, d_ff=32)
    c.train.update(num_steps=6, batch_size=16, chunk_size=3, log_every=3,
                   probe_every=3, probe_size=16)
    c.eval.update(detect_prompts=8, decode_prompts=4, best_of_n=2)
  elif variant == 'paper':
    c.task.update(num_pairs=26, num_queries=5, value_len=4,
                  shuffle_keys=True)   # every letter a key (26 at most)
    c.model = ml_collections.ConfigDict(dict(
        d_model=1024, num_heads=16, num_layers=16, d_ff=4096, max_len=256,
        positions='rope', mlp='swiglu', dtype='bfloat16'))
    c.train.update(num_steps=20000, batch_size=256, lr=3e-4,
                   weight_decay=0.1, chunk_size=500, probe_every=100,
                   probe_size=1024, target=0.6)
    c.token_guard.update(step_beams=4, num_rollout=10)
    c.eval.update(detect_prompts=5000, decode_prompts=2000, best_of_n=32,
                  prompts_per_call=8)   # memory: 8 prompts at a time
    c.train.micro_batch = 8    # rows per accumulated gradient chunk
  return c
