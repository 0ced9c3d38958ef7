// Argument checks every target's host entry shares: dtype, rank, row-major layout, DimVar
// ranges, fixed extents and output aliasing, each raising a tvm-ffi error (a Python TypeError /
// ValueError) whose message starts with the entry and parameter name. Each target's Entry
// derives from EntryChecks and adds its own device check in front of `declared`.
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

namespace tilefoundry::detail {

/// The DLPack dtype of element type `T`, given the target's own 16-bit float types.
template <class T, class BF16, class F16>
constexpr DLDataType dl_dtype() {
  constexpr auto bits = static_cast<uint8_t>(8 * sizeof(T));
  if constexpr (std::is_same_v<T, BF16>) {
    return {kDLBfloat, 16, 1};
  } else if constexpr (std::is_same_v<T, F16>) {
    return {kDLFloat, 16, 1};
  } else if constexpr (std::is_same_v<T, bool>) {
    return {kDLBool, 8, 1};
  } else if constexpr (std::is_floating_point_v<T>) {
    return {kDLFloat, bits, 1};
  } else {
    static_assert(std::is_integral_v<T>, "dl_dtype: no DLPack dtype for this element type");
    return {std::is_signed_v<T> ? kDLInt : kDLUInt, bits, 1};
  }
}

inline std::string dtype_name(DLDataType t) {
  switch (t.code) {
    case kDLFloat: return "f" + std::to_string(t.bits);
    case kDLBfloat: return "bf16";
    case kDLInt: return "i" + std::to_string(t.bits);
    case kDLUInt: return "u" + std::to_string(t.bits);
    case kDLBool: return "bool";
    default: return "dtype code " + std::to_string(t.code) + " bits " + std::to_string(t.bits);
  }
}

// The target-independent checks of one entry named `name`.
struct EntryChecks {
  explicit EntryChecks(const char* entry) : name(entry) {}

  const char* name;

  /// `t` has dtype `want`, rank `rank` and a row-major layout, as `decl` declares it.
  void declared(const tvm::ffi::TensorView& t, const char* param, DLDataType want, int rank, const char* decl) const {
    DLDataType got = t.dtype();
    if (got.code != want.code || got.bits != want.bits || got.lanes != want.lanes) {
      TVM_FFI_THROW(TypeError) << name << ": parameter '" << param << "' has dtype " << dtype_name(got)
                               << ", declared " << dtype_name(want) << " " << decl;
    }
    if (t.ndim() != rank) {
      TVM_FFI_THROW(ValueError) << name << ": parameter '" << param << "' has rank " << t.ndim()
                                << ", declared rank " << rank << " " << decl;
    }
    int64_t expected = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (t.size(d) != 1 && t.stride(d) != expected) {
        TVM_FFI_THROW(ValueError) << name << ": parameter '" << param
                                  << "' must be contiguous (row-major); dim " << d << " has stride " << t.stride(d)
                                  << ", expected " << expected;
      }
      expected *= t.size(d);
    }
  }

  /// The extent of `t` along `axis`, which DimVar `var` takes; it must lie in [lo, hi).
  int64_t bind(const tvm::ffi::TensorView& t, const char* param, int axis, const char* var, int64_t lo,
               int64_t hi) const {
    int64_t n = t.size(axis);
    if (n < lo || n >= hi) {
      TVM_FFI_THROW(ValueError) << name << ": parameter '" << param << "' dim " << axis << " gives DimVar " << var
                                << " the extent " << n << ", outside its range [" << lo << ", " << hi << ")";
    }
    return n;
  }

  /// The extent of `t` along `axis` is `want`, which `what` names in the message.
  void extent(const tvm::ffi::TensorView& t, const char* param, int axis, int64_t want, const char* what) const {
    if (t.size(axis) != want) {
      TVM_FFI_THROW(ValueError) << name << ": parameter '" << param << "' dim " << axis << " is " << t.size(axis)
                                << ", expected " << what << " = " << want;
    }
  }

  // Outputs must not overlap any other parameter: kernels read inputs while writing outputs. An
  // output the entry updates in place, (output, input) in `updates` as parameter positions, may
  // be exactly that input (same first byte and size), never a part of it.
  void noalias(std::initializer_list<std::pair<const char*, const tvm::ffi::TensorView*>> params,
               int output_count, std::initializer_list<std::pair<int, int>> updates = {}) const {
    int i = 0;
    int first_output = static_cast<int>(params.size()) - output_count;
    for (const auto& [pa, ta] : params) {
      int j = 0;
      for (const auto& [pb, tb] : params) {
        bool declared = false;
        for (const auto& [out, in] : updates) declared = declared || (out == j && in == i);
        if (j > i && j >= first_output && overlaps(*ta, *tb) && !(declared && same(*ta, *tb))) {
          TVM_FFI_THROW(ValueError) << name << ": output parameter '" << pb << "' overlaps parameter '" << pa
                                    << "' in memory; pass a separate output tensor";
        }
        ++j;
      }
      ++i;
    }
  }

  static int64_t bytes(const tvm::ffi::TensorView& t) {
    int64_t n = 1;
    for (int d = 0; d < t.ndim(); ++d) n *= t.size(d);
    return n * ((t.dtype().bits + 7) / 8);
  }

  static uintptr_t first_byte(const tvm::ffi::TensorView& t) {
    return reinterpret_cast<uintptr_t>(t.data_ptr()) + t.byte_offset();
  }

  static bool overlaps(const tvm::ffi::TensorView& a, const tvm::ffi::TensorView& b) {
    int64_t na = bytes(a), nb = bytes(b);
    if (na == 0 || nb == 0) return false;
    uintptr_t pa = first_byte(a), pb = first_byte(b);
    return pa < pb + nb && pb < pa + na;
  }

  /// `a` and `b` are one tensor's memory: the same first byte and size.
  static bool same(const tvm::ffi::TensorView& a, const tvm::ffi::TensorView& b) {
    return first_byte(a) == first_byte(b) && bytes(a) == bytes(b);
  }
};

}  // namespace tilefoundry::detail
