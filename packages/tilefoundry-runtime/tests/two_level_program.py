"""The two-level program the loading and decorator tests share: a Layer module with two functions,
used as three renamed children under a Top with a head, and seeded weights for it."""

import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func, module, tf

T = DimVar("T", 1, 65)


@module(entry="ffn")
class Layer:
    @func
    def norm(x: Tensor[(T, 8), "f32"], g: ConstTensor[(8,), "f32"]) -> Tensor[(T, 8), "f32"]:
        return tf.rms_norm(x, g)

    @func
    def ffn(
        x: Tensor[(T, 8), "f32"], w_up: ConstTensor[(8, 16), "f32"], w_down: ConstTensor[(16, 8), "f32"]
    ) -> Tensor[(T, 8), "f32"]:
        return tf.silu(x @ w_up) @ w_down

    def twice(self, x):
        return self.ffn(self.norm(x))


@module
class Top:
    a = Layer.renamed("a")
    layers = (Layer, Layer)

    @func
    def head(x: Tensor[(T, 8), "f32"], w_out: ConstTensor[(8, 4), "f32"]) -> Tensor[(T, 4), "f32"]:
        return x @ w_out

    def forward(self, x):
        for layer in (self.a, *self.layers):
            x = layer.twice(x)
        return self.head(x)


def weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = {"w_out": torch.randn(8, 4, generator=g)}
    for p in ("a", "layers.0", "layers.1"):
        out[f"{p}.g"] = torch.rand(8, generator=g) + 0.5
        out[f"{p}.w_up"] = torch.randn(8, 16, generator=g) / 3
        out[f"{p}.w_down"] = torch.randn(16, 8, generator=g) / 4
    return out
