// expect-error: ops::sync: a named barrier needs Count > 0 threads, a multiple of 32 (whole warps)
// seed 000 §3.4: the participant geometry is checked at compile time.
#include <tilefoundry/runtime.h>

__global__ void kernel() { tilefoundry::ops::sync<tilefoundry::ops::SyncKind::named, 0, 48, 0u, 1>(); }
