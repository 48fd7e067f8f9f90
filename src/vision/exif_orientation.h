// The EXIF Orientation tag and the transposition it asks for. transformers' load_image (the path
// of chat rows' {"type": "image", "image": ...}) applies PIL.ImageOps.exif_transpose, and the
// datasets library does the same for Parquet image structs, so every image source applies it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vision/decoded_image.h"

namespace surogate::vision {

// The Orientation (tag 0x0112) of IFD0 of a TIFF-structured EXIF block, with or without the
// "Exif\0\0" prefix of JPEG's APP1; 1 when absent, out of range or malformed (Pillow's default).
int exif_orientation_of(const uint8_t* exif, size_t size);

// Rotates / mirrors the image (rgb and alpha) as Pillow's exif_transpose does for orientation 2..8,
// then sets the orientation to 1.
void apply_exif_orientation(DecodedImage& image);

}  // namespace surogate::vision
