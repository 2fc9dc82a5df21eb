"""The PBT workspace (learner/pbt_workspace.py) between two real learners sharing one folder, as two runs
on a cluster's shared disk share it: what one member publishes the other ranks and takes whole, and
whatever another member left half-written or unreadable is skipped, never fatal. (The Slurm test,
tests/slurm/test_slurm_pbt.py, runs the same exchange between two jobs, one after the other.)"""

import json
import logging

import gymnasium as gym
import pytest

from sf_hydra.learner.pbt_rules import weights_digest
from sf_hydra.learner.pbt_workspace import Workspace
from tests.helpers.plans import learner_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OBS, ACTIONS = gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2)


def member(tmp_cfg, folder, m, seed, **hyper):
    """Member m's real learner (optimizers built, no Trainer) and its Workspace in `folder`."""
    overrides = [f"seed={seed}", "pbt.with_pbt=true", f"pbt.workspace={folder}", f"pbt.member={m}",
                 *(f"algo.{k}={v}" for k, v in hyper.items())]
    learner = learner_for(tmp_cfg(*overrides), OBS, ACTIONS)
    learner.configure_optimizers()
    return learner, Workspace(folder, m)


def test_a_member_takes_what_another_published_whole(tmp_cfg, tmp_path):
    folder = tmp_path / "population"
    donor, donor_ws = member(tmp_cfg, folder, 0, seed=1, learning_rate=0.003)
    taker, taker_ws = member(tmp_cfg, folder, 1, seed=2, learning_rate=1e-7)
    assert taker_ws.objectives() == {}  # nobody has published yet
    donor_ws.publish(donor, None, objective=42.5, env_steps=4096)
    taker_ws.publish(taker, None, objective=None, env_steps=2048)  # before its first episode
    assert taker_ws.objectives() == {0: 42.5}  # its own file is not a rival
    assert donor_ws.objectives() == {1: None}  # known, but left out of the ranking
    state = json.loads((folder / "member_0" / "state.json").read_text())
    assert state["member"] == 0 and state["env_steps"] == 4096 and state["objective"] == 42.5

    own = weights_digest(taker.policies[0].state_dict())
    version = taker.stats[0].version
    digest = taker_ws.copy_into(taker, None, donor=0, policy=0)
    assert digest == weights_digest(donor.policies[0].state_dict()) != own
    assert weights_digest(taker.policies[0].state_dict()) == digest
    assert taker.hyperparams[0]["learning_rate"] == pytest.approx(0.003)
    assert taker.stats[0].version == version + 1  # new weights, a new version


def test_what_another_member_left_half_written_is_skipped(tmp_cfg, tmp_path, caplog):
    folder = tmp_path / "population"
    donor, donor_ws = member(tmp_cfg, folder, 0, seed=1)
    taker, taker_ws = member(tmp_cfg, folder, 1, seed=2)
    donor_ws.publish(donor, None, objective=10.0, env_steps=2048)
    for name, text in (("member_2", '{"member": 2, "objective": 3'),  # cut off mid-write
                       ("member_3", '{"member": 3}'),  # no objective
                       ("member_4", '{"member": "four", "objective": 1.0}'),
                       ("member_5", '[1, 2]')):
        (folder / name).mkdir()
        (folder / name / "state.json").write_text(text)
    assert taker_ws.objectives() == {0: 10.0}

    # A donor whose policy file is torn: the taker keeps its own weights and version, and says why.
    policy = folder / "member_0" / "policy.pt"
    policy.write_bytes(policy.read_bytes()[: policy.stat().st_size // 2])
    own, version = weights_digest(taker.policies[0].state_dict()), taker.stats[0].version
    with caplog.at_level(logging.WARNING, logger="sf_hydra"):
        assert taker_ws.copy_into(taker, None, donor=0, policy=0) is None
    assert weights_digest(taker.policies[0].state_dict()) == own and taker.stats[0].version == version
    assert any("could not take member 0's policy" in r.getMessage() and str(policy) in r.getMessage()
               for r in caplog.records), caplog.text
