// PNG through libpng, with the transforms that give Pillow's pixels: palette and low-bit grey
// expanded to 8 bits (Pillow's L;2 / L;4 unpackers scale the same way), 16-bit colour and
// grey+alpha cut to their high byte (Pillow's RGB;16B / LA;16B), 16-bit grey clamped to 255
// (Pillow opens it as I;16, whose conversion to RGB clamps). A tRNS chunk of an 8-bit-or-less
// image becomes an alpha plane, as Pillow's "transparency" does; a 16-bit image's tRNS is ignored.
// Gamma and colour chunks are ignored, as Pillow ignores them.
// libpng reports errors by longjmp: decode_png_rows holds no C++ object of its own, everything it
// fills lives in the caller's frame.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "vision/exif_orientation.h"
#include "vision/image_decoders.h"

namespace surogate::vision {
namespace {

struct PngReadState {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t offset = 0;
  char message[256] = {};
  std::jmp_buf jump;
};

void png_error_to_jump(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngReadState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  std::longjmp(state->jump, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

void png_read_from_memory(png_structp png, png_bytep out, png_size_t length) {
  auto* state = static_cast<PngReadState*>(png_get_io_ptr(png));
  if (length > state->size - state->offset) {
    png_error(png, "the file ends early (truncated)");
  }
  std::memcpy(out, state->data + state->offset, length);
  state->offset += length;
}

// What libpng hands back: rows of `channels` samples of `bytes_per_sample` bytes.
struct PngPixels {
  png_uint_32 width = 0, height = 0;
  int channels = 0;
  int bytes_per_sample = 1;  // 2 only for 16-bit grey, kept whole for the clamp
  int exif_orientation = 1;
  std::vector<uint8_t> data;
  std::vector<png_bytep> rows;
};

// False on a libpng error (the message is in state.message).
bool decode_png_rows(PngReadState& state, PngPixels& out) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, png_error_to_jump, png_ignore_warning);
  if (png == nullptr) {
    std::snprintf(state.message, sizeof(state.message), "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (setjmp(state.jump)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  if (info == nullptr) png_error(png, "libpng could not start");
  png_set_read_fn(png, &state, png_read_from_memory);
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);  // our own pixel limit applies instead
  png_read_info(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  const int color_type = png_get_color_type(png, info);
  out.width = png_get_image_width(png, info);
  out.height = png_get_image_height(png, info);
  const bool gray16 = bit_depth == 16 && color_type == PNG_COLOR_TYPE_GRAY;
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth <= 8 && png_get_valid(png, info, PNG_INFO_tRNS) != 0) png_set_tRNS_to_alpha(png);
  if (bit_depth == 16 && !gray16) png_set_strip_16(png);
  if (gray16) png_set_swap(png);  // host order for the clamp
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out.channels = png_get_channels(png, info);
  out.bytes_per_sample = gray16 ? 2 : 1;
  const size_t row_bytes = png_get_rowbytes(png, info);
  out.data.resize(row_bytes * out.height);
  out.rows.resize(out.height);
  for (png_uint_32 y = 0; y < out.height; ++y) out.rows[y] = out.data.data() + row_bytes * y;
  png_read_image(png, out.rows.data());
  png_read_end(png, info);
  png_bytep exif = nullptr;
  png_uint_32 exif_size = 0;
  if (png_get_eXIf_1(png, info, &exif_size, &exif) != 0 && exif != nullptr) {
    out.exif_orientation = exif_orientation_of(exif, exif_size);
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

uint32_t big_endian_u32(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
}

uint8_t png_sample(const PngPixels& pixels, size_t index) {
  if (pixels.bytes_per_sample == 1) return pixels.data[index];
  uint16_t value = 0;
  std::memcpy(&value, pixels.data.data() + index * 2, 2);
  return static_cast<uint8_t>(value > 255 ? 255 : value);
}

}  // namespace

DecodedImage decode_png(const ImageBytes& image, int64_t max_pixels) {
  PngReadState state;
  state.data = image.bytes.data();
  state.size = image.bytes.size();
  // The size, from IHDR (always the first chunk), before libpng allocates anything.
  if (image.bytes.size() >= 24 && std::memcmp(image.bytes.data() + 12, "IHDR", 4) == 0) {
    check_image_size(image.name, big_endian_u32(image.bytes.data() + 16), big_endian_u32(image.bytes.data() + 20),
                     max_pixels);
  }
  PngPixels pixels;
  if (!decode_png_rows(state, pixels)) {
    fail_user("image {}: not a readable PNG: {}", image.name, state.message);
  }
  DecodedImage out;
  out.width = static_cast<int>(pixels.width);
  out.height = static_cast<int>(pixels.height);
  out.exif_orientation = pixels.exif_orientation;
  const size_t count = static_cast<size_t>(out.width) * out.height;
  const int channels = pixels.channels;
  const bool gray = channels <= 2;
  const bool alpha = channels == 2 || channels == 4;
  out.rgb.resize(count * 3);
  if (alpha) out.alpha.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t base = i * channels;
    for (int c = 0; c < 3; ++c) out.rgb[i * 3 + c] = png_sample(pixels, base + (gray ? 0 : c));
    if (alpha) out.alpha[i] = png_sample(pixels, base + channels - 1);
  }
  return out;
}

}  // namespace surogate::vision
