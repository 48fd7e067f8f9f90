// JPEG through libjpeg-turbo with the library's defaults, which are Pillow's: the accurate integer
// IDCT and fancy upsampling, YCbCr converted to RGB by the library, grey replicated to RGB. CMYK /
// YCCK files are refused (Pillow's CMYK path inverts Adobe's inverted samples; not reproduced).
// A file that ends early is an error (Pillow's "image file is truncated"), not a grey bottom.
// libjpeg reports errors by longjmp: decode_jpeg_rows holds no C++ object of its own.
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <jerror.h>  // JWRN_JPEG_EOF

#include <csetjmp>
#include <cstring>

#include "core/error.h"
#include "vision/exif_orientation.h"
#include "vision/image_decoders.h"

namespace surogate::vision {
namespace {

struct JpegErrorState {
  jpeg_error_mgr manager;  // first, so the library's pointer is ours
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

void jpeg_error_to_jump(j_common_ptr info) {
  auto* state = reinterpret_cast<JpegErrorState*>(info->err);
  info->err->format_message(info, state->message);
  std::longjmp(state->jump, 1);
}

// Warnings are ignored as Pillow ignores them, except the one that says data ran out.
void jpeg_warning_or_truncation(j_common_ptr info, int level) {
  if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF) {
    auto* state = reinterpret_cast<JpegErrorState*>(info->err);
    std::snprintf(state->message, sizeof(state->message), "the file ends early (truncated)");
    std::longjmp(state->jump, 1);
  }
}

struct JpegPixels {
  unsigned width = 0;
  unsigned height = 0;
  int components = 0;
  bool too_large = false;
  bool unsupported_color = false;
  int exif_orientation = 1;
  std::vector<uint8_t> data;
};

int orientation_from_markers(jpeg_decompress_struct& info) {
  for (jpeg_saved_marker_ptr marker = info.marker_list; marker != nullptr; marker = marker->next) {
    if (marker->marker == JPEG_APP0 + 1 && marker->data_length >= 6 && std::memcmp(marker->data, "Exif\0\0", 6) == 0) {
      return exif_orientation_of(marker->data, marker->data_length);
    }
  }
  return 1;
}

// False on a libjpeg error (the message is in state.message).
bool decode_jpeg_rows(const ImageBytes& image, int64_t max_pixels, JpegErrorState& state, JpegPixels& out) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&state.manager);
  state.manager.error_exit = jpeg_error_to_jump;
  state.manager.emit_message = jpeg_warning_or_truncation;
  if (setjmp(state.jump)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, image.bytes.data(), static_cast<unsigned long>(image.bytes.size()));
  jpeg_save_markers(&info, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(&info, TRUE);
  out.width = info.image_width;
  out.height = info.image_height;
  out.exif_orientation = orientation_from_markers(info);
  if (static_cast<int64_t>(out.width) * out.height > max_pixels) {
    out.too_large = true;
  } else if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) {
    out.unsupported_color = true;
  }
  if (out.too_large || out.unsupported_color) {
    jpeg_destroy_decompress(&info);
    return true;
  }
  info.out_color_space = info.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&info);
  out.components = info.output_components;
  const size_t row_bytes = static_cast<size_t>(out.width) * out.components;
  out.data.resize(row_bytes * out.height);
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = out.data.data() + row_bytes * info.output_scanline;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

}  // namespace

DecodedImage decode_jpeg(const ImageBytes& image, int64_t max_pixels) {
  JpegErrorState state;
  JpegPixels pixels;
  if (!decode_jpeg_rows(image, max_pixels, state, pixels)) {
    fail_user("image {}: not a readable JPEG: {}", image.name, state.message);
  }
  check_image_size(image.name, pixels.width, pixels.height, max_pixels);
  if (pixels.unsupported_color) {
    fail_user("image {}: CMYK / YCCK JPEG files are not supported; convert the image to RGB", image.name);
  }
  DecodedImage out;
  out.width = static_cast<int>(pixels.width);
  out.height = static_cast<int>(pixels.height);
  out.exif_orientation = pixels.exif_orientation;
  const size_t count = static_cast<size_t>(out.width) * out.height;
  if (pixels.components == 3) {
    out.rgb = std::move(pixels.data);
    return out;
  }
  out.rgb.resize(count * 3);
  for (size_t i = 0; i < count; ++i) {
    for (int c = 0; c < 3; ++c) out.rgb[i * 3 + c] = pixels.data[i];
  }
  return out;
}

}  // namespace surogate::vision
