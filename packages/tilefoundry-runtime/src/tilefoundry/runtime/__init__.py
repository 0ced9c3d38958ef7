"""tilefoundry.runtime: runtime modules and functions, their ABI, resources, and generation.

    from tilefoundry.runtime import (RuntimeModule, RuntimeFunction, runtime_module, runtime_func,
        CompiledModule, EntryABI, ParamABI, entry_abi_of, param_abi_of,
        DictResource, SafetensorsResource, Absolute, Preprocessed, generate)
    from tilefoundry.runtime import donate    # give caches up to compiled calls that update them in place
"""

import importlib
from typing import Any

# NOTE: bound eagerly because the submodule shares the name: importing
# `tilefoundry.runtime.generate` first would otherwise leave the module object under `generate`.
from .generate import generate as generate

# Public name -> the module that defines it. Resolved on first access, so importing one
# submodule (say, resource) does not pull in the IR and the evaluator.
_EXPORTS = {
    "RuntimeModule": "tilefoundry.runtime.module",
    "RuntimeFunction": "tilefoundry.runtime.function",
    "runtime_module": "tilefoundry.runtime.decorator",
    "runtime_func": "tilefoundry.runtime.decorator",
    "CompiledModule": "tilefoundry.runtime.loader",
    "donate": "tilefoundry.runtime.donation",
    "EntryABI": "tilefoundry.runtime.abi",
    "ParamABI": "tilefoundry.runtime.abi",
    "entry_abi_of": "tilefoundry.runtime.abi",
    "param_abi_of": "tilefoundry.runtime.abi",
    "DictResource": "tilefoundry.runtime.resource",
    "SafetensorsResource": "tilefoundry.runtime.resource",
    "Absolute": "tilefoundry.runtime.resource",
    "Preprocessed": "tilefoundry.runtime.resource",
    "autotune": "tilefoundry.runtime.autotuning",
    "Autotuned": "tilefoundry.runtime.autotuning",
}

__all__ = sorted([*_EXPORTS, "generate"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tilefoundry.runtime' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
