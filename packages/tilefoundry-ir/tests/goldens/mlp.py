"""Golden program: a SwiGLU MLP Module whose gate weight has a converter from the checkpoint layout."""

import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func, module, tf

T = DimVar("tokens", 1, 8193)


@module(entry="mlp")
class Mlp:
    @func
    def mlp(
        x: Tensor[(T, 64), f32],
        w_gate: ConstTensor[(64, 96), f32],
        w_up: ConstTensor[(64, 96), f32],
        w_down: ConstTensor[(96, 64), f32],
    ):
        return (tf.silu(x @ w_gate) * (x @ w_up)) @ w_down

    @mlp.converter("w_gate")  # offline, at prepare time: checkpoint names in, weight out
    def _(gate_proj_weight: ConstTensor[(96, 64), f32]) -> Tensor[(64, 96), f32]:
        return tf.transpose(gate_proj_weight, (1, 0))


PROGRAM = Mlp
run = Mlp.mlp


def inputs(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    x = torch.randn(7, 64, generator=g)
    w_gate, w_up = torch.randn(64, 96, generator=g) / 8, torch.randn(64, 96, generator=g) / 8
    return x, w_gate, w_up, torch.randn(96, 64, generator=g) / 10


def reference(x, w_gate, w_up, w_down):
    return (torch.nn.functional.silu(x @ w_gate) * (x @ w_up)) @ w_down
