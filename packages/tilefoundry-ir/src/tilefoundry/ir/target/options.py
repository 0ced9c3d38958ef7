"""Compile options: one declaration per option, and the check that refuses any other.

`compile(..., options={...})` hands its options to the planner and to the chosen target. Every
option is declared once, as an `Option`: the planner's common ones here (`PLANNER_OPTIONS`,
accepted by every target, since planning reads them whatever the target), a target's own through
its `tilefoundry_target_options` hook. `compile` checks the options against both before any
work (`check_options`), and readers take a value with `Option.read`, so the declared default is
the only default in the tree.

    VECTORIZE.read({})                     # True
    VECTORIZE.read({"vectorize": 1})       # PlanError: option vectorize must be True or False, got 1
    check_options({"vectorise": False}, PLANNER_OPTIONS, "cpu")
    # PlanError: cpu: unknown compile option 'vectorise' (did you mean 'vectorize'?);
    #            cpu accepts gemm, gemm_fusion, reassociate, vectorize
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import PlanError

PLANNER = "planner"


@dataclass(frozen=True)
class Option:
    """One compile option: its name, accepted values, default, meaning and owner.

    Attributes:
        name: the key users write in `options`.
        values: every accepted value, in the order the docs list them. A value matches by type
            and equality, so `1` is not `True` and `"1"` is not `1`.
        default: what an absent option means; one of `values`. None stands for "the target
            decides from the machine" (the meaning says how), and is then an accepted value.
        meaning: one line: what the option changes.
        owner: "planner" for the common options, else the name of the target declaring it.

    Raises:
        ValueError: `values` is empty or does not hold `default`.
    """

    name: str
    values: tuple[Any, ...]
    default: Any
    meaning: str
    owner: str = PLANNER

    def __post_init__(self) -> None:
        if not self.accepts(self.default):
            raise ValueError(
                f"option {self.name}: default {self.default!r} is not among its values ({self.expected})"
            )

    def accepts(self, value: object) -> bool:
        """True when `value` is one of the declared values (same type, equal)."""
        return any(type(v) is type(value) and v == value for v in self.values)

    @property
    def expected(self) -> str:
        """The accepted values as a message says them: "True or False", "one of auto, loop, atom"."""
        names = [str(v) for v in self.values]
        if len(names) == 2:
            return " or ".join(names)
        return "one of " + ", ".join(names)

    def refusal(self, value: object) -> str:
        """The text refusing `value`: "option gemm must be one of auto, loop, atom, got 'blas'"."""
        return f"option {self.name} must be {self.expected}, got {value!r}"

    def read(self, options: Mapping[str, Any]) -> Any:
        """The option's value in `options`, or its default when absent.

        Raises:
            PlanError: the value given is not one of the declared values, naming the option.
        """
        value = options.get(self.name, self.default)
        if not self.accepts(value):
            raise PlanError(self.refusal(value), where=_place(self.name), expected=self.values, got=value)
        return value


def _place(name: object) -> str:
    """Where an option sits in the caller's input, as errors name it: "options['gemm']"."""
    return f"options[{name!r}]"


# ---------------------------------------------------------------- the planner's common options

VECTORIZE = Option(
    "vectorize", (True, False), True, "innermost independent axis in vector packs with a scalar tail"
)
REASSOCIATE = Option(
    "reassociate", (False, True), False,
    "let vector lanes reorder any sum (else only max/min and sums whose op allows it)",
)
GEMM = Option(
    "gemm", ("auto", "loop", "atom"), "auto",
    "the GEMM atom where proved / always the checked loop / the atom or `PlanError` naming what blocked it",
)
GEMM_FUSION = Option(
    "gemm_fusion", ("auto", "all", "epilogues", "chains", "prologues", "none"), "auto",
    "what a GEMM atom fuses where it can: its element-wise consumer (epilogue), the row kernel writing "
    "its A (prologue), the GEMM reading its epilogue's output (chain). auto: epilogues (prologues "
    "measured slower on the H200, chains on the H100) / all: all three / epilogues only / epilogues "
    "and chains / prologues only / none",
)
PLANNER_OPTIONS = (VECTORIZE, REASSOCIATE, GEMM, GEMM_FUSION)


def check_options(options: Mapping[str, Any], declared: Iterable[Option], target: str) -> None:
    """Refuse any option that `declared` does not hold, or a value its declaration does not accept.

    Args:
        options: the compile options as the caller gave them.
        declared: the options `target` accepts (the planner's and its own).
        target: the target's name, for the message.

    Raises:
        PlanError: an unknown option (naming it, the closest declared name, and every accepted
            name) or a refused value (naming the option, the accepted values and what came);
            `where` is the option's place, "options['name']".
    """
    by_name = {o.name: o for o in declared}
    for name, value in options.items():
        option = by_name.get(name)
        if option is None:
            accepted = sorted(by_name)
            close = difflib.get_close_matches(str(name), accepted, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise PlanError(
                f"{target}: unknown compile option {name!r}{hint}; {target} accepts "
                f"{', '.join(accepted) or 'no options'}",
                where=_place(name), expected=tuple(accepted), got=name,
            )
        if not option.accepts(value):
            raise PlanError(f"{target}: {option.refusal(value)}", where=_place(name), expected=option.values,
                            got=value)
