"""torch's ONNX conversion failure said at the spec: :func:`onnx_error` names the spec
node that made the operator torch could not convert (from the program node's module
stack), the operator, and the innermost reason (used by
:func:`attngraph.lower.export.programs.export_onnx`)."""

from __future__ import annotations

import re
from typing import Any

from attngraph.errors import LoweringError

__all__ = ["onnx_error"]


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes, outermost first."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(out) < 20:
        out.append(cur)
        cur = cur.__cause__
    return out


def _culprit(graph: Any, program: Any, text: str) -> tuple[str, Any] | None:
    """The spec node (``"a" in block 'c1'``, its location) whose module made the
    program node named in torch's "Error when translating node %name"."""
    found = re.search(r"translating node %(\w+)", text)
    if found is None:
        return None
    fx = next((n for n in program.graph.nodes if n.name == found.group(1)), None)
    stack = fx.meta.get("nn_module_stack") if fx is not None else None
    if not stack:
        return None
    parts = str(list(stack.values())[-1][0]).split(".")  # nodes.c1.nodes.a
    ids = tuple(parts[i + 1].lstrip("@") for i, p in enumerate(parts[:-1]) if p == "nodes")
    for path, node in graph.walk():
        if ids and path == ids[:-1] and node.id == ids[-1]:
            where = f" (in {', '.join(repr(p) for p in path)})" if path else ""
            return f"node '{node.id}'{where}", node.loc
    return None


def onnx_error(graph: Any, program: Any, exc: BaseException) -> LoweringError:
    """torch's conversion failure as one error: the spec node that made the operator
    torch could not convert (when known), the operator, and the innermost reason."""
    chain = _chain(exc)
    text = "\n".join(str(e) for e in chain)
    reason = next((str(e).strip().splitlines()[0] for e in reversed(chain)
                   if str(e).strip()), type(exc).__name__)
    op = re.search(r"target=(torch\.ops\.[\w.]+)", text)
    what = f" ({op.group(1).removeprefix('torch.ops.')})" if op else ""
    who = _culprit(graph, program, text)
    hint = ("the torch.export program (--format pt2) runs; ONNX needs another form of "
            "this node, or torch's exporter a conversion for it")
    if who is None:
        msg = f"torch.onnx could not convert {graph.name}: {reason}{what}"
        return LoweringError(msg, None, hint)
    msg = f"torch.onnx could not convert {who[0]} of {graph.name}: {reason}{what}"
    return LoweringError(msg, who[1], hint)
