"""check: run a candidate (and a reference) on the same inputs and measure every output."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from tilefoundry.check._predicates import Predicate
from tilefoundry.check._report import OutputCheck, Report

# TileFoundry's dtype names; the check package depends on torch alone, so it keeps its own table.
_DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float8_e4m3fn: "fp8e4m3",
    torch.float8_e5m2: "fp8e5m2",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "bool",
}


def _dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def _flatten(value: Any, path: str, what: str) -> list[tuple[str, torch.Tensor]]:
    """(path, tensor) for every leaf of a tensor or nested tuple, depth first.

    # ((a, b), c) at "output" -> output[0][0], output[0][1], output[1]
    """
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, tuple):
        return [leaf for i, item in enumerate(value) for leaf in _flatten(item, f"{path}[{i}]", what)]
    raise TypeError(
        f"check: {what} {path} is {type(value).__name__}, expected a torch.Tensor or a tuple of them"
    )


def _validate_expect(expect: Any, reference: Callable | None) -> None:
    if not isinstance(expect, Mapping):
        raise TypeError(
            f"check: expect must be a mapping from output path to predicates, got {type(expect).__name__}"
        )
    for path, preds in expect.items():
        if isinstance(preds, Predicate) or not isinstance(preds, Sequence) or isinstance(preds, str):
            raise TypeError(
                f"check: expect[{path!r}] must be a list of predicates, got {type(preds).__name__}"
            )
        if not preds:
            raise ValueError(f"check: expect[{path!r}] is empty; give at least one predicate")
        for pred in preds:
            if isinstance(pred, type) and issubclass(pred, Predicate):
                bounds = ", ".join(f"{b}=..." for b in pred.bounds)
                raise TypeError(
                    f"check: expect[{path!r}] holds the class {pred.name}; instantiate it with its bounds: "
                    f"{pred.name}({bounds})"
                )
            if not isinstance(pred, Predicate):
                raise TypeError(f"check: expect[{path!r}] holds {type(pred).__name__}, expected a Predicate")
            if reference is None and pred.needs_reference:
                raise ValueError(
                    f"check: expect[{path!r}] uses {pred.name}, which needs a reference, but reference "
                    "is None; without a reference only reference-free predicates apply (nan_inf)"
                )


def _match_reference(produced: list[tuple[str, torch.Tensor]], ref: list[tuple[str, torch.Tensor]]) -> None:
    cand_paths, ref_paths = [p for p, _ in produced], [p for p, _ in ref]
    if cand_paths != ref_paths:
        raise ValueError(
            "check: candidate result structure differs from the reference's: candidate produced "
            f"{', '.join(cand_paths)}; reference produced {', '.join(ref_paths)}"
        )
    for (path, c), (_, r) in zip(produced, ref, strict=True):
        if c.shape != r.shape:
            raise ValueError(
                f"check: {path} shape differs: candidate {tuple(c.shape)}, reference {tuple(r.shape)}"
            )
        if c.dtype != r.dtype:
            raise ValueError(
                f"check: {path} dtype differs: candidate {_dtype_name(c.dtype)}, "
                f"reference {_dtype_name(r.dtype)}"
            )


def _match_expect(
    produced: list[tuple[str, torch.Tensor]], expect: Mapping[str, Sequence[Predicate]]
) -> None:
    paths = [p for p, _ in produced]
    listing = ", ".join(paths)
    for path in expect:
        if path not in paths:
            raise ValueError(f"check: expect names {path!r}, which was not produced; produced: {listing}")
    for path, tensor in produced:
        if path not in expect:
            raise ValueError(
                f"check: {path} has no predicates; expect must give every produced tensor a non-empty "
                f"list (produced: {listing})"
            )
        if tensor.is_complex():
            raise ValueError(
                f"check: {path} is {_dtype_name(tensor.dtype)}; complex outputs are not supported"
            )
        if tensor.is_floating_point():
            continue
        for pred in expect[path]:
            if not pred.discrete:
                raise ValueError(
                    f"check: {path} is {_dtype_name(tensor.dtype)}; {pred.name} is not meaningful on integer "
                    "or boolean outputs, use exact comparison: equal()"
                )


def check(
    candidate: Callable[..., Any],
    reference: Callable[..., Any] | None,
    inputs: tuple,
    *,
    expect: Mapping[str, Sequence[Predicate]],
) -> Report:
    """Run candidate(*inputs) and reference(*inputs), and measure each output against expect.

    Results (a tensor or a nested tuple of tensors) flatten to paths "output", "output[0]",
    "output[1][0]", ...; expect maps every such path to a non-empty list of predicates. The
    reference is moved to the candidate's device for measuring. Any callable works: a runtime
    twin's forward, a LoadedModule, a torch function.

    Args:
        candidate: what is judged.
        reference: what it is judged against, or None to judge the candidate alone (only
            predicates whose needs_reference is false then apply).
        inputs: the positional arguments, each a tensor or a nested tuple of tensors.
        expect: predicates per output path.

    Returns:
        The Report; its `passed` is true only when every predicate on every output passed.

    Raises:
        TypeError: a callable, input, result leaf, expect entry or predicate of the wrong kind.
        ValueError: an empty result, a structure / shape / dtype mismatch with the reference, an
            expect path that was not produced or a produced tensor without predicates, a
            reference predicate without a reference, or an inexact predicate on an integer
            or boolean output.

    Example:
        >>> check(twin.forward, loaded.forward, (x,), expect={"output": [rel_l2(max=1e-2)]})
    """
    if not callable(candidate):
        raise TypeError(f"check: candidate must be callable, got {type(candidate).__name__}")
    if reference is not None and not callable(reference):
        raise TypeError(f"check: reference must be callable or None, got {type(reference).__name__}")
    if not isinstance(inputs, tuple):
        raise TypeError(
            f"check: inputs must be a tuple of positional arguments, got {type(inputs).__name__}; "
            "wrap a single argument as (x,)"
        )
    _flatten(inputs, "inputs", "input")
    _validate_expect(expect, reference)

    produced = _flatten(candidate(*inputs), "output", "candidate result")
    if not produced:
        raise ValueError("check: the candidate's result flattens to no tensors; an empty result cannot pass")
    ref: list[tuple[str, torch.Tensor | None]] = [(p, None) for p, _ in produced]
    if reference is not None:
        ref_leaves = _flatten(reference(*inputs), "output", "reference result")
        _match_reference(produced, ref_leaves)
        ref = ref_leaves
    _match_expect(produced, expect)

    outputs = []
    for (path, c), (_, r) in zip(produced, ref, strict=True):
        c = c.detach()
        r = None if r is None else r.detach().to(c.device)
        ref_norm = None if r is None else float(torch.linalg.vector_norm(r.to(torch.float64).flatten()))
        results = tuple(pred.measure(c, r if pred.needs_reference else None) for pred in expect[path])
        outputs.append(OutputCheck(path, tuple(c.shape), _dtype_name(c.dtype), ref_norm, results))
    return Report(tuple(outputs))
