"""Small decoder language models and the papers built on them.

- LM substrate: decoder with a KV cache (`model`), sampling (`sample`),
  SFT and GRPO (DeepSeekMath, arXiv 2402.03300; `grpo`) and synthetic
  tasks with exact scoring (`tasks`).
- TOKEN-GUARD: token-level hallucination control by self-checking
  decoding, arXiv 2601.21969: `token_guard`.
- MARC: memory-augmented RL token compression for video understanding,
  arXiv 2510.07915: `marc`.
- Uni-CoT: unified macro/micro chain-of-thought, arXiv 2508.05606:
  `unicot`.
- R-WoM: retrieval-augmented world model for computer-use agents,
  arXiv 2510.11892: `rwom`.

Example:
    ```python
    import jax
    import optax
    from iclrjax import lm
    from iclrjax.lm import grpo, tasks

    model = lm.Model(lm.Config(vocab_size=tasks.TOKENIZER.vocab_size,
                               d_model=32, num_layers=1, d_ff=64))
    params = model.init(jax.random.PRNGKey(0))
    batch = tasks.addition(jax.random.PRNGKey(1), batch=4, num_digits=1)
    out = lm.sample.sample(model, params, batch.prompt_BxP,
                           jax.random.PRNGKey(2), max_new_tokens=3)
    print(tasks.exact_match(out.tokens_NxT, batch.target_BxT))  # [4]

    cfg = grpo.GRPOConfig(num_generations=4, max_new_tokens=3,
                          stop_tokens=(tasks.EOS,))
    reward = lambda prompts, tokens, mask, target: tasks.exact_match(
        tokens, target)
    opt = optax.adam(1e-3)
    step = jax.jit(grpo.make_grpo_step(model, opt, reward, cfg))
    state, metrics = step(grpo.init_state(params, opt), params,
                          batch.prompt_BxP, batch.target_BxT,
                          jax.random.PRNGKey(3))
    print({k: float(v) for k, v in metrics.items()})
    ```
"""

from iclrjax.lm import grpo
from iclrjax.lm import marc
from iclrjax.lm import model
from iclrjax.lm import rwom
from iclrjax.lm import sample
from iclrjax.lm import tasks
from iclrjax.lm import token_guard
from iclrjax.lm import unicot
from iclrjax.lm.grpo import (GRPOConfig, TrainState, group_advantages,
                             init_state, make_grpo_step, make_sft_step,
                             policy_loss)
from iclrjax.lm.marc import (CGRPOConfig, VideoConfig, VisualLM, VMRConfig,
                             make_cgrpo_step, make_video)
from iclrjax.lm.model import Config, Model, causal_mask
from iclrjax.lm.rwom import drift, make_app, run_agent
from iclrjax.lm.sample import filter_logits, sequence_logprobs
from iclrjax.lm.tasks import (CharTokenizer, exact_match, make_task,
                              sft_sequences)
from iclrjax.lm.token_guard import TokenGuardConfig, foresight_search
from iclrjax.lm.unicot import layout, long_chain_mask, subgoal_mask

__all__ = [
    'grpo', 'marc', 'model', 'rwom', 'sample', 'tasks', 'token_guard',
    'unicot',
    # substrate
    'Config', 'Model', 'causal_mask', 'filter_logits', 'sequence_logprobs',
    'GRPOConfig', 'TrainState', 'init_state', 'group_advantages',
    'policy_loss', 'make_grpo_step', 'make_sft_step',
    'CharTokenizer', 'make_task', 'exact_match', 'sft_sequences',
    # papers
    'TokenGuardConfig', 'foresight_search',
    'VideoConfig', 'make_video', 'VMRConfig', 'VisualLM', 'CGRPOConfig',
    'make_cgrpo_step',
    'layout', 'subgoal_mask', 'long_chain_mask',
    'make_app', 'drift', 'run_agent',
]
