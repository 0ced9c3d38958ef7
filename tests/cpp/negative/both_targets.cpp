// expect-error: tilefoundry/runtime.h: both TILEFOUNDRY_TARGET_CUDA and TILEFOUNDRY_TARGET_CPU are defined
// seed 000 §2: exactly one of TILEFOUNDRY_TARGET_CUDA / TILEFOUNDRY_TARGET_CPU must be defined.
#define TILEFOUNDRY_TARGET_CUDA
#include <tilefoundry/runtime.h>

int main() { return 0; }
