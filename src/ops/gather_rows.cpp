// Reference row gathers; see gather_rows.h.
#include "ops/gather_rows.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::ops {

template <typename T>
void gather_rows(const T* x, int64_t x_rows, const int32_t* index, int64_t y_rows, int64_t width, T* y) {
  for (int64_t m = 0; m < y_rows; ++m) {
    const int32_t from = index[m];
    SUROGATE_CHECK(from >= -1 && from < x_rows, "gather_rows: index {} of row {} outside {} rows", from, m, x_rows);
    T* out = y + m * width;
    if (from < 0) {
      std::fill(out, out + width, T{0});
    } else {
      std::copy(x + static_cast<int64_t>(from) * width, x + (static_cast<int64_t>(from) + 1) * width, out);
    }
  }
}

template <typename T>
void gather_rows_sum(const T* d_y, int64_t y_rows, const int32_t* sources, int64_t x_rows, int64_t fan_in,
                     int64_t width, T* d_x) {
  for (int64_t n = 0; n < x_rows; ++n) {
    T* out = d_x + n * width;
    std::fill(out, out + width, T{0});
    for (int64_t k = 0; k < fan_in; ++k) {
      const int32_t from = sources[n * fan_in + k];
      SUROGATE_CHECK(from >= -1 && from < y_rows, "gather_rows_sum: source {} of row {} outside {} rows", from, n, y_rows);
      if (from < 0) continue;
      const T* row = d_y + static_cast<int64_t>(from) * width;
      for (int64_t e = 0; e < width; ++e) out[e] += row[e];
    }
  }
}

template void gather_rows<float>(const float*, int64_t, const int32_t*, int64_t, int64_t, float*);
template void gather_rows<double>(const double*, int64_t, const int32_t*, int64_t, int64_t, double*);
template void gather_rows_sum<float>(const float*, int64_t, const int32_t*, int64_t, int64_t, int64_t, float*);
template void gather_rows_sum<double>(const double*, int64_t, const int32_t*, int64_t, int64_t, int64_t, double*);

}  // namespace surogate::ops
