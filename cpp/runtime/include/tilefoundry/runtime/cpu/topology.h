// CPU launch geometry: launch-provided levels read the host program context that the
// generated host loop binds with ProgramScope (cta = worker, thread = inner instance).
#pragma once

#include <tilefoundry/host_program.h>
#include <tilefoundry/topology.h>

namespace tilefoundry::detail {

template <TopologyScope T>
struct launch_geometry {
  static constexpr int kLevel = static_cast<int>(T);

  static auto shape() noexcept { return cute::make_shape(host_program.dim[kLevel]); }  // (n)
  static int id() noexcept { return host_program.id[kLevel]; }
};

}  // namespace tilefoundry::detail
