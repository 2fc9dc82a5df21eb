"""benchmarks/vs_peers.py without its peers: --help, a cited config (or a reason) for every system on every env
it runs, each system's solve and budget commands, the reading of each peer's output as it prints it (the moment
and the env steps at which the 100-episode average reaches the target), the watching of a real process (ended at
its target line, or at the cap), the table's medians and ranges, and the marked section of the results page,
merged env by env (a pass replaces the blocks of the envs it ran and keeps the others')."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.runs import env_with_repo

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import vs_peers  # noqa: E402
from vs_peers import (  # noqa: E402
    BEGIN,
    END,
    ENVS,
    RUNNABLE,
    SB3_EP_REW,
    SF_AVERAGE,
    SYSTEM_CLASSES,
    CannotRun,
    Result,
    average_reaches,
    cleanrl_episode,
    episodes_average,
    last_value,
    runs_of,
    sf_parser,
    solved_line_steps,
    table_rows,
    watch,
    write_results,
)
from vs_peers_drivers import _schedule, solved_line  # noqa: E402

# RL Zoo's entries as rl_zoo3 2.9.2 ships them in hyperparams/ppo.yml (the parts the table and driver read)
ZOO_YML = """\
CartPole-v1:
  n_envs: 8
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 32
  batch_size: 256
  n_epochs: 20
  learning_rate: lin_0.001
  clip_range: lin_0.2
Acrobot-v1:
  normalize: true
  n_envs: 16
  n_timesteps: !!float 1e6
  n_steps: 256
  n_epochs: 4
atari:
  policy: 'CnnPolicy'
  n_envs: 8
  n_steps: 128
  n_timesteps: !!float 1e7
Ant-v4:
  normalize: true
  n_timesteps: !!float 1e6
  policy: 'MlpPolicy'
"""


@pytest.fixture
def peers(tmp_path):
    """A peers folder as --setup leaves it, each venv reduced to what the table reads: its python, RL Zoo's
    ppo.yml where the system uses it, CleanRL's unpacked ppo.py."""
    for cls in SYSTEM_CLASSES:
        if cls.venv_name:
            (tmp_path / cls.venv_name / "bin").mkdir(parents=True)
            (tmp_path / cls.venv_name / "bin" / "python").touch()
    for venv in ("sb3_venv", "torchrl_venv"):
        yml = tmp_path / venv / "lib" / "python3.11" / "site-packages" / "rl_zoo3" / "hyperparams" / "ppo.yml"
        yml.parent.mkdir(parents=True)
        yml.write_text(ZOO_YML)
    script = tmp_path / "cleanrl_venv" / "src" / "cleanrl-0.4.8" / "cleanrl" / "ppo.py"
    script.parent.mkdir(parents=True)
    script.touch()
    return tmp_path


def test_help_names_the_peers_folder_under_the_users_cache(tmp_path):
    env = {**env_with_repo(), "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "1000"}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "vs_peers.py"), "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert f"--peers-dir PEERS_DIR where each peer's venv lives, one folder each (default: {tmp_path}/cache/sf_hydra/" \
           "peers)" in said
    assert "--setup [PEER ...]" in said and "launch to exit" in said


def test_every_system_cites_its_config_or_says_why_it_cannot_run(peers):
    cited = {}
    for cls in SYSTEM_CLASSES:
        for env_id in RUNNABLE:
            try:
                cited[(cls.name, env_id)] = cls(peers).config(ENVS[env_id])
            except CannotRun as why:
                cited[(cls.name, env_id)] = f"cannot run: {why}"
    for (name, env_id), text in cited.items():  # a file and an entry, or a reason
        assert any(f in text for f in (".yaml", ".yml", ".py", ".ini", "sdist", "cannot run: ")), (name, env_id, text)
    assert "ppo.yml `CartPole-v1` (n_envs 8, n_steps 32, batch_size 256, n_epochs 20" in cited[("sb3", "CartPole-v1")]
    assert "ppo.yml `CartPole-v1` (n_envs 8" in cited[("torchrl", "CartPole-v1")]
    assert "rewards by the running return's spread" in cited[("torchrl", "Acrobot-v1")]  # `normalize: true`
    assert "train_until_avg_return=-100" in cited[("ours", "Acrobot-v1")]
    assert cited[("pufferlib", "Acrobot-v1")].startswith("cannot run: no PufferLib config for Acrobot-v1")
    assert set(RUNNABLE) == set(ENVS) and all(not spec.not_run for spec in ENVS.values())
    # the new envs: fixed budgets; who runs them and why the others cannot, in the table
    assert all(ENVS[e].target is None for e in ("HalfCheetah-v5", "ALE/Pong-v5", "doom_basic"))
    assert "ppo.yml `Ant-v4` (normalize True, n_timesteps 1000000.0); it has no HalfCheetah-v5 entry" in cited[
        ("sb3", "HalfCheetah-v5")]
    assert "ppo.yml `atari` on PongNoFrameskip-v4 (n_envs 8, n_steps 128" in cited[("sb3", "ALE/Pong-v5")]
    assert "conf/env/doom/basic.yaml" in cited[("ours", "doom_basic")]
    assert "sf_examples.vizdoom.train_vizdoom --env=doom_basic" in cited[("sample_factory", "doom_basic")]
    assert "2 workers x 4 envs" in cited[("sample_factory", "ALE/Pong-v5")]
    for env_id in ("HalfCheetah-v5", "ALE/Pong-v5", "doom_basic"):
        assert cited[("torchrl", env_id)].startswith("cannot run: ")
        assert cited[("cleanrl", env_id)].startswith("cannot run: ")
    assert cited[("pufferlib", "HalfCheetah-v5")].startswith("cannot run: its mujoco config")
    assert cited[("pufferlib", "doom_basic")].startswith("cannot run: its doom config")
    assert "pufferlib/config/atari.ini, `puffer train pong`" in cited[("pufferlib", "ALE/Pong-v5")]
    assert cited[("sb3", "doom_basic")].startswith("cannot run: no ViZDoom")


def test_an_uninstalled_peer_is_a_row_that_says_so(tmp_path):
    configs = vs_peers.configs_of([vs_peers.Sb3Zoo(tmp_path)], ["CartPole-v1"])
    assert configs[("CartPole-v1", "sb3")] == "cannot run: not installed (run `--setup sb3`)"


def test_solve_and_budget_commands(peers, tmp_path):
    cartpole, acrobot = ENVS["CartPole-v1"], ENVS["Acrobot-v1"]
    ours = vs_peers.Ours(peers)
    solve = ours.run_spec(acrobot, 3, tmp_path, None).cmd
    assert solve[1:] == [str(REPO / "train.py"), "env=gym/acrobot", "seed=3", f"train_dir={tmp_path}",
                         "experiment=run", "train_until_avg_return=-100"]
    assert ours.run_spec(cartpole, 3, tmp_path, 5000).cmd[-2:] == ["train_for_env_steps=5000",
                                                                   "train_until_avg_return=null"]
    sb3 = vs_peers.Sb3Zoo(peers).run_spec(cartpole, 2, tmp_path, None)
    assert sb3.cmd[1:5] == ["-m", "rl_zoo3.train", "--algo", "ppo"] and "--eval-freq" in sb3.cmd
    key, value = sb3.cmd[-1].split(":", 1)  # RL Zoo's -params evaluates the value as Python
    assert key == "callback" and ast.literal_eval(value) == [
        {"vs_peers_drivers.sb3_stop_at_average": {"target": 450.0}}]
    assert sb3.env["OMP_NUM_THREADS"] == "1" and sb3.env["PYTHONPATH"] == str(REPO / "benchmarks")
    torchrl = vs_peers.TorchRL(peers).run_spec(cartpole, 2, tmp_path, None).cmd
    assert torchrl[torchrl.index("--steps") + 1] == "100000" and torchrl[-2:] == ["--target", "450"]
    cleanrl = vs_peers.CleanRL(peers).run_spec(cartpole, 2, tmp_path, 20000)
    assert cleanrl.cmd[-2:] == ["--total-timesteps", "20000"] and cleanrl.stop_when is None
    sf = vs_peers.SampleFactory(peers).run_spec(acrobot, 2, tmp_path, None)
    assert sf.cmd[1].endswith("benchmarks/sf_gym_env.py") and "--env=Acrobot-v1" in sf.cmd
    assert sf.stop_when is not None


def test_fixed_budget_commands_of_the_new_envs(peers, tmp_path):
    (peers / "pufferlib_venv" / "bin" / "puffer").touch()
    cheetah, pong, doom = ENVS["HalfCheetah-v5"], ENVS["ALE/Pong-v5"], ENVS["doom_basic"]
    assert runs_of(cheetah, None) == [1_000_000] and runs_of(pong, 5000) == [5000] and runs_of(doom, 0) == []
    assert runs_of(ENVS["CartPole-v1"], None) == [None, 100_000]
    ours = vs_peers.Ours(peers).run_spec(pong, 1, tmp_path, 8000).cmd
    assert ours[2] == "env=atari/pong" and ours[-2:] == ["train_for_env_steps=8000", "train_until_avg_return=null"]
    sb3 = vs_peers.Sb3Zoo(peers).run_spec(cheetah, 1, tmp_path, 3000).cmd
    assert sb3[sb3.index("--env") + 1] == "HalfCheetah-v5" and sb3[-2:] == ["-n", "3000"]
    conf = Path(sb3[sb3.index("--conf-file") + 1])
    assert conf.read_text().startswith("HalfCheetah-v5:\n") and "normalize: true" in conf.read_text()
    sb3 = vs_peers.Sb3Zoo(peers).run_spec(pong, 1, tmp_path, 8000).cmd
    assert sb3[sb3.index("--env") + 1] == "PongNoFrameskip-v4" and "--conf-file" not in sb3
    assert sb3[-2:] == ["-n", "2000"]  # frames / the wrapper's frame skip: SB3 counts agent steps
    sf = vs_peers.SampleFactory(peers).run_spec(doom, 1, tmp_path, 4000)
    assert sf.cmd[1:4] == ["-m", "sf_examples.vizdoom.train_vizdoom", "--env=doom_basic"]
    assert "--train_for_env_steps=4000" in sf.cmd and "--num_workers=2" in sf.cmd
    log = vs_peers.Watched([(1.0, "[2026-12-07 15:21:00,000][01] Avg episode reward: [(0, '0.455')]")], 0.0, 2.0, 0)
    assert sf.final_return(log) == pytest.approx(45.5)  # its doom_basic spec scales rewards by 0.01
    sf = vs_peers.SampleFactory(peers).run_spec(cheetah, 1, tmp_path, 4000).cmd
    assert "--env=mujoco_halfcheetah" in sf and "--num_envs_per_worker=32" in sf
    puffer = vs_peers.PufferLib(peers).run_spec(pong, 1, tmp_path, 8000)
    assert puffer.cmd[1:3] == ["train", "pong"] and puffer.cmd[-2:] == ["--train.total-timesteps", "8000"]
    workers = int(puffer.cmd[puffer.cmd.index("--vec.num-workers") + 1])
    assert 128 % workers == 0 and workers == vs_peers.puffer_workers(128)
    dashboard = "\u2502  episode_return          -20.5    episode_length       3300.0  \u2502"
    assert puffer.final_return(vs_peers.Watched([(0.0, dashboard)], 0.0, 1.0, 0)) == -20.5


def test_the_return_each_system_last_reported():
    sb3 = ["| rollout/            |          |", "|    ep_rew_mean      | -464     |",
           "|    ep_rew_mean      | 1.23e+03 |", "| time/               |          |"]
    w = vs_peers.Watched([(float(i), line) for i, line in enumerate(sb3)], 0.0, 9.0, 0)
    assert last_value(SB3_EP_REW)(w) == pytest.approx(1230.0)
    assert last_value(SF_AVERAGE)(w) is None
    lines = [f"global_step={i}, episode_reward={float(i)}" for i in range(1, 151)]
    w = vs_peers.Watched([(0.0, line) for line in lines], 0.0, 1.0, 0)
    assert episodes_average(cleanrl_episode)(w) == pytest.approx(100.5)  # episodes 51..150
    line = "vs_peers: 20480 env steps, 100 episodes averaging 431.5"
    assert last_value(vs_peers.TORCHRL_AVERAGE)(vs_peers.Watched([(0.0, line)], 0.0, 1.0, 0)) == 431.5


def test_cleanrl_episodes_are_averaged_over_the_last_hundred():
    stop_when, solved = average_reaches(450.0, cleanrl_episode, window=100)
    lines = [f"global_step={4 * i}, episode_reward={400.0 if i < 50 else 500.0}" for i in range(1, 150)]
    hits = [line for line in lines if stop_when(line)]
    # episodes 51..149 score 500: the window of 100 first averages 450 at episode 100 (50 of 400, 50 of 500)
    assert hits[0] == "global_step=400, episode_reward=500.0"
    assert solved(None) == 400
    assert not stop_when("Traceback (most recent call last):")


def test_sample_factory_average_is_paired_with_the_frames_reported_before_it():
    stop_when, solved = average_reaches(450.0, sf_parser(), window=None)
    log = ["\x1b[36m[2026-12-07 04:35:25,610][04692] Fps is (10 sec: 5324.9, 60 sec: 5870.9, 300 sec: 5870.9). "
           "Total num frames: 194560. Throughput: 0: 5895.3. Samples: 192660.\x1b[0m",
           "\x1b[36m[2026-12-07 04:35:25,611][04692] Avg episode reward: [(0, '247.840')]\x1b[0m",
           "\x1b[36m[2026-12-07 04:35:30,622][04692] Fps is (10 sec: 5114.3). Total num frames: 218112.\x1b[0m",
           "\x1b[36m[2026-12-07 04:35:30,622][04692] Avg episode reward: [(0, '451.090')]\x1b[0m"]
    assert [stop_when(line) for line in log] == [False, False, False, True]
    assert solved(None) == 218112


def test_drivers_solved_line_is_read_back():
    line = solved_line(55128, 452.19)
    assert line == "vs_peers: solved at 55128 env steps, 100-episode average 452.19"
    w = vs_peers.Watched([(1.0, "| rollout/ | 500 |"), (2.0, line), (3.0, "Saving to logs")], 0.0, 4.0, 0)
    assert solved_line_steps(w) == 55128
    assert solved_line_steps(vs_peers.Watched([], 0.0, 1.0, 0)) is None
    assert _schedule("lin_0.001", 0.25) == pytest.approx(0.00025) and _schedule(3e-4, 0.1) == 3e-4


def test_watch_ends_a_real_process_at_its_target_line_or_at_the_cap(tmp_path):
    script = "import time\nfor i in range(100):\n    print(f'step {i}', flush=True)\n    time.sleep(0.05)\n"
    w = watch([sys.executable, "-c", script], tmp_path, env_with_repo(), tmp_path / "a.log", cap=30,
              stop_when=lambda line: line == "step 10")
    assert w.returncode is None and w.stopped_at is not None  # ended by us, at the line
    assert 0.4 < w.stopped_at - w.start < w.wall < 4.0
    assert (tmp_path / "a.log").read_text().startswith("step 0\nstep 1\n")
    w = watch([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"], tmp_path,
              env_with_repo(), tmp_path / "b.log", cap=1.0)
    assert w.returncode is None and w.stopped_at is None and 1.0 <= w.wall < 8.0
    w = watch([sys.executable, "-c", "raise ValueError('bad flag')"], tmp_path, env_with_repo(), tmp_path / "c.log",
              cap=30)
    assert w.returncode == 1 and vs_peers.failure(w) == "exit 1: ValueError: bad flag"


def test_table_medians_ranges_and_counts(peers):
    systems = [vs_peers.Ours(peers), vs_peers.Sb3Zoo(peers)]
    configs = vs_peers.configs_of(systems, ["CartPole-v1"])
    results = [Result("CartPole-v1", "ours", 1, "solve", 20.0, 200_000, 20.0, ok=True),
               Result("CartPole-v1", "ours", 2, "solve", 30.0, 300_000, 30.0, ok=True),
               Result("CartPole-v1", "ours", 3, "solve", 300.0, how="cap 300 s"),
               Result("CartPole-v1", "ours", 1, "budget", 10.0, budget=20_000, ok=True),
               Result("CartPole-v1", "ours", 2, "budget", 5.0, budget=20_000, ok=True),
               Result("CartPole-v1", "sb3", 1, "solve", 22.0, 55_000, 22.0, ok=True),
               Result("CartPole-v1", "sb3", 1, "budget", 300.0, budget=20_000, how="cap 300 s")]
    results[3].final_return, results[4].final_return = 480.0, 500.0
    rows = {row[1]: row for row in table_rows(results, systems, ["CartPole-v1"], configs) if row[0] == "CartPole-v1"}
    assert len(rows["sf_hydra"]) == len(vs_peers.HEADERS)
    assert rows["sf_hydra"][3:] == ["25.0 s (20.0-30.0)", "250k (200-300)", "2 / 3", "20k", "7.5 s (5.0-10.0)",
                                    "3,000 (2,000-4,000)", "490.0 (480.0-500.0)", "cap 300 s"]
    assert rows["Stable-Baselines3 PPO (RL Zoo)"][3:] == ["22.0 s", "55k", "1 / 1", "20k", "-", "-", "-",
                                                          "cap 300 s"]
    assert all(row[0] == "CartPole-v1" for row in table_rows(results, systems, ["CartPole-v1"], configs))


def test_a_fixed_budget_env_reports_time_and_return_and_no_solve(peers):
    systems = [vs_peers.Ours(peers), vs_peers.CleanRL(peers)]
    configs = vs_peers.configs_of(systems, ["HalfCheetah-v5"])
    results = [Result("HalfCheetah-v5", "ours", 1, "budget", 400.0, budget=1_000_000, ok=True, final_return=2968.9)]
    rows = table_rows(results, systems, ["HalfCheetah-v5"], configs)
    assert rows[0][1] == "sf_hydra" and rows[0][3:] == ["-", "-", "-", "1000k", "400.0 s", "2,500", "2968.9", "-"]
    assert rows[1][2] == "-" and rows[1][-1].startswith("cannot run: its ppo_continuous_action.py")


def test_the_recorded_command_repeats_the_pass_without_its_folders():
    args = vs_peers.parse_args(["--envs", "CartPole-v1", "Acrobot-v1", "--seeds", "3", "--cap", "60", "--work-dir",
                                "runs", "--write-results"])
    assert vs_peers.pass_command(args) == ("python benchmarks/vs_peers.py --envs CartPole-v1 Acrobot-v1 --seeds 3 "
                                           "--first-seed 1 --cap 60")
    assert vs_peers.pass_command(vs_peers.parse_args(["--envs", "doom_basic", "--budget", "5000"])).endswith(
        "--cap 300 --budget 5000")
    args = vs_peers.parse_args(["--systems", "ours", "sb3"])
    assert "--envs CartPole-v1 --systems ours sb3 --seeds 2" in vs_peers.pass_command(args)


def _pass(command: str, envs, day_load: float) -> vs_peers.Pass:
    return vs_peers.Pass(command, [1, 2], {e: 0 for e in envs}, 60.0, load_before=(day_load,) * 3,
                         load_after=(day_load,) * 3, versions={"sf_hydra": "torch x"})


def _rows(env_id: str, time: str):
    return [[env_id, "sf_hydra", "shipped defaults", time, "10k", "2 / 2", "-", "-", "-", "-", "-"],
            [env_id, "Stable-Baselines3 PPO (RL Zoo)", "zoo", "-", "-", "0 / 2", "-", "-", "-", "-", "cap 60 s"]]


def _blocks(command: str, env_id: str, time: str, load: float):
    results = [Result(env_id, "ours", 1, "solve", 1.0, other_cpu=0.25)]
    return vs_peers.env_blocks(_pass(command, [env_id], load), results, _rows(env_id, time))


def _section(page: Path) -> str:
    return BEGIN + page.read_text().split(BEGIN, 1)[1].split(END, 1)[0] + END


def _env_rows(page: Path, env_id: str):
    return [line for line in _section(page).splitlines() if line.startswith(f"| {env_id} |")]


def test_a_block_says_how_its_env_was_measured_and_holds_its_rows():
    block = _blocks("python benchmarks/vs_peers.py --envs Acrobot-v1", "Acrobot-v1", "12.5 s", 1.5)["Acrobot-v1"]
    lines = block.splitlines()
    assert lines[:3] == ["<!-- vs_peers env: Acrobot-v1 -->", "### Acrobot-v1", ""]
    assert lines[3].startswith("Measured ") and "(`python benchmarks/vs_peers.py --envs Acrobot-v1`)" in lines[3]
    assert "load average (1, 5, 15 min) 1.50, 1.50, 1.50 before" in lines[3] and "median 0.25 cores" in lines[3]
    assert "Seeds [1, 2]; solve runs capped at 60 s" in lines[3] and "Versions: sf_hydra: torch x." in lines[3]
    assert lines[5] == "| " + " | ".join(vs_peers.HEADERS) + " |"
    assert lines[7:] == ["| Acrobot-v1 | sf_hydra | shipped defaults | 12.5 s | 10k | 2 / 2 | - | - | - | - | - |",
                         "| Acrobot-v1 | Stable-Baselines3 PPO (RL Zoo) | zoo | - | - | 0 / 2 | - | - | - | - "
                         "| cap 60 s |"]


def test_results_section_is_added_with_its_heading_where_the_page_has_no_markers(tmp_path):
    page = tmp_path / "results.md"
    page.write_text("# Results\n\n## Other\n\ntext\n")
    write_results(_blocks("run A", "CartPole-v1", "9.0 s", 1.0), page)
    text = page.read_text()
    assert text.startswith("# Results\n\n## Other\n\ntext\n\n## Against the peers (`vs_peers.py`) {#vs-peers}\n\n"
                           f"{BEGIN}\n<!-- vs_peers env: CartPole-v1 -->\n### CartPole-v1\n")
    assert text.endswith(f"{END}\n") and text.count(BEGIN) == 1
    # every other env: one "not run yet" row each, in a table of its own
    for env_id in ENVS:
        if env_id != "CartPole-v1":
            assert _env_rows(page, env_id) == [f"| {env_id} | all | " + "- | " * 8 + "not run yet |"]


def test_a_pass_of_one_env_keeps_the_other_envs_rows_and_provenance(tmp_path):
    page = tmp_path / "results.md"
    page.write_text("# Results\n")
    write_results(_blocks("run A", "CartPole-v1", "9.0 s", 1.0), page)
    cartpole = vs_peers.parse_blocks(_section(page))["CartPole-v1"]
    page.write_text(page.read_text() + "\n## After\n\ntext after\n")
    write_results(_blocks("run B", "Acrobot-v1", "20.0 s", 4.0), page)
    text = page.read_text()
    blocks = vs_peers.parse_blocks(_section(page))
    assert list(blocks) == ["CartPole-v1", "Acrobot-v1"]  # ENVS's order
    assert blocks["CartPole-v1"] == cartpole and "(`run A`)" in cartpole and "1.00, 1.00, 1.00 before" in cartpole
    assert "(`run B`)" in blocks["Acrobot-v1"] and "4.00, 4.00, 4.00 before" in blocks["Acrobot-v1"]
    assert _env_rows(page, "CartPole-v1")[0].split(" | ")[3] == "9.0 s"
    assert _env_rows(page, "Acrobot-v1")[0].split(" | ")[3] == "20.0 s"
    assert text.count(BEGIN) == 1 and f"{END}\n\n## After\n\ntext after\n" in text
    assert _env_rows(page, "doom_basic")[0].endswith("| not run yet |")


def test_rerunning_an_env_replaces_only_its_rows_and_provenance(tmp_path):
    page = tmp_path / "results.md"
    page.write_text("# Results\n")
    write_results({**_blocks("run A", "CartPole-v1", "9.0 s", 1.0), **_blocks("run A", "Acrobot-v1", "20.0 s", 1.0)},
                  page)
    acrobot = vs_peers.parse_blocks(_section(page))["Acrobot-v1"]
    write_results(_blocks("run C", "CartPole-v1", "7.0 s", 2.0), page)
    blocks = vs_peers.parse_blocks(_section(page))
    assert blocks["Acrobot-v1"] == acrobot
    assert "(`run C`)" in blocks["CartPole-v1"] and "(`run A`)" not in blocks["CartPole-v1"]
    assert [row.split(" | ")[3] for row in _env_rows(page, "CartPole-v1")] == ["7.0 s", "-"]  # no row of run A left
    assert _section(page).count("<!-- vs_peers env: CartPole-v1 -->") == 1


def test_a_section_in_the_per_env_format_round_trips_unchanged(tmp_path):
    page = tmp_path / "results.md"
    page.write_text("# Results\n")
    write_results({**_blocks("run A", "CartPole-v1", "9.0 s", 1.0), **_blocks("run B", "doom_basic", "-", 3.0)},
                  page)
    before = page.read_text()
    assert vs_peers.section(vs_peers.parse_blocks(_section(page))) == _section(page)
    write_results({}, page)  # a merge of nothing leaves the page as it was
    assert page.read_text() == before


def test_a_section_from_before_the_per_env_blocks_is_split_by_env(tmp_path):
    """The one-paragraph, one-table section the writer wrote before: each env keeps its rows and that paragraph;
    the placeholder rows of envs it did not run become "not run yet"."""
    header = "| " + " | ".join(vs_peers.HEADERS) + " |\n|" + "|".join("---" for _ in vs_peers.HEADERS) + "|"
    old = (f"{BEGIN}\nMeasured then (`run old`).\n\n{header}\n| CartPole-v1 | sf_hydra | d | 9.0 s | - | 2 / 2 | - | - "
           "| - | - | - |\n| Acrobot-v1 | sf_hydra | d | 20.0 s | - | 2 / 2 | - | - | - | - | - |\n| doom_basic | all "
           "| - | - | - | - | - | - | - | - | not run this round (why) |\n" + END)
    page = tmp_path / "results.md"
    page.write_text(f"# Results\n\n{old}\n")
    write_results(_blocks("run new", "Acrobot-v1", "15.0 s", 1.0), page)
    blocks = vs_peers.parse_blocks(_section(page))
    assert list(blocks) == ["CartPole-v1", "Acrobot-v1"]
    assert "Measured then (`run old`)." in blocks["CartPole-v1"] and _env_rows(page, "CartPole-v1")[0].split(
        " | ")[3] == "9.0 s"
    assert [row.split(" | ")[3] for row in _env_rows(page, "Acrobot-v1")] == ["15.0 s", "-"]
    assert _env_rows(page, "doom_basic")[0].endswith("| not run yet |")


def test_the_results_page_holds_each_env_once_in_the_writers_format():
    """docs/results.md as the writer reads it back: each measured env once, in the table's order, under a line
    that names the vs_peers pass that measured it; every other env not run yet; nothing the writer would change."""
    page = REPO / "docs" / "results.md"
    blocks = vs_peers.parse_blocks(_section(page))
    assert {"CartPole-v1", "Acrobot-v1"} <= set(blocks)
    assert list(blocks) == [env_id for env_id in ENVS if env_id in blocks]
    for env_id, block in blocks.items():
        command = block.split("(`python benchmarks/vs_peers.py ", 1)[1].split("`", 1)[0]
        assert env_id in command.split("--envs ", 1)[1].split(" --", 1)[0].split(), (env_id, command)
    assert vs_peers.section(blocks) == _section(page)
    for env_id in set(ENVS) - set(blocks):
        assert _env_rows(page, env_id) == [f"| {env_id} | all | " + "- | " * 8 + "not run yet |"]
    assert all(len(row.split(" | ")) == len(vs_peers.HEADERS) for env_id in ENVS for row in _env_rows(page, env_id))
