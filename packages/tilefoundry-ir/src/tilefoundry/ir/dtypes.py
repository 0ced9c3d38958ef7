"""Element types: one singleton per dtype name, mapped to torch."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DType:
    """An element type. Compare with `is` or `==`; both hold for singletons."""

    name: str
    bits: int
    kind: str  # "float", "int", "uint" or "bool"
    torch: torch.dtype

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


f64 = DType("f64", 64, "float", torch.float64)
f32 = DType("f32", 32, "float", torch.float32)
f16 = DType("f16", 16, "float", torch.float16)
bf16 = DType("bf16", 16, "float", torch.bfloat16)
fp8e4m3 = DType("fp8e4m3", 8, "float", torch.float8_e4m3fn)
fp8e5m2 = DType("fp8e5m2", 8, "float", torch.float8_e5m2)
i64 = DType("i64", 64, "int", torch.int64)
i32 = DType("i32", 32, "int", torch.int32)
i16 = DType("i16", 16, "int", torch.int16)
i8 = DType("i8", 8, "int", torch.int8)
u8 = DType("u8", 8, "uint", torch.uint8)
boolean = DType("bool", 8, "bool", torch.bool)

DTYPES: dict[str, DType] = {
    d.name: d for d in (f64, f32, f16, bf16, fp8e4m3, fp8e5m2, i64, i32, i16, i8, u8, boolean)
}
_BY_TORCH = {d.torch: d for d in DTYPES.values()}


def dtype_of(x: str | DType | torch.dtype) -> DType:
    """The DType named by a string, a torch dtype, or a DType (returned as is).

    Raises:
        ValueError: naming the accepted dtype names.
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, torch.dtype):
        if x in _BY_TORCH:
            return _BY_TORCH[x]
        raise ValueError(f"torch dtype {x} has no TileFoundry dtype; accepted: {', '.join(DTYPES)}")
    if isinstance(x, str) and x in DTYPES:
        return DTYPES[x]
    raise ValueError(f"unknown dtype {x!r}; accepted: {', '.join(DTYPES)}")
