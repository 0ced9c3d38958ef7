"""The benchmark's cases: what each computes in the DSL, its peers, its floor and its goals.

A `KernelCase` is one DSL function compiled with `tilefoundry.jit`; a `ModelCase` is a whole
causal LM from `tilefoundry.models`, compiled with `tilefoundry.twin`. Case ids read
family/variant/size ("gemm/qwen3-1.7b/gate_up/m16"); `select` filters them with the patterns
of `--cases`. Each module here builds one family at any size, so the plans (plans.py) list
the H200 shapes and the tests build the same cases small.
"""

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..floors import Work
from ..goals import Goal

# Peers by key (what --peers names) -> the name the table prints. cuBLAS is reached through
# torch.matmul; "sdpa flash" is torch's scaled_dot_product_attention with the flash backend forced.
PEERS = {
    "eager": "torch eager",
    "compile": "torch.compile",
    "cublas": "cuBLAS",
    "sdpa": "sdpa flash",
    "sdpa_gqa": "sdpa",
    "transformers": "transformers",
}


@dataclass(frozen=True)
class Peer:
    """A way a user would otherwise run the case.

    Attributes:
        key: its PEERS key.
        make: builds the callable, which takes the case's inputs (torch.compile wraps here,
            so its compilation happens in the run, after the dynamo caches were reset).
    """

    key: str
    make: Callable[[], Callable[..., Any]]

    @property
    def name(self) -> str:
        return PEERS[self.key]


def eager_and_compiled(fn: Callable[..., Any]) -> tuple[Peer, Peer]:
    """torch eager running `fn`, and torch.compile of the same function (static shapes)."""
    return Peer("eager", lambda: fn), Peer("compile", lambda: torch.compile(fn, dynamic=False))


def randn(
    gen: torch.Generator, shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """Seeded standard-normal data of `dtype` on `device` (never zeros)."""
    return torch.randn(tuple(shape), generator=gen, device=device, dtype=torch.float32).to(dtype)


def generator(device: torch.device, seed: int) -> torch.Generator:
    """A generator on `device` seeded with `seed`: one per input set."""
    return torch.Generator(device=device).manual_seed(seed)


@dataclass(frozen=True)
class KernelCase:
    """One DSL function against its peers.

    Attributes:
        id: family/variant/size, unique in a plan.
        shape: the shape column of the table.
        dtype: the dtype column.
        work: matrix flops and fewest bytes of one call.
        kernel: names the compiled kernel; cases with equal names share one build (a DimVar
            shape compiled once for several sizes).
        ours: builds the DSL function (a `tilefoundry.dsl.func`).
        inputs: (device, seed) -> the function's arguments, weights included.
        peers: what it is compared with.
        tolerance: rel_l2 bound of every output against the evaluator.
        goals: issue 7's goals for this case.
    """

    id: str
    shape: str
    dtype: str
    work: Work
    kernel: str
    ours: Callable[[], Any]
    inputs: Callable[[torch.device, int], tuple]
    peers: tuple[Peer, ...]
    tolerance: float = 1e-2
    goals: tuple[Goal, ...] = ()

    def compile(self, target: str, options: Mapping[str, Any] | None = None) -> Any:
        """The compiled function: `tilefoundry.jit(ours, target=target, options=options)`."""
        import tilefoundry

        return tilefoundry.jit(self.ours(), target=target, options=options)


@dataclass(frozen=True)
class ModelCase:
    """A causal LM decoding, compiled as a twin, against Hugging Face transformers.

    Attributes:
        id, shape, dtype, work, kernel, goals: as KernelCase's (work is of the whole call).
        config: a config.json document (the model's shape; weights are drawn at random).
        context: KV-cache length.
        kind: "decode_step" (one token at `position`) or "generate" (`new_tokens` after a
            prompt of `prompt_len`).
        tolerance: rel_l2 bound of logits and caches against the evaluator.
    """

    id: str
    shape: str
    dtype: str
    work: Work
    kernel: str
    config: Mapping[str, Any]
    context: int
    kind: str
    position: int = 0
    prompt_len: int = 8
    new_tokens: int = 1
    tolerance: float = 3e-2
    goals: tuple[Goal, ...] = ()

    def ours(self, target: str) -> Any:
        """The semantic Module for `target`: `causal_lm(config, context=, linear_layout=)`."""
        from tilefoundry.models import causal_lm, config_from_dict, linear_layout_of

        config = config_from_dict(dict(self.config), source=self.id)
        return causal_lm(config, context=self.context, linear_layout=linear_layout_of(target))

    def compile(self, target: str, options: Mapping[str, Any] | None = None) -> Any:
        """The compiled twin (not yet loaded): `tilefoundry.twin(sem, target=target, options=options)`."""
        import tilefoundry

        return tilefoundry.twin(self.ours(target), target=target, options=options)


Case = KernelCase | ModelCase


def family(case: Case) -> str:
    """The first segment of a case id."""
    return case.id.split("/", 1)[0]


def matches(case_id: str, pattern: str) -> bool:
    """A --cases pattern names a case id, a prefix of whole segments, or a glob over ids.

    matches("gemm/square/4096", "gemm")          # True: a leading segment
    matches("gemm/square/4096", "*/square/*")    # True: a glob
    matches("gemm/square/4096", "gem")           # False
    """
    return fnmatch.fnmatchcase(case_id, pattern) or fnmatch.fnmatchcase(case_id, pattern.rstrip("/") + "/*")


def select(cases: Sequence[Case], patterns: Sequence[str]) -> list[Case]:
    """The cases any pattern matches, in plan order; no patterns keeps them all.

    Raises:
        ValueError: a pattern that matches no case, naming the families there are.
    """
    if not patterns:
        return list(cases)
    for p in patterns:
        if not any(matches(c.id, p) for c in cases):
            families = ", ".join(dict.fromkeys(family(c) for c in cases))
            raise ValueError(f"--cases: {p!r} matches no case of this plan; families: {families}")
    return [c for c in cases if any(matches(c.id, p) for p in patterns)]
