// expect-error: Mesh: the mesh axes assigned to a topology level must multiply to its size
// seed 000 §2.3: the axes assigned to a static level multiply to its device count.
#define TILEFOUNDRY_THREAD_EXTENT 128
#include <tilefoundry/runtime.h>

// Trailing axes (2, 32) give 64 threads, not 128.
using Bad = tilefoundry::Mesh<decltype(cute::make_layout(cute::make_shape(cute::Int<2>{}, cute::Int<32>{}))),
                              tilefoundry::TopologyScope::thread>;
int main() { return Bad::rank; }
