"""TileFoundry: write a kernel or model once, run it as reference, runtime twin, or compiled code.

    import tilefoundry
    from tilefoundry import func, module, jit, build, compile, twin, evaluate
"""

import importlib
import pkgutil
from typing import Any

# The workspace members each ship a `tilefoundry.*` subpackage; this package owns the namespace
# root and extends its search path over them.
__path__ = pkgutil.extend_path(__path__, __name__)

# Public name -> the module that defines it. Resolved on first access so `import tilefoundry`
# stays cheap and no member is imported before it is needed.
_EXPORTS = {
    "func": "tilefoundry.dsl",
    "module": "tilefoundry.dsl",
    "evaluate": "tilefoundry.ir.evaluator",
    "jit": "tilefoundry.runtime.jit",
    "build": "tilefoundry.runtime.jit",
    "compile": "tilefoundry.runtime.jit",
    "twin": "tilefoundry.runtime.jit",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tilefoundry' has no attribute {name!r}")
