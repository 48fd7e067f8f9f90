// WebP through libwebp. Pillow decodes with WebPAnimDecoder into RGBA (mode RGBA when the file
// has alpha, else RGB); the first frame of a still image is decoded straight into the canvas,
// which is what WebPDecodeRGB(A) gives. Animated WebP is refused (Pillow would give frame 0).
// The EXIF chunk, if any, comes from the demuxer, as Pillow's info["exif"].
#include <webp/decode.h>
#include <webp/demux.h>

#include "core/error.h"
#include "vision/exif_orientation.h"
#include "vision/image_decoders.h"

namespace surogate::vision {
namespace {

int webp_exif_orientation(const ImageBytes& image) {
  WebPData data{image.bytes.data(), image.bytes.size()};
  WebPDemuxer* demuxer = WebPDemux(&data);
  if (demuxer == nullptr) return 1;
  int orientation = 1;
  WebPChunkIterator chunk;
  if (WebPDemuxGetChunk(demuxer, "EXIF", 1, &chunk) != 0) {
    orientation = exif_orientation_of(chunk.chunk.bytes, chunk.chunk.size);
    WebPDemuxReleaseChunkIterator(&chunk);
  }
  WebPDemuxDelete(demuxer);
  return orientation;
}

}  // namespace

DecodedImage decode_webp(const ImageBytes& image, int64_t max_pixels) {
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(image.bytes.data(), image.bytes.size(), &features);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) fail_user("image {}: the WebP file ends early (truncated)", image.name);
  if (status != VP8_STATUS_OK) fail_user("image {}: not a readable WebP file (libwebp status {})", image.name, static_cast<int>(status));
  check_image_size(image.name, features.width, features.height, max_pixels);
  if (features.has_animation != 0) fail_user("image {}: animated WebP files are not supported", image.name);
  DecodedImage out;
  out.width = features.width;
  out.height = features.height;
  const size_t count = static_cast<size_t>(out.width) * out.height;
  const int channels = features.has_alpha != 0 ? 4 : 3;
  std::vector<uint8_t> pixels(count * channels);
  const int stride = out.width * channels;
  const uint8_t* decoded =
      channels == 4 ? WebPDecodeRGBAInto(image.bytes.data(), image.bytes.size(), pixels.data(), pixels.size(), stride)
                    : WebPDecodeRGBInto(image.bytes.data(), image.bytes.size(), pixels.data(), pixels.size(), stride);
  if (decoded == nullptr) fail_user("image {}: the WebP data is truncated or corrupt", image.name);
  out.exif_orientation = webp_exif_orientation(image);
  if (channels == 3) {
    out.rgb = std::move(pixels);
    return out;
  }
  out.rgb.resize(count * 3);
  out.alpha.resize(count);
  for (size_t i = 0; i < count; ++i) {
    for (int c = 0; c < 3; ++c) out.rgb[i * 3 + c] = pixels[i * 4 + c];
    out.alpha[i] = pixels[i * 4 + 3];
  }
  return out;
}

}  // namespace surogate::vision
