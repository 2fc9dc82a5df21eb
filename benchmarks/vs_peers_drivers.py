"""Small drivers that `vs_peers.py` runs inside a peer's own venv, written against each peer's public API.

    <peer venv>/bin/python benchmarks/vs_peers_drivers.py torchrl --env CartPole-v1 --seed 1 --steps 100000 \\
        --target 450 --hyperparams '{"n_envs": 8, ...}'

Only the standard library is imported at the top: each function imports its peer's packages, so this file is
importable in every peer's venv (RL Zoo imports `sb3_stop_at_average` by name through its `callback`
hyperparameter). Every driver prints the same line once the average return of the last 100 training episodes
reaches the target (`SOLVED_LINE`), then stops: the work sf_hydra's `train_until_avg_return` does.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

WINDOW = 100  # training episodes averaged, as sf_hydra's logger.stats_avg
SOLVED_LINE = "vs_peers: solved at {steps} env steps, {window}-episode average {average:.2f}"


def solved_line(steps: int, average: float) -> str:
    """The line each driver prints when it stops at the target; vs_peers.py reads the steps from it."""
    return SOLVED_LINE.format(steps=steps, window=WINDOW, average=average)


# ----------------------------------------------------------------------------- Stable-Baselines3 (through RL Zoo)


def sb3_stop_at_average(target: float):
    """An SB3 callback (its `BaseCallback` API) that ends `learn()` once the model's own buffer of the last 100
    training episodes (`ep_info_buffer`, filled by SB3's Monitor wrapper, unnormalized returns) is full and
    averages `target`. RL Zoo builds it from `-params callback:...`; it is checked after every vector step."""
    from stable_baselines3.common.callbacks import BaseCallback

    class StopAtAverage(BaseCallback):
        def _on_step(self) -> bool:
            episodes = self.model.ep_info_buffer
            if episodes is None or len(episodes) < WINDOW:
                return True
            average = sum(e["r"] for e in list(episodes)[-WINDOW:]) / WINDOW
            if average < target:
                return True
            print(solved_line(self.model.num_timesteps, average), flush=True)
            return False

    return StopAtAverage()


# ----------------------------------------------------------------------------- TorchRL


def _schedule(value, progress_left: float) -> float:
    """An RL Zoo hyperparameter at a point of training: `lin_X` decays linearly from X to 0 (progress_left 1 -> 0),
    a number stays."""
    if isinstance(value, str) and value.startswith("lin_"):
        return float(value[4:]) * progress_left
    return float(value)


def _torchrl_env(env_id: str, n_envs: int, seed: int):
    """n_envs copies of the gymnasium env stepped in this process (gymnasium's sync vector env, as SB3's
    DummyVecEnv), with TorchRL's episode-return and step-count transforms."""
    import gymnasium as gym
    from torchrl.envs import Compose, GymWrapper, RewardSum, StepCounter, TransformedEnv

    vector = gym.make_vec(env_id, num_envs=n_envs, vectorization_mode="sync",
                          vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED})  # TorchRL resets
    env = TransformedEnv(GymWrapper(vector), Compose(RewardSum(), StepCounter()))
    env.set_seed(seed)
    return env


def _torchrl_modules(env, hidden: int = 64):
    """SB3's MlpPolicy shape: separate actor and critic, two hidden layers of 64, tanh."""
    import torch
    from tensordict.nn import TensorDictModule
    from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator

    n_obs = env.observation_spec["observation"].shape[-1]
    n_actions = env.action_spec.shape[-1]
    actor_net = MLP(in_features=n_obs, out_features=n_actions, num_cells=[hidden, hidden],
                    activation_class=torch.nn.Tanh)
    actor = ProbabilisticActor(TensorDictModule(actor_net, in_keys=["observation"], out_keys=["logits"]),
                               in_keys=["logits"], spec=env.action_spec, distribution_class=OneHotCategorical,
                               return_log_prob=True)
    critic_net = MLP(in_features=n_obs, out_features=1, num_cells=[hidden, hidden], activation_class=torch.nn.Tanh)
    return actor, ValueOperator(critic_net, in_keys=["observation"])


def torchrl_ppo(env_id: str, seed: int, steps: int, target: float | None, hp: dict) -> None:
    """PPO from TorchRL's parts (Collector, GAE, ClipPPOLoss, a replay buffer sampled without replacement), run
    with an RL Zoo entry's hyperparameters (`hp`: one without `normalize`) and SB3's defaults for those it leaves
    out (64x64 tanh actor and critic, value coefficient 0.5, gradient norm 0.5, advantages normalized, Adam eps
    1e-5); stops at `target`."""
    import torch
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    torch.manual_seed(seed)
    n_envs, n_steps = int(hp.get("n_envs", 1)), int(hp.get("n_steps", 2048))
    batch_size, n_epochs = int(hp.get("batch_size", 64)), int(hp.get("n_epochs", 10))
    frames_per_batch = n_envs * n_steps
    env = _torchrl_env(env_id, n_envs, seed)
    actor, critic = _torchrl_modules(env)
    advantage = GAE(gamma=float(hp.get("gamma", 0.99)), lmbda=float(hp.get("gae_lambda", 0.95)),
                    value_network=critic, average_gae=False)
    loss = ClipPPOLoss(actor, critic, clip_epsilon=_schedule(hp.get("clip_range", 0.2), 1.0),
                       entropy_coeff=float(hp.get("ent_coef", 0.0)), critic_coeff=float(hp.get("vf_coef", 0.5)),
                       loss_critic_type="l2", normalize_advantage=True)
    optimizer = torch.optim.Adam(loss.parameters(), lr=_schedule(hp.get("learning_rate", 3e-4), 1.0), eps=1e-5)
    buffer = ReplayBuffer(storage=LazyTensorStorage(frames_per_batch), sampler=SamplerWithoutReplacement(),
                          batch_size=batch_size)
    collector = Collector(env, actor, frames_per_batch=frames_per_batch, total_frames=steps)
    returns: collections.deque = collections.deque(maxlen=WINDOW)
    done_steps = 0
    for batch in collector:
        done_steps += batch.numel()
        done = batch["next", "done"].squeeze(-1)
        returns.extend(batch["next", "episode_reward"].squeeze(-1)[done].tolist())
        if target is not None and len(returns) == WINDOW and sum(returns) / WINDOW >= target:
            print(solved_line(done_steps, sum(returns) / WINDOW), flush=True)
            break
        left = max(0.0, 1.0 - (done_steps - frames_per_batch) / steps)
        for group in optimizer.param_groups:
            group["lr"] = _schedule(hp.get("learning_rate", 3e-4), left)
        loss.clip_epsilon.fill_(_schedule(hp.get("clip_range", 0.2), left))
        with torch.no_grad():
            advantage(batch)
        buffer.extend(batch.reshape(-1))
        for _ in range(n_epochs):
            for _ in range(frames_per_batch // batch_size):
                parts = loss(buffer.sample())
                total = parts["loss_objective"] + parts["loss_critic"] + parts.get("loss_entropy", 0.0)
                optimizer.zero_grad()
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), float(hp.get("max_grad_norm", 0.5)))
                optimizer.step()
        collector.update_policy_weights_()
        print(f"vs_peers: {done_steps} env steps, {len(returns)} episodes averaging "
              f"{sum(returns) / max(len(returns), 1):.1f}", flush=True)
    collector.shutdown()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("driver", choices=["torchrl"])
    p.add_argument("--env", required=True, help="a gymnasium id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, required=True, help="env steps at most (the schedules' horizon)")
    p.add_argument("--target", type=float, default=None, help="stop once the last 100 episodes average this")
    p.add_argument("--hyperparams", type=json.loads, default={}, help="the RL Zoo entry, as JSON")
    args = p.parse_args(argv)
    torchrl_ppo(args.env, args.seed, args.steps, args.target, args.hyperparams)


if __name__ == "__main__":
    sys.exit(main())
