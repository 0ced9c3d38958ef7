// The umbrella: the only header generated code includes, and the only reader of the
// build-injected target macro (exactly one of TILEFOUNDRY_TARGET_CUDA / TILEFOUNDRY_TARGET_CPU).
#pragma once

#if defined(TILEFOUNDRY_TARGET_CUDA) && defined(TILEFOUNDRY_TARGET_CPU)
#error "tilefoundry/runtime.h: both TILEFOUNDRY_TARGET_CUDA and TILEFOUNDRY_TARGET_CPU are defined; define exactly one"
#elif defined(TILEFOUNDRY_TARGET_CUDA)
#include <tilefoundry/runtime/cuda/runtime.cuh>
#elif defined(TILEFOUNDRY_TARGET_CPU)
#include <tilefoundry/runtime/cpu/runtime.h>
#else
#error "tilefoundry/runtime.h: no target selected; define exactly one of TILEFOUNDRY_TARGET_CUDA or TILEFOUNDRY_TARGET_CPU"
#endif
