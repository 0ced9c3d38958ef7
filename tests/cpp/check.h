// A minimal check harness for the host-run header tests. CHECK records a failure with its line
// and expression; run_group() runs one test function and prints "[name] N passed, M failed",
// the line the pytest driver reads; check_summary() is main's exit status.
#pragma once

#include <cstdio>

namespace tf_test {

inline int passed = 0;
inline int failed = 0;
inline int any_failed = 0;

inline void record(bool ok, char const* expr, char const* file, int line) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    std::printf("FAIL %s:%d: %s\n", file, line, expr);
  }
}

inline void run_group(char const* name, void (*fn)()) {
  passed = 0;
  failed = 0;
  fn();
  std::printf("[%s] %d passed, %d failed\n", name, passed, failed);
  any_failed |= failed != 0 || passed == 0;
}

inline int check_summary() { return any_failed; }

}  // namespace tf_test

#define CHECK(...) ::tf_test::record(static_cast<bool>(__VA_ARGS__), #__VA_ARGS__, __FILE__, __LINE__)
