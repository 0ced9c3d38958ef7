// expect-error: make_shard_tensor: got a raw pointer
// seed 000 §2.7: make_shard_tensor rejects a raw pointer at compile time.
#include <tilefoundry/runtime.h>

int main() {
  static float data[8];
  using M = tilefoundry::Mesh<cute::Layout<cute::Int<2>, cute::Int<1>>, tilefoundry::TopologyScope::cta>;
  auto layout = cute::make_layout(cute::make_shape(cute::Int<2>{}, cute::Int<4>{}), cute::LayoutRight{});
  auto sl = tilefoundry::make_shard_layout(layout, cute::make_tuple(tilefoundry::shard::S<0>{}), M{});
  auto t = tilefoundry::make_shard_tensor(&data[0], layout, sl);
  return static_cast<int>(sizeof(t));
}
