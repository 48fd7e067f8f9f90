// Counter-based dropout; see dropout.h.
#include "ops/dropout.h"

#include "core/error.h"

namespace surogate::ops {
namespace {
uint64_t mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}
}  // namespace

bool dropout_keeps(uint64_t seed, uint64_t stream, uint64_t index, double probability) {
  const uint64_t bits = mix(mix(mix(seed) ^ stream) ^ index);
  const double uniform = static_cast<double>(bits >> 11) * 0x1.0p-53;
  return uniform >= probability;
}

template <typename T>
void dropout_forward(const T* x, int64_t count, double probability, uint64_t seed, uint64_t stream, T* out) {
  SUROGATE_CHECK(probability >= 0.0 && probability < 1.0, "dropout probability in [0, 1)");
  const T keep_scale = static_cast<T>(1.0 / (1.0 - probability));
  for (int64_t i = 0; i < count; ++i) {
    out[i] = dropout_keeps(seed, stream, static_cast<uint64_t>(i), probability) ? x[i] * keep_scale : T(0);
  }
}

template void dropout_forward<float>(const float*, int64_t, double, uint64_t, uint64_t, float*);
template void dropout_forward<double>(const double*, int64_t, double, uint64_t, uint64_t, double*);

}  // namespace surogate::ops
