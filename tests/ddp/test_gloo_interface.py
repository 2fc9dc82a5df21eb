"""The interface the learner ranks of a Slurm job on several nodes give gloo (ranks.use_interface_to_peers): the
one that routes to the job's other nodes, unless GLOO_SOCKET_IFNAME is set. Here the "other node" is localhost, so
the route is over lo; tests/slurm/test_slurm_two_nodes.py runs it across two real nodes."""

from sf_hydra.app import ranks


def test_gloo_uses_the_interface_that_reaches_the_other_nodes(monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "here")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "")  # unset for the rule; restored (or removed) after the test
    monkeypatch.setattr(ranks, "_slurm_job_nodes", lambda: ["here", "localhost"])
    line = ranks.use_interface_to_peers()
    assert line == "node here: gloo over lo (127.0.0.1), the interface that reaches node localhost (127.0.0.1)"
    assert ranks.os.environ["GLOO_SOCKET_IFNAME"] == "lo"


def test_a_set_gloo_interface_and_a_one_node_job_are_left_alone(monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "here")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "ib0")
    monkeypatch.setattr(ranks, "_slurm_job_nodes", lambda: ["here", "there"])
    assert ranks.use_interface_to_peers() == "node here: gloo uses GLOO_SOCKET_IFNAME=ib0 (set outside)"
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "")
    monkeypatch.setattr(ranks, "_slurm_job_nodes", lambda: ["here"])
    assert ranks.use_interface_to_peers() is None and ranks.os.environ["GLOO_SOCKET_IFNAME"] == ""
