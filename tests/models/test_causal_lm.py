"""The causal-LM family run three ways: twins judged against the LoadedModule, the step contract, and
the compiled plan of its K-major Linear weights."""

from __future__ import annotations

import pytest
import torch

import tilefoundry
from tilefoundry.check import check, rel_l2
from tilefoundry.ir.target import get_target
from tilefoundry.models import DEMO_CONFIG, causal_lm, config_from_dict

TWINS = ("torch", "cpu")


def _opened(opened_models, case, target):
    return opened_models[(case.ckpt, target)]


def _decode_inputs(model, case):
    """A one-token step after a prefill of the prompt: every input built by the model itself."""
    caches = model.init_caches(device="cpu")
    _, caches = model(*model.prepare_inputs(case.prompt, 0, caches, device="cpu"))
    return model.prepare_inputs(case.tokens[:1], case.prompt.numel(), caches, device="cpu")


@pytest.mark.parametrize("target", TWINS)
def test_twin_passes_check_against_its_loaded_module(hf_case, target, opened_models):
    """seed 000 §1.1: the twin and the LoadedModule agree on forward — logits and every new cache."""
    loaded = opened_models[(hf_case.ckpt, "reference")].model
    twin = _opened(opened_models, hf_case, target).model
    assert twin.module is not None
    inputs = _decode_inputs(loaded, hf_case)
    layers = len(inputs[-1])
    expect = {"output[0]": [rel_l2(max=1e-5)]}
    expect.update({f"output[1][{i}][{j}]": [rel_l2(max=1e-5)] for i in range(layers) for j in range(2)})
    report = check(twin.forward, loaded.forward, inputs, expect=expect)
    assert report.passed, str(report)


@pytest.mark.parametrize("target", ("reference", *TWINS))
def test_1_1_2_a_step_does_not_mutate_the_state_it_was_given(hf_case, target, opened_models):
    """seed 000 §1.1.2: state is the caller's; a step MUST NOT mutate a cache it was given."""
    model = _opened(opened_models, hf_case, target).model
    inputs = _decode_inputs(model, hf_case)
    given = inputs[-1]
    before = [[t.clone() for t in pair] for pair in given]
    _, fresh = model(*inputs)
    pos = hf_case.prompt.numel()
    for (k, v), (k0, v0), (k1, v1) in zip(given, before, fresh, strict=True):
        assert torch.equal(k, k0) and torch.equal(v, v0)
        # The new key and value landed at `pos`; what was cached before stays.
        assert not torch.equal(k1[:, :, pos], k0[:, :, pos]) and not torch.equal(v1[:, :, pos], v0[:, :, pos])
        assert torch.equal(k1[:, :, :pos], k0[:, :, :pos]) and torch.equal(v1[:, :, :pos], v0[:, :, :pos])


def test_1_1_2_prepare_inputs_for_generation_builds_every_input_but_the_ids(hf_case, opened_models):
    """seed 000 §1.1.2: the model selects the token at step and creates every other input itself,
    without mutating or retaining the token-ID view it was given."""
    model = opened_models[(hf_case.ckpt, "reference")].model
    ids = torch.cat((hf_case.prompt, hf_case.tokens))
    view = ids[:10]
    caches = model.init_caches(device="cpu")
    tokens, cos, sin, positions, pos, kv_len, passed = model.prepare_inputs_for_generation(
        view, 9, caches, device="cpu"
    )
    assert tokens.tolist() == [int(ids[9])]
    assert tokens.untyped_storage().data_ptr() != ids.untyped_storage().data_ptr()
    assert positions.tolist() == [9] and int(pos) == 9 and int(kv_len) == 10
    assert cos.shape == sin.shape == (model.module.layers[0].functions["attention"].params[1].type.shape)
    assert passed is caches
    assert torch.equal(view, ids[:10])


def test_prepare_inputs_refuses_tokens_past_the_context(hf_case, opened_models):
    model = opened_models[(hf_case.ckpt, "reference")].model
    caches = model.init_caches(device="cpu")
    with pytest.raises(
        ValueError, match="2 token\\(s\\) at position 63 do not fit the context of 64 positions"
    ):
        model.prepare_inputs(hf_case.prompt[:2], 63, caches, device="cpu")


def _planned_gemms(mod, options: dict) -> tuple[list[str], list[str]]:
    """(every kernel name, the B operand of every GEMM atom call) in the cpu plan of `mod`."""
    kernels, operands = [], []

    def dump(stage: str, text: str) -> None:
        if stage != "check budget":
            return
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["kernel"]:
                kernels.append(words[1])
            elif words[:1] == ["atom"] and "_gemm_" in words[1]:
                operands.append(line.split("(", 1)[1].split(",")[1].strip())

    tilefoundry.compile(mod, target="cpu", options=options, dump=dump)
    return kernels, operands


def test_compiled_gemms_read_the_k_major_weights_in_place():
    """Every projection and the LM head is `x @ w` on the loaded weight: the cpu plan has no
    transpose kernel, and where the host has the f32 GEMM atom (`gemm="atom"` fails closed on any
    matmul it cannot take), each atom call reads the weight parameter itself as its B operand."""
    cfg = config_from_dict(DEMO_CONFIG, source="demo")
    sem = causal_lm(cfg, context=16)
    atom = any(a.kind == "mma" and a.a_dtype == "f32" for a in get_target("cpu").catalog.atoms)
    options = {"gemm": "atom"} if atom else {}
    layer_kernels, layer_b = _planned_gemms(sem.layers[0], options)
    root_kernels, root_b = _planned_gemms(sem, options)
    assert not [k for k in layer_kernels + root_kernels if k.endswith("_transpose")]
    if atom:
        assert sorted(layer_b) == sorted(
            ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        )
        assert root_b == ["lm_head"]
