"""Uni-CoT's micro-step context, mask and positions against the release.

The fixture (generate/unicot.py) runs `refine_image_with_cot`
(Fr0zenCrane/UniCoT inference_mdp_self_reflection.py:190-441) for two
consecutive micro steps and records the rotary positions BAGEL's prepare_*
methods (modeling/bagel/bagel.py:231-641, 866-885) give every text, image
and generation start; and BAGEL's per-sample mask
(`prepare_attention_mask_per_sample`, data/data_utils.py:72-103) for one
micro step's context in our layout: input, z_i, the previous state (a
conditioning image, 'full'), the step (causal), with our segment lengths.

Ours: `unicot.subgoal_mask` on `unicot.layout(M=2, T=2, G=4)`, at micro
step c = 4 (sub-goal 2, step 2), whose context is the input, z_2, the
re-encoded state of step c - 1 and its own segment; positions: the
decoder's default, the token's index 0..L-1 (iclrjax/lm/model.py Decoder;
`generate` writes the cache at the token's index).

What matches: the step rows over their context (every earlier context
token, causal within the step), the input and z_i rows, nothing outside
the context, consecutive positions within a step's text. Deliberate
differences (iclrjax/lm/unicot.py module docstring; a later issue may
redesign): the release restarts every micro step at position 0 in a fresh
context (inference_mdp_self_reflection.py:213-215), ours continues one
sequence; BAGEL gives a whole image one position (bagel.py:339-342,
461-464), ours one per state token; a re-encoded state here is causal and
reads only the input, BAGEL's conditioning image is bidirectional and reads
every earlier split.
"""

import functools

import numpy as np

from iclrjax.lm import unicot
from tests.parity import common

PAPER = ('Uni-CoT: Towards Unified Chain-of-Thought Reasoning Across Text '
         'and Vision (arXiv 2508.05606)')
FIXTURE = 'unicot'
M, T, SUBGOAL, STEP = 2, 2, 2, 2          # micro step c = (2 - 1) 2 + 2 = 4


@functools.lru_cache(maxsize=None)
def _setup():
  f, _ = common.load(FIXTURE)
  G = int(f['grid'])
  lay = unicot.layout(M, T, G)
  c = (SUBGOAL - 1) * T + STEP
  role, chain, sub = lay.role, lay.chain, lay.subgoal
  parts = [np.flatnonzero(role == unicot.R_INPUT),
           np.flatnonzero((role == unicot.R_PLAN) & (sub == SUBGOAL)),
           np.flatnonzero((role == unicot.R_STATE) & (chain == c - 1)),
           np.flatnonzero((role == unicot.R_STEP) & (chain == c))]
  assert [len(p) for p in parts] == list(f['ctx_split_lens'])
  ctx = np.concatenate(parts)
  mask = np.asarray(unicot.subgoal_mask(lay))
  ends = np.cumsum([0] + [len(p) for p in parts])
  rows = {k: slice(ends[i], ends[i + 1])
          for i, k in enumerate(('input', 'plan', 'state', 'step'))}
  # The release's calls, split per call.
  off = np.cumsum(np.concatenate([[0], f['trace_tokens']]))
  pos = [f['trace_positions'][a:b] for a, b in zip(off[:-1], off[1:])]
  names = [str(f['call_names'][i]) for i in f['trace_call']]
  pos_ours = np.arange(len(lay.role))       # the decoder's default
  prev = np.flatnonzero((role == unicot.R_STEP) & (chain == c - 1))
  return dict(f=f, G=G, lay=lay, c=c, parts=parts, ctx=ctx, mask=mask,
              rows=rows, pos=pos, names=names, pos_ours=pos_ours,
              prev_step=prev)


def _eval_context(s, k):
  """Positions of micro step k's evaluation context, as the release builds
  it: the three texts, the image, the start, the fed-back evaluation."""
  idx = [i for i, st in enumerate(s['f']['trace_step']) if st == k][:6]
  return [s['pos'][i] for i in idx], [s['names'][i] for i in idx]


def _checks(s) -> list[common.Check]:
  f, G, mask, ctx, rows = s['f'], s['G'], s['mask'], s['ctx'], s['rows']
  theirs = f['ctx_mask']
  ours = mask[np.ix_(ctx, ctx)]
  step_rows = s['parts'][3]
  outside = np.setdiff1d(np.arange(mask.shape[1]), ctx)
  # A state row, if it were BAGEL's image: causal within, and not z_i.
  st, pl = rows['state'], rows['plan']
  as_ours = theirs[st].copy()
  as_ours &= np.tril(np.ones_like(theirs, bool))[st]
  as_ours[:, pl] = False
  # Positions.
  ctx0, names0 = _eval_context(s, 0)
  ctx1, _ = _eval_context(s, 1)
  assert names0 == ['prepare_prompts'] * 3 + [
      'prepare_vit_images', 'prepare_start_tokens', 'prepare_prompts']
  ours_step = s['pos_ours'][step_rows]
  ours_prev = s['pos_ours'][s['prev_step']]
  images = [p for p, n in zip(s['pos'], s['names'])
            if n in ('prepare_vit_images', 'prepare_vae_images',
                     'prepare_vae_latent')]
  after = [s['pos'][i + 1][0] - s['pos'][i][0]
           for i, n in enumerate(s['names'][:-1]) if n == 'prepare_vit_images'
           and s['f']['trace_step'][i] == s['f']['trace_step'][i + 1]]
  ours_state = s['pos_ours'][s['parts'][2]]
  return [
      common.check("mask: a micro step's rows over its context (input, "
                   'z_i, state t-1: all; own step: causal)',
                   ours[rows['step']], theirs[rows['step']], 0),
      common.check('mask: input and z_i rows within the context (causal)',
                   ours[:rows['plan'].stop], theirs[:rows['plan'].stop], 0),
      common.Check('mask: step rows attend to no key outside their context '
                    '(theirs: a fresh context holds nothing else)',
                    float(mask[np.ix_(step_rows, outside)].sum()), 0),
      common.check('deliberate: state rows causal and blind to z_i (ours) '
                   'where a conditioning image is bidirectional and reads '
                   'every earlier split (theirs)', ours[st], as_ours, 0),
      common.Check(
          'deliberate: positions restart at 0 in a fresh context per micro '
          'step (theirs: shift 0 between steps) where ours continue one '
          f'sequence (shift 2G + 3 = {2 * G + 3})',
          max(float(ctx0[0][0]),
              max(common.max_diff(a, b) for a, b in zip(ctx1, ctx0)),
              abs(float(ours_step[0] - ours_prev[0]) - (2 * G + 3))), 0),
      common.Check(
          'deliberate: an image takes one position (theirs: span 0, next '
          f'+1) where a state takes G = {G} (ours: span G - 1)',
          max(max(float(p.max() - p.min()) for p in images),
              max(abs(a - 1.0) for a in after),
              abs(float(ours_state[-1] - ours_state[0]) - (G - 1))), 0),
  ]


def checks() -> list[common.Check]:
  return _checks(_setup())


def test_matches_reference():
  common.assert_checks(checks())


def test_deliberate_differences_are_real():
  s = _setup()
  cs = checks()
  common.assert_checks([c for c in cs if c.quantity.startswith('deliberate')])
  # Ours really differs: its state rows are not BAGEL's image rows, its
  # micro steps do not restart, and its states span G positions.
  st = s['rows']['state']
  ours = s['mask'][np.ix_(s['ctx'], s['ctx'])]
  assert (ours[st] != s['f']['ctx_mask'][st]).any()
  step = s['pos_ours'][s['parts'][3]]
  ctx0, _ = _eval_context(s, 0)
  assert step[0] > ctx0[5][0] and step[0] != s['pos_ours'][s['prev_step']][0]
  assert np.ptp(s['pos_ours'][s['parts'][2]]) == s['G'] - 1
