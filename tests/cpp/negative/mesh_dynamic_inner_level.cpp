// expect-error: Mesh: only the first (outermost) topology level may be launch-provided
// seed 000 §2.3: an inner level whose size is unknown cannot take a group of axes.
#include <tilefoundry/runtime.h>

using Bad = tilefoundry::Mesh<decltype(cute::make_layout(cute::make_shape(cute::Int<2>{}, cute::Int<32>{}))),
                              tilefoundry::TopologyScope::cta, tilefoundry::TopologyScope::thread>;
int main() { return Bad::rank; }
