"""A trained policy you can call from Python, outside a run:

    from sf_hydra import Policy
    policy = Policy.load("train_dir/doom_basic")            # the run's newest learner state, policy 0
    actions, state = policy.act(obs, state)                 # one env's observation, or a batch of them

`Policy.load` takes a run folder (its newest checkpoint that loads, or with kind="best" a policy's best one) or a
checkpoint file, rebuilds the network the run trained from its saved `config.yaml` and the env's spaces (the
run's `spaces.json`; a run older than that file builds one env to read them), and loads the weights. The
observation normalizer is part of the network, so `act` takes observations exactly as the run's env gives them
(dict observations and an `action_mask` key included) and returns actions as the env's `step` takes them.
enjoy.py and evaluation during training play their games through this class too (evaluation/episodes.py).

Light on purpose: torch, the model and env packages and OmegaConf; neither Lightning nor Hydra's compose."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import gymnasium as gym
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from sf_hydra.config.saved import with_schema_defaults
from sf_hydra.config.trust import check_saved_config
from sf_hydra.core.errors import ConfigError
from sf_hydra.core.run_dir import BEST_KEY, best_checkpoint_name, checkpoint_dir, read_spaces, resume_checkpoint
from sf_hydra.core.spaces import obs_specs, to_env_action
from sf_hydra.models import build_model, model_recipe
from sf_hydra.models.actor_critic import StepOutput

log = logging.getLogger("sf_hydra")
CONFIG = "config.yaml"
KINDS = ("last", "best")


def stacked_obs(observations: Sequence, specs) -> Dict[str, torch.Tensor]:
    """Observations (of one space) as one batch, with the dtypes the trajectory buffers use."""
    keys = list(observations[0]) if isinstance(observations[0], dict) else ["obs"]
    rows = [[np.asarray(o[k] if isinstance(o, dict) else o) for o in observations] for k in keys]
    return {k: torch.as_tensor(np.stack(r)).to(specs[k][1]).reshape(len(r), *specs[k][0]) for k, r in zip(keys, rows)}


@dataclass(frozen=True)
class Origin:
    """Where a loaded policy's weights come from."""

    run_dir: Optional[Path] = None
    checkpoint: Optional[Path] = None
    policy: int = 0
    env_steps: Optional[int] = None  # the run's env steps when the checkpoint was saved
    extra: Dict[str, Any] = field(default_factory=dict)  # a best checkpoint's record (metric, value, ...)


class Policy:
    """A trained network and the spaces it acts in. `act` is the whole acting step: observations in, env actions
    and the next recurrent state out (a feed-forward network's state is None)."""

    def __init__(self, model: torch.nn.Module, observation_space: gym.Space, action_space: gym.Space,
                 origin: Optional[Origin] = None):
        self.model = model.eval()
        self.observation_space, self.action_space = observation_space, action_space
        self.origin = origin or Origin()
        self.specs = obs_specs(observation_space)

    # -- loading --------------------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Union[str, Path], policy: int = 0, kind: str = "last", device: str = "cpu",
             trusted_targets: Optional[Sequence[str]] = None) -> "Policy":
        """Policy `policy` of a run folder (its newest checkpoint that loads; kind="best": that policy's best
        checkpoint) or of a checkpoint file inside one (checkpoints/..., a milestone). The run's config may name
        sf_hydra's own parts, the code your own training recorded, and what `trusted_targets` names (module
        prefixes or dotted paths: a run from elsewhere with its own env or model); anything else is refused before
        it is imported (sf_hydra.config.trust)."""
        if kind not in KINDS:
            raise ConfigError("kind", kind, " or ".join(KINDS))
        run_dir, ckpt = _run_and_checkpoint(Path(path), policy, kind)
        cfg = load_run_config(run_dir, trusted_targets)
        observation_space, action_space = run_spaces(run_dir, cfg)
        return cls.from_checkpoint(cfg, ckpt, observation_space, action_space, policy, run_dir, device)

    @classmethod
    def from_checkpoint(cls, cfg, ckpt: Path, observation_space: gym.Space, action_space: gym.Space,
                        policy: int = 0, run_dir: Optional[Path] = None, device: str = "cpu") -> "Policy":
        """The network of the run config `cfg` with trained policy `policy`'s weights from `ckpt` (`policies.<k>.`
        in the checkpoint; `model.` in checkpoints saved before several policies). A best checkpoint chosen by
        evaluation during training holds the weights that evaluation played: those are loaded."""
        num_policies = cfg.algo.num_policies
        if not 0 <= policy < num_policies:
            raise ConfigError("policy", policy, f"a trained policy of this run: 0 to {num_policies - 1}")
        model = build_model(model_recipe(cfg), observation_space, action_space)
        state = torch.load(ckpt, map_location="cpu", weights_only=True)
        best = state.get(BEST_KEY) or {}
        if best.get("evaluated_weights") is not None and best.get("policy") == policy:
            log.info("playing the weights evaluated at %s env steps (policy version %s): %s=%s",
                     best.get("evaluated_run_env_steps"), best.get("evaluated_policy_version"), best.get("metric"),
                     best.get("value"))
            model.load_state_dict(best["evaluated_weights"])
        else:
            weights = state["state_dict"]
            prefix = f"policies.{policy}." if any(k.startswith("policies.") for k in weights) else "model."
            model.load_state_dict({k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)})
        steps = (state.get("sf_hydra") or {}).get("env_steps")
        extra = {k: v for k, v in best.items() if k != "evaluated_weights"}
        return cls(model.to(device), observation_space, action_space, Origin(run_dir, Path(ckpt), policy, steps, extra))

    # -- acting ---------------------------------------------------------------------------------------------------
    @property
    def recurrent(self) -> bool:
        return self.model.core is not None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def initial_state(self, batch: Optional[int] = None) -> Optional[torch.Tensor]:
        """The recurrent state an episode starts from ([batch, size], or [1, size] for one env); None for a
        feed-forward network."""
        if not self.recurrent:
            return None
        return torch.zeros(batch or 1, self.model.rnn_state_size, device=self.device)

    def act(self, obs, state: Optional[torch.Tensor] = None, deterministic: bool = False):
        """(actions, next state) for one observation or a batch of them (a list of observations, or arrays
        with a leading batch dimension; a dict observation's keys each batched). One observation gives one
        env action; a batch gives a list of them (a numpy array for Box, Discrete and MultiDiscrete spaces).
        `state`: what the last call returned (None: an episode's start); reset a row to zeros when its episode
        ends. deterministic=True takes the most likely action."""
        batch, single = self._as_batch(obs)
        rows = next(iter(batch.values())).shape[0]
        out = self.step(batch, state if state is not None else self.initial_state(rows), deterministic)
        chosen = out.actions.cpu().numpy()
        actions = [to_env_action(self.action_space, row) for row in chosen]
        if single:
            return actions[0], out.rnn_states
        if isinstance(self.action_space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            return np.stack(actions), out.rnn_states
        return actions, out.rnn_states

    @torch.no_grad()
    def step(self, obs: Dict[str, torch.Tensor], state: Optional[torch.Tensor], deterministic: bool) -> StepOutput:
        """The network's acting step on a batch already in tensors (the episodes code): actions, log-probs,
        values and the next state."""
        device = self.device
        obs = {k: v.to(device) for k, v in obs.items()}
        return self.model.act(obs, None if state is None else state.to(device), deterministic=deterministic)

    def _as_batch(self, obs) -> Tuple[Dict[str, torch.Tensor], bool]:
        """The observation(s) as a batch of tensors, and whether it was one observation."""
        if isinstance(obs, (list, tuple)) and not isinstance(self.observation_space, gym.spaces.Tuple):
            return stacked_obs(list(obs), self.specs), False
        key = next(iter(self.specs))
        first = obs[key] if isinstance(obs, dict) else obs
        shape = self.specs[key][0]
        if np.ndim(first) == len(shape):
            return stacked_obs([obs], self.specs), True
        if np.ndim(first) != len(shape) + 1:
            raise ValueError(f"an observation of shape {tuple(np.shape(first))} for key {key!r}: this policy "
                             f"takes {tuple(shape)} (one observation) or [batch, *{tuple(shape)}]")
        n = np.shape(first)[0]
        rows = [{k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i] for i in range(n)]
        return stacked_obs(rows, self.specs), False

    def __repr__(self) -> str:
        where = self.origin.checkpoint or "in memory"
        return (f"Policy({type(self.model).__name__}, policy {self.origin.policy}, {where}, "
                f"observation {self.observation_space}, action {self.action_space})")


# -- the run folder ------------------------------------------------------------------------------------------------
def load_run_config(run_dir: Path, trusted_targets: Optional[Sequence[str]] = None):
    """The run's resolved config (what it was trained with), once the code it names is checked: sf_hydra's own
    parts, what the user's own training recorded, or `trusted_targets` (sf_hydra.config.trust); migrated to
    today's schema (the keys an older sf_hydra did not save: sf_hydra.config.saved)."""
    saved = Path(run_dir) / CONFIG
    if not saved.is_file():
        runs = sorted(p.parent.name for p in Path(run_dir).parent.glob(f"*/{CONFIG}"))
        raise ConfigError("experiment", Path(run_dir).name,
                          f"a trained run in {Path(run_dir).parent} (found: {runs or 'none'})")
    cfg = read_saved_config(saved)
    check_saved_config(cfg, str(saved), trusted_targets, run_dir=Path(run_dir))
    missing = [key for key in ("env.factory", "model._target_") if OmegaConf.select(cfg, key) is None]
    if missing:  # saved before families and networks were named by dotted paths
        raise ConfigError("experiment", Path(run_dir).name, (
            f"a run whose {saved} names its env family and network (it has no {' / '.join(missing)}: an older "
            "sf_hydra saved it; its checkpoint still loads: run its train command again, which resumes it and "
            "saves the config anew)"))
    return with_schema_defaults(cfg)


def read_saved_config(path: Path):
    """A saved config file as a mapping; a ConfigError naming the file when it is not one (hand-edited, cut)."""
    try:
        cfg = OmegaConf.load(path)
    except Exception as e:  # noqa: BLE001 (YAML's errors, a binary file, ...: the file is not a config)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError("config.yaml", str(path), f"a YAML mapping (the run's saved config); reading it failed: "
                          f"{type(e).__name__}: {first}. Restore it, or train the run again") from None
    if not isinstance(cfg, DictConfig):
        raise ConfigError("config.yaml", str(path), "a YAML mapping (the run's saved config); restore it, or train "
                          "the run again")
    return cfg


def run_spaces(run_dir: Path, cfg) -> Tuple[gym.Space, gym.Space]:
    """One agent's observation and action spaces: the run's spaces.json, else from one env built to read them."""
    saved = read_spaces(run_dir)
    if saved is not None:
        return saved[0], saved[1]
    from sf_hydra.sampler.env_info import describe_env  # builds the env: only for runs older than spaces.json

    log.info("%s has no spaces.json (trained before it was written): building env %s to read its spaces",
             run_dir, cfg.env.name)
    info = describe_env(cfg.env, seed=cfg.seed)
    return info.observation_space, info.action_space


def _run_and_checkpoint(path: Path, policy: int, kind: str) -> Tuple[Path, Path]:
    """(run folder, checkpoint) for a run folder or a checkpoint file inside one."""
    if path.is_file():
        run_dir = next((p for p in path.parents if (p / CONFIG).is_file()), None)
        if run_dir is None:
            raise FileNotFoundError(f"{path}: no run folder ({CONFIG}) above this checkpoint to rebuild its network")
        return run_dir, path
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: neither a run folder nor a checkpoint file")
    if kind == "best":
        best = checkpoint_dir(path) / best_checkpoint_name(policy)
        if not best.is_file():
            raise ConfigError("kind", "best", f"last: {path} has no best checkpoint of policy {policy} yet")
        return path, best
    ckpt = resume_checkpoint(path)
    if ckpt is None:
        raise FileNotFoundError(f"{path}: the run has no checkpoint yet")
    return path, ckpt
