"""A torch runtime twin checked against its semantic Module's LoadedModule (seed 000 §1.1, §1.6).

The Module is two levels: a layer module with two functions (an RMS norm and a gated MLP), used
as three renamed children, under a root with a head. Its twin is written in plain torch. The
correspondence is held numerically: `check` compares the twin's forward with the reading's
forward on the same inputs, against the bounds stated here.
"""

import torch
import torch.nn.functional as F

from tilefoundry.check import check, cosine, max_abs, nan_inf, rel_l2
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, module, tf
from tilefoundry.runtime import DictResource, runtime_func, runtime_module

T = DimVar("T", 1, 129)
D, H = 32, 64


@module(entry="mlp")
class Layer:
    @func
    def norm(x: Tensor[(T, D), "bf16"], g: ConstTensor[(D,), "bf16"]) -> Tensor[(T, D), "bf16"]:
        x32 = tf.cast(x, "f32")
        var = tf.mean(x32 * x32, axis=-1, keepdim=True)
        return tf.cast(x32 * tf.rsqrt(var + 1e-6), "bf16") * g

    @func
    def mlp(
        x: Tensor[(T, D), "bf16"],
        w_gate: ConstTensor[(D, H), "bf16"],
        w_up: ConstTensor[(D, H), "bf16"],
        w_down: ConstTensor[(H, D), "bf16"],
    ) -> Tensor[(T, D), "bf16"]:
        return (tf.silu(x @ w_gate) * (x @ w_up)) @ w_down

    def block(self, x):
        return x + self.mlp(self.norm(x))


@module
class Stack:
    l0 = Layer.renamed("l0")
    l1 = Layer.renamed("l1")
    l2 = Layer.renamed("l2")

    @func
    def head(x: Tensor[(T, D), "bf16"], w_out: ConstTensor[(D, 16), "bf16"]) -> Tensor[(T, 16), "f32"]:
        return tf.cast(x @ w_out, "f32")

    def forward(self, x):
        h = self.l2.block(self.l1.block(self.l0.block(x)))
        return h, self.head(h)


@runtime_module(Layer)
class LayerTwin:
    @runtime_func
    def norm(self, x, g):
        return F.rms_norm(x.float(), (D,), eps=1e-6).to(torch.bfloat16) * g

    @runtime_func
    def mlp(self, x, w_gate, w_up, w_down):
        gate_up = x @ torch.cat([w_gate, w_up], dim=1)  # one fused projection
        gate, up = gate_up.split(H, dim=1)
        return (F.silu(gate) * up) @ w_down


@runtime_module(Layer)
class WrongLayerTwin:
    norm = LayerTwin.norm

    @runtime_func
    def mlp(self, x, w_gate, w_up, w_down):
        return (F.gelu(x @ w_gate) * (x @ w_up)) @ w_down  # the bug: gelu where silu is meant


@runtime_module(Stack)
class StackTwin:
    l0 = LayerTwin
    l1 = LayerTwin
    l2 = LayerTwin

    @runtime_func
    def head(self, x, w_out):
        return (x @ w_out).float()


@runtime_module(Stack)
class WrongStackTwin:
    l0 = LayerTwin
    l1 = WrongLayerTwin
    l2 = LayerTwin
    head = StackTwin.head


def _checkpoint(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)

    out = {"w_out": rand(D, 16, scale=D**-0.5)}
    for p in ("l0", "l1", "l2"):
        out[f"{p}.g"] = (torch.rand(D, generator=g) + 0.5).to(torch.bfloat16)
        out[f"{p}.w_gate"] = rand(D, H, scale=D**-0.5)
        out[f"{p}.w_up"] = rand(D, H, scale=D**-0.5)
        out[f"{p}.w_down"] = rand(H, D, scale=H**-0.5)
    return out


# Stated bounds: bf16 storage (8 bits of mantissa) through three residual blocks, loose enough for a
# twin that fuses the gate/up projection and normalizes with torch's rms_norm (on CPU today it
# happens to round exactly like the evaluator; a GPU run need not), tight enough to catch a wrong
# activation function (rel_l2 ~ 0.09 below).
EXPECT = {
    "output[0]": [rel_l2(max=2e-2), cosine(min=0.999), nan_inf()],
    "output[1]": [rel_l2(max=2e-2), max_abs(max=5e-2), nan_inf()],
}


def _x(seed: int = 11, n: int = 24) -> torch.Tensor:
    return torch.randn(n, D, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def test_1_1_twin_passes_check_against_its_loaded_module():
    """seed 000 §1.1: the twin RuntimeModule and the semantic Module agree on the same inputs —
    check comparing them against stated bounds is that contract."""
    ckpt = _checkpoint(0)
    reference = Stack.load(DictResource(ckpt))
    twin = StackTwin().load(DictResource(ckpt))
    assert twin.module is Stack and [m.module.name for m in twin.modules] == ["l0", "l1", "l2"]
    report = check(twin, reference, (_x(),), expect=EXPECT)
    assert report.passed, str(report)
    assert [o.path for o in report.outputs] == ["output[0]", "output[1]"]
    assert [o.dtype for o in report.outputs] == ["bf16", "f32"]


def test_1_1_wrong_twin_fails_and_the_report_shows_where():
    """seed 000 §1.1 / §1.6: a deliberately wrong twin fails check; the whole-step report names the
    failing outputs, and checking node by node localizes the fault to one child's function."""
    ckpt = _checkpoint(0)
    reference = Stack.load(DictResource(ckpt))
    twin = WrongStackTwin().load(DictResource(ckpt))
    x = _x()
    report = check(twin, reference, (x,), expect=EXPECT)
    assert not report.passed
    failed = {o.path for o in report.outputs if not o.passed}
    assert failed == {"output[0]", "output[1]"}
    text = str(report)
    assert "output[0]" in text and "FAIL" in text

    # Node by node, on the input each node sees in the reference run.
    h0 = reference.l0.block(x)
    h1 = reference.l1.norm(h0)
    verdicts = {
        f"{name}.{fn}": check(
            getattr(getattr(twin, name), fn), getattr(getattr(reference, name), fn), (inp,),
            expect={"output": [rel_l2(max=2e-2)]},
        ).passed
        for name, fn, inp in [("l0", "norm", x), ("l0", "mlp", x), ("l1", "norm", h0), ("l1", "mlp", h1),
                              ("l2", "mlp", h1)]
    }  # fmt: skip
    assert verdicts == {"l0.norm": True, "l0.mlp": True, "l1.norm": True, "l1.mlp": False, "l2.mlp": True}
