"""The compile options of the cuda target, declared once; catalog, realizer, emitter and builder read them."""

from tilefoundry.ir.target import Option

from .catalog import ARCHS, NAME

ARCH = Option(
    "arch", (*ARCHS, None), None,
    "catalog and code built; None: the GPU's arch when it is sm_80 or newer, else `sm_90a`",
    NAME,
)
PORTABLE = Option(
    "portable", (False, True), False, "also build `sm_80` code, so one library runs on Ampere", NAME
)
FAST_MATH = Option(
    "fast_math", (False, True), False,
    "nvcc's --use_fast_math for the module: f32 tanh, exp, log, sin and cos by the GPU's approximate "
    "instructions, division and square root approximate, f32 denormals flushed to zero (docs/cuda.md, "
    "Precision) / IEEE f32 math, each function within CUDA's documented ulp bound (DESIGN §3)",
    NAME,
)
ATTENTION = Option(
    "attention", ("auto", "loop", "atom"), "auto",
    "flash atom when proved / the lowering's nest / atom or `PlanError`",
    NAME,
)
ATTENTION_WARP_ROWS = Option(
    "attention_warp_rows", ("auto", 16, 32), "auto",
    "rows each warp of the attention atom's mma.sync prefill tier owns, a knob for `autotune`: 16 "
    "(8 warps of one m16 tile, Q in registers, one CTA an SM) / 32 (4 warps of two tiles sharing each K "
    "and V fragment, Q reloaded from shared memory, 32-key steps, two CTAs an SM); auto: on sm_90a the "
    "wgmma tier (two warpgroups of 64 rows, 128-key steps) at head dim 128, else 32 for a call with at "
    "least 8 CTAs of 128 rows an SM, and 16 below",
    NAME,
)
GEMM_TILE = Option(
    "gemm_tile", ("auto", "128x128", "128x256", "256x128"), "auto",
    "CTA tile (M x N) of the sm90 GEMM collective for every GEMM of the module, a knob for `autotune`; "
    "auto: per call 128x128, 128x256 where N, K >= 4096 and its tiles fill the GPU, 64x64 ping-pong "
    "where M <= 128 and the 128x128 tiles do not fill it (64x96 for a B stored (N, K) where 64x64 tiles "
    "exceed one wave), stream-K where K >= 8192 and neither does, "
    "and a B stored (N, K) swapped (C^T = B . A^T, 64x16 ping-pong, as 4x1 clusters sharing A up to "
    "N = 16384) where M <= 16 and B is large enough "
    "(4Mi elements past M = 8, 2Mi at M = 2-8; at M = 1 8Mi with N >= K or 16Mi, for a lone call whose B "
    "is not settled), and swapped on 64x32 tiles at 16 < M <= 128 where those are one wave",
    NAME,
)
GEMM_CLUSTER = Option(
    "gemm_cluster", ("auto", "1x1", "2x1", "1x2"), "auto",
    "thread-block cluster (M x N CTAs) of every sm90 GEMM collective of the module, a knob for `autotune`: "
    "2x1 multicasts each B tile by TMA to the CTAs of two neighbouring M tiles (1x2: each A tile to two N "
    "tiles), halving those L2 reads; auto: 2x1 for the 128x256 tile of gemm_tile's auto, taken alone at "
    "M >= 256, N >= 2048 and K >= 2048 where its tiles fill 7/8 of the GPU, 1x1 for every other collective",
    NAME,
)
GEMM_SWIZZLE = Option(
    "gemm_swizzle", (1, 2, 4, 8), 1,
    "the sm90 GEMM's persistent tile scheduler visits output tiles in bands of this many tiles across "
    "(CUTLASS's max_swizzle_size), so CTAs running together share operand tiles in L2; a knob for `autotune`",
    NAME,
)
BATCH_LAUNCHES = Option(
    "batch_launches", (True, False), True,
    "launch consecutive independent kernels as one (docs/cuda.md) / every kernel alone",
    NAME,
)
GRID_CTAS_PER_SM = Option(
    "grid_ctas_per_sm", (2, 3, 4, 5, 6, 7, 8, None), None,
    "CTAs an SM each packed flat grid is compiled to hold (`__launch_bounds__`'s minimum: ptxas caps "
    "its registers to fit, spilling if it must); None: ptxas chooses",
    NAME,
)
GRID_PACKS = Option(
    "grid_packs", ("auto", 1, 2, 4), "auto",
    "16-byte packs each thread of a packed flat grid takes, grid-strided, each pack's loads written before "
    "the arithmetic of the packs before it, so more bytes may be in flight an SM; auto: 2 where every "
    "packed load's address depends on a load (a gather, such as an embedding's rows), else 1; launches "
    "that may update their outputs in place take 1",
    NAME,
)
OPTIONS = (
    ARCH, PORTABLE, FAST_MATH, ATTENTION, ATTENTION_WARP_ROWS, GEMM_TILE, GEMM_CLUSTER, GEMM_SWIZZLE,
    BATCH_LAUNCHES, GRID_CTAS_PER_SM, GRID_PACKS,
)
