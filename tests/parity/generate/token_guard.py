"""Token-Guard (rhq945/Token-Guard): the released scorer and the
phi-decoding step value, run on a tiny random GPT-2.

Runs, unchanged, from the checkout's guard/ folder:
  * token_guard_plugin.LatentEnvironment: initialize_anchor (h_x),
    verify_candidates (token scores, H_k, e~_k, |f|, F_seg),
    compute_chain_global_score (F_global, F_fact, F_logic),
    adjust_thresholds (the threshold shift) and check_refinement (the
    refinement flag);
  * generation_utils.TokenGuardGenerator.generate: the per-token mean
    log-probability of each sampled continuation (phi-decoding's step
    value, used by beam_search.process_step).

The LM is a randomly initialised 2-layer transformers.GPT2LMHeadModel
(float32, CPU, no weights downloaded) behind a one-character-per-token
tokenizer stub; the environment is built with object.__new__ (its __init__
loads a checkpoint). Every model output the release consumed is recorded
(hidden_states[-2], hidden_states[0], logits of each candidate row; logits
of each sampled row), so the fixture test feeds ours the same numbers.

Needs torch and transformers (tested with transformers 5.25.0):
  python tests/parity/generate/token_guard.py --ref <checkout>
"""

from __future__ import annotations

import numpy as np

import _common

SEED = 20260121
V, D = 12, 16                     # vocabulary, model width
ALPHABET = 'abcdefghijkl'         # token i <-> ALPHABET[i]
CTX = 'bcadgfeh'                  # the scorer's context (8 tokens)
CANDIDATES = ['kd', 'e', 'jabc', 'ffgh', 'ciaeb', 'dhhkla']
# The step value: layout [prompt 4 | segments of 3 tokens] x 3, at step k=1.
P, S, K, STEP = 4, 3, 3, 1
BEAMS, ROLLOUT = 2, 2
FLIP_F_SEG = -0.3


def main():
  args = _common.cli(__doc__)
  _common.add_path(args.ref, 'guard')
  import torch
  import transformers

  import generation_utils
  import token_guard_plugin as tgp

  rng = np.random.default_rng(SEED)
  torch.manual_seed(SEED)
  cfg = transformers.GPT2Config(
      vocab_size=V, n_positions=32, n_embd=D, n_layer=2, n_head=2,
      bos_token_id=None, eos_token_id=None, pad_token_id=0,
      initializer_range=0.3)
  model = transformers.GPT2LMHeadModel(cfg).eval()
  with torch.no_grad():   # a shared direction: cosines spread over (-1, 1)
    model.transformer.wpe.weight += torch.as_tensor(
        0.35 * rng.normal(size=D), dtype=torch.float32)

  class Tokenizer:
    """One character per token; no special tokens, no EOS (rows run to
    their length)."""
    pad_token_id = 0
    eos_token_id = None

    def encode(self, text, add_special_tokens=False):
      return [ALPHABET.index(c) for c in text]

    def __call__(self, text, return_tensors=None, truncation=False,
                 max_length=None):
      ids = torch.tensor([self.encode(text)])
      return transformers.BatchEncoding(
          {'input_ids': ids, 'attention_mask': torch.ones_like(ids)})

    def decode(self, ids, skip_special_tokens=True):
      return ''.join(ALPHABET[int(i)] for i in ids)

  tok = Tokenizer()

  # --- the scorer ---------------------------------------------------------
  env = object.__new__(tgp.LatentEnvironment)
  env.config = tgp.TokenGuardConfig(device='cpu')
  env.device = 'cpu'
  env.tokenizer = tok
  env.model = model
  env.current_threshold_adj = 0.0

  h_x = env.initialize_anchor(CTX)
  arts = env.verify_candidates(CTX, CANDIDATES, h_x)
  assert [a.text for a in arts] == CANDIDATES
  ctx_ids = tok(CTX).input_ids
  _, ctx_h, _ = env._get_model_outputs(ctx_ids)      # what the anchor saw
  n_max = max(len(c) for c in CANDIDATES)
  C, L = len(CANDIDATES), len(CTX) + n_max
  rows = np.zeros((C, L), np.int32)
  logits = np.zeros((C, L, V), np.float32)
  hid = np.zeros((C, L, D), np.float32)
  emb = np.zeros((C, L, D), np.float32)
  for i, c in enumerate(CANDIDATES):                  # what each score saw
    ids = tok(CTX + c).input_ids
    lg, hh, ee = env._get_model_outputs(ids)
    n = ids.shape[1]
    rows[i, :n] = ids[0].numpy()
    logits[i, :n], hid[i, :n], emb[i, :n] = lg[0], hh[0], ee[0]
  tok_scores = np.zeros((C, n_max), np.float32)
  for i, a in enumerate(arts):
    tok_scores[i, :len(a.token_scores)] = a.token_scores

  # Chains: every prefix of the candidates, the reversed order, and chains
  # with a constructed segment C (candidate 2 with H_k negated and F_seg
  # -0.3) that drives F_fact / F_logic below 0 (the 1e-8 floor and the
  # clip of F_global at 0).
  flip = tgp.CandidateSegment('', -arts[2].H_k, arts[2].e_tilde_k,
                              arts[2].f_norm, FLIP_F_SEG, [])
  pool = arts + [flip]
  order = [list(range(k)) for k in range(1, C + 1)]
  order += [list(range(C - 1, C - 1 - k, -1)) for k in range(2, C + 1)]
  order += [[C], [2, C], [0, C, 3], [C, 2, C]]
  chain_idx = np.full((len(order), C), -1, np.int32)
  chain_out = np.zeros((len(order), 3), np.float64)
  for j, o in enumerate(order):
    chain_idx[j, :len(o)] = o
    chain_out[j] = env.compute_chain_global_score([pool[i] for i in o])

  # The threshold shift on a grid (both strict bounds included) and on the
  # chains' own (F_fact, F_logic); the refinement flag on the candidates
  # and on F_seg values either side of each window edge, under each shift.
  grid = np.array([0.2, 0.45, 0.5, 0.55, 0.6, 0.65, 0.9])
  fl = np.concatenate([np.stack(np.meshgrid(grid, grid), -1).reshape(-1, 2),
                       chain_out[:, 1:]])
  adj = []
  for f_fact, f_logic in fl:
    env.adjust_thresholds(float(f_fact), float(f_logic))
    adj.append(env.current_threshold_adj)
  edges = np.array([0.45, 0.55, 0.65, 0.75, 0.85])
  f_seg = np.concatenate([[a.segment_score for a in arts],
                          (edges[:, None] + [-1e-4, 1e-4]).ravel(),
                          [0.3, 0.5, 0.6, 0.7, 0.8, 0.95]])
  shifts = np.array([0.1, 0.0, -0.1])
  flags = np.zeros((len(shifts), len(f_seg)), bool)
  for a_i, s in enumerate(shifts):
    env.current_threshold_adj = float(s)
    for j, f in enumerate(f_seg):
      seg = tgp.CandidateSegment('', None, None, 1.0, float(f), [0.5, 0.1])
      flags[a_i, j] = env.check_refinement(seg).needed

  # --- the step value -----------------------------------------------------
  gen = generation_utils.TokenGuardGenerator(model, tok)
  prompt = ''.join(ALPHABET[i] for i in rng.integers(0, V, P))
  prev = [prompt + ''.join(ALPHABET[i] for i in rng.integers(0, V, S * STEP))
          for _ in range(BEAMS)]
  L2 = P + S * K
  torch.manual_seed(SEED + 1)
  first, first_value = gen.generate(prev, n_return=ROLLOUT,
                                    max_new_tokens=L2 - len(prev[0]))
  first_rows = [prev[i // ROLLOUT] + t for i, t in enumerate(first)]
  # The completion call: each rollout's step k kept, the foresight redrawn.
  hi = P + S * (STEP + 1)
  comp, comp_value = gen.generate([r[:hi] for r in first_rows], n_return=1,
                                  max_new_tokens=L2 - hi)
  comp_rows = [r[:hi] + t for r, t in zip(first_rows, comp)]
  step_rows = np.array([tok.encode(r) for r in first_rows + comp_rows],
                       np.int32)
  assert step_rows.shape == (2 * BEAMS * ROLLOUT, L2)
  with torch.no_grad():                               # teacher-forced logits
    step_logits = model(torch.as_tensor(step_rows, dtype=torch.long)).logits

  _common.write('token_guard', dict(
      ctx_hidden=ctx_h[0].numpy(), h_x=h_x.numpy(),
      rows=rows, lengths=np.array([len(c) for c in CANDIDATES], np.int32),
      logits=logits, hidden=hid, embed=emb,
      token_scores=tok_scores,
      H_k=np.stack([a.H_k.numpy() for a in arts]),
      e_tilde=np.stack([a.e_tilde_k.numpy() for a in arts]),
      f_norm=np.array([a.f_norm for a in arts]),
      f_seg=np.array([a.segment_score for a in arts]),
      chain_idx=chain_idx, chain_global=chain_out,
      adj_inputs=fl, adj=np.array(adj),
      refine_f_seg=f_seg, refine_shift=shifts, refine_flags=flags,
      step_rows=step_rows, step_logits=step_logits.numpy(),
      step_value_first=np.array(first_value),
      step_value_completed=np.array(comp_value),
      layout=np.array([P, S, K, STEP], np.int32)),
      args=args, repo='rhq945/Token-Guard',
      files=['guard/token_guard_plugin.py', 'guard/generation_utils.py'],
      what=('LatentEnvironment.initialize_anchor, verify_candidates, '
            'compute_chain_global_score, adjust_thresholds, '
            'check_refinement; TokenGuardGenerator.generate (per-token '
            'mean log-prob of each sampled continuation)'),
      packages=('numpy', 'torch', 'transformers'),
      notes=('Random 2-layer GPT2LMHeadModel (V 12, D 16, float32, CPU) '
             'with a one-character tokenizer stub; LatentEnvironment built '
             'by object.__new__. Scorer: 6 candidates after an 8-token '
             'context; chains = prefixes, reversed, and chains with a '
             'constructed segment (index 6: candidate 2 with H_k negated, '
             'F_seg -0.3); threshold shift on a 7x7 grid of (F_fact, '
             'F_logic) plus the chains\' own; refinement flag on the '
             'candidates\' F_seg and values 1e-4 either side of each window '
             'edge, under shifts +0.1, 0, -0.1. '
             'Step value: 2 beams x 2 rollouts at step '
             'k=1 of [prompt 4 | 3 x 3 tokens]; first = the rollout from '
             'the beam (step + foresight), completed = the foresight '
             'redrawn after the step (beam_search.process_step). '
             'step_logits: teacher-forced model logits of those rows.'))


if __name__ == '__main__':
  main()
