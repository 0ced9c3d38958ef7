"""TileFoundry: write a kernel or model once, run it as reference, runtime twin, or compiled code."""

import pkgutil

# The members of the workspace each ship a `tilefoundry.*` subpackage; this package owns the
# namespace root and extends its search path over them.
__path__ = pkgutil.extend_path(__path__, __name__)

__all__: list[str] = []
