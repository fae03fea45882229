"""Reinforcement learning: a pure, scan-compiled PPO core and two papers.

- Sampling Complexity of TD and PPO in RKHS, arXiv 2509.24991:
  `kernel_ppo` (NPG with a one-step kernel-TD critic, network and RKHS
  forms) on the clip-PPO core `ppo`.
- FGE: feasibility-guided exploration, arXiv 2602.15817: `fge` (the
  initial-condition sampler) with the samplers it is compared to
  (`curricula`: domain randomisation, PLR, RARL) on the parameter-robust
  avoid tasks of `reach`.

Shared pieces: `envs` (one pure interface over gymnax and Brax; those need
the `rl` extra), `rollout` (rollouts, GAE, observation normalisation),
`networks` and `distributions`.

Example:
    ```python
    import jax
    from iclrjax.rl import envs, kernel_ppo

    env = envs.make('CartPole-v1')     # gymnax: pip install 'iclrjax[rl]'
    # The documented defaults (kernel_ppo.default_config(): the release's
    # CartPole setting); any envs.Env works, Brax ones included.
    init, step = kernel_ppo.make_network(env)
    state = init(jax.random.PRNGKey(0), 0.5)  # step sizes Delta_k = k^-0.5
    step = jax.jit(step)
    for k in range(10):                 # 10 NPG iterations of 128 env steps
      state, metrics = step(state, k)
    print(float(metrics['return']), int(metrics['env_steps']))

    c = kernel_ppo.default_config()     # your own settings: edit a copy
    c.reward_scale = 0.1                # e.g. a softer softmax-of-Q policy
    init, step = kernel_ppo.make_network(env, c)
    ```
"""

from iclrjax.rl import curricula
from iclrjax.rl import distributions
from iclrjax.rl import envs
from iclrjax.rl import fge
from iclrjax.rl import kernel_ppo
from iclrjax.rl import networks
from iclrjax.rl import ppo
from iclrjax.rl import reach
from iclrjax.rl import rollout
from iclrjax.rl.curricula import (Sampler, domain_randomisation, make_trainer,
                                  plr, rarl, uniform_box)
from iclrjax.rl.envs import Env, EnvSpec, Step
from iclrjax.rl.envs import make as make_env
from iclrjax.rl.fge import feasibility_fn, fge_sampler, with_ablation
from iclrjax.rl.fge import train as train_fge
from iclrjax.rl.kernel_ppo import (AgentState, delta_schedule,
                                   kernel_td_closed_form, kernel_td_iterate,
                                   make_network, make_network_continuous,
                                   make_rkhs, npg_policy_step)
from iclrjax.rl.ppo import greedy_policy, make_ppo
from iclrjax.rl.reach import GymnaxTask, ReachEnv, ReachTask, make_task
from iclrjax.rl.rollout import gae

__all__ = [
    'curricula', 'distributions', 'envs', 'fge', 'kernel_ppo', 'networks',
    'ppo', 'reach', 'rollout',
    # environments
    'make_env', 'Env', 'EnvSpec', 'Step', 'make_task', 'ReachTask',
    'ReachEnv', 'GymnaxTask',
    # PPO core
    'make_ppo', 'greedy_policy', 'gae',
    # kernel PPO
    'make_network', 'make_network_continuous', 'make_rkhs', 'AgentState',
    'kernel_td_closed_form', 'kernel_td_iterate', 'npg_policy_step',
    'delta_schedule',
    # FGE and the curricula
    'train_fge', 'fge_sampler', 'feasibility_fn', 'with_ablation', 'Sampler',
    'make_trainer', 'domain_randomisation', 'uniform_box', 'plr', 'rarl',
]
