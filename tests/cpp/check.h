// A minimal check harness for the host-run header tests: CHECK records a failure with its
// line and expression; main() returns check_summary(), nonzero when anything failed.
#pragma once

#include <cstdio>

namespace tf_test {

inline int passed = 0;
inline int failed = 0;

inline void record(bool ok, char const* expr, char const* file, int line) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    std::printf("FAIL %s:%d: %s\n", file, line, expr);
  }
}

inline int check_summary() {
  std::printf("%d checks passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace tf_test

#define CHECK(...) ::tf_test::record(static_cast<bool>(__VA_ARGS__), #__VA_ARGS__, __FILE__, __LINE__)
