"""twin() compiles each distinct module node once: identical layers share one library."""

from __future__ import annotations

import threading

import torch

import tilefoundry
from tilefoundry.check import check, rel_l2
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func, module, tf
from tilefoundry.runtime import DictResource
from tilefoundry.runtime import jit as jit_module

T = DimVar("tokens", 1, 33)


@module(entry="block")
class Block:
    @func
    def block(x: Tensor[(T, 16), f32], w: ConstTensor[(16, 16), f32]) -> Tensor[(T, 16), f32]:
        return x + tf.silu(x @ w)


@module()
class Stack:
    layers = (Block, Block, Block)

    def forward(self, x):
        for layer in self.layers:
            x = layer.block(x)
        return x


def test_identical_layers_compile_once(monkeypatch) -> None:
    """Three layers with the same functions build one library, and each still runs its own weights."""
    calls: list[str] = []
    real = jit_module.compile

    def counting(node, **kw):
        calls.append(node.name)
        return real(node, **kw)

    monkeypatch.setattr(jit_module, "compile", counting)
    torch.manual_seed(0)
    weights = {f"layers.{i}.w": torch.randn(16, 16) / 4 for i in range(3)}
    compiled = tilefoundry.twin(Stack, target="cpu").load(DictResource(weights))
    assert calls == ["layers.0"]
    reading = Stack.load(DictResource(weights))
    x = torch.randn(5, 16)
    report = check(compiled, reading, (x,), expect={"output": [rel_l2(max=1e-5)]})
    assert report.passed, str(report)


@module(entry="head")
class Head:
    @func
    def head(x: Tensor[(T, 16), f32], w: ConstTensor[(16, 4), f32]) -> Tensor[(T, 4), f32]:
        return x @ w


@module()
class HeadedStack:
    layers = (Block, Block)
    out = Head

    def forward(self, x):
        for layer in self.layers:
            x = layer.block(x)
        return self.out.head(x)


def test_distinct_nodes_compile_side_by_side(monkeypatch) -> None:
    """The layers' node and the head's are two libraries built at once (each compile waits until
    both have started: built one after the other, the wait would time out), and the twin computes
    what the semantic module reads."""
    started = threading.Barrier(2, timeout=60)
    calls: list[str] = []
    real = jit_module.compile

    def meeting(node, **kw):
        calls.append(node.name)
        started.wait()
        return real(node, **kw)

    monkeypatch.setattr(jit_module, "compile", meeting)
    torch.manual_seed(1)
    weights = {f"layers.{i}.w": torch.randn(16, 16) / 4 for i in range(2)} | {"out.w": torch.randn(16, 4)}
    compiled = tilefoundry.twin(HeadedStack, target="cpu").load(DictResource(weights))
    assert sorted(calls) == ["layers.0", "out"]
    reading = HeadedStack.load(DictResource(weights))
    x = torch.randn(7, 16)
    report = check(compiled, reading, (x,), expect={"output": [rel_l2(max=1e-5)]})
    assert report.passed, str(report)
