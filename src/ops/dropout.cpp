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
  const uint64_t bits = mix(mix(mix(seed) ^ stream) ^ (index >> 2));
  const auto draw = static_cast<uint32_t>((bits >> (16 * (index & 3))) & 0xffffu);
  return draw >= dropout_threshold16(probability);
}

template <typename T>
void dropout_forward(const T* x, int64_t count, double probability, uint64_t seed, uint64_t stream, T* out,
                     const T* addend) {
  SUROGATE_CHECK(probability >= 0.0 && probability < 1.0, "dropout probability in [0, 1)");
  const T keep_scale = static_cast<T>(dropout_keep_scale(probability));
  for (int64_t i = 0; i < count; ++i) {
    const T dropped = dropout_keeps(seed, stream, static_cast<uint64_t>(i), probability) ? x[i] * keep_scale : T(0);
    out[i] = addend != nullptr ? addend[i] + dropped : dropped;
  }
}

template void dropout_forward<float>(const float*, int64_t, double, uint64_t, uint64_t, float*, const float*);
template void dropout_forward<double>(const double*, int64_t, double, uint64_t, uint64_t, double*, const double*);

}  // namespace surogate::ops
