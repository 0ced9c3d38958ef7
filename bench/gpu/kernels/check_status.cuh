// CHECK(call) for the standalone sweeps: a CUDA runtime or cuBLAS call whose status is not 0
// (success) prints where, what and the status, and exits.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                       \
  do {                                                                                 \
    auto const e_ = (x);                                                               \
    if (e_ != 0) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, int(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
