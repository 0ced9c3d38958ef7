// The host program context: which program instance the calling host thread is.
//
// On CPU the generated host loop binds each worker (cta level) and each inner instance
// (thread level) through a ProgramScope; program_id / program_dim then read it. A CUDA
// translation unit reads the same context on the host side, so host-capable views
// (local(), Mesh::local_index()) behave alike on both targets when run on the host.
// Unbound levels read as instance 0 of 1: plain host code is a single program instance.
#pragma once

#include <tilefoundry/topology.h>

namespace tilefoundry {
namespace detail {

constexpr int kScopeCount = static_cast<int>(TopologyScope::scope_count);

/// Per-host-thread ids and extents, indexed by TopologyScope.
struct HostProgram {
  int id[kScopeCount] = {};
  int dim[kScopeCount] = {1, 1};
};

inline thread_local HostProgram host_program{};

}  // namespace detail

/**
 * @brief Binds the calling host thread as instance `id` of `dim` at level T for the scope's
 *        lifetime, restoring the previous binding on exit (scopes nest).
 *
 * Example, the CPU host loop of a kernel with a launch-provided worker count:
 *   for (int w = 0; w < workers; ++w) {
 *     tilefoundry::ProgramScope<tilefoundry::TopologyScope::cta> worker(w, workers);
 *     body();  // program_id<cta>() == w, program_dim<cta>() == workers
 *   }
 */
template <TopologyScope T>
class ProgramScope {
  static constexpr int kLevel = static_cast<int>(T);
  static_assert(kLevel < detail::kScopeCount, "ProgramScope: T must be cta or thread");

 public:
  ProgramScope(int id, int dim) noexcept
      : saved_id_(detail::host_program.id[kLevel]), saved_dim_(detail::host_program.dim[kLevel]) {
    detail::host_program.id[kLevel] = id;
    detail::host_program.dim[kLevel] = dim;
  }
  ~ProgramScope() {
    detail::host_program.id[kLevel] = saved_id_;
    detail::host_program.dim[kLevel] = saved_dim_;
  }
  ProgramScope(ProgramScope const&) = delete;
  ProgramScope& operator=(ProgramScope const&) = delete;

 private:
  int saved_id_;
  int saved_dim_;
};

}  // namespace tilefoundry
