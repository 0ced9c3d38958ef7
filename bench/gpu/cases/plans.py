"""The case lists: `full` (issue 7's shapes), `quick` (one or two of each family) and `tiny` (CPU smoke).

    cases = PLANS["full"]()

Memory-bound rows move >= 256 MB so the copy-bandwidth goal applies to them; GEMM covers
4096^3, 8192^3 and every projection of Qwen3-1.7B and Qwen3-8B at M = 1, 16, 128, 2048.
`tiny` keeps every family at sizes the evaluator and a CPU build handle in seconds.
"""

from collections.abc import Callable

from . import Case, attention, gemm, memory, model

GEMM_M = (1, 16, 128, 2048)
DECODE_CONTEXTS = (1024, 4096, 16384, 32768)


def full() -> list[Case]:
    """Every case of issue 7 at the H200 shapes.

    The 48 projection GEMMs come last: when the time budget runs out, they are what is skipped.
    """
    rows, hidden = 32768, 4096
    cases: list[Case] = [
        memory.swiglu(rows, hidden),
        memory.gelu_chain(rows, hidden),
        memory.rms_norm(rows, hidden),
        memory.layer_norm(rows, hidden),
        memory.softmax(rows, hidden),
        memory.argmax(2048, 151936),
        memory.argmax(1, 151936),  # the decode step's greedy pick: one row, one CTA of ours
        memory.rope(4, 32, 8192, 128),
        memory.head_norm_rope(4, 32, 8192, 128),
        memory.embedding(151936, 4096, 32768),
        memory.kv_update(16, 8, 8192, 128, 1),
        gemm.square(4096),
        gemm.square(8192),
    ]
    for causal in (True, False):
        cases += [
            attention.prefill(4, 32, 4096, 128, causal=causal),
            attention.prefill(1, 32, 1024, 128, causal=causal),
        ]
    cases += [attention.decode(1, 32, 8, ctx, 128) for ctx in DECODE_CONTEXTS]
    cases += [
        model.decode_step(model.QWEN3_1_7B, context=4096, position=1024),
        model.generation(model.QWEN3_1_7B, context=4096, prompt_len=8, new_tokens=128),
    ]
    cases += [
        gemm.linear(m_name, proj, m)
        for m_name in gemm.QWEN3
        for proj in gemm.projections(m_name)
        for m in GEMM_M
    ]
    return cases


def quick() -> list[Case]:
    """One or two cases of each family at the H200 shapes, for a run of a few minutes."""
    return [
        memory.swiglu(32768, 4096),
        memory.rms_norm(32768, 4096),
        memory.softmax(32768, 4096),
        gemm.square(4096),
        gemm.linear("qwen3-1.7b", "gate_up", 1),
        gemm.linear("qwen3-1.7b", "gate_up", 2048),
        attention.prefill(4, 32, 4096, 128, causal=True),
        attention.decode(1, 32, 8, 8192, 128),
        model.decode_step(model.QWEN3_1_7B, context=2048, position=1024),
        model.generation(model.QWEN3_1_7B, context=2048, prompt_len=8, new_tokens=32),
    ]


def tiny() -> list[Case]:
    """Every family at toy sizes: a smoke run on CPU (`--tiny --device cpu --target cpu`)."""
    return [
        memory.swiglu(16, 64),
        memory.gelu_chain(16, 64),
        memory.rms_norm(16, 64),
        memory.layer_norm(16, 64),
        memory.softmax(16, 64),
        memory.argmax(16, 3000),
        memory.rope(1, 2, 8, 16),
        memory.head_norm_rope(1, 2, 8, 16),
        memory.embedding(50, 16, 12),
        memory.kv_update(1, 2, 16, 8, 1),
        gemm.square(32),
        gemm.linear("qwen3-1.7b", "kv", 1),
        attention.prefill(1, 2, 8, 16, causal=True),
        attention.prefill(1, 2, 8, 16, causal=False),
        attention.decode(1, 4, 2, 16, 16),
        model.decode_step(model.QWEN3_TINY, context=32, position=5),
        model.generation(model.QWEN3_TINY, context=32, prompt_len=3, new_tokens=4),
    ]


PLANS: dict[str, Callable[[], list[Case]]] = {"full": full, "quick": quick, "tiny": tiny}
