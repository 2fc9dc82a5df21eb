"""`algo.policy_assignment`'s rules, in one place: which trained policy acts in each env of a run with several
policies (the choices: config/choices.py PolicyAssignment; the mapping itself: sampler/policy_mapping.py).

- fixed: each policy an equal block of the run's envs for the whole run. Refused where the envs
  (hardware.num_workers x num_envs_per_worker) are not a multiple of the policies (batched sampling aside: it
  maps whole workers to policies), and on a multi-agent env (its seats are drawn per episode).
- per_episode: each env draws its policy at every episode start (Sample Factory's way). Refused with batched
  sampling and several policies (a worker's vector env serves one policy).
- auto: fixed where the envs divide evenly among the policies, else per_episode.
- Where no choice applies, none is made: one policy, a multi-agent env, batched sampling (worker i -> policy i
  mod N, decided by the worker).
- A run saved before the key existed drew each env's policy per episode: it resumes so (BEFORE_THE_KEY).

The checks run twice on the same rules: on the config alone before any process starts (config/validation.py:
the agent count not known yet) and again once one env told its agent count (the sampler's checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from sf_hydra.core.errors import ConfigError

KEY = "algo.policy_assignment"
BEFORE_THE_KEY = "per_episode"  # what a run saved before the key did: each env drew its policy per episode


@dataclass(frozen=True)
class Assignment:
    """What the rules read of a run: the choice, the policies, the run's envs, batched sampling and the env's
    agent count (None: a single-agent env, or not known yet) with the env's id."""

    choice: str
    policies: int
    envs: int
    batched: bool
    num_agents: Optional[int] = None
    env_id: str = ""

    @classmethod
    def of(cls, cfg, num_agents: Optional[int] = None) -> "Assignment":
        algo, hw = cfg.algo, cfg.hardware
        return cls(str(algo.policy_assignment), algo.num_policies, hw.num_workers * hw.num_envs_per_worker,
                   bool(hw.batched_sampling), num_agents, "" if num_agents is None else str(cfg.env.id))


# (refused when, what is allowed instead), in the order they are checked.
RULES: Tuple[Tuple[Callable[[Assignment], bool], Callable[[Assignment], str]], ...] = (
    (lambda a: a.choice == "fixed" and not a.batched and a.envs % a.policies != 0,
     lambda a: f"auto or per_episode with {a.envs} envs (hardware.num_workers x num_envs_per_worker) for "
               f"algo.num_policies={a.policies}: fixed gives every policy an equal block of envs, so the envs must "
               "be a multiple of the policies"),
    (lambda a: a.choice == "per_episode" and a.batched and a.policies > 1,
     lambda a: "auto or fixed with hardware.batched_sampling=true (a worker's vector env serves one policy: worker "
               "i -> policy i mod num_policies)"),
    (lambda a: a.choice == "fixed" and a.num_agents is not None,
     lambda a: f"auto or per_episode for a multi-agent env ({a.env_id!r} has {a.num_agents} agents: its seats are "
               "drawn per episode, pbt.mix_policies_in_one_env)"),
)


def check_policy_assignment(cfg, num_agents: Optional[int] = None) -> None:
    """ConfigError naming algo.policy_assignment when a rule refuses the run's choice; `num_agents`: the env's
    agent count once known (None: a single-agent env, or the config alone)."""
    assignment = Assignment.of(cfg, num_agents)
    for refused, allowed in RULES:
        if refused(assignment):
            raise ConfigError(KEY, assignment.choice, allowed(assignment))


def assigns_fixed(cfg, num_agents: Optional[int]) -> bool:
    """Whether each env gets one policy for the whole run: several policies, a single-agent env stepped env by
    env, and fixed, or auto with envs that divide evenly among the policies."""
    a = Assignment.of(cfg, num_agents)
    if a.policies == 1 or a.num_agents is not None or a.batched or a.choice == "per_episode":
        return False
    return a.choice == "fixed" or a.envs % a.policies == 0
