// From an image file's bytes to the RGB image the processor resizes: the format is recognised by
// its signature (PNG, JPEG, WebP), decoded, turned by its EXIF orientation and converted to RGB.
//
// Alpha: transformers' load_image (chat rows' {"type": "image", "image": PATH | URL | data URI})
// calls Pillow's .convert("RGB"), which drops alpha; the image processor's own convert_to_rgb,
// applied to PIL images a dataset hands over (HF datasets' Image feature, i.e. Parquet
// {bytes, path} structs), composites transparency onto white. Both are reproduced; the caller
// says which source the image came from.
#pragma once

#include <cstdint>

#include "vision/decoded_image.h"

namespace surogate::vision {

enum class AlphaHandling {
  drop,                // Pillow's Image.convert("RGB"): the colour channels as they are
  composite_on_white,  // transformers' convert_to_rgb: Image.alpha_composite over opaque white
};

struct DecodeOptions {
  int64_t max_pixels = kDefaultMaxDecodedPixels;
  AlphaHandling alpha = AlphaHandling::drop;
  bool apply_exif_orientation = true;
};

// The decoded image before the RGB conversion (alpha kept, orientation applied when asked).
DecodedImage decode_image_file(const ImageBytes& image, const DecodeOptions& options);

RgbImage to_rgb(DecodedImage image, AlphaHandling alpha);

// decode_image_file + to_rgb. One UserError naming the file for anything it cannot decode.
RgbImage decode_image(const ImageBytes& image, const DecodeOptions& options = {});

}  // namespace surogate::vision
