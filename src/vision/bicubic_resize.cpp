// The arithmetic follows Pillow's libImaging/Resample.c step for step (same operand order, double
// where it uses double, int32 where it uses int): any reordering changes the rounding of a weight
// and with it a pixel. The module is compiled with -ffp-contract=off so no FMA sneaks in.
#include "vision/bicubic_resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace surogate::vision {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // 8 bits of result, 2 of headroom for negative lobes
constexpr double kBicubicSupport = 2.0;

double bicubic_kernel(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// For each output index: the first input index, how many inputs it reads, and their
// fixed-point weights (ksize slots per output, unused ones zero).
struct Coefficients {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
};

Coefficients precompute_coefficients(int in_size, float in0, float in1, int out_size) {
  double scale = static_cast<double>(in1 - in0) / out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kBicubicSupport * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  const double inv_filterscale = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    double ww = 0.0;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    for (int x = 0; x < xmax; ++x) {
      const double w = bicubic_kernel((x + xmin - center + 0.5) * inv_filterscale);
      k[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) k[x] /= ww;
      const double scaled = k[x] * (1 << kPrecisionBits);
      c.weights[static_cast<size_t>(xx) * c.ksize + x] =
          k[x] < 0 ? static_cast<int32_t>(-0.5 + scaled) : static_cast<int32_t>(0.5 + scaled);
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

uint8_t clip8(int sum) {
  return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255));
}

// Output pixel value = sum over taps of input(tap) * weight, for one channel.
template <typename Input>
uint8_t convolve(const Coefficients& c, int index, Input input) {
  int sum = 1 << (kPrecisionBits - 1);
  const int32_t* k = &c.weights[static_cast<size_t>(index) * c.ksize];
  for (int tap = 0; tap < c.count[index]; ++tap) sum += input(c.first[index] + tap) * k[tap];
  return clip8(sum);
}

RgbImage resample_horizontal(const RgbImage& in, int row_offset, int rows, const Coefficients& c, int out_width) {
  RgbImage out{out_width, rows, std::vector<uint8_t>(static_cast<size_t>(out_width) * rows * 3)};
  for (int yy = 0; yy < rows; ++yy) {
    const uint8_t* line = &in.pixels[static_cast<size_t>(yy + row_offset) * in.width * 3];
    uint8_t* line_out = &out.pixels[static_cast<size_t>(yy) * out_width * 3];
    for (int xx = 0; xx < out_width; ++xx) {
      for (int ch = 0; ch < 3; ++ch) {
        line_out[xx * 3 + ch] = convolve(c, xx, [&](int x) { return static_cast<int>(line[x * 3 + ch]); });
      }
    }
  }
  return out;
}

RgbImage resample_vertical(const RgbImage& in, const Coefficients& c, int row_shift, int out_height) {
  RgbImage out{in.width, out_height, std::vector<uint8_t>(static_cast<size_t>(in.width) * out_height * 3)};
  const size_t stride = static_cast<size_t>(in.width) * 3;
  for (int yy = 0; yy < out_height; ++yy) {
    uint8_t* line_out = &out.pixels[yy * stride];
    for (size_t i = 0; i < stride; ++i) {
      line_out[i] = convolve(c, yy, [&](int y) { return static_cast<int>(in.pixels[(y - row_shift) * stride + i]); });
    }
  }
  return out;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& image, int width, int height, ResampleOrder order) {
  const bool need_horizontal = width != image.width;
  const bool need_vertical = height != image.height;
  if (!need_horizontal && !need_vertical) return image;
  const bool horizontal_first = order == ResampleOrder::pillow12 || !(image.height - height > 0 &&
                                                                      image.height - height > (image.width - width) * 2);
  const Coefficients vertical =
      precompute_coefficients(image.height, 0.0f, static_cast<float>(image.height), height);
  if (!need_horizontal) return resample_vertical(image, vertical, 0, height);
  const Coefficients horizontal = precompute_coefficients(image.width, 0.0f, static_cast<float>(image.width), width);
  if (!horizontal_first) {
    const RgbImage rows = resample_vertical(image, vertical, 0, height);  // the height shrinks here
    return resample_horizontal(rows, 0, rows.height, horizontal, width);
  }
  // Rows of the source the vertical pass reads; the horizontal pass resamples only these.
  const int first_row = vertical.first[0];
  const int last_row = vertical.first[height - 1] + vertical.count[height - 1];
  RgbImage rows = resample_horizontal(image, first_row, last_row - first_row, horizontal, width);
  if (!need_vertical) return rows;
  return resample_vertical(rows, vertical, first_row, height);
}

}  // namespace surogate::vision
