// Host-run tests of the host-capable runtime headers, built with g++ for the CPU target:
// topology ids through ProgramScope, Mesh grouping and local_index(), ShardLayout local shape,
// local() offsets per seed 000 §2.10, make_shard_tensor, shard_partition, shard-aware copy.
#define TILEFOUNDRY_THREAD_EXTENT 4  // a static thread level; the cta level is launch-provided
#include <tilefoundry/runtime.h>

#include <numeric>
#include <type_traits>
#include <vector>

#include "check.h"

using namespace tilefoundry;
using cute::Int;
using cute::_1;
using TS = TopologyScope;

// ---------------------------------------------------------------- topology (§2.1-2.2)

static_assert(is_static_topology_v<TS::thread> && !is_static_topology_v<TS::cta>);
static_assert(std::is_same_v<decltype(program_dim<TS::thread>()), Int<4>>, "static level: a constant");
static_assert(std::is_same_v<decltype(program_shape<TS::thread>()), cute::Shape<Int<4>>>);
static_assert(std::is_same_v<decltype(program_dim<TS::cta>()), int>, "launch-provided level: a runtime int");

void test_topology() {
  CHECK(program_id<TS::cta>() == 0 && program_dim<TS::cta>() == 1);  // unbound: instance 0 of 1
  {
    ProgramScope<TS::cta> worker(3, 8);
    CHECK(program_id<TS::cta>() == 3);
    CHECK(program_dim<TS::cta>() == 8);
    CHECK(cute::size(program_shape<TS::cta>()) == 8);
    {
      ProgramScope<TS::cta> nested(5, 6);
      CHECK(program_id<TS::cta>() == 5);
    }
    CHECK(program_id<TS::cta>() == 3);  // restored on scope exit
  }
  CHECK(program_id<TS::cta>() == 0);
}

// ---------------------------------------------------------------- Mesh grouping (§2.3)

// Each level's axes number its own ids: (2,4):(1,1) is cta axis (2):(1), thread axis (4):(1).
using Mesh2x4 = Mesh<cute::Layout<cute::Shape<Int<2>, Int<4>>, cute::Stride<_1, _1>>, TS::cta, TS::thread>;
static_assert(Mesh2x4::grouping.owner[0] == 0 && Mesh2x4::grouping.owner[1] == 1);

// thread (4 static) takes trailing (2,2) row-major; the launch-provided cta level takes the rest (3).
using Mesh3x2x2 = Mesh<cute::Layout<cute::Shape<Int<3>, Int<2>, Int<2>>, cute::Stride<_1, Int<2>, _1>>, TS::cta, TS::thread>;
static_assert(Mesh3x2x2::grouping.begin[1] == 1 && Mesh3x2x2::grouping.end[1] == 3);
static_assert(Mesh3x2x2::grouping.begin[0] == 0 && Mesh3x2x2::grouping.end[0] == 1);

// A launch-provided level takes axes of run-time extent.
using MeshDyn = Mesh<cute::Layout<cute::Shape<int, Int<4>>, cute::Stride<_1, _1>>, TS::cta, TS::thread>;
static_assert(MeshDyn::grouping.owner[0] == 0 && MeshDyn::grouping.owner[1] == 1);

void test_mesh_local_index() {
  Mesh2x4 mesh{};
  for (int c = 0; c < 2; ++c) {
    for (int t = 0; t < 4; ++t) {
      ProgramScope<TS::cta> cta(c, 2);
      ProgramScope<TS::thread> thread(t, 4);
      auto idx = mesh.local_index();
      CHECK(int(cute::get<0>(idx)) == c && int(cute::get<1>(idx)) == t);
    }
  }
  // (3,2,2):(1,2,1): thread t -> (t/2 % 2, t % 2); cta c -> c.
  Mesh3x2x2 mesh3{};
  ProgramScope<TS::cta> cta(2, 3);
  ProgramScope<TS::thread> thread(3, 4);
  auto idx = mesh3.local_index();
  CHECK(int(cute::get<0>(idx)) == 2 && int(cute::get<1>(idx)) == 1 && int(cute::get<2>(idx)) == 1);

  // Run-time extents: (n,4):(1,1) with n = 5.
  MeshDyn dyn{cute::make_layout(cute::make_shape(5, Int<4>{}), cute::make_stride(_1{}, _1{}))};
  ProgramScope<TS::cta> cta4(4, 5);
  ProgramScope<TS::thread> thread1(1, 4);
  auto d = dyn.local_index();
  CHECK(int(cute::get<0>(d)) == 4 && int(cute::get<1>(d)) == 1);
}

// Mesh of the cta level only, 6 launch-provided workers laid out (2,3) row-major.
using MeshCta = Mesh<decltype(cute::make_layout(cute::make_shape(Int<2>{}, Int<3>{}), cute::LayoutRight{})), TS::cta>;

void test_mesh_cta_only() {
  MeshCta mesh{};
  for (int c = 0; c < 6; ++c) {
    ProgramScope<TS::cta> cta(c, 6);
    auto idx = mesh.local_index();
    CHECK(int(cute::get<0>(idx)) == c / 3 && int(cute::get<1>(idx)) == c % 3);
  }
}

// ---------------------------------------------------------------- ShardLayout (§2.4-2.5)

// (8,6) row-major, rows split by mesh axis 0 (2), cols by mesh axis 1 (3), each instance a
// contiguous (4,2) block: canonical ((4,2),(2,3)):((6,24),(1,2)), split leaves 1 and 3.
auto canonical_8x6() {
  return cute::make_layout(cute::make_shape(cute::make_shape(Int<4>{}, Int<2>{}), cute::make_shape(Int<2>{}, Int<3>{})),
                           cute::make_stride(cute::make_stride(Int<6>{}, Int<24>{}), cute::make_stride(_1{}, Int<2>{})));
}
auto split_rows_cols() { return cute::make_tuple(shard::S<1>{}, shard::S<3>{}); }

void test_shard_layout_local_shape() {
  auto sl = make_shard_layout(canonical_8x6(), split_rows_cols(), MeshCta{});
  auto shape = shard_layout_local_shape(sl);
  static_assert(std::is_same_v<decltype(shape), cute::Shape<cute::Shape<Int<4>, _1>, cute::Shape<Int<2>, _1>>>,
                "nesting kept, split leaves set to 1");
  auto sl_b = make_shard_layout(canonical_8x6(), cute::make_tuple(shard::S<1>{}, shard::B{}), MeshCta{});
  static_assert(
      std::is_same_v<decltype(shard_layout_local_shape(sl_b)), cute::Shape<cute::Shape<Int<4>, _1>, cute::Shape<Int<2>, Int<3>>>>);
  CHECK(cute::size(shape) == 8);
  CHECK(cute::size(shard_layout_local_shape(sl_b)) == 24);
}

// ---------------------------------------------------------------- local() (§2.10)

void test_local_offsets() {
  std::vector<float> host(48);
  std::iota(host.begin(), host.end(), 0.0f);
  auto global = cute::make_layout(cute::make_shape(Int<8>{}, Int<6>{}), cute::LayoutRight{});
  auto sl = make_shard_layout(canonical_8x6(), split_rows_cols(), MeshCta{});
  auto t = make_shard_tensor(cute::make_tensor(host.data(), global), global, sl);
  static_assert(std::is_same_v<decltype(t.data()), float*>, "data() drops to the raw pointer");
  CHECK(t.data() == host.data());
  for (int c = 0; c < 6; ++c) {
    ProgramScope<TS::cta> cta(c, 6);
    auto l = local(t);
    int const row0 = (c / 3) * 4, col0 = (c % 3) * 2;
    CHECK(l.data() - host.data() == (c / 3) * 24 + (c % 3) * 2);  // Σ coord[m] · S[k]
    CHECK(cute::size(l) == 8);
    bool values = true;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 2; ++j) values &= l(i, j) == host[(row0 + i) * 6 + col0 + j];  // by tensor axes
    }
    CHECK(values);
  }
}

// The IR's example (tilefoundry.ir.shard): 4 CTAs split the 8 rows of an (8,16) row-major tensor,
// canonical ((2,4),16):((16,32),1), Split(1); instance c owns rows 2c, 2c+1.
void test_local_ir_example() {
  std::vector<float> host(128);
  std::iota(host.begin(), host.end(), 0.0f);
  using Mesh4 = Mesh<cute::Layout<Int<4>, _1>, TS::cta>;
  auto global = cute::make_layout(cute::make_shape(Int<8>{}, Int<16>{}), cute::LayoutRight{});
  auto canonical = cute::make_layout(cute::make_shape(cute::make_shape(Int<2>{}, Int<4>{}), Int<16>{}),
                                     cute::make_stride(cute::make_stride(Int<16>{}, Int<32>{}), _1{}));
  auto t = make_shard_tensor(cute::make_tensor(host.data(), global), global,
                             make_shard_layout(canonical, cute::make_tuple(shard::S<1>{}), Mesh4{}));
  static_assert(std::is_same_v<decltype(shard_layout_local_shape(t.shard_layout)),
                               cute::Shape<cute::Shape<Int<2>, _1>, Int<16>>>, "((2,1),16), as the IR's local_shape");
  for (int c = 0; c < 4; ++c) {
    ProgramScope<TS::cta> cta(c, 4);
    auto l = local(t);
    CHECK(l.data() - host.data() == 32 * c);  // the IR's local_offset((c,))
    CHECK(l(1, 15) == host[(2 * c + 1) * 16 + 15]);
  }
}

void test_local_broadcast_and_partial_contribute_zero() {
  std::vector<float> host(48);
  auto global = cute::make_layout(cute::make_shape(Int<8>{}, Int<6>{}), cute::LayoutRight{});
  auto sl = make_shard_layout(canonical_8x6(), cute::make_tuple(shard::S<1>{}, shard::P<ops::sum_op>{}), MeshCta{});
  auto t = make_shard_tensor(cute::make_tensor(host.data(), global), global, sl);
  for (int c = 0; c < 6; ++c) {
    ProgramScope<TS::cta> cta(c, 6);
    CHECK(local(t).data() - host.data() == (c / 3) * 24);
  }
}

void test_local_rmem_split_stride_zero() {
  // A per-thread register fragment: 4 thread-split rows of 8, split stride 0.
  using ThreadMesh = Mesh<decltype(cute::make_layout(Int<4>{})), TS::thread>;
  float frag[8];
  auto canonical = cute::make_layout(cute::make_shape(Int<4>{}, Int<8>{}), cute::make_stride(Int<0>{}, _1{}));
  auto sl = make_shard_layout(canonical, cute::make_tuple(shard::S<0>{}), ThreadMesh{});
  auto engine = cute::make_tensor(&frag[0], cute::make_layout(Int<8>{}));
  auto t = make_shard_tensor(engine, canonical, sl);
  for (int th = 0; th < 4; ++th) {
    ProgramScope<TS::thread> thread(th, 4);
    auto l = local(t);
    CHECK(l.data() == &frag[0]);
    CHECK(cute::size(l) == 8);
  }
}

void test_local_keeps_gmem_residency() {
  std::vector<float> host(48);
  auto global = cute::make_layout(cute::make_shape(Int<8>{}, Int<6>{}), cute::LayoutRight{});
  auto sl = make_shard_layout(canonical_8x6(), split_rows_cols(), MeshCta{});
  auto t = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(host.data()), global), global, sl);
  ProgramScope<TS::cta> cta(4, 6);
  auto l = local(t);
  static_assert(cute::is_gmem<cute::remove_cvref_t<decltype(l.data())>>::value, "local() keeps the gmem tag");
  CHECK(cute::raw_pointer_cast(l.data()) - host.data() == 24 + 2);
}

// ---------------------------------------------------------------- shard_partition (§3.3)

void test_shard_partition_matches_local() {
  std::vector<float> host(48);
  auto global = cute::make_layout(cute::make_shape(Int<8>{}, Int<6>{}), cute::LayoutRight{});
  auto sl = make_shard_layout(canonical_8x6(), split_rows_cols(), MeshCta{});
  auto view = make_shard_view(cute::make_gmem_ptr(host.data()), sl);
  auto t = make_shard_tensor(cute::make_tensor(cute::make_gmem_ptr(host.data()), global), global, sl);
  for (int c = 0; c < 6; ++c) {
    ProgramScope<TS::cta> cta(c, 6);
    auto p = shard_partition(view);
    static_assert(cute::is_layout<cute::remove_cvref_t<decltype(p.layout())>>::value, "plain CuTe layout");
    CHECK(p.data() == local(t).data());
    CHECK(p.layout() == local(t).layout());
  }
}

// ---------------------------------------------------------------- copy (§2.8)

void test_copy_both_directions() {
  std::vector<float> src(48), back(48, -1.0f), mid(48, -1.0f);
  std::iota(src.begin(), src.end(), 1.0f);
  auto global = cute::make_layout(cute::make_shape(Int<8>{}, Int<6>{}), cute::LayoutRight{});
  auto sl = make_shard_layout(canonical_8x6(), split_rows_cols(), MeshCta{});
  auto plain_src = cute::make_tensor(src.data(), global);
  auto shard_dst = make_shard_tensor(cute::make_tensor(mid.data(), global), global, sl);
  tilefoundry::copy(plain_src, shard_dst);  // plain -> shard
  CHECK(mid == src);
  auto plain_back = cute::make_tensor(back.data(), global);
  tilefoundry::copy(shard_dst, plain_back);  // shard -> plain
  CHECK(back == src);
  // A column-major destination: the full tensor is copied by logical coordinate.
  std::vector<float> colmajor(48);
  auto cm = cute::make_tensor(colmajor.data(), cute::make_layout(cute::make_shape(Int<8>{}, Int<6>{})));
  tilefoundry::copy(shard_dst, cm);
  CHECK(colmajor[1] == src[6] && colmajor[8] == src[1]);
}

int main() {
  tf_test::run_group("topology", test_topology);
  tf_test::run_group("mesh_local_index", test_mesh_local_index);
  tf_test::run_group("mesh_cta_only", test_mesh_cta_only);
  tf_test::run_group("shard_layout_local_shape", test_shard_layout_local_shape);
  tf_test::run_group("local_offsets", test_local_offsets);
  tf_test::run_group("local_ir_example", test_local_ir_example);
  tf_test::run_group("local_broadcast_and_partial", test_local_broadcast_and_partial_contribute_zero);
  tf_test::run_group("local_rmem_split_stride_zero", test_local_rmem_split_stride_zero);
  tf_test::run_group("local_keeps_gmem_residency", test_local_keeps_gmem_residency);
  tf_test::run_group("shard_partition", test_shard_partition_matches_local);
  tf_test::run_group("copy_both_directions", test_copy_both_directions);
  return tf_test::check_summary();
}
