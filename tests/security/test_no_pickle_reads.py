"""No code in src/ unpickles what another machine could have written. A scan of every module's syntax tree
finds each call that unpickles (pickle's, dill's and cloudpickle's load/loads/Unpickler, joblib.load,
numpy.load with allow_pickle, torch.load) or opens a pickling channel over a socket or file descriptor
(multiprocessing.connection's Connection, Client, Listener), whatever name it is imported under, and every
torch.distributed collective that pickles (all_gather_object, broadcast_object_list, ...: the learner ranks may be
other machines; learner/ddp.py sends JSON in tensors instead), which no exception allows. Each other call must be
one of:

- torch.load with weights_only=True (plain data and tensors only);
- numpy.load without allow_pickle;
- a pickle read sealed by this user's key: its line carries SEALED and the function that holds it calls
  `verify(` (sf_hydra.core.seal) on an earlier line;
- a documented use between a process and its own child, on ALLOWED below with the reason.

An ALLOWED entry that no longer matches a call fails too: the list stays as short as the code needs."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
SEALED = "# sealed: verified above"

UNPICKLING = {f"{module}.{name}" for module in ("pickle", "_pickle", "dill", "cloudpickle")
              for name in ("load", "loads", "Unpickler")} | {"joblib.load"}
CHANNELS = {f"multiprocessing.connection.{name}" for name in ("Connection", "Client", "Listener")}
PICKLING_COLLECTIVES = {f"torch.distributed.{name}" for name in (
    "all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list", "send_object_list",
    "recv_object_list")}

# (file under the repo, enclosing function, call) -> why it may unpickle
ALLOWED: Dict[Tuple[str, str, str], str] = {
    ("src/sf_hydra/envs/doom/players.py", "PlayerProcess.__init__", "multiprocessing.connection.Connection"):
        "a socketpair to the Doom player process this process just started: only its own child writes to it",
    ("src/sf_hydra/envs/doom/agent_process.py", "<module>", "multiprocessing.connection.Connection"):
        "the Doom player process's end of the socketpair its parent made and handed to it by file descriptor",
}


class _Calls(ast.NodeVisitor):
    """Every call of a module with its dotted name (imports resolved: `import pickle as p`, `from torch import
    load`), the function that holds it (Class.method, <module>) and the lines of `verify(` calls before it."""

    def __init__(self, tree: ast.Module):
        self.names = _imported_names(tree)
        self.scope: List[str] = []
        self.verify_lines: List[List[int]] = [[]]
        self.calls: List[Tuple[ast.Call, str, str, List[int]]] = []
        self.visit(tree)

    def _scoped(self, node) -> None:
        self.scope.append(node.name)
        if not isinstance(node, ast.ClassDef):
            self.verify_lines.append([])
        self.generic_visit(node)
        self.scope.pop()
        if not isinstance(node, ast.ClassDef):
            self.verify_lines.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Call(self, node: ast.Call) -> None:
        name = self.dotted(node.func)
        if name is not None and name.split(".")[-1] == "verify":
            self.verify_lines[-1].append(node.lineno)
        if name is not None:
            self.calls.append((node, name, ".".join(self.scope) or "<module>", list(self.verify_lines[-1])))
        self.generic_visit(node)

    def dotted(self, func: ast.expr) -> Optional[str]:
        parts = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        return ".".join([self.names.get(func.id, func.id), *reversed(parts)])


def _imported_names(tree: ast.Module) -> Dict[str, str]:
    """Local name -> the dotted name it was imported as, from every import of the module (at any depth)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_constant(node: Optional[ast.expr], value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _unsafe(call: ast.Call, name: str, line: str, verified_before: List[int]) -> Optional[str]:
    """Why this call may unpickle untrusted bytes (None: it reads plain data only, or sealed data)."""
    if name == "torch.load":
        return None if _is_constant(_keyword(call, "weights_only"), True) else "torch.load without weights_only=True"
    if name == "numpy.load":
        allow = _keyword(call, "allow_pickle")
        return None if allow is None or _is_constant(allow, False) else "numpy.load with allow_pickle"
    if name in UNPICKLING:
        if SEALED in line and any(n < call.lineno for n in verified_before):
            return None
        return f"{name} not sealed (the line needs {SEALED!r} and a verify( call before it in its function)"
    if name in CHANNELS:
        return f"{name}: a pickling channel"
    if name in PICKLING_COLLECTIVES:
        return f"{name}: a collective that pickles across machines"
    return None


def _sites(root: Path) -> Iterator[Tuple[str, int, str, str, str]]:
    """(file relative to the repo, line, function, call, why) of each call in the modules under `root` that may
    unpickle untrusted bytes."""
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for call, name, function, verified in _Calls(ast.parse(text, str(path))).calls:
            why = _unsafe(call, name, lines[call.lineno - 1], verified)
            if why is not None:
                yield str(path.relative_to(REPO) if path.is_relative_to(REPO) else path), call.lineno, function, \
                    name, why


def test_nothing_in_src_unpickles_what_another_machine_could_have_written():
    sites = list(_sites(SRC))
    refused = [f"{file}:{line} in {function}: {why}" for file, line, function, name, why in sites
               if (file, function, name) not in ALLOWED or name in PICKLING_COLLECTIVES]
    assert not refused, "unpickling of bytes that may come from elsewhere:\n" + "\n".join(refused)
    stale = set(ALLOWED) - {(file, function, name) for file, _, function, name, _ in sites}
    assert not stale, f"allow-list entries that match no call any more (remove them): {sorted(stale)}"


FOUND = """
import pickle as p
from torch import load
import numpy as np
from multiprocessing.connection import Client
from sf_hydra.core.seal import verify
import torch.distributed as dist
from torch.distributed import broadcast_object_list

def plain(b):
    return p.loads(b)

def comment_only(b):
    return p.loads(b)  # sealed: verified above

def verified_after(b, mac):
    state = p.loads(b)  # sealed: verified above
    verify("x", b, mac)
    return state

class Reader:
    def read(self, path):
        return load(path), load(path, weights_only=False), np.load(path, allow_pickle=True), Client(path)

def gathered(value, out):
    dist.all_gather_object(out, value)
    broadcast_object_list(out)
"""

PASSED = """
import pickle
import torch
import numpy
from sf_hydra.core import seal

def sealed(b, mac):
    if not seal.verify("x", b, mac):
        raise ValueError(mac)
    return pickle.loads(b)  # sealed: verified above

def plain_data(path):
    return torch.load(path, weights_only=True), numpy.load(path), numpy.load(path, allow_pickle=False)
"""


def test_the_scan_finds_each_kind_of_unpickling_under_any_name(tmp_path):
    (tmp_path / "found.py").write_text(FOUND)
    (tmp_path / "passed.py").write_text(PASSED)
    found = [(Path(file).name, function, name) for file, _, function, name, _ in _sites(tmp_path)]
    assert found == [("found.py", "plain", "pickle.loads"), ("found.py", "comment_only", "pickle.loads"),
                     ("found.py", "verified_after", "pickle.loads"), ("found.py", "Reader.read", "torch.load"),
                     ("found.py", "Reader.read", "torch.load"), ("found.py", "Reader.read", "numpy.load"),
                     ("found.py", "Reader.read", "multiprocessing.connection.Client"),
                     ("found.py", "gathered", "torch.distributed.all_gather_object"),
                     ("found.py", "gathered", "torch.distributed.broadcast_object_list")]
