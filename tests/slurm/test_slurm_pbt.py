"""PBT across Slurm jobs: `--multirun hydra/launcher=slurm pbt.member=0,1` with a shared
`pbt.workspace` trains each member as its own job; the members exchange objectives and
weights through that folder (member 1 starts with a useless learning rate and takes
member 0's policy).

The two jobs run one after the other (`hydra.launcher.array_parallelism=1`: task 0, then task 1), so member 1
meets member 0's last published files, the way a member meets one that finished or died. Run side by side, the
exchange depended on the two overlapping: with other tests' jobs on the node's two cores, Slurm could run
member 1 (3 s of training) before member 0 started, and then there was nobody to take from."""

from __future__ import annotations

import json

import pytest

from tests.slurm.jobs import slurm, wait_until


def events(run_dir):
    path = run_dir / "pbt" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow  # ~20 s: the only test of the PBT workspace (learner/pbt_workspace.py), so it runs in CI
def test_two_members_exchange_through_the_workspace(sweep):
    workspace = sweep.train_dir / "population"
    code = sweep.run(
        "pbt.member=0,1", "pbt.with_pbt=true", f"pbt.workspace={workspace}", "pbt.period_env_steps=2000",
        "pbt.start_mutation=2000", "pbt.replace_reward_gap_absolute=2", "train_for_env_steps=16000",
        "+pbt.initial_hyperparams={1:{learning_rate:1e-7}}", "hydra.launcher.array_parallelism=1", timeout=420)
    assert code == 0, sweep.output[-3000:]
    runs = {m: sweep.dir / f"pbt.member={m}" for m in (0, 1)}
    for m, run_dir in runs.items():  # each member published its policy and objective
        state = json.loads((workspace / f"member_{m}" / "state.json").read_text())
        assert state["member"] == m and state["env_steps"] >= 2000
        assert (workspace / f"member_{m}" / "policy.pt").stat().st_size > 0
        assert json.loads((run_dir / "summary.json").read_text())["env_steps"] >= 16000
    member_0_done = json.loads((workspace / "member_0" / "state.json").read_text())["time"]
    assert events(runs[1])[0]["time"] > member_0_done  # one after the other, in task order
    taken = [e for e in events(runs[1]) if e["action"] == "replaced"]
    assert taken, events(runs[1])
    assert all(e["donor"] == 0 and e["weights_digest"] == e["donor_weights_digest"] for e in taken), taken
    first = taken[0]
    assert first["hyperparams_before"]["learning_rate"] == 1e-7 and first["hyperparams_after"]["learning_rate"] > 1e-4
    # Both were Slurm jobs of the sweep's array.
    def completed():
        lines = slurm("sacct", "-X", "-n", "-P", "-S", "now-2hours", f"--name={sweep.job_name}", "-o",
                      "JobID,State").split()
        return [ln for ln in lines if ln.endswith("|COMPLETED")]

    lines = wait_until(lambda: len(c := completed()) == 2 and c, 60, "both jobs COMPLETED in sacct")
    assert all("_" in ln for ln in lines), lines  # two tasks of one job array
