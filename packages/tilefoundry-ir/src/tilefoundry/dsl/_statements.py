"""The statement check: a @func body may use only statements that trace to a dataflow graph.

Tracing runs the body once, so Python that only happens at trace time (constants, `if` on
compile-time values, `for` over ranges and tuples, helper functions, `with Mesh(...)`) is
fine. Statements whose meaning depends on running more than once, on exceptions, or on state
outside the body have no graph form; this pass finds them in the source before tracing, so the
refusal names their line even when the tracing run would never reach them.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable

from ..ir.errors import DSLError, SourceLoc

# Statement class -> (what it is, what to write instead).
_REFUSED: dict[type, tuple[str, str]] = {
    ast.While: ("a while loop", "a for loop over a compile-time range or tuple"),
    ast.Try: ("try/except", "no exception handling; a @func body is a pure dataflow graph"),
    ast.TryStar: ("try/except*", "no exception handling; a @func body is a pure dataflow graph"),
    ast.Raise: ("raise", "validate configuration outside the body, or assert on compile-time values"),
    ast.Global: ("global", "parameters and return values; a @func reads no outside state"),
    ast.Nonlocal: ("nonlocal", "parameters and return values; a @func reads no outside state"),
    ast.Import: ("import", "an import at module level"),
    ast.ImportFrom: ("import", "an import at module level"),
    ast.Delete: ("del", "rebinding a name; values are immutable"),
    ast.ClassDef: ("a class definition", "a class at module level"),
    ast.AsyncFunctionDef: ("an async function", "a plain helper function"),
    ast.AsyncFor: ("async for", "a for loop over a compile-time range or tuple"),
    ast.AsyncWith: ("async with", "with Mesh(...) for placement scopes"),
    ast.Yield: ("yield", "return the results as a tuple"),
    ast.YieldFrom: ("yield from", "return the results as a tuple"),
    ast.Await: ("await", "a plain call; a @func body runs synchronously"),
}


def check_statements(fn: Callable[..., object], kind: str = "@func") -> None:
    """Refuse the first unsupported statement in `fn`'s body, naming its file and line.

    A function whose source is unavailable (built by `exec`) is not checked here; tracing still
    refuses data-dependent control flow.

    Raises:
        DSLError: naming the statement, its location, and what to write instead.
    """
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return
    tree = ast.parse(textwrap.dedent("".join(lines)))
    (top,) = tree.body
    assert isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef))
    file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    if isinstance(top, ast.AsyncFunctionDef):
        _refuse(top, file, first, kind, fn.__name__)
    for stmt in top.body:
        for node in ast.walk(stmt):
            if type(node) in _REFUSED:
                _refuse(node, file, first, kind, fn.__name__)


def _refuse(node: ast.AST, file: str, first: int, kind: str, name: str) -> None:
    what, instead = _REFUSED[type(node)]
    raise DSLError(
        f"unsupported statement in {kind} {name!r}: {what}; use {instead}",
        where=SourceLoc(file, first + node.lineno - 1),  # type: ignore[attr-defined]
        expected=instead,
        got=what,
    )
