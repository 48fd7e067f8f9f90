// Bounds the native stack the recursive-descent parser and the tree-walking evaluator may use.
// A chat template comes from a model folder, i.e. from the user: one nested a hundred thousand
// parentheses or `{% if %}` blocks deep would otherwise overflow the stack and crash the process
// instead of failing with a message naming the template and line. The guard records the stack
// position where parsing / rendering starts and reports when recursion has used more than its
// budget (well under the 8 MB default stack of Linux threads).
#pragma once

#include <cstddef>
#include <cstdint>

namespace surogate::chat_template::detail {

class StackGuard {
public:
  static constexpr size_t kBudgetBytes = size_t{2} << 20;

  StackGuard() : base_(position()) {}
  // True when the caller's frame lies more than the budget below the starting point (the stack
  // grows downwards on every platform Surogate builds for).
  bool exhausted() const {
    const uintptr_t here = position();
    return here < base_ && base_ - here > kBudgetBytes;
  }

private:
  [[gnu::noinline]] static uintptr_t position() {
    volatile char marker = 0;
    return reinterpret_cast<uintptr_t>(&marker);
  }
  uintptr_t base_;
};

}  // namespace surogate::chat_template::detail
