"""Uni-CoT fixture: the released micro step's context, positions and mask.

Two sources in Fr0zenCrane/UniCoT:

1. `refine_image_with_cot` (inference_mdp_self_reflection.py), one micro
   step of the MDP self-reflection loop, run twice (two consecutive micro
   steps: the first edits the image, the second finds it good). It builds
   its context through BAGEL's own `prepare_prompts`, `prepare_vit_images`,
   `prepare_vae_images`, `prepare_start_tokens`, `prepare_vae_latent(_cfg)`
   (modeling/bagel/bagel.py), which assign the rotary positions. The model
   is a bare `Bagel` object (`object.__new__`, the attributes these methods
   read) behind a stand-in whose cache updates are no-ops and whose
   generate_text / generate_image return fixed tokens / zeros; the tokenizer
   is a stand-in mapping each text to a fixed number of ids. Recorded: every
   prepare_* call in order (micro step, name, rope in, tokens, first and
   last position, whether all its tokens share one position) and its
   positions (concatenated in call order; `trace_tokens` splits them).
2. `prepare_attention_mask_per_sample` (data/data_utils.py), BAGEL's
   per-sample training mask, for the splits of one micro step's context in
   our grid-walk layout: input (causal), sub-goal z_i (causal), the previous
   state as a conditioning image (full), the step (causal), with our
   segment lengths for a G x G grid.

Stubs: transformers, accelerate, safetensors, the Qwen2 / SigLIP / VAE
modules (modeling.bagel.qwen2_navit's NaiveCache, modeling_utils), the
image transforms (data.transforms: cv2 / torchvision). No random inputs:
what is compared is structural (the noise prepare_vae_latent draws is not
recorded).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

G = 4                 # grid side: a state is G tokens
VIT_PATCH = 14        # the image: start + (G - 2) patches + end = G tokens
IDS = dict(bos_token_id=1, eos_token_id=2, start_of_image=3, end_of_image=4)


class _Any:
  def __init__(self, *a, **k):
    pass

  def __call__(self, *a, **k):
    return _Any()


_stub = _common.stub


def _import_reference(ref: Path):
  import torch
  sys.path.insert(0, str(ref))
  _stub('transformers')
  _stub('transformers.configuration_utils', PretrainedConfig=object)
  _stub('transformers.modeling_utils', PreTrainedModel=torch.nn.Module)
  _stub('accelerate', infer_auto_device_map=_Any,
        load_checkpoint_and_dispatch=_Any, init_empty_weights=_Any)
  _stub('safetensors')
  _stub('safetensors.torch', load_file=_Any)

  class NaiveCache:
    def __init__(self, num_layers):
      self.num_layers = num_layers

  modeling = _stub('modeling')
  modeling.__path__ = [str(ref / 'modeling')]
  bagel_pkg = _stub('modeling.bagel')
  bagel_pkg.__path__ = [str(ref / 'modeling' / 'bagel')]
  _stub('modeling.bagel.qwen2_navit', NaiveCache=NaiveCache)
  _stub('modeling.bagel.modeling_utils', MLPconnector=_Any,
        TimestepEmbedder=_Any, PositionEmbedding=_Any)
  _stub('modeling.qwen2', Qwen2Tokenizer=_Any)
  _stub('modeling.autoencoder', load_ae=_Any)
  _stub('data.transforms', ImageTransform=_Any)
  import data.data_utils as data_utils        # the real BAGEL helpers
  import modeling.bagel.bagel as bagel        # the real Bagel class
  for k in ('BagelConfig', 'Bagel'):
    setattr(bagel_pkg, k, getattr(bagel, k))
  for k in ('Qwen2Config', 'Qwen2ForCausalLM', 'SiglipVisionConfig',
            'SiglipVisionModel'):
    setattr(bagel_pkg, k, _Any)
  path = ref / 'inference_mdp_self_reflection.py'
  spec = importlib.util.spec_from_file_location('unicot_inference', path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod, bagel, data_utils


def main():
  args = _common.cli(__doc__)
  import torch
  from PIL import Image
  mod, bagel, data_utils = _import_reference(args.ref.resolve())

  # A bare Bagel with what the prepare_* methods read.
  b = object.__new__(bagel.Bagel)
  torch.nn.Module.__init__(b)
  b.vit_patch_size = VIT_PATCH
  b.vit_max_num_patch_per_side = 70
  b.latent_downsample = 16
  b.max_latent_size = 64
  b.latent_channel = 16
  b.latent_patch_size = 2
  b.get_flattened_position_ids = data_utils.get_flattened_position_ids_extrapolate

  trace = []      # (micro step, name, rope in, tokens, first, last, shared)
  positions = []  # every call's positions (concatenated in the fixture)
  step = [0]
  POS_KEY = {'prepare_prompts': 'packed_text_position_ids',
             'prepare_start_tokens': 'packed_query_position_ids',
             'prepare_vae_latent_cfg': 'cfg_packed_position_ids'}
  NAMES = ['prepare_prompts', 'prepare_vit_images', 'prepare_vae_images',
           'prepare_start_tokens', 'prepare_vae_latent',
           'prepare_vae_latent_cfg']

  def recorded(name):
    fn = getattr(bagel.Bagel, name)

    def call(*a, **k):
      out = fn(b, *a, **k)
      gi = out[0] if isinstance(out, tuple) else out
      pos = gi[POS_KEY.get(name, 'packed_position_ids')].numpy()
      rope_in = k['curr_rope'][0] if 'curr_rope' in k else a[1][0]
      trace.append((step[0], NAMES.index(name), rope_in, len(pos),
                    int(pos[0]), int(pos[-1]), int(np.all(pos == pos[0]))))
      positions.append(pos.astype(np.int64))
      return out
    return call

  lengths = {}    # text -> number of ids (the tokenizer stand-in)
  replies = []    # what generate_text "writes", in order

  class Tokenizer:
    def encode(self, text):     # texts not listed (a prompt constant): 2
      return [10] * lengths.get(text, 2)

    def decode(self, ids):
      return replies.pop(0)

  class Model:
    config = types.SimpleNamespace(
        llm_config=types.SimpleNamespace(num_hidden_layers=1))

    def __getattr__(self, name):
      if name in NAMES:
        return recorded(name)
      raise AttributeError(name)

    def forward_cache_update_text(self, cache, **k):
      return cache
    forward_cache_update_vit = forward_cache_update_text

    def forward_cache_update_vae(self, vae, cache, **k):
      return cache

    def generate_text(self, **k):
      return torch.zeros(1, 1, dtype=torch.long)

    def generate_image(self, packed_init_noises, **k):
      return [torch.zeros_like(packed_init_noises)]

  class VAE:
    def decode(self, latent):
      n, c, h, w = latent.shape
      return torch.zeros(n, 3, h * 8, w * 8)

  prompt, think = 'a prompt', 'a plan'
  eval_text, edit, good = 'an evaluation', 'Edit: <sugg>x</sugg>', (
      'Everything is good')
  enhance_out = '<sugg>y</sugg>'
  lengths.update({mod.SYSTEM_PROMPT: 2, prompt: 2, think: 1,
                  eval_text: G + 1,     # wrapped in bos/eos: G + 3 tokens
                  edit: 3, good: 3, enhance_out: 2})
  wrap = lambda s: f'<|im_start|>{s}<|im_end|>'
  # Micro step 0: evaluate, find a problem, rewrite the suggestion, edit.
  replies += [wrap(eval_text), wrap(edit), wrap(enhance_out)]
  # Micro step 1: three evaluation rounds, all good.
  replies += [wrap(eval_text), wrap(good)] * 3

  mod.gen_model = Model()
  mod.tokenizer = Tokenizer()
  mod.new_token_ids = IDS
  mod.vae_model = VAE()
  mod.vit_transform = lambda img: torch.zeros(3, VIT_PATCH,
                                              VIT_PATCH * (G - 2))
  mod.vae_transform = lambda img: torch.zeros(3, 32, 32)
  torch.manual_seed(0)
  image = Image.fromarray(np.zeros((512, 512, 3), np.uint8))
  flags = []
  for k in range(2):
    step[0] = k
    image, _, modified = mod.refine_image_with_cot(
        image=image, prompt=prompt, think_text=think, max_length=8,
        device='cpu')
    flags.append(modified)
  assert flags == [True, False], flags
  assert not replies, replies

  # BAGEL's training mask for one micro step's context, our lengths.
  split_lens = [G + 2, 1, G, G + 3]
  modes = ['causal', 'causal', 'full', 'causal']
  m = data_utils.prepare_attention_mask_per_sample(split_lens, modes)
  mask = (m == 0).numpy()

  tr = np.asarray(trace, np.int64)
  _common.write('unicot', {
      'trace_step': tr[:, 0], 'trace_call': tr[:, 1],
      'trace_rope_in': tr[:, 2], 'trace_tokens': tr[:, 3],
      'trace_first': tr[:, 4], 'trace_last': tr[:, 5],
      'trace_shared': tr[:, 6],
      'trace_positions': np.concatenate(positions),
      'call_names': np.array(NAMES),
      'grid': np.int64(G), 'eval_tokens': np.int64(G + 3),
      'ctx_split_lens': np.asarray(split_lens, np.int64),
      'ctx_modes': np.array(modes), 'ctx_mask': mask,
  }, args=args, repo='Fr0zenCrane/UniCoT',
     files=['inference_mdp_self_reflection.py', 'modeling/bagel/bagel.py',
            'data/data_utils.py'],
     what=('refine_image_with_cot for two consecutive micro steps: every '
           'prepare_* call (rotary positions of texts, images, generation '
           'starts); prepare_attention_mask_per_sample for one micro '
           "step's context (input, z_i, previous state as an image, step)"),
     packages=('numpy', 'torch', 'pillow'),
     notes=(f'G = {G}; texts: SYSTEM 2 ids, prompt 2, think 1, evaluation '
            f'{G + 1} (bos/eos-wrapped: {G + 3} tokens = our step segment), '
            f'others 2-3; ViT image {VIT_PATCH}x{VIT_PATCH * (G - 2)} px '
            f'= {G - 2} patches + start/end = {G} tokens; trace_call '
            'indexes call_names'))


if __name__ == '__main__':
  main()
