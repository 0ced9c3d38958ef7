"""`@runtime_module(sem)` / `@runtime_func`: build a Module's runtime twin class, validated one-to-one.

    @runtime_module(layer_sem)
    class Layer:
        @runtime_func                         # the semantic @func's own signature, weights included
        def norm(self, x, g):
            return torch.nn.functional.rms_norm(x, x.shape[-1:], g)

        proj = MyCompiledProj(entry_abi_of(layer_sem.proj))   # a RuntimeFunction stand-in

    @runtime_module(model_sem)
    class Model:
        ...
        layers = Layer                        # a child is a class; one instance per child, ir=...

    twin = Model().load(SafetensorsResource(ckpt, device="cuda"))
    twin.layers[0].norm(x)                    # activations alone: weights come from load

Orchestration methods (forward, init_caches, ...) come verbatim from `sem.methods`; inside
them `self.<fn>` / `self.<child>` resolve to the twin's own kernels and children.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from tilefoundry.ir.errors import EvalError
from tilefoundry.ir.hir import Function
from tilefoundry.ir.loading import LoadError, read_weight
from tilefoundry.ir.module import Module

from .function import RuntimeFunction
from .module import RuntimeModule

_TAG = "__tilefoundry_runtime_func__"

# Attributes of every twin that a function, child or method of the same name would shadow and
# that the Module itself does not already reserve (it refuses `name`, `entry`, `load`, ...).
RESERVED = ("module", "modules")


def runtime_func(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Tag a method as the kernel body of the semantic @func of the same name.

    Its parameters after `self` are the semantic function's, in order, weights included; the
    twin fills the weights by name at call time, so callers pass activations alone.
    """
    if not callable(fn):
        raise TypeError(f"@runtime_func decorates a method, got {type(fn).__name__} {fn!r}")
    setattr(fn, _TAG, True)
    return fn


def runtime_module(sem: Module) -> Callable[[type], type[RuntimeModule]]:
    """Class decorator: the RuntimeModule subclass whose instances are `sem`'s runtime twin.

    Raises (at decoration):
        TypeError: `sem` names a function, child or method `module` (or another RESERVED name);
            the kernel name set differs from sem's function names; the child attribute set
            differs from sem's child names; a child is an instance rather than a class, or its
            class does not accept `ir=`; a kernel's signature differs from its @func's; the
            class defines `__init__`.
    """
    if not isinstance(sem, Module):
        raise TypeError(
            f"@runtime_module takes the semantic Module instance, got {type(sem).__name__} {sem!r}"
        )
    for kind, names in (("function", sem.functions), ("child", child_groups(sem)), ("method", sem.methods)):
        clash = [n for n in names if n in RESERVED]
        if clash:
            raise TypeError(
                f"@runtime_module: Module {sem.name!r} names a {kind} {clash[0]!r}, which a twin would bind "
                f"over its own {clash[0]!r} accessor (`module` is the authored Module the twin stands for); "
                f"rename the {kind}"
            )

    def deco(cls: type) -> type[RuntimeModule]:
        return _twin_class(sem, cls)

    return deco


def child_groups(mod: Module) -> dict[str, list[Module]]:
    """Child attribute name -> its child Modules: `layers.0`, `layers.1` group under `layers`."""
    groups: dict[str, list[Module]] = {}
    for c in mod.children:
        head, _, tail = c.name.rpartition(".")
        groups.setdefault(head if head and tail.isdigit() else c.name, []).append(c)
    return groups


def _twin_class(sem: Module, cls: type) -> type[RuntimeModule]:
    where = f"@runtime_module({sem.name}) on {cls.__qualname__}"
    own = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    if "__init__" in own:
        raise TypeError(
            f"{where}: the class defines __init__, but the generated __init__ builds the twin from ir=; "
            f"give a kernel's own state to a RuntimeFunction stand-in instead"
        )
    kernels = {k: v for k, v in own.items() if getattr(v, _TAG, False) or isinstance(v, RuntimeFunction)}
    children = {k: v for k, v in own.items() if _is_child_spec(v)}
    instances = [k for k, v in own.items() if _holds_instance(v)]
    if instances:
        raise TypeError(
            f"{where}: child attribute {instances[0]!r} is a RuntimeModule instance; give its class "
            f"(e.g. a @runtime_module result) — the generated __init__ builds one per child with ir="
        )
    _same_names(where, "kernel", kernels, sem.functions, "functions")
    groups = child_groups(sem)
    _same_names(where, "child attribute", children, groups, "children")
    for name, spec in children.items():
        _check_child_spec(where, name, spec, len(groups[name]))
    for name, body in kernels.items():
        _check_kernel_signature(where, name, body, sem.functions[name])

    ns: dict[str, Any] = {k: v for k, v in own.items() if k not in kernels and k not in children}
    for name, body in kernels.items():
        ns[name] = _Kernel(name, body)
    for name, spec in children.items():
        ns[name] = _ChildSlot(name, spec)
    for name, method in sem.methods.items():
        ns.setdefault(name, method)
    ns.setdefault("forward", _entry_forward)
    ns["_sem"] = sem
    ns["_child_classes"] = {
        n: s if isinstance(s, tuple) else (s,) * len(groups[n]) for n, s in children.items()
    }
    bases = (_Twin, *(b for b in cls.__bases__ if b not in (object, RuntimeModule)))
    return type(cls.__name__, bases, ns)


def _is_child_spec(v: object) -> bool:
    if isinstance(v, tuple) and v:
        return all(isinstance(c, type) and issubclass(c, RuntimeModule) for c in v)
    return isinstance(v, type) and issubclass(v, RuntimeModule)


def _holds_instance(v: object) -> bool:
    items = v if isinstance(v, tuple) else (v,)
    return any(isinstance(c, RuntimeModule) for c in items)


def _same_names(where: str, what: str, have: dict[str, Any], want: dict[str, Any], sem_kind: str) -> None:
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in want]
    if missing or extra:
        parts = ([f"missing {', '.join(map(repr, missing))}"] if missing else []) + (
            [f"extra {', '.join(map(repr, extra))}"] if extra else []
        )
        raise TypeError(
            f"{where}: the {what} names must equal the Module's {sem_kind} "
            f"({', '.join(map(repr, want)) or 'none'}); {'; '.join(parts)}"
        )


def _check_child_spec(where: str, name: str, spec: Any, count: int) -> None:
    classes = spec if isinstance(spec, tuple) else (spec,)
    if isinstance(spec, tuple) and len(spec) != count:
        raise TypeError(f"{where}: child attribute {name!r} holds {len(spec)} classes for {count} children")
    for c in classes:
        params = inspect.signature(c).parameters
        if "ir" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            raise TypeError(
                f"{where}: child class {c.__qualname__} for {name!r} must accept the ir= constructor keyword "
                f"(every @runtime_module result does)"
            )


def _check_kernel_signature(where: str, name: str, body: Any, fn: Function) -> None:
    want = [p.name for p in fn.params]
    if isinstance(body, RuntimeFunction):
        got = [p.name for p in body.type.input_params]
        what = f"RuntimeFunction stand-in {name!r} has ABI inputs"
    else:
        got = list(inspect.signature(body).parameters)[1:]
        what = f"@runtime_func {name!r} takes"
    if got != want:
        raise TypeError(
            f"{where}: {what} ({', '.join(got)}), the semantic @func takes ({', '.join(want)}); "
            f"a kernel has the @func's own signature, weights included"
        )


class _Kernel:
    """Class attribute of one kernel; on an instance it gives the activations-alone callable."""

    def __init__(self, name: str, body: Any) -> None:
        self.name = name
        self.body = body

    def __get__(self, obj: _Twin | None, owner: type) -> Any:
        if obj is None:
            return self.body
        return _BoundKernel(obj, self.name, self.body)


class _BoundKernel:
    """A twin's kernel: called with activations alone, weights filled by name from load."""

    def __init__(self, twin: _Twin, name: str, body: Any) -> None:
        self.twin, self.name, self.body = twin, name, body

    def __call__(self, *acts: Any) -> Any:
        twin = self.twin
        fn = twin.module.functions[self.name]
        where = f"{twin.name}.{self.name} (twin {type(twin).__name__})"
        names = [p.name for p in fn.activations]
        if len(acts) != len(names):
            hint = (
                "; the full parameter list is the semantic Module's runner — here the weights come from load"
                if fn.weights and len(acts) == len(fn.params)
                else ""
            )
            raise EvalError(
                f"{where}: takes activations alone ({', '.join(names)}), got {len(acts)} arguments{hint}",
                where=where,
                expected=len(names),
                got=len(acts),
            )
        it = iter(acts)
        args = [twin._weight(p.name, self.name) if p.const else next(it) for p in fn.params]
        if isinstance(self.body, RuntimeFunction):
            return self.body(*args)
        return self.body(twin, *args)


class _ChildSlot:
    """Class attribute of a child; on an instance it gives the child twin (or the group's tuple)."""

    def __init__(self, name: str, spec: Any) -> None:
        self.name = name
        self.spec = spec

    def __get__(self, obj: _Twin | None, owner: type) -> Any:
        if obj is None:
            return self.spec
        return obj._groups[self.name]


def _entry_forward(self: _Twin, *acts: Any) -> Any:
    """The generated forward when the class and the Module define none: the entry function."""
    if self.entry is None:
        mod = self.module
        raise EvalError(
            f"twin {self.name} ({type(self).__name__}) has no forward method and no entry function; call one "
            f"of its functions ({', '.join(mod.functions) or 'none'}) or methods "
            f"({', '.join(mod.methods) or 'none'}) by name",
            where=self.name,
            expected="a forward method or an entry",
            got="neither",
        )
    return getattr(self, self.entry)(*acts)


class _Twin(RuntimeModule):
    """Base of every @runtime_module class: built from an ir Module, loads its own weights."""

    _sem: Module
    _child_classes: dict[str, tuple[type[RuntimeModule], ...]]

    def __init__(self, ir: Module | None = None) -> None:
        ir = self._sem if ir is None else ir
        where = f"{type(self).__name__}(ir={getattr(ir, 'name', ir)!r})"
        if not isinstance(ir, Module):
            raise TypeError(f"{where}: ir must be a Module, got {type(ir).__name__}")
        groups = child_groups(ir)
        want = {n: len(cs) for n, cs in child_groups(self._sem).items()}
        if set(ir.functions) != set(self._sem.functions) or {n: len(cs) for n, cs in groups.items()} != want:
            raise TypeError(
                f"{where}: ir has functions ({', '.join(ir.functions)}) and children "
                f"({', '.join(c.name for c in ir.children)}); this twin class was built for functions "
                f"({', '.join(self._sem.functions)}) and children "
                f"({', '.join(c.name for c in self._sem.children)})"
            )
        built = {
            n: tuple(cls(ir=c) for cls, c in zip(self._child_classes[n], cs, strict=True))
            for n, cs in groups.items()
        }
        by_module = {id(c): t for n, cs in groups.items() for c, t in zip(cs, built[n], strict=True)}
        super().__init__(ir.name, ir.entry, tuple(by_module[id(c)] for c in ir.children))
        self._ir = ir
        # A tuple attribute (children `layers.0`, `layers.1`, ...) reads as a tuple; a plain child as itself.
        self._groups = {n: t if groups[n][0].name != n else t[0] for n, t in built.items()}
        self._constants: dict[str, torch.Tensor] = {}

    @property
    def module(self) -> Module:
        """The authored Module this twin was generated from (its `ir=`)."""
        return self._ir

    def _weight(self, name: str, fn_name: str) -> torch.Tensor:
        if name not in self._constants:
            raise LoadError(
                f"{self.name}.{fn_name}: weight {name!r} is not bound; call load(resource) first",
                where=f"{self.name}.{name}",
                expected=name,
                got=sorted(self._constants),
            )
        return self._constants[name]

    def load(self, resource: Any) -> _Twin:
        """Read and validate every weight of the tree, then bind them all; nothing on failure."""
        staged: list[tuple[_Twin, dict[str, torch.Tensor]]] = []
        others: list[tuple[RuntimeModule, Any]] = []
        self._stage(resource, "", staged, others)
        for child, res in others:
            child.load(res)
        for node, constants in staged:
            node._constants = constants
        return self

    def _stage(self, resource: Any, prefix: str, staged: list, others: list) -> None:
        constants = {
            name: read_weight(resource, name, prefix + name, t) for name, t in self._ir.weights.items()
        }
        staged.append((self, constants))
        for child in self.modules:
            sub = resource.subtree(child.name)
            if isinstance(child, _Twin):
                child._stage(sub, f"{prefix}{child.name}.", staged, others)
            else:
                others.append((child, sub))
