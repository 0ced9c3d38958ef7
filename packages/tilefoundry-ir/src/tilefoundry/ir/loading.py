"""Reading a Module's weights: `prepare_module` (offline), `load_module`, and `LoadedModule`.

`Module.prepare(raw, out_dir)` and `Module.load(resource)` are thin methods over the two
functions here (seed 000 §1.1.2):

    Model.prepare(DictResource(hf_state_dict, alias=...), "ckpt/")     # converters, stacking
    loaded = Model.load(SafetensorsResource("ckpt/", device="cpu"))    # a LoadedModule
    logits = loaded(x)                       # forward: activations alone, constants filled by name

A Module is pure IR and is never written to: each `load` returns an independent reading.
"""

from __future__ import annotations

import json
import os
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import torch
from safetensors.torch import save_file

from .dims import DimExpr, DimVar, evaluate_dim
from .dtypes import dtype_of
from .errors import DSLError, EvalError, LoadError
from .evaluator import evaluate
from .hir import Function
from .ops.base import evaluating_on
from .types import TensorType

if TYPE_CHECKING:
    from .module import Module

SHARD_NAME = "model-00001-of-00001.safetensors"
INDEX_NAME = "model.safetensors.index.json"


class Resource(Protocol):
    """What loading reads through: the runtime's RuntimeResource (seed 000 §1.5)."""

    def load(self, name: str) -> torch.Tensor: ...

    def load_group(self, name: str) -> tuple[torch.Tensor, ...] | None: ...

    def subtree(self, seg: str) -> Resource: ...


def validate_weight(key: str, declared: TensorType, tensor: object) -> torch.Tensor:
    """Return `tensor` if its dtype and shape match `declared` exactly, else refuse.

    A DimVar extent must lie in its range and agree wherever the DimVar repeats.

    Raises:
        LoadError: naming the weight, its declared type and what was found.
    """
    if not isinstance(tensor, torch.Tensor):
        raise LoadError(
            f"weight {key!r}: declared {declared}, found {type(tensor).__name__}",
            where=key,
            expected=declared,
            got=type(tensor).__name__,
        )
    shape = tuple(tensor.shape)
    found = f"shape {shape} {_dtype_name(tensor.dtype)}"
    if _dtype_name(tensor.dtype) != declared.dtype.name or not _shape_fits(declared.shape, shape):
        raise LoadError(
            f"weight {key!r}: declared {declared}, found {found}", where=key, expected=declared, got=found
        )
    return tensor


def read_weight(resource: Resource, name: str, key: str, declared: TensorType) -> torch.Tensor:
    """Read weight `name` (checkpoint key `key`) from `resource` and validate it against `declared`.

    Raises:
        LoadError: the weight is missing, resolves to a one-to-many group (stacking is prepare's
            job), or its dtype/shape differs from `declared`.
    """
    try:
        tensor = resource.load(name)
    except KeyError as e:
        raise LoadError(
            f"weight {key!r}: declared {declared}, not found in the resource ({e})",
            where=key,
            expected=declared,
        ) from e
    except TypeError as e:
        # The resource refuses a one-to-many alias on load: only prepare assembles groups.
        raise LoadError(
            f"weight {key!r}: declared {declared}, but {e}; loading reads one tensor per weight, "
            f"Module.prepare stacks a group into one",
            where=key,
            expected=declared,
        ) from e
    return validate_weight(key, declared, tensor)


def _dtype_name(dt: torch.dtype) -> str:
    try:
        return dtype_of(dt).name
    except ValueError:
        return str(dt).removeprefix("torch.")


def _shape_fits(declared: tuple, shape: tuple[int, ...]) -> bool:
    if len(declared) != len(shape):
        return False
    bound: dict[DimVar, int] = {}
    for d, n in zip(declared, shape, strict=True):
        if isinstance(d, DimVar) and (not d.admits(n) or bound.setdefault(d, n) != n):
            return False
    for d, n in zip(declared, shape, strict=True):
        if isinstance(d, int) and d != n:
            return False
        if isinstance(d, DimExpr):
            try:
                if evaluate_dim(d, bound) != n:
                    return False
            except KeyError:
                return False
    return True


class FunctionRunner:
    """One function of a reading: called with activations alone, constants filled by name."""

    def __init__(self, loaded: LoadedModule, fn: Function) -> None:
        self.loaded = loaded
        self.fn = fn

    @property
    def where(self) -> str:
        return f"{self.loaded.path}.{self.fn.name}"

    def __call__(self, *acts: Any) -> Any:
        fn = self.fn
        names = [p.name for p in fn.activations]
        if len(acts) != len(names):
            if fn.weights and len(acts) == len(fn.params):
                raise EvalError(
                    f"{self.where}: a loaded function takes activations alone ({', '.join(names)}), got "
                    f"{len(acts)} arguments — the full parameter list "
                    f"({', '.join(p.name for p in fn.params)}) is for the Module's own runner "
                    f"(loaded.module.{fn.name}); here the weights come from the loaded constants",
                    where=self.where,
                    expected=len(names),
                    got=len(acts),
                )
            raise EvalError(
                f"{self.where}: takes {len(names)} activations ({', '.join(names)}), "
                f"got {len(acts)} arguments",
                where=self.where,
                expected=len(names),
                got=len(acts),
            )
        given = dict(zip(names, acts, strict=True))
        device = self.loaded.placement(fn.name, given)
        args = [self.loaded.constant(p.name, fn.name) if p.const else given[p.name] for p in fn.params]
        if device is None:
            return evaluate(fn, *args)
        with evaluating_on(device):
            return evaluate(fn, *args)

    def __repr__(self) -> str:
        return f"<loaded function {self.where}({', '.join(p.name for p in self.fn.activations)})>"


class LoadedModule:
    """One reading of a Module: the Module, the constants read for it, and the child readings.

    Attribute access mirrors the Module's: a function gives a FunctionRunner (activations
    alone), a child name its LoadedModule, a tuple-child group name (`layers`) the tuple of its
    readings, and a method is bound to this reading.

    Attributes:
        module: the Module behind this reading.
        constants: weight name -> tensor of this node (children hold their own).
        modules: the child readings, in the Module's child order.
        path: the dotted module path of this node, root name first (for messages).
    """

    def __init__(
        self,
        module: Module,
        constants: Mapping[str, torch.Tensor],
        modules: tuple[LoadedModule, ...] = (),
        path: str | None = None,
    ) -> None:
        self.module = module
        self.constants = types.MappingProxyType(dict(constants))
        self.modules = tuple(modules)
        self.path = module.name if path is None else path

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not instance attributes; guard against recursion
        # while the instance is half-built (copy, pickle).
        if name.startswith("__") or "module" not in self.__dict__:
            raise AttributeError(name)
        mod = self.module
        if name in mod.functions:
            return FunctionRunner(self, mod.functions[name])
        for child in self.modules:
            if child.module.name == name:
                return child
        group = [c for c in self.modules if c.module.name.rpartition(".")[0] == name]
        if group:
            return tuple(sorted(group, key=lambda c: int(c.module.name.rpartition(".")[2])))
        if name in mod.methods:
            return types.MethodType(mod.methods[name], self)
        if name in mod.attributes:
            return mod.attributes[name]
        raise AttributeError(
            f"LoadedModule {self.path} has no {name!r}; functions: {', '.join(mod.functions) or 'none'}; "
            f"children: {', '.join(c.module.name for c in self.modules) or 'none'}; "
            f"methods: {', '.join(mod.methods) or 'none'}"
        )

    def constant(self, name: str, fn_name: str) -> torch.Tensor:
        """The bound constant `name` that function `fn_name` declares; EvalError if unbound."""
        if name not in self.constants:
            raise EvalError(
                f"{self.path}.{fn_name}: weight {name!r} is not bound in this reading "
                f"(bound: {', '.join(self.constants) or 'none'})",
                where=f"{self.path}.{fn_name}",
                expected=name,
                got=sorted(self.constants),
            )
        return self.constants[name]

    def placement(self, fn_name: str, acts: Mapping[str, Any]) -> torch.device | None:
        """The one device this reading's constants and the tensor activations `acts` sit on.

        None when there is no tensor at all (the evaluator's default stays in place).

        Raises:
            EvalError: they sit on more than one device, naming what sits where.
        """
        where: dict[torch.device, list[str]] = {}
        for name, t in self.constants.items():
            where.setdefault(t.device, []).append(f"constant {name!r}")
        for name, a in acts.items():
            if isinstance(a, torch.Tensor):
                where.setdefault(a.device, []).append(f"activation {name!r}")
        if len(where) > 1:
            sites = "; ".join(f"{dev}: {', '.join(items)}" for dev, items in where.items())
            raise EvalError(
                f"{self.path}.{fn_name}: constants and activations must sit on one device, found {sites}; "
                f"build the activations where the resource loaded the weights",
                where=f"{self.path}.{fn_name}",
                expected="one device",
                got={str(d): items for d, items in where.items()},
            )
        return next(iter(where), None)

    def forward(self, *acts: Any) -> Any:
        """Run the step: the `forward` method if the Module defines one, else the entry function.

        Raises:
            EvalError: the Module has neither, naming the functions and methods to call instead.
        """
        mod = self.module
        if "forward" in mod.methods:
            return mod.methods["forward"](self, *acts)
        if mod.entry is not None:
            return getattr(self, mod.entry)(*acts)
        raise EvalError(
            f"LoadedModule {self.path} has no forward method and no entry function; call one of its "
            f"functions ({', '.join(mod.functions) or 'none'}) or methods "
            f"({', '.join(mod.methods) or 'none'}) by name",
            where=self.path,
            expected="a forward method or an entry",
            got="neither",
        )

    __call__ = forward

    def __repr__(self) -> str:
        return f"<LoadedModule {self.path} constants={len(self.constants)} children={len(self.modules)}>"


def load_module(mod: Module, resource: Resource) -> LoadedModule:
    """Read `mod`'s weights from `resource`, each strictly validated, into a new LoadedModule tree.

    Children are read under `resource.subtree(child.name)`. The Module is never written to; a
    failed load raises and returns nothing, so no reading is ever half-loaded.

    Raises:
        LoadError: a weight is missing or its dtype/shape differs from its declaration.
    """
    return _load(mod, resource, mod.name, "")


def _load(mod: Module, resource: Resource, path: str, prefix: str) -> LoadedModule:
    constants = {
        name: read_weight(resource, name, prefix + name, declared) for name, declared in mod.weights.items()
    }
    children = tuple(
        _load(c, resource.subtree(c.name), f"{path}.{c.name}", f"{prefix}{c.name}.") for c in mod.children
    )
    return LoadedModule(mod, constants, children, path)


def prepare_module(
    mod: Module, raw: Resource, out_dir: str | os.PathLike[str], *, device: str = "cpu"
) -> None:
    """Convert a raw checkpoint into the directory `load_module` reads.

    For each declared weight: fetch its converter's parameters from `raw` by their own raw
    names (a one-to-many alias is stacked with torch.stack, prepare's only reshaping), run the
    converter through the evaluator on `device`, and validate the result against the declared
    ConstTensor type; a weight with no converter is validated unchanged. Writes one safetensors
    shard and `model.safetensors.index.json`, keyed by dot-joined module paths. Nothing is
    written unless every weight converts and validates.

    Raises:
        LoadError: a raw tensor is missing, or a result's dtype/shape differs from its declaration.
        DSLError: two functions of one module register a converter for the same weight.
    """
    tensors: dict[str, torch.Tensor] = {}
    _prepare(mod, raw, "", tensors, torch.device(device))
    os.makedirs(out_dir, exist_ok=True)
    save_file({k: t.contiguous() for k, t in tensors.items()}, os.path.join(out_dir, SHARD_NAME))
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict.fromkeys(sorted(tensors), SHARD_NAME)}
    with open(os.path.join(out_dir, INDEX_NAME), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def _prepare(
    mod: Module, raw: Resource, prefix: str, out: dict[str, torch.Tensor], device: torch.device
) -> None:
    converters = _converters_of(mod)
    for name, declared in mod.weights.items():
        key = prefix + name
        conv = converters.get(name)
        if conv is None:
            value = _fetch(raw, name, key)
        else:
            args = [_fetch(raw, p.name, key).to(device) for p in conv.params]
            with evaluating_on(device):
                value = evaluate(conv, *args)
        out[key] = validate_weight(key, declared, value).detach().to("cpu")
    for child in mod.children:
        _prepare(child, raw.subtree(child.name), f"{prefix}{child.name}.", out, device)


def _converters_of(mod: Module) -> dict[str, Function]:
    found: dict[str, tuple[str, Function]] = {}
    for fn in mod.functions.values():
        for weight, conv in fn.converters.items():
            if weight in found and found[weight][1] is not conv:
                raise DSLError(
                    f"module {mod.name!r}: weight {weight!r} has two converters, on {found[weight][0]!r} and "
                    f"{fn.name!r}; register one",
                    where=conv.loc,
                    expected="one converter per weight",
                    got=[found[weight][0], fn.name],
                )
            found[weight] = (fn.name, conv)
    return {w: conv for w, (_, conv) in found.items()}


def _fetch(raw: Resource, name: str, key: str) -> torch.Tensor:
    """The raw tensor `name` that weight `key` is made from; a one-to-many alias is stacked."""
    group = raw.load_group(name)
    if group is not None:
        kinds = [f"shape {tuple(t.shape)} {_dtype_name(t.dtype)}" for t in group]
        if len(set(kinds)) > 1:
            # torch.stack would promote mixed dtypes silently; precision is the converter's job.
            members = ", ".join(f"[{i}] {k}" for i, k in enumerate(kinds))
            raise LoadError(
                f"weight {key!r}: the one-to-many group {name!r} mixes {members}; stacking needs one dtype "
                f"and shape",
                where=key,
                expected="one dtype and shape",
                got=kinds,
            )
        return torch.stack(tuple(group))
    try:
        return raw.load(name)
    except KeyError as e:
        raise LoadError(
            f"weight {key!r}: raw tensor {name!r} not found ({e})", where=key, expected=name
        ) from e


