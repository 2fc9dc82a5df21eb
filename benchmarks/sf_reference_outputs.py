"""What a Sample Factory 2.1.1 run's policy computes, computed by Sample Factory itself: run with the Sample
Factory venv's python (the same as benchmarks/vs_sample_factory.py sets up):

    ~/.cache/sf_hydra/peers/sf_venv/bin/python benchmarks/sf_reference_outputs.py RUN --steps 64 --out outputs.npz
    ~/.cache/sf_hydra/peers/sf_venv/bin/python benchmarks/sf_reference_outputs.py RUN --episodes 30 --out score.json

RUN is a Sample Factory experiment folder (config.json, checkpoint_p0/). With --steps it plays one env for
that many steps with the policy (sampled actions, the recurrent state carried and zeroed after each episode's
end) and saves, per step, the raw observation (`obs__<key>`), the action logits and the value Sample Factory's
actor-critic computed for it, and whether the episode ended after the step (`dones`): the reference
tests/sample_factory/test_import_run.py holds our imported policy to. With --episodes it plays that many episodes as
Sample Factory's enjoy does (sampled actions) and writes their returns (the env's reward, before the learner's
reward_scale) and mean/std as JSON. Its envs: gym ids (sf_examples.train_gym_env's registration, any gymnasium
id) and Doom (sf_examples.vizdoom). Nothing here is sf_hydra's: it imports Sample Factory only.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch


def sf_config(run: Path):
    """Sample Factory's config for the run, as its enjoy builds it (its config.json over the defaults)."""
    env = json.loads((run / "config.json").read_text())["env"]
    argv = [f"--env={env}", f"--experiment={run.name}", f"--train_dir={run.parent}", "--device=cpu",
            "--no_render"]
    if env.startswith("doom_"):
        from sf_examples.vizdoom.train_vizdoom import parse_vizdoom_cfg, register_vizdoom_components

        register_vizdoom_components()
        cfg = parse_vizdoom_cfg(argv=argv, evaluation=True)
    else:
        import gymnasium as gym
        from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
        from sample_factory.envs.env_utils import register_env

        register_env(env, lambda full_env_name, cfg=None, env_config=None, render_mode=None:
                     gym.make(full_env_name, render_mode=render_mode))
        parser, _ = parse_sf_args(argv=argv, evaluation=True)
        cfg = parse_full_cfg(parser, argv)
    from sample_factory.cfg.arguments import load_from_checkpoint

    return load_from_checkpoint(cfg)


def build(run: Path, checkpoint: str, seed: int):
    """(cfg, env, actor_critic with the checkpoint's weights) as Sample Factory's enjoy builds them."""
    from sample_factory.algo.utils.make_env import make_env_func_batched
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.utils.attr_dict import AttrDict

    cfg = sf_config(run)
    cfg.num_envs = 1
    env = make_env_func_batched(cfg, env_config=AttrDict(worker_index=0, vector_index=0, env_id=0), render_mode=None)
    actor_critic = create_actor_critic(cfg, env.observation_space, env.action_space)
    actor_critic.eval()
    path = Path(checkpoint) if checkpoint else sorted((run / "checkpoint_p0").glob("checkpoint_*.pth"))[-1]
    actor_critic.load_state_dict(torch.load(path, map_location="cpu", weights_only=False)["model"])
    torch.manual_seed(seed)
    return cfg, env, actor_critic


def play(cfg, env, actor_critic, steps: int = 0, episodes: int = 0, seed: int = 0):
    """Steps of one env (until `steps` steps, or `episodes` episodes ended): per step the raw observation,
    the logits, the value, the episode's end; and the returns of the episodes that ended."""
    from sample_factory.algo.sampling.batched_sampling import preprocess_actions
    from sample_factory.algo.utils.env_info import extract_env_info
    from sample_factory.algo.utils.rl_utils import make_dones, prepare_and_normalize_obs
    from sample_factory.model.model_utils import get_rnn_size

    env_info = extract_env_info(env, cfg)

    obs, _ = env.reset(seed=seed)
    rnn = torch.zeros([1, get_rnn_size(cfg)], dtype=torch.float32)
    record = {"obs": [], "logits": [], "values": [], "dones": []}
    returns, ret = [], 0.0
    with torch.no_grad():
        while (steps and len(record["dones"]) < steps) or (episodes and len(returns) < episodes):
            if steps:
                record["obs"].append({k: v[0].cpu().numpy().copy() for k, v in obs.items()})
            out = actor_critic(prepare_and_normalize_obs(actor_critic, obs), rnn)
            rnn = out["new_rnn_states"]
            actions = out["actions"]
            actions = preprocess_actions(env_info, actions.unsqueeze(-1) if actions.ndim == 1 else actions)
            obs, rew, terminated, truncated, _ = env.step(actions)
            done = bool(make_dones(terminated, truncated)[0])
            ret += float(rew[0])
            if steps:
                record["logits"].append(out["action_logits"].reshape(-1).numpy())
                record["values"].append(float(out["values"].reshape(-1)[0]))
                record["dones"].append(done)
            if done:
                returns.append(ret)
                ret = 0.0
                rnn = torch.zeros_like(rnn)
    return record, returns


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", type=Path)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--episodes", type=int, default=0)
    p.add_argument("--checkpoint", default=None, help="a .pth file (default: the newest checkpoint_p0/checkpoint_*)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    if bool(args.steps) == bool(args.episodes):
        sys.exit("give exactly one of --steps N or --episodes N")
    cfg, env, actor_critic = build(args.run, args.checkpoint, args.seed)
    record, returns = play(cfg, env, actor_critic, args.steps, args.episodes, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.steps:
        keys = list(record["obs"][0])
        np.savez_compressed(args.out, **{f"obs__{k}": np.stack([o[k] for o in record["obs"]]) for k in keys},
                            logits=np.stack(record["logits"]).astype(np.float32),
                            values=np.asarray(record["values"], dtype=np.float32),
                            dones=np.asarray(record["dones"], dtype=bool))
        print(f"{args.out}: {len(record['dones'])} steps, {int(np.sum(record['dones']))} episode ends")
    else:
        result = {"episodes": len(returns), "mean_return": float(np.mean(returns)),
                  "std_return": float(np.std(returns)), "returns": returns, "seed": args.seed}
        args.out.write_text(json.dumps(result, indent=1))
        print(f"{args.out}: {result['mean_return']:.3f} +/- {result['std_return']:.3f} over {len(returns)} episodes")
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
