// Compile-only tests of the CUDA runtime (nvcc -arch=sm_90a): one kernel per op family through
// its public entry, and static_asserts on the tier each entry selects at compile time.
#define TILEFOUNDRY_THREAD_EXTENT 128  // a static thread level; the cta level is launch-provided
#include <tilefoundry/runtime.h>

using namespace tilefoundry;
using cute::Int;
using cute::_1;
using TS = TopologyScope;
using tilefoundry::detail::ReduceTier;

// ---------------------------------------------------------------- topology

static_assert(std::is_same_v<decltype(program_dim<TS::thread>()), Int<128>>);
static_assert(std::is_same_v<decltype(program_dim<TS::cta>()), int>);

// ---------------------------------------------------------------- sync (§3.4)

__global__ void kernel_sync(unsigned int* grid_bar, float* out) {
  __shared__ float s[128];
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  ops::sync<ops::SyncKind::cta>();
  ops::sync<ops::SyncKind::warp>();
  ops::sync<ops::SyncKind::warp, 0, 0, 0x0000ffffu>();
  ops::sync<ops::SyncKind::named, 0, 64, 0u, 1>();
  ops::sync<ops::SyncKind::grid>(grid_bar);
  out[blockIdx.x * 128 + threadIdx.x] = s[127 - threadIdx.x];
}

// ---------------------------------------------------------------- reduce (§3.5)

// thread tier: a plain per-thread (4,8) fragment reduced along mode 1 into (4).
using PlainFrag = decltype(cute::make_tensor<float>(cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{}))));
static_assert(tilefoundry::detail::reduce_tier_v<Int<1>, PlainFrag> == ReduceTier::thread);

__global__ void kernel_reduce_thread(float const* in, float* out) {
  auto frag = cute::make_tensor<float>(cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{})));
  for (int i = 0; i < 32; ++i) frag(i) = in[threadIdx.x * 32 + i];
  auto acc = cute::make_tensor<float>(cute::make_layout(Int<4>{}));
  ops::reduce<ops::sum_op, Int<1>>(frag, acc);
  ops::reduce<ops::mean_op, cute::tuple<Int<1>>>(frag, acc);
  ops::reduce<ops::max_op, cute::seq<1>>(frag, acc);
  ops::reduce<ops::absmax_op, Int<1>>(frag, acc);
  auto keep = cute::make_tensor<float>(cute::make_layout(cute::make_shape(Int<4>{}, _1{})));
  ops::reduce<ops::min_op, Int<1>>(frag, keep);  // keepdim
  auto whole = cute::make_tensor<cute::half_t>(cute::make_layout(_1{}));
  ops::reduce<ops::sum_op, cute::seq<0, 1>>(frag, whole);
  out[threadIdx.x] = acc(0) + keep(1) + static_cast<float>(whole(0));
}

// A 128-thread level as (warp, lane) = (4,32):(32,1); a row of 32 x 8 values per warp, split by lane.
using WarpLaneMesh = Mesh<decltype(cute::make_layout(cute::make_shape(Int<4>{}, Int<32>{}), cute::LayoutRight{})), TS::thread>;
using RowLayout = cute::Layout<cute::Shape<Int<32>, Int<8>>, cute::Stride<Int<0>, _1>>;  // (lane-split, 8) rmem
using RowAttrs = cute::tuple<shard::B, shard::S<0>>;
using RowShard = ShardLayout<RowLayout, RowAttrs, WarpLaneMesh>;
using RowEngine = decltype(cute::make_tensor<float>(cute::make_layout(Int<8>{})));
using RowTensor = ShardTensor<RowEngine, RowLayout, RowShard>;
static_assert(tilefoundry::detail::reduce_tier_v<cute::seq<0, 1>, RowTensor> == ReduceTier::warp);
static_assert(tilefoundry::detail::reduce_tier_v<Int<1>, RowTensor> == ReduceTier::thread, "mode 1 is not split");

// Nested canonical layout: tensor axis 0 is ((8 per lane) x 32 lanes), split leaf 1.
using NestedLayout = cute::Layout<cute::Shape<cute::Shape<Int<8>, Int<32>>, Int<2>>,
                                  cute::Stride<cute::Stride<Int<2>, Int<0>>, _1>>;
using NestedShard = ShardLayout<NestedLayout, cute::tuple<shard::B, shard::S<1>>, WarpLaneMesh>;
using NestedTensor = ShardTensor<decltype(cute::make_tensor<float>(cute::make_layout(Int<16>{}))), NestedLayout, NestedShard>;
static_assert(tilefoundry::detail::reduce_tier_v<Int<0>, NestedTensor> == ReduceTier::warp, "leaf 1 lies in axis 0");
static_assert(tilefoundry::detail::reduce_tier_v<Int<1>, NestedTensor> == ReduceTier::thread);

// Lanes {l, l+4, l+8, l+12} of a (8,4,4):(16,4,1) thread mesh: stride 4, extent 4, inside a warp.
using StridedMesh =
    Mesh<decltype(cute::make_layout(cute::make_shape(Int<8>{}, Int<4>{}, Int<4>{}), cute::LayoutRight{})), TS::thread>;
using StridedLayout = cute::Layout<cute::Shape<Int<4>, Int<2>>, cute::Stride<Int<0>, _1>>;
using StridedShard = ShardLayout<StridedLayout, cute::tuple<shard::B, shard::S<0>, shard::B>, StridedMesh>;
using StridedTensor = ShardTensor<decltype(cute::make_tensor<float>(cute::make_layout(Int<2>{}))), StridedLayout, StridedShard>;
static_assert(tilefoundry::detail::reduce_participants<Int<0>, StridedTensor>::geometry().lane_stride[0] == 4);
static_assert(tilefoundry::detail::reduce_tier_v<Int<0>, StridedTensor> == ReduceTier::warp);

// All 128 threads on one axis: the combine spans warps -> cta tier with a workspace.
using CtaMesh = Mesh<decltype(cute::make_layout(Int<128>{})), TS::thread>;
using CtaLayout = cute::Layout<cute::Shape<Int<128>, Int<4>>, cute::Stride<Int<0>, _1>>;
using CtaShard = ShardLayout<CtaLayout, cute::tuple<shard::S<0>>, CtaMesh>;
using CtaTensor = ShardTensor<decltype(cute::make_tensor<float>(cute::make_layout(Int<4>{}))), CtaLayout, CtaShard>;
static_assert(tilefoundry::detail::reduce_tier_v<cute::seq<0>, CtaTensor> == ReduceTier::cta);

__global__ void kernel_reduce_sharded(float const* in, float* out) {
  auto row = cute::make_tensor<float>(cute::make_layout(Int<8>{}));
  for (int i = 0; i < 8; ++i) row(i) = in[threadIdx.x * 8 + i];
  RowShard row_shard{RowLayout{}, RowAttrs{}, WarpLaneMesh{}};
  auto src = make_shard_tensor(row, RowLayout{}, row_shard);
  // Warp tier into a per-thread scalar (B on both mesh axes).
  using OutLayout = cute::Layout<cute::Shape<_1>, cute::Stride<Int<0>>>;
  using OutShard = ShardLayout<OutLayout, cute::tuple<shard::B, shard::B>, WarpLaneMesh>;
  auto scalar = cute::make_tensor<float>(cute::make_layout(_1{}));
  auto dst = make_shard_tensor(scalar, OutLayout{}, OutShard{OutLayout{}, {}, WarpLaneMesh{}});
  ops::reduce<ops::sum_op, cute::seq<0, 1>>(src, dst);
  ops::reduce<ops::absmax_op, cute::seq<0, 1>>(src, dst);

  // Strided warp tier.
  auto pair = cute::make_tensor<float>(cute::make_layout(Int<2>{}));
  pair(0) = in[threadIdx.x];
  pair(1) = -in[threadIdx.x];
  auto strided = make_shard_tensor(pair, StridedLayout{}, StridedShard{});
  auto pair_out = cute::make_tensor<float>(cute::make_layout(cute::make_shape(_1{}, Int<2>{})));
  ops::reduce<ops::max_op, Int<0>>(strided, pair_out);

  // CTA tier through shared memory; the result lands in shared memory, written once.
  __shared__ float ws[128 * 4];
  __shared__ float result[4];
  auto quad = cute::make_tensor<float>(cute::make_layout(Int<4>{}));
  for (int i = 0; i < 4; ++i) quad(i) = in[threadIdx.x * 4 + i];
  auto cta_src = make_shard_tensor(quad, CtaLayout{}, CtaShard{});
  auto workspace = cute::make_tensor(cute::make_smem_ptr(&ws[0]), cute::make_layout(Int<128 * 4>{}));
  auto shared_out = cute::make_tensor(cute::make_smem_ptr(&result[0]), cute::make_layout(cute::make_shape(_1{}, Int<4>{})));
  ops::reduce<ops::mean_op, cute::seq<0>>(cta_src, shared_out, workspace);
  __syncthreads();
  out[threadIdx.x] = scalar(0) + pair_out(1) + result[threadIdx.x % 4];
}

// ---------------------------------------------------------------- copy_async (§3.6)

using GmemRow = decltype(cute::make_tensor(cute::make_gmem_ptr(static_cast<cute::half_t const*>(nullptr)),
                                           cute::make_layout(Int<8>{})));
using SmemRow = decltype(cute::make_tensor(cute::make_smem_ptr(static_cast<cute::half_t*>(nullptr)),
                                           cute::make_layout(Int<8>{})));
using SmemStrided = decltype(cute::make_tensor(cute::make_smem_ptr(static_cast<cute::half_t*>(nullptr)),
                                               cute::make_layout(Int<8>{}, Int<2>{})));
static_assert(tilefoundry::detail::vector_bits_v<GmemRow, SmemRow> == 128);
static_assert(tilefoundry::detail::vector_bits_v<GmemRow, SmemStrided> == 16, "strided smem: element-wise");
#if defined(__CUDA_ARCH__)
static_assert(ops::detail::copy_async_16b_v<GmemRow, SmemRow>, "sm_90: cp.async 16-byte tier");
static_assert(!ops::detail::copy_async_16b_v<GmemRow, SmemStrided>, "no 16-byte vectors: plain copy tier");
#endif

__global__ void kernel_copy_async(cute::half_t const* in, cute::half_t* out) {
  __shared__ alignas(16) cute::half_t tile[128 * 8];
  __shared__ alignas(16) cute::half_t strided[128 * 16];
  auto src = cute::make_tensor(cute::make_gmem_ptr(in + threadIdx.x * 8), cute::make_layout(Int<8>{}));
  auto dst = cute::make_tensor(cute::make_smem_ptr(&tile[threadIdx.x * 8]), cute::make_layout(Int<8>{}));
  auto dst2 = cute::make_tensor(cute::make_smem_ptr(&strided[threadIdx.x * 16]), cute::make_layout(Int<8>{}, Int<2>{}));
  ops::copy_async(src, dst);
  ops::copy_async(src, dst2);
  ops::cp_async_commit();
  ops::cp_async_wait<0>();
  ops::sync<ops::SyncKind::cta>();
  out[threadIdx.x] = tile[(threadIdx.x * 8 + 8) % (128 * 8)] + strided[threadIdx.x * 16];
}

// ---------------------------------------------------------------- unary family, binary

__global__ void kernel_elementwise(cute::half_t const* in, float* out_f, cute::bfloat16_t* out_b, float alpha) {
  auto x = cute::make_tensor(cute::make_gmem_ptr(in + threadIdx.x * 8), cute::make_layout(Int<8>{}));
  auto f = cute::make_tensor<float>(cute::make_layout(Int<8>{}));
  auto g = cute::make_tensor<float>(cute::make_layout(Int<8>{}));
  ops::unary(ops::relu_op{}, x, f);
  ops::unary(ops::gelu_op{}, f, g);
  ops::unary(ops::silu_op{}, g, g);
  ops::unary(ops::softplus_op{}, g, g);
  ops::clamp(g, g, -1.0f, 1.0f);
  ops::binary(ops::add_op{}, f, g, f);
  ops::binary(ops::mul_op{}, f, alpha, f);
  ops::binary(ops::maximum_op{}, 0.0f, f, f);
  auto b = cute::make_tensor(cute::make_gmem_ptr(out_b + threadIdx.x * 8), cute::make_layout(Int<8>{}));
  ops::cast(f, b);
  auto same = cute::make_tensor(cute::make_gmem_ptr(out_f + threadIdx.x * 8), cute::make_layout(Int<8>{}));
  ops::cast(f, same);  // same element type: the vectorized identity tier
  ops::copy_n(g, same, 3);
}

// ---------------------------------------------------------------- mma

using SmemA = decltype(cute::make_tensor(cute::make_smem_ptr(static_cast<cute::bfloat16_t*>(nullptr)),
                                         cute::make_layout(cute::make_shape(Int<64>{}, Int<16>{}), cute::LayoutRight{})));
using SmemB = decltype(cute::make_tensor(cute::make_smem_ptr(static_cast<cute::bfloat16_t*>(nullptr)),
                                         cute::make_layout(cute::make_shape(Int<32>{}, Int<16>{}), cute::LayoutRight{})));
using SmemC = decltype(cute::make_tensor(cute::make_smem_ptr(static_cast<float*>(nullptr)),
                                         cute::make_layout(cute::make_shape(Int<64>{}, Int<32>{}))));
static_assert(ops::detail::mma_tensor_core_v<SmemA, SmemB, SmemC>, "bf16 64x32x16 on 4 warps: tensor cores");
static_assert(ops::detail::mma_plan<SmemA, SmemB, SmemC>::wm == 4);
using SmemAf = decltype(cute::make_tensor(cute::make_smem_ptr(static_cast<float*>(nullptr)),
                                          cute::make_layout(cute::make_shape(Int<64>{}, Int<16>{}))));
static_assert(!ops::detail::mma_tensor_core_v<SmemAf, SmemAf, SmemC>, "f32 stays f32: the fma tier");

__global__ void kernel_mma(cute::bfloat16_t const* a, cute::bfloat16_t const* b, float* c, float const* af) {
  __shared__ cute::bfloat16_t sa[64 * 16];
  __shared__ cute::bfloat16_t sb[32 * 16];
  __shared__ float sc[64 * 32];
  __shared__ float saf[64 * 16];
  for (int i = threadIdx.x; i < 64 * 16; i += 128) sa[i] = a[i], saf[i] = af[i];
  for (int i = threadIdx.x; i < 32 * 16; i += 128) sb[i] = b[i];
  for (int i = threadIdx.x; i < 64 * 32; i += 128) sc[i] = 0.0f;
  ops::sync<ops::SyncKind::cta>();
  auto tA = cute::make_tensor(cute::make_smem_ptr(&sa[0]), cute::make_layout(cute::make_shape(Int<64>{}, Int<16>{}), cute::LayoutRight{}));
  auto tB = cute::make_tensor(cute::make_smem_ptr(&sb[0]), cute::make_layout(cute::make_shape(Int<32>{}, Int<16>{}), cute::LayoutRight{}));
  auto tC = cute::make_tensor(cute::make_smem_ptr(&sc[0]), cute::make_layout(cute::make_shape(Int<64>{}, Int<32>{})));
  ops::mma(tA, tB, tC);
  auto tAf = cute::make_tensor(cute::make_smem_ptr(&saf[0]), cute::make_layout(cute::make_shape(Int<64>{}, Int<16>{})));
  auto tBf = cute::make_tensor(cute::make_smem_ptr(&saf[0]), cute::make_layout(cute::make_shape(Int<32>{}, Int<16>{})));
  ops::sync<ops::SyncKind::cta>();
  ops::mma(tAf, tBf, tC);
  ops::sync<ops::SyncKind::cta>();
  for (int i = threadIdx.x; i < 64 * 32; i += 128) c[i] = sc[i];
}

// ---------------------------------------------------------------- host side of a CUDA TU

int host_local_offset() {
  static float host[48];
  using MeshCta = Mesh<decltype(cute::make_layout(cute::make_shape(Int<2>{}, Int<3>{}), cute::LayoutRight{})), TS::cta>;
  auto canonical = cute::make_layout(cute::make_shape(Int<2>{}, Int<4>{}, Int<3>{}, Int<2>{}),
                                     cute::make_stride(Int<24>{}, Int<6>{}, Int<2>{}, _1{}));
  auto global = cute::make_layout(cute::make_shape(Int<8>{}, Int<6>{}), cute::LayoutRight{});
  auto t = make_shard_tensor(cute::make_tensor(&host[0], global), global,
                             make_shard_layout(canonical, cute::make_tuple(shard::S<0>{}, shard::S<2>{}), MeshCta{}));
  ProgramScope<TS::cta> cta(4, 6);
  return static_cast<int>(local(t).data() - &host[0]) + co_resident_cta_limit(kernel_sync, 128, 0);
}
