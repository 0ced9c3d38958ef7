// expect-error: tilefoundry/runtime.h: no target selected
// seed 000 §2: exactly one of TILEFOUNDRY_TARGET_CUDA / TILEFOUNDRY_TARGET_CPU must be defined.
#undef TILEFOUNDRY_TARGET_CPU
#include <tilefoundry/runtime.h>

int main() { return 0; }
