// expect-error: Mesh: each topology level's axes must number its ids one to one
// seed 000 §2.3: idx2crd over a level's axes recovers coordinates only from a compact sub-layout.
#define TILEFOUNDRY_THREAD_EXTENT 8
#include <tilefoundry/runtime.h>

// (2,4):(1,1) gives thread 1 both coordinates (1,0) and (0,1); (2,4):(4,1) would be row-major.
using Bad = tilefoundry::Mesh<cute::Layout<cute::Shape<cute::Int<2>, cute::Int<4>>, cute::Stride<cute::Int<1>, cute::Int<1>>>,
                              tilefoundry::TopologyScope::thread>;
int main() { return Bad::rank; }
