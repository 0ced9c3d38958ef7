// expect-error: local: a shard::Dynamic attribute must be resolved before local()
// seed 000 §2.10.2: A[m] = Dynamic must have been resolved before local(); otherwise ill-formed.
#include <tilefoundry/runtime.h>

int main() {
  static float data[8];
  using M = tilefoundry::Mesh<cute::Layout<cute::Int<2>, cute::Int<1>>, tilefoundry::TopologyScope::cta>;
  auto layout = cute::make_layout(cute::make_shape(cute::Int<2>{}, cute::Int<4>{}), cute::LayoutRight{});
  auto sl = tilefoundry::make_shard_layout(layout, cute::make_tuple(tilefoundry::shard::Dynamic{}), M{});
  auto t = tilefoundry::make_shard_tensor(cute::make_tensor(&data[0], layout), layout, sl);
  return static_cast<int>(tilefoundry::local(t).size());
}
