// The CPU greedy choice of ops/greedy_tokens.h: one pass for NaN / +inf and the largest value
// (`x > m ? x : m`, the comparison generate::argmax uses), then the first index holding it.
#include "ops/greedy_tokens.h"

#include <limits>

namespace surogate::ops {

template <typename T>
void greedy_tokens(const T* logits, int64_t rows, int64_t vocab, int32_t* tokens) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = logits + r * vocab;
    bool unusable = false;
    T best = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < vocab; ++i) {
      unusable |= !(row[i] < std::numeric_limits<T>::infinity());  // exactly NaN and +inf
      best = row[i] > best ? row[i] : best;
    }
    int32_t chosen = 0;  // every value -inf: the first
    for (int64_t i = 0; i < vocab; ++i) {
      if (row[i] == best) {
        chosen = static_cast<int32_t>(i);
        break;
      }
    }
    tokens[r] = unusable ? kUnusableRow : chosen;
  }
}

template void greedy_tokens(const float*, int64_t, int64_t, int32_t*);
template void greedy_tokens(const double*, int64_t, int64_t, int32_t*);

}  // namespace surogate::ops
