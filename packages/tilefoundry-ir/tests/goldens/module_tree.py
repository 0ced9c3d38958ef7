"""Golden program: a module tree — layer copies named by position, a child, inherited topology,
methods, and a renamed copy of the whole tree."""

import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, Topology, f32, func, module, tf

T = DimVar("tokens", 1, 257)


@module(entry="block")
class Block:
    @func
    def block(x: Tensor[(T, 32), f32], norm: ConstTensor[(32,), f32], w: ConstTensor[(32, 32), f32]):
        return x + tf.rms_norm(x, norm, eps=1e-5) @ w


@module(entry="logits")
class Head:
    @func
    def logits(x: Tensor[(T, 32), f32], w: ConstTensor[(32, 10), f32]) -> Tensor[(T, 10), f32]:
        return tf.log_softmax(x @ w, axis=-1)


@module(topologies=(Topology("cta", 8), Topology("thread", 128)))
class Tower:
    # Three independent copies of Block, named "layers.0" ... "layers.2" (checkpoint prefixes).
    layers = (Block,) * 3
    head = Head
    depth = 3

    def forward(self, x):
        # Written for a loaded reading, whose functions take activations alone.
        for layer in self.layers:
            x = layer.block(x)
        return self.head.logits(x)


# A renamed copy is an independent tree; Tower itself keeps its name.
PROGRAM = Tower.renamed("encoder")


def run(x, *weights):
    """The forward step on the unloaded Module: every function takes its weights too."""
    for i, layer in enumerate(Tower.layers):
        x = layer.block(x, *weights[2 * i : 2 * i + 2])
    return Tower.head.logits(x, weights[-1])


def inputs(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    weights = []
    for _ in range(3):
        weights += [1 + 0.1 * torch.randn(32, generator=g), torch.randn(32, 32, generator=g) / 6]
    return (torch.randn(9, 32, generator=g), *weights, torch.randn(32, 10, generator=g) / 6)


def reference(x, *weights):
    for i in range(3):
        norm, w = weights[2 * i : 2 * i + 2]
        x = x + (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm) @ w
    return torch.log_softmax(x @ weights[-1], dim=-1)
