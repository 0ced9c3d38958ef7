"""The GEMM atom family: a proved GEMM region as one call of atoms/gemm.cuh's `gemm<GemmLayout>`.

    atom sm90_gemm_tma_wgmma_128x128x64_bf16_rcr(a, w, out0; m=T, n=128, k=64)
      ->  ws = gemm_workspace_bytes<GemmLayout::rcr>(...);
          gemm<GemmLayout::rcr>(b_a, b_w, b_out0, 1, d_T, 128, 64, ws, stream_)

The template picks its tier (sm90 collective, skinny split-K, mma.sync, SIMT) at the call. A
GEMM atom's name ends in its operands' storage (`_rrr`: B (K, N); `_rcr`: B stored (N, K),
K-major), which must be the proved region's and is passed to the runtime as `GemmLayout`. A
group of GEMMs sharing A (`ir.plan.gemm_groups`) is one `gemm_group` call; every member's region
is re-proved.

B is "settled" (`GemmGroup::b_settled`, gemm's last argument; settled.py) when every B is a
ConstTensor entry parameter (a weight) no kernel of the program writes and A is a temporary some
kernel of the program writes (with a prologue the atom may apply, a kernel before that one, so
that something of the program always launches before the call): the launch before the call is
then the program's own and writes no B, so the skinny tier may read B's first packs before the
programmatic-launch wait, while the kernel before it (attention, a norm) still runs.
"""

from __future__ import annotations

import itertools

from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.plan.atoms import GemmRegion, match_gemm
from tilefoundry.ir.plan.gemm_epilogues import epilogue_chain
from tilefoundry.ir.plan.gemm_groups import gemm_members
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import Const, Expr, Load, Var, free_vars, loads, mul, transform
from tilefoundry.ir.tile.stmt import (
    Assign,
    AtomCall,
    Kernel,
    Let,
    Program,
    Stmt,
    Store,
    map_exprs,
    statements,
)

from .atoms import AtomKind, register
from .gemm_chain import chain_block, chain_flag, chain_refusal, ends_chain, unless_chained
from .gemm_prologue import construct, group_init, realized_prologue, staged_flag
from .kernels import dim_names, functor_name, kernel_args, kernel_params
from .realize import Realization
from .serial import SerialCode
from .settled import launches_before, settled_weights

# Macros a generated source defines before including the runtime, per atom-name prefix: the
# sm90 collective is compiled only into modules that use it.
SM90_GEMM_MACRO = "TILEFOUNDRY_CUDA_GEMM_SM90"
# The GEMM atom families, each one call of gemm.cuh's tiered gemm<>: sm90, sm80 and portable.
GEMM_PREFIXES = ("sm90_gemm_", "sm80_gemm_", "cuda_gemm_")
GEMM_DTYPES = ("f32", "bf16", "f16")
# The runtime's GemmLayout for each (A major, B major) of a proved region: r row-major, c
# column-major, for A, B and C in turn; also the suffix of the catalog atom's name.
GEMM_LAYOUTS = {("K", "N"): "rrr", ("K", "K"): "rcr"}
# N and K from which the sm90 collective may take its 128 x 256 tile, M, N and K from which that
# tile runs as a 2 x 1 cluster under gemm_cluster "auto", M up to which it may take the 64 x 64
# ping-pong tile, and K from which it may run stream-K (atoms/gemm_sm90.cuh's kSm90WideMinNK,
# kSm90WidePairMinM, kSm90WidePairMinN, kSm90WidePairMinK, kSm90SmallTileMaxM and
# kSm90StreamKMinK; a test holds them equal, and the swapped GEMM's below).
WIDE_TILE_MIN_NK = 4096
WIDE_PAIR_MIN_M = 256
WIDE_PAIR_MIN_N = 2048
WIDE_PAIR_MIN_K = 2048
SMALL_TILE_MAX_M = 128
STREAM_K_MIN_K = 8192
# M up to which a TN GEMM may run swapped, and B's elements from which it does past SKINNY_MAX_M,
# at 1 < M <= SKINNY_MAX_M and (N >= K, or twice as many) at M = 1 (kSkinnyMaxM, kSm90SwappedMaxM,
# kSm90SwappedMinNK, kSm90SwappedRowsMinNK and kSm90SwappedLoneMinNK).
SKINNY_MAX_M = 8
SWAPPED_MAX_M = 16
SWAPPED_MIN_NK = 1 << 22
SWAPPED_ROWS_MIN_NK = 1 << 21
SWAPPED_LONE_MIN_NK = 1 << 23
# N up to which the swapped 64 x 16 tile runs as 4 x 1 clusters (kSm90SwappedQuadMaxN).
SWAPPED_QUAD_MAX_N = 16384
# M up to which a TN GEMM may run on 64 x 32 swapped tiles past SWAPPED_MAX_M, while they are one
# wave of SM90_MAX_SMS at most (kSm90SwappedMidMaxM, sm90_swapped_mid_pays).
SWAPPED_MID_MAX_M = 128
# The most SMs of an sm_90 part (H100 / H200 SXM): a call whose 64 x 64 tiles exceed two waves of
# them never takes the small tile (the runtime's sm90_small_tile_pays).
SM90_MAX_SMS = 132


def _gemm_recheck(r: Realization) -> None:
    atom = r.body
    assert isinstance(atom, AtomCall)
    k = r.kernel
    for member in gemm_members(atom):
        region = match_gemm(Kernel(k.name, k.form, member.replaces, k.reads, k.writes, k.origin))
        why = None
        if isinstance(region, str):
            why = region
        elif (region.a, region.b, region.c) != (atom.operands[0], member.b, member.c):
            why = "the atom's operands are not the region's A, B and C"
        elif region.a.dtype.name not in GEMM_DTYPES:
            why = f"dtype {region.a.dtype} is not one of {', '.join(GEMM_DTYPES)}"
        elif "group" in atom.params and region.batch:
            why = "a grouped member has batch dims"
        else:
            why = _layout_mismatch(atom.atom, region)
        if why is not None:
            raise PlanError(
                f"cuda: kernel {k.name}: atom {atom.atom} no longer matches its region: {why}",
                where=k.name,
                expected="a proved GEMM region",
                got=why,
            )


def _at_least(e: Expr | None, bound: int) -> bool:
    return isinstance(e, Const) and int(e.value) >= bound


def _sm90_call(r: Realization) -> AtomCall | None:
    atom = r.body
    return atom if isinstance(atom, AtomCall) and atom.atom.startswith("sm90_gemm_") else None


def _wide_call(r: Realization, min_n: int, min_k: int) -> AtomCall | None:
    """The sm90 GEMM call of `r` when its K is a constant of at least `min_k` and some member's N a
    constant of at least `min_n`: the extents a 128 x 256 tile needs; else None."""
    atom = _sm90_call(r)
    if atom is None or not _at_least(atom.params.get("k"), min_k):
        return None
    return atom if any(_at_least(member.n, min_n) for member in gemm_members(atom)) else None


def may_take_wide_tile(r: Realization) -> bool:
    """Whether an sm90 GEMM call of `r` may run the 128 x 256 tile under gemm_tile="auto": some
    member's N and K are constants of at least WIDE_TILE_MIN_NK (the runtime decides per call)."""
    return _wide_call(r, WIDE_TILE_MIN_NK, WIDE_TILE_MIN_NK) is not None


def may_take_wide_pair(r: Realization) -> bool:
    """Whether an sm90 GEMM call of `r` may run the 128 x 256 tile as a 2 x 1 cluster under
    gemm_tile and gemm_cluster "auto": its K is a constant of at least WIDE_PAIR_MIN_K, some
    member's N a constant of at least WIDE_PAIR_MIN_N, and its M not a constant below
    WIDE_PAIR_MIN_M (the runtime decides per call)."""
    atom = _wide_call(r, WIDE_PAIR_MIN_N, WIDE_PAIR_MIN_K)
    if atom is None:
        return False
    m = atom.params.get("m")
    return not (isinstance(m, Const) and int(m.value) < WIDE_PAIR_MIN_M)


def may_take_small_tile(r: Realization) -> bool:
    """Whether an sm90 GEMM call of `r` may run the 64 x 64 ping-pong tile under gemm_tile="auto":
    its M is not a constant above SMALL_TILE_MAX_M, and some member's N is not a constant with more
    64-wide columns than two waves of SM90_MAX_SMS (the runtime decides per call, from M and N)."""
    atom = _sm90_call(r)
    if atom is None:
        return False
    m = atom.params.get("m")
    if isinstance(m, Const) and int(m.value) > SMALL_TILE_MAX_M:
        return False
    return any(
        not (isinstance(member.n, Const) and -(-int(member.n.value) // 64) > 2 * SM90_MAX_SMS)
        for member in gemm_members(atom)
    )


def may_take_small_wide(r: Realization) -> bool:
    """Whether an sm90 GEMM call of `r` may run the 64 x 96 ping-pong tile under gemm_tile="auto":
    it may take the small tile, B is stored (N, K), and at the largest M the small tile serves its
    64 x 64 tiles may exceed one wave of SM90_MAX_SMS: a batched call, or some member's N not a
    constant or wide enough (the runtime decides per call, sm90_small_wide_pays)."""
    atom = _sm90_call(r)
    if atom is None or not atom.atom.endswith("_rcr") or not may_take_small_tile(r):
        return False
    if any(name.startswith("batch") for name in atom.params):
        return True
    m = atom.params.get("m")
    rows = int(m.value) if isinstance(m, Const) else SMALL_TILE_MAX_M
    return any(
        not isinstance(member.n, Const) or -(-rows // 64) * -(-int(member.n.value) // 64) > SM90_MAX_SMS
        for member in gemm_members(atom)
    )


def may_take_stream_k(r: Realization) -> bool:
    """Whether an sm90 GEMM call of `r` may run stream-K under gemm_tile="auto": its K is a
    constant of at least STREAM_K_MIN_K (the runtime decides per call, from M and N)."""
    atom = _sm90_call(r)
    return atom is not None and _at_least(atom.params.get("k"), STREAM_K_MIN_K)


def _swapped_min_nk(m: Expr | None) -> int:
    """The fewest elements of B with which a call of this M may run swapped (sm90_swapped_pays)."""
    if not isinstance(m, Const):
        return SWAPPED_ROWS_MIN_NK
    rows = int(m.value)
    if rows == 1:
        return SWAPPED_LONE_MIN_NK
    return SWAPPED_ROWS_MIN_NK if rows <= SKINNY_MAX_M else SWAPPED_MIN_NK


def swapped_forms(r: Realization) -> set[str]:
    """The forms of the swapped TN GEMM an sm90 GEMM call of `r` may run under gemm_tile="auto":
    "quad" (4 x 1 clusters, N up to SWAPPED_QUAD_MAX_N) and "single" (1 x 1, wider N), for each
    member that may run swapped. Such a call has B stored (N, K) (the `_rcr` atoms), an M that is
    not a constant above SWAPPED_MAX_M, and a B that may hold as many elements as that M needs (the
    runtime decides per call, sm90_swapped_pays and sm90_swapped_quad_pays). Empty: none may."""
    atom = _sm90_call(r)
    if atom is None or not atom.atom.endswith("_rcr"):
        return set()
    m, k = atom.params.get("m"), atom.params.get("k")
    if isinstance(m, Const) and int(m.value) > SWAPPED_MAX_M:
        return set()
    least = _swapped_min_nk(m)
    forms: set[str] = set()
    for member in gemm_members(atom):
        if not isinstance(member.n, Const):
            forms |= {"quad", "single"}
            continue
        n = int(member.n.value)
        if isinstance(k, Const) and n * int(k.value) < least:
            continue
        forms.add("quad" if n <= SWAPPED_QUAD_MAX_N else "single")
    return forms


def may_take_swapped_mid(r: Realization) -> bool:
    """Whether an sm90 GEMM call of `r` may run on 64 x 32 swapped tiles under gemm_tile="auto": B is
    stored (N, K), its M is not a constant outside SWAPPED_MAX_M + 1 to SWAPPED_MID_MAX_M, and some
    member's N is not a constant whose 64-row tiles, times M's 32-row slices (at the least M), exceed
    one wave of SM90_MAX_SMS (the runtime decides per call, sm90_swapped_mid_pays)."""
    atom = _sm90_call(r)
    if atom is None or not atom.atom.endswith("_rcr"):
        return False
    m = atom.params.get("m")
    least = SWAPPED_MAX_M + 1
    if isinstance(m, Const):
        least = int(m.value)
        if not SWAPPED_MAX_M < least <= SWAPPED_MID_MAX_M:
            return False
    slices = -(-least // 32)
    return any(
        not (isinstance(member.n, Const) and -(-int(member.n.value) // 64) * slices > SM90_MAX_SMS)
        for member in gemm_members(atom)
    )


# with_sm90_gemm's slots (atoms/gemm_sm90.cuh), each the collective of one branch, and the variant
# macro that puts it in a module (None: the default collective, always there). The swapped slots
# also follow the ..._QUAD_ONLY / ..._SINGLE_ONLY macros (sm90_slots).
SM90_SLOTS = (
    (0, "TILEFOUNDRY_SM90_SWAPPED"),  # the swapped 64 x 16 tile as 4 x 1 clusters
    (1, "TILEFOUNDRY_SM90_SWAPPED"),  # the swapped 64 x 16 tile alone
    (2, "TILEFOUNDRY_SM90_SWAPPED_MID"),
    (3, "TILEFOUNDRY_SM90_WIDE_PAIR"),
    (4, "TILEFOUNDRY_SM90_WIDE_TILE"),
    (5, "TILEFOUNDRY_SM90_SMALL_WIDE"),
    (6, "TILEFOUNDRY_SM90_SMALL_TILE"),
    (7, "TILEFOUNDRY_SM90_STREAM_K"),
    (8, None),
)
_SWAPPED_ONLY = {0: "TILEFOUNDRY_SM90_SWAPPED_SINGLE_ONLY", 1: "TILEFOUNDRY_SM90_SWAPPED_QUAD_ONLY"}
# The slots with_sm90_gemm takes only for a B stored (N, K).
SM90_B_K_MAJOR_SLOTS = frozenset({0, 1, 2, 5})


def sm90_slots(defines: list[str]) -> list[int]:
    """The slots of with_sm90_gemm a module with these `#define` lines may reach: one source each."""
    macros = {line.split()[1] for line in defines if line.startswith("#define ")}
    return [
        slot
        for slot, macro in SM90_SLOTS
        if (macro is None or macro in macros) and _SWAPPED_ONLY.get(slot) not in macros
    ]


def sm90_operand_types(called: list[Realization]) -> list[tuple[str, bool]]:
    """(element C++ type, B stored (N, K)) of every 16-bit GEMM call among `called`: the operand
    kinds each sm90 slot's source builds its collective for (the main source's gemm<> may reach
    the sm90 tier from any GEMM atom of such a dtype)."""
    kinds = set()
    for r in called:
        atom = r.body
        if not isinstance(atom, AtomCall) or not atom.atom.startswith(GEMM_PREFIXES):
            continue
        a = atom.operands[0]
        if a.dtype.name in ("bf16", "f16"):
            kinds.add((ctype(a.dtype), atom.atom.endswith("_rcr")))
    return sorted(kinds)


def _layout_mismatch(name: str, region: GemmRegion) -> str | None:
    """Why atom `name` cannot realize the region's operand majors, or None."""
    a, b = region.a_major, region.b_major
    layout = GEMM_LAYOUTS.get((a, b))
    if layout is None:
        return f"the runtime has no GEMM layout for A {a}-major, B {b}-major"
    if not name.endswith(f"_{layout}"):
        return f"the region's operands are {layout} (A {a}-major, B {b}-major), not the atom's"
    return None


def epilogue_flag(e: Kernel) -> str:
    """The host entry's flag saying the GEMM atom applied epilogue kernel `e` (so it must not run)."""
    return f"{e.name}_applied_"


def _epilogue_device(program: Program, r: Realization) -> list[str]:
    """The epilogue kernel's element statements as a functor the skinny GEMM calls per output.

    Its reads that need no result (the residual an add takes) are split off as `early(m, n)`,
    which the register kernel calls right after its PDL wait, so their latency overlaps the K loop
    instead of following it; the functor's three-argument form reads them itself (other tiers).
    """
    atom = r.body
    assert isinstance(atom, AtomCall)
    e = atom.epilogue
    if e is None:
        return []
    chain = epilogue_chain(e)
    assert chain is not None, "fuse_epilogues admits 2-D element grids only"
    m, n = chain
    members = gemm_members(atom)
    own = (Var(m.var), Var(n.var))
    slots = {id(x.c): i for i, x in enumerate(members)}

    def result(x: Expr) -> Expr | None:
        if isinstance(x, Load) and id(x.buffer) in slots and x.index == own:
            return Var(f"c_{slots[id(x.buffer)]}", x.buffer.dtype)
        return None

    dims = dim_names(program)
    body = map_exprs(n.body, lambda x: transform(x, result))
    early = early_reads(body, {m.var, n.var} | set(dims))
    body = map_exprs(body, lambda x: transform(x, lambda y: early.get(y)))
    names = {f"c_{i}": f"c[{i}]" for i in range(len(members))}
    names |= {v.name: f"pre.{v.name}" for v in early.values()}
    serial = SerialCode(dims, e.name)
    cx = serial.cx()
    results = f"const {ctype(members[0].c.dtype)} (&c)[{len(members)}]"
    coords = f"int64_t {m.var}, int64_t {n.var}"
    head = [
        f"// epilogue {e.name} of {r.kernel.name}: its statements at one output (m, n), given the results",
        f"struct {functor_name(program, e, 'epilogue')} {{",
        *(f"  {p};" for p in kernel_params(program, e).split(", ")),
    ]
    statements = [*serial.stmt(body, 2, names), "  }"]
    if not early:
        return [*head, f"  __device__ void operator()({coords}, {results}) const {{", *statements, "};"]
    reads = ", ".join(cx(x) for x in early)
    at = f"{m.var}, {n.var}"
    return [
        *head,
        "  // reads that need no result: made early by the register kernel (skinny_early)",
        f"  struct Early {{ {' '.join(f'{ctype(v.dtype)} {v.name};' for v in early.values())} }};",
        f"  __device__ Early early({coords}) const {{ return {{{reads}}}; }}",
        f"  __device__ void operator()({coords}, {results}, const Early& pre) const {{",
        *statements,
        f"  __device__ void operator()({coords}, {results}) const {{ (*this)({at}, c, early({at})); }}",
        "};",
    ]


def early_reads(body: Stmt, coords: set[str]) -> dict[Load, Var]:
    """The loads of a straight-line epilogue `body` that may run before its results exist: indices
    over the output's coordinates and dims alone, from buffers the body does not store to. Each
    maps to the Var (`e0`, `e1`, ...) that stands for it."""
    stmts = statements(body)
    if not all(isinstance(x, (Store, Let, Assign)) for x in stmts):
        return {}
    stored = {id(x.buffer) for x in stmts if isinstance(x, Store)}
    taken = {x.name for x in stmts if isinstance(x, (Let, Assign))}  # names the body binds
    fresh = (f"e{k}" for k in itertools.count() if f"e{k}" not in taken)
    found: dict[Load, Var] = {}

    def visit(x: Expr) -> Expr:
        for ld in loads(x):
            if id(ld.buffer) in stored or ld in found:
                continue
            if all(free_vars(i) <= coords for i in ld.index):
                found[ld] = Var(next(fresh), ld.dtype)
        return x

    map_exprs(body, visit)
    return found


def _gemm_device(program: Program, r: Realization) -> list[str]:
    """The epilogue's and the prologue's functors, where the atom has them."""
    atom = r.body
    assert isinstance(atom, AtomCall)
    out = _epilogue_device(program, r)
    if atom.prologue is not None:
        code = realized_prologue(program, r)
        out += list(code.lines) or [f"// prologue {atom.prologue.name}: always launched: {code.refusal}"]
    return out


def _prologue_args(program: Program, r: Realization) -> tuple[list[str], str]:
    """Host lines building the prologue functor, and the GEMM call's trailing arguments for it."""
    atom = r.body
    assert isinstance(atom, AtomCall)
    if atom.prologue is None:
        return [], ""
    code = realized_prologue(program, r)
    if code.refusal is not None:
        return [], ""
    return [f"  {construct(program, atom, code)}"], f", pro_, {staged_flag(atom.prologue)}"


def b_settled(program: Program, atom: AtomCall) -> bool:
    """Whether no kernel that may still run when the call starts writes any of its B (module doc;
    settled.py): with no prologue, the kernel writing A launches before the call; a prologue the
    atom applies does not launch, so a kernel before it must."""
    if atom.operands[0] not in program.temps:
        return False
    if atom.prologue is not None and not launches_before(program, atom.prologue):
        return False
    return settled_weights(program, (m.b for m in gemm_members(atom)))


SETTLED_NOTE = "  // B settled (weights no kernel here writes; A written here): read before the PDL wait"


def _group_init(atom: AtomCall, cx: CExpr, settled: bool) -> list[str]:
    init = f"  {group_init(atom, cx, settled)}"
    return [SETTLED_NOTE, init] if settled else [init]


def _gemm_launch(program: Program, r: Realization, cx: CExpr) -> list[str]:
    atom = r.body
    assert isinstance(atom, AtomCall)
    layout = f"GemmLayout::{atom.atom.rsplit('_', 1)[1]}"
    a = atom.operands[0]
    t = ctype(a.dtype)
    what = f'"the GEMM atom of kernel {r.kernel.name}"'
    dims = f"{cx(atom.params['m'])}, {cx(atom.params['k'])}"
    ws = [
        f"  const size_t ws_bytes_ = gemm_group_workspace_bytes<{layout}>({cname(a)}, g_, {dims});",
        "  DeviceScratch<unsigned char> ws_(e, static_cast<int64_t>(ws_bytes_), stream_);",
    ]
    pro, pro_args = _prologue_args(program, r)
    settled = b_settled(program, atom)
    if atom.epilogue is not None:
        ep = atom.epilogue
        count = len(gemm_members(atom))
        args = ", ".join(kernel_args(program, ep))
        lines = [
            f"bool {epilogue_flag(ep)} = false;",
            f"{{  // {atom.atom} x{count}, then epilogue {ep.name} where the tier can apply it",
            *_group_init(atom, cx, settled),
            f"  const {functor_name(program, ep, 'epilogue')} epi_{{{args}}};",
            *pro,
            *ws,
            f"  e.cuda(gemm_epilogue<{layout}, {count}>({cname(a)}, g_, {dims}, epi_, ws_.ptr, stream_, "
            f"&{epilogue_flag(ep)}{pro_args}), {what});",
            "}",
        ]
        if ends_chain(program, r.kernel):  # the second call of a chain
            return unless_chained(chain_flag(r.kernel), lines)
        if (why := chain_refusal(atom)) is not None:
            return [f"// {why}", *lines]
        if atom.chain is not None:  # the first call of a chain
            first = chain_block(program, r.kernel, cx, layout, _group_init(atom, cx, settled))
            return [*first, *unless_chained(chain_flag(atom.chain), lines)]
        return lines
    if "group" in atom.params or pro:
        return [
            f"{{  // {atom.atom} x{len(gemm_members(atom))} sharing A: C_s = A . B_s, {t}, f32 accumulation",
            *_group_init(atom, cx, settled),
            *pro,
            *ws,
            f"  e.cuda(gemm_group<{layout}>({cname(a)}, g_, {dims}, ws_.ptr, stream_{pro_args}), {what});",
            "}",
        ]
    _, b, c = atom.operands
    batch: Expr = Const(1)
    for name, x in atom.params.items():
        if name.startswith("batch"):
            batch = mul(batch, x)
    ptrs = f"{cname(a)}, {cname(b)}, {cname(c)}"
    dims = f"{cx(batch)}, {cx(atom.params['m'])}, {cx(atom.params['n'])}, {cx(atom.params['k'])}"
    flag = ", true" if settled else ""
    return [
        f"{{  // {atom.atom}: C = A . B, {t} operands, f32 accumulation",
        *([SETTLED_NOTE] if settled else []),
        f"  const size_t ws_bytes_ = gemm_workspace_bytes<{layout}>({ptrs}, {dims}{flag});",
        "  DeviceScratch<unsigned char> ws_(e, static_cast<int64_t>(ws_bytes_), stream_);",
        f"  e.cuda(gemm<{layout}>({ptrs}, {dims}, ws_.ptr, stream_{flag}), {what});",
        "}",
    ]


register(AtomKind(GEMM_PREFIXES[0], _gemm_recheck, _gemm_launch, (SM90_GEMM_MACRO,), _gemm_device))
register(AtomKind(GEMM_PREFIXES[1], _gemm_recheck, _gemm_launch, device=_gemm_device))
register(AtomKind(GEMM_PREFIXES[2], _gemm_recheck, _gemm_launch, device=_gemm_device))
