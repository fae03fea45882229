"""Parity fixture for kernel PPO (Zou et al., arXiv 2509.24991) from
conniemessi/TD-and-PPO-in-RKHS `main_discrete.py`.

The released code is the paper's network form (one MLP whose logits are
both the critic Q(s, .) and the softmax policy), not a kernel-TD critic, so
this runs its own objects on tiny random inputs:

  * one minibatch: `RKHS_NPG.compute_loss` (total loss and TD critic loss)
    and `Agent.training_npg` (the gradients and the parameters after its
    Adam step);
  * three consecutive `Agent.update_npg` calls (T epochs over a Memory of
    8 transitions in minibatches of `batchsize`, then the beta schedule
    k^schedule_pow and the old-network sync), recording beta, the current
    and old networks' logits before each update, the average TD loss and
    the logits after it;
  * `Runner.run_episode` on a stub environment that hits a time limit, to
    record which `done` the code stores there.

  python tests/parity/generate/kernel_ppo.py --ref <checkout>

gym and matplotlib are only used by the script's `main`; they are stubbed.
"""

import sys
import types

import _common
import numpy as np

for _name in ('gym', 'matplotlib', 'matplotlib.pyplot'):
  sys.modules.setdefault(_name, types.ModuleType(_name))

import torch  # noqa: E402

ARGS = _common.cli(__doc__)
_common.add_path(ARGS.ref)
import main_discrete as md  # noqa: E402

torch.set_num_threads(1)
STATE_DIM, ACTION_DIM = 4, 3
HP = dict(policy_params=20.0, entropy_coef=0.05, vf_loss_coef=1.0,
          batchsize=4, T=2, gamma=0.99, lam=0.95, learning_rate=1e-3,
          schedule_pow=-0.5)
N_UPDATE = 8          # transitions per update_npg call
NUM_UPDATES = 3
SEED = 0


def make_agent():
  torch.manual_seed(SEED)  # both agents get the same initial weights
  return md.Agent(STATE_DIM, ACTION_DIM, True, HP['policy_params'],
                  HP['entropy_coef'], HP['vf_loss_coef'], HP['batchsize'],
                  HP['T'], HP['gamma'], HP['lam'], HP['learning_rate'],
                  schedule_pow=HP['schedule_pow'])


def weights(prefix, module):
  """The current network's weights (torch layout: weight [out, in])."""
  return {f'{prefix}_{k.replace(".", "_")}': v.detach().numpy().copy()
          for k, v in module.state_dict().items()}


def draw_transitions(rng, n):
  dones = (rng.random(n) < 0.25).astype(np.float32)
  return dict(states=rng.normal(size=(n, STATE_DIM)).astype(np.float32),
              actions=rng.integers(0, ACTION_DIM, n),
              rewards=rng.normal(size=n).astype(np.float32),
              dones=dones,
              next_states=rng.normal(size=(n, STATE_DIM)).astype(np.float32))


def fill_memory(agent, tr):
  for i in range(len(tr['dones'])):
    agent.save_eps(tr['states'][i].tolist(), int(tr['actions'][i]),
                   float(tr['rewards'][i]), float(tr['dones'][i]),
                   tr['next_states'][i].tolist())


rng = np.random.default_rng(20250929)
out = {k: np.asarray(v) for k, v in HP.items()}
out['n_update'] = np.asarray(N_UPDATE)

# --- One minibatch: loss, TD critic loss, gradients, Adam step. ----------
agent = make_agent()
out.update(weights('init', agent.critic))
tr = draw_transitions(rng, HP['batchsize'])
out.update({f'mb_{k}': v for k, v in tr.items()})
fill_memory(agent, tr)
loader = torch.utils.data.DataLoader(agent.memory, HP['batchsize'],
                                     shuffle=False)
states, actions, rewards, dones, next_states = next(iter(loader))
with torch.no_grad():
  out['mb_old_logits'] = agent.critic_old(states).numpy()
  loss, critic_loss = agent.policy_loss.compute_loss(
      agent.actor(states), agent.actor_old(states), agent.critic(states),
      agent.critic_old(states), agent.critic(next_states), actions, rewards,
      dones)
  # The same TD loss with pi(.|s') as the expected-SARSA weights (what the
  # action_probs argument weights next_q_values with): our default target.
  _, critic_loss_next = agent.policy_loss.compute_loss(
      agent.actor(next_states), agent.actor_old(states),
      agent.critic(states), agent.critic_old(states),
      agent.critic(next_states), actions, rewards, dones)
out['mb_loss'] = np.asarray(loss.item())
out['mb_critic_loss'] = np.asarray(critic_loss)
out['mb_critic_loss_next_state_weights'] = np.asarray(critic_loss_next)
td = agent.training_npg(states, actions, rewards, dones, next_states)
assert abs(td - critic_loss) < 1e-6
out.update({f'mb_grad_{k.replace(".", "_")}': v.grad.numpy().copy()
            for k, v in agent.critic.named_parameters()})
out.update(weights('mb_after', agent.critic))

# --- Three update_npg calls: epochs, minibatches, beta schedule, sync. ---
agent = make_agent()
seq = {k: [] for k in ('states', 'actions', 'rewards', 'dones',
                       'next_states', 'beta', 'logits_before', 'old_logits',
                       'td_loss', 'logits_after')}
for k in range(NUM_UPDATES):
  tr = draw_transitions(rng, N_UPDATE)
  for name, v in tr.items():
    seq[name].append(v)
  seq['beta'].append(agent.policy_params)
  with torch.no_grad():
    seq['logits_before'].append(
        agent.critic(torch.from_numpy(tr['states'])).numpy())
    seq['old_logits'].append(
        agent.critic_old(torch.from_numpy(tr['states'])).numpy())
  fill_memory(agent, tr)
  agent.update_npg()
  seq['td_loss'].append(agent.td_error_losses[-1])
  with torch.no_grad():
    seq['logits_after'].append(
        agent.critic(torch.from_numpy(tr['states'])).numpy())
out.update({f'seq_{k}': np.asarray(v) for k, v in seq.items()})
out.update(weights('seq_final', agent.critic))


# --- Runner on a stub environment that truncates (never terminates). ----
class TimeLimitStub:
  """reset() -> (obs, info); step(a) -> (obs, r, terminated, truncated,
  info): a time limit after 3 steps, no termination."""

  def reset(self):
    self.t = 0
    return np.zeros(STATE_DIM, np.float32), {}

  def step(self, action):
    self.t += 1
    obs = np.full(STATE_DIM, 0.1 * self.t, np.float32)
    return obs, 1.0, False, self.t == 3, {}


agent = make_agent()
runner = md.Runner(TimeLimitStub(), agent, False, True, n_update=10**9)
runner.run_episode()
out['trunc_terminated'] = np.zeros(3, bool)
out['trunc_truncated'] = np.array([False, False, True])
out['trunc_stored_dones'] = np.asarray(agent.memory.dones, np.float32)

_common.write(
    'kernel_ppo', out, args=ARGS, repo='conniemessi/TD-and-PPO-in-RKHS',
    files=['main_discrete.py'],
    what=('RKHS_NPG.compute_loss (loss, TD critic loss), '
          'Agent.training_npg (grads, Adam step), three Agent.update_npg '
          'calls (beta schedule, epochs x minibatches, old-net sync), '
          'Runner.run_episode done flags at a time limit'),
    packages=('numpy', 'torch'),
    notes=('state_dim 4, action_dim 3, hidden 64 (fixed in SharedBase); '
           'hyper-parameters under the reference names; weights in torch '
           'layout (Linear weight [out, in]); seed 0 for torch, '
           'default_rng(20250929) for the inputs.'))
