// expect-error: ShardLayout: not canonical: a split position's extent must equal its mesh axis extent
// DESIGN §4: canonical form, every split position has the extent of its mesh axis.
#include <tilefoundry/runtime.h>

int main() {
  using M = tilefoundry::Mesh<cute::Layout<cute::Int<2>, cute::Int<1>>, tilefoundry::TopologyScope::cta>;
  auto layout = cute::make_layout(cute::make_shape(cute::Int<4>{}, cute::Int<4>{}), cute::LayoutRight{});
  auto sl = tilefoundry::make_shard_layout(layout, cute::make_tuple(tilefoundry::shard::S<0>{}), M{});
  return static_cast<int>(sizeof(sl));
}
