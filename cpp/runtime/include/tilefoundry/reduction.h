// Reduction kind tags: the Op of ops::reduce and the Reduction of shard::P<Reduction>.
// Pure types, usable on host and device; the device combine rules live in ops/reduce_detail.h.
#pragma once

namespace tilefoundry::ops {

struct sum_op {};
struct mean_op {};
struct max_op {};
struct min_op {};
struct absmax_op {};  ///< max of |x|

}  // namespace tilefoundry::ops
