// expect-error: ops::reduce: this reduction combines lanes of different warps and needs a shared-memory workspace
// seed 000 §3.5: without a workspace (no_workspace) the reduce stays within one warp.
#define TILEFOUNDRY_THREAD_EXTENT 128
#include <tilefoundry/runtime.h>

using namespace tilefoundry;
using cute::Int;

using CtaMesh = Mesh<decltype(cute::make_layout(Int<128>{})), TopologyScope::thread>;
using RowLayout = cute::Layout<cute::Shape<Int<128>, Int<4>>, cute::Stride<Int<0>, Int<1>>>;
using RowShard = ShardLayout<RowLayout, cute::tuple<shard::S<0>>, CtaMesh>;

__global__ void kernel(float* out) {
  auto row = cute::make_tensor<float>(cute::make_layout(Int<4>{}));
  auto src = make_shard_tensor(row, RowLayout{}, RowShard{});
  auto dst = cute::make_tensor<float>(cute::make_layout(Int<4>{}));
  ops::reduce<ops::sum_op, Int<0>>(src, dst);
  out[threadIdx.x] = dst(0);
}
