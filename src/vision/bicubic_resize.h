// Pillow's Image.resize(size, Image.BICUBIC) on an 8-bit RGB image, bit for bit: the separable
// two-pass convolution with the a = -0.5 cubic kernel widened by the downscale factor, weights
// normalised in double and rounded to 22-bit fixed point, sums started at half a unit and clipped
// to 0..255 after each pass.
//
// The order of the passes changes the result (the first pass is rounded to uint8) and Pillow
// changed it: up to 12.x the horizontal pass always runs first (over only the rows the vertical
// pass reads); from 13.0 the vertical pass runs first when the height shrinks by more than twice
// as many pixels as the width does.
#pragma once

#include "vision/decoded_image.h"

namespace surogate::vision {

enum class ResampleOrder {
  pillow13,  // Pillow >= 13.0 (the default: what a current transformers install resizes with)
  pillow12,  // Pillow <= 12.x: horizontal first, always
};

RgbImage resize_bicubic(const RgbImage& image, int width, int height, ResampleOrder order = ResampleOrder::pillow13);

}  // namespace surogate::vision
