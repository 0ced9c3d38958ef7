// expect-error: ops::reduce: a reduced mode is split across CTAs
// seed 000 §3.5: a reduction whose reduced axis crosses CTA boundaries is not supported.
#define TILEFOUNDRY_THREAD_EXTENT 128
#include <tilefoundry/runtime.h>

using namespace tilefoundry;
using cute::Int;

// A (4 CTAs, 128 threads) mesh; mode 0 of the row is split over the CTA axis.
using GridMesh = Mesh<cute::Layout<cute::Shape<Int<4>, Int<128>>, cute::Stride<Int<1>, Int<1>>>, TopologyScope::cta,
                      TopologyScope::thread>;
using RowLayout = cute::Layout<cute::Shape<Int<4>, Int<8>>, cute::Stride<Int<0>, Int<1>>>;
using RowShard = ShardLayout<RowLayout, cute::tuple<shard::S<0>, shard::B>, GridMesh>;

__global__ void kernel(float* out) {
  auto row = cute::make_tensor<float>(cute::make_layout(Int<8>{}));
  auto src = make_shard_tensor(row, RowLayout{}, RowShard{});
  auto dst = cute::make_tensor<float>(cute::make_layout(cute::Int<1>{}));
  ops::reduce<ops::sum_op, cute::seq<0, 1>>(src, dst);
  out[threadIdx.x] = dst(0);
}
