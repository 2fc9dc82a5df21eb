"""How far the run's config travels: from an entry function, every function that receives the config (or a
node of it) as an argument, followed through the calls that pass it on, found by reading the source (ast).

    python benchmarks/cfg_walk.py                                  # from sf_hydra.app.train:train, parameter cfg
    python benchmarks/cfg_walk.py --entry sf_hydra.app.enjoy:enjoy --param cfg --list

Printed: the files and functions visited, and the calls that handed the config on. A name carries the config
when it is the entry's parameter, a parameter a call handed it to, or a local assigned from one (`hw =
cfg.hardware`); a call hands it on when an argument is such a name or an attribute/subscript of one. Calls are
resolved through the module's imports (at any depth: the launch imports lazily), the module's own functions and
classes (a class: its __init__), and `self.method` within a class. What is not resolved (a call through a
variable, a library's function) ends the walk there: the figure is a lower bound, the same rule on both sides of
a comparison.
"""

from __future__ import annotations

import argparse
import ast
from collections import deque
from pathlib import Path
from typing import Dict, Optional, Set, Tuple

SRC = Path(__file__).resolve().parents[1] / "src"


class Module:
    """One module's functions (qualified names within it) and what its imports bind each name to."""

    def __init__(self, name: str, path: Path):
        self.name, self.path = name, path
        self.tree = ast.parse(path.read_text())
        self.functions: Dict[str, ast.AST] = {}
        self.classes: Set[str] = set()
        self.imports: Dict[str, str] = {}  # local name -> "module" or "module:attr"
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.functions[f"{node.name}.{item.name}"] = item
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.imports[alias.asname or alias.name.split(".")[0]] = alias.asname and alias.name or \
                        alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{base}:{alias.name}"


def load_modules() -> Dict[str, Module]:
    modules = {}
    for path in sorted((SRC / "sf_hydra").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = Module(name, path)
    return modules


def resolve(target: str, modules: Dict[str, Module]) -> Optional[Tuple[str, str]]:
    """("module", "qualified function") for "module:attr" (a function, or a class's __init__), following a
    package's re-exports; None outside sf_hydra or when nothing such is defined there."""
    module, _, attr = target.partition(":")
    for _ in range(5):  # re-exports through a package's __init__
        found = modules.get(module)
        if found is None or not attr:
            return None
        if attr in found.functions:
            return module, attr
        if attr in found.classes:
            return (module, f"{attr}.__init__") if f"{attr}.__init__" in found.functions else None
        if attr in found.imports:
            module, _, attr = found.imports[attr].partition(":")
            if not attr:  # `from package import submodule`
                return None
            continue
        sub = f"{module}.{attr}"
        return None if sub not in modules else None
    return None


def callee(call: ast.Call, module: Module, cls: Optional[str], modules) -> Optional[Tuple[str, str]]:
    f = call.func
    if isinstance(f, ast.Name):
        if f.id in module.functions:
            return module.name, f.id
        if f.id in module.classes:
            init = f"{f.id}.__init__"
            return (module.name, init) if init in module.functions else None
        if f.id in module.imports:
            return resolve(module.imports[f.id], modules)
    elif isinstance(f, ast.Attribute):
        if isinstance(f.value, ast.Name) and f.value.id in ("self", "cls") and cls:
            name = f"{cls}.{f.attr}"
            return (module.name, name) if name in module.functions else None
        if isinstance(f.value, ast.Name) and f.value.id in module.imports:
            bound = module.imports[f.value.id]
            target = bound.replace(":", ".") if ":" in bound else bound
            return resolve(f"{target}:{f.attr}", modules)
    return None


def root_name(node: ast.AST) -> Optional[str]:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def carried(function: ast.AST, params: Set[str]) -> Set[str]:
    """The names that hold the config in `function`: `params` and locals assigned from them (to a fixed point)."""
    names = set(params)
    changed = True
    while changed:
        changed = False
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and root_name(node.value) in names:
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id not in names:
                        names.add(target.id)
                        changed = True
    return names


def parameter_names(function: ast.AST):
    args = function.args
    return [a.arg for a in args.posonlyargs + args.args], {a.arg for a in args.kwonlyargs} | {a.arg for a in args.args}


def walk(entry: str, param: str, modules: Dict[str, Module]):
    module_name, _, function_name = entry.partition(":")
    start = (module_name, function_name)
    seen: Dict[Tuple[str, str], Set[str]] = {start: {param}}
    queue, handed = deque([start]), []
    while queue:
        module_name, qual = queue.popleft()
        module = modules[module_name]
        function = module.functions[qual]
        cls = qual.split(".")[0] if "." in qual else None
        names = carried(function, seen[(module_name, qual)])
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
            target = callee(call, module, cls, modules)
            if target is None:
                continue
            positional, keywords = parameter_names(modules[target[0]].functions[target[1]])
            offset = 1 if "." in target[1] and positional[:1] in (["self"], ["cls"]) else 0
            got = {positional[i + offset] for i, a in enumerate(call.args)
                   if i + offset < len(positional) and root_name(a) in names}
            got |= {k.arg for k in call.keywords if k.arg in keywords and root_name(k.value) in names}
            if not got:
                continue
            handed.append(((module_name, qual), target))
            if not got <= seen.get(target, set()):
                seen[target] = seen.get(target, set()) | got
                queue.append(target)
    return seen, handed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entry", default="sf_hydra.app.train:train")
    parser.add_argument("--param", default="cfg")
    parser.add_argument("--list", action="store_true", help="print every function visited")
    args = parser.parse_args()
    modules = load_modules()
    seen, handed = walk(args.entry, args.param, modules)
    files = sorted({modules[m].path.relative_to(SRC) for m, _ in seen})
    returns = sum(isinstance(n, ast.Return) for m, q in seen for n in ast.walk(modules[m].functions[q]))
    if args.list:
        for m, q in sorted(seen):
            print(f"  {m}:{q}")
        for path in files:
            print(f"  {path}")
    print(f"from {args.entry} ({args.param}): {len(files)} files, {len(seen)} functions, {len(handed)} calls "
          f"hand it on, {returns} return statements in the functions visited")


if __name__ == "__main__":
    main()
