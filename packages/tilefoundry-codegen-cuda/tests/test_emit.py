"""emit.py: the translation unit, the host entry's checks, launch geometry and the caller's stream."""

from __future__ import annotations

import re

from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.emit import _derive_launch_config, codegen
from tilefoundry.codegen.cuda.realize import realize_kernel
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, i64, tf
from tilefoundry.ir.pipeline import ScheduledModule
from tilefoundry.ir.tile.cexpr import CExpr

T = DimVar("T", 1, 65)


@func
def silu_rows(x: Tensor[(T, 64), f32]):
    return tf.silu(x)


@func
def rms(x: Tensor[(T, 256), bf16], g: ConstTensor[(256,), bf16]):
    return tf.rms_norm(x, g)


@func
def emb(table: ConstTensor[(100, 64), f32], ids: Tensor[(T,), i64]):
    return tf.embedding(table, ids)


def test_source_includes_only_the_umbrella_header(cuda_source) -> None:
    """seed 000 §2: generated code includes <tilefoundry/runtime.h> and no target subheader."""
    text = cuda_source(silu_rows)
    assert re.findall(r"#include <[^>]+>", text) == ["#include <tilefoundry/runtime.h>"]
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(silu_rows, silu_rows_entry);" in text


def test_host_entry_checks_every_parameter_before_launching(cuda_source) -> None:
    """The entry checks CUDA placement, dtype, rank, extents, DimVar ranges and noalias, then launches."""
    text = cuda_source(rms)
    entry = text[text.index("void rms_entry(") :]
    checks = [
        'e.tensor(t_x, "x", dtype<bf16>(), 2, "(T, 256) bf16");',
        'e.tensor(t_g, "g", dtype<bf16>(), 1, "(256,) bf16");',
        'const int64_t d_T = e.bind(t_x, "x", 0, "T", 1, 65);',
        'e.extent(t_g, "g", 0, int64_t(256LL), "256");',
        'e.noalias({{"x", &t_x}, {"g", &t_g}, {"out0", &t_out0}}, 1);',
    ]
    positions = [entry.index(c) for c in checks]
    assert positions == sorted(positions)
    assert positions[-1] < entry.index("launch_kernel(")


def test_1_4_kernels_launch_on_the_callers_stream(cuda_source) -> None:
    """seed 000 §1.4: launches go to TVMFFIEnvGetStream's stream (the caller's, e.g. torch's current one)."""
    text = cuda_source(rms)
    assert "cudaStream_t stream_ = e.stream();" in text
    launches = re.findall(r"launch_kernel\([^;]*;", text)
    assert launches and all(", stream_, " in launch for launch in launches)


def test_1_4_launch_geometry_is_derived_in_codegen_and_embedded(sched, cuda_source) -> None:
    """seed 000 §1.4: grid and block extents come from _derive_launch_config, written into the host entry."""
    p = sched(rms)
    (r,) = realize_kernel(p.name, p.kernels[0], arch_catalog("sm_90a"), {})
    cfg = _derive_launch_config(r, CExpr({"T": "d_T"}))
    assert (cfg.work, cfg.threads, cfg.per_block) == ("d_T", 128, 4)
    text = cuda_source(rms)
    assert f"launch_kernel(rms__k0_rms_norm, {cfg.grid}, {cfg.threads}, 0, stream_, " in text


def test_exec_bridge_empty_domain_is_noop(cuda_source) -> None:
    """seed 003, Execution bridge: empty logical domains become no-ops, not invalid zero-sized launches."""
    text = cuda_source(silu_rows)
    entry = text[text.index("void silu_rows_entry(") :]
    guard = entry.index("if (work_ > 0) {")
    assert entry.index("const int64_t work_ = (d_T * int64_t(64LL));") < guard < entry.index("launch_kernel(")


def test_index_check_runs_before_the_gather_and_raises_after_it(cuda_source) -> None:
    """Data-dependent indices are validated on the device; the verdict is read back before the gather."""
    text = cuda_source(emb)
    entry = text[text.index("void emb_entry(") :]
    check = entry.index("launch_kernel(emb__checks, ")
    message = "embedding: ids holds a value outside [0, V) of the table: "
    verdict = entry.index(f'check_.raise_if_violated({{"{message}"}});')
    assert check < verdict < entry.index("emb__k0_embedding")
    assert "report_index(verdict_, 1, v0);" in text
    # the gather indexes with ids, so it may not share the check's launch (batching.py)
    why = "not launched together with checks: it reads ids, which the index check checks validates first"
    assert why in text


def test_temporaries_come_from_the_callers_allocator(sched) -> None:
    """A buffer between kernels is a DeviceScratch on the stream, released at the end of the entry."""

    @func
    def two(x: Tensor[(T, 64), f32]):
        return tf.softmax(tf.exp(x) * 2.0, -1) + 1.0

    sources = codegen(ScheduledModule("m", (sched(two),), arch_catalog("sm_90a")), {})
    (text,) = sources.files.values()
    assert list(sources.files) == ["m.cu"] and sources.entries == ("two",)
    assert "DeviceScratch<float> b_t0_mem(e, d_T * int64_t(64LL), stream_);  // (T, 64) f32" in text


@func
def odd_rms(x: Tensor[(T, 63), f32], g: ConstTensor[(63,), f32]):
    return tf.rms_norm(x, g)


def test_rows_with_packs_launch_the_packed_variant_only_when_aligned(cuda_source) -> None:
    """A packed row norm comes as the scalar kernel and `_v8`; the host runs `_v8` only when x, g and
    out0 start 16-byte aligned (a view one bf16 past a boundary would fault in load_pack)."""
    text = cuda_source(rms)
    assert "__global__ void __launch_bounds__(128) rms__k0_rms_norm(" in text
    assert "__global__ void __launch_bounds__(128) rms__k0_rms_norm_v8(" in text
    scalar = text[text.index("rms__k0_rms_norm(") : text.index("rms__k0_rms_norm_v8(")]
    assert "load_pack" not in scalar and "store_pack" not in scalar
    assert text.count("store_pack<8>(b_out0 + ") == 1
    entry = text[text.index("void rms_entry(") :]
    guard = entry.index("if (aligned16({b_x, b_g, b_out0})) {")
    packed = entry.index("launch_kernel(rms__k0_rms_norm_v8, grid_blocks(work_, 4), 128, 0, stream_, ")
    other = entry.index("} else {\n        launch_kernel(rms__k0_rms_norm, grid_blocks(work_, 4), 128, ")
    assert guard < packed < other


def test_rows_without_packs_have_one_variant(cuda_source) -> None:
    """Rows of 63 f32 take no packs: one kernel, launched unguarded."""
    text = cuda_source(odd_rms)
    assert re.findall(r"launch_kernel\((\w+),", text) == ["odd_rms__k0_rms_norm"]
    assert "_v4" not in text and "aligned16" not in text
