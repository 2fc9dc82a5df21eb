"""Each config key's one-line meaning, read from the schema's own comments.

A schema field is documented where it is declared: a trailing `# comment` on its line, or
the comment lines right above it. `field_docs(cls)` parses the dataclass's source for them,
so `train.py --help` (sf_hydra/app/help.py) and the test that every key has a doc read the one
declaration there is, with no copy to keep in step.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import textwrap
import tokenize
from dataclasses import fields, is_dataclass
from functools import lru_cache
from typing import Dict

_TOOL_COMMENT = re.compile(r"^(noqa|type:|fmt:|pragma)\b")


def field_docs(cls: type) -> Dict[str, str]:
    """{field name: doc ('' when it has none)} for every field of dataclass `cls`, inherited
    ones documented where their class declares them (a subclass's redeclaration wins)."""
    assert is_dataclass(cls), cls
    docs: Dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if is_dataclass(klass):
            docs.update({name: doc for name, doc in _declared_docs(klass).items() if doc or name not in docs})
    return {f.name: docs.get(f.name, "") for f in fields(cls)}


def class_doc(cls: type) -> str:
    """The first line of a dataclass's own docstring ('' for the one dataclass generates)."""
    doc = cls.__dict__.get("__doc__") or ""
    if doc.startswith(f"{cls.__name__}("):
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split())


@lru_cache(maxsize=None)
def _declared_docs(cls: type) -> Dict[str, str]:
    source = textwrap.dedent(inspect.getsource(cls))
    comments: Dict[int, tuple] = {}  # line -> (text, whether the comment is the whole line)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if not _TOOL_COMMENT.match(text):
                comments[tok.start[0]] = (text, tok.line.strip().startswith("#"))
    class_def = ast.parse(source).body[0]
    docs = {}
    for node in class_def.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above, line = [], node.lineno - 1
        while line in comments and comments[line][1]:
            above.insert(0, comments[line][0])
            line -= 1
        trailing = [text for n, (text, whole) in sorted(comments.items())
                    if node.lineno <= n <= node.end_lineno and not whole]
        docs[node.target.id] = " ".join(above + trailing).strip()
    return docs
