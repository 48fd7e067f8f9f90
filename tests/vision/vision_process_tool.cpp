// Driven by tests/python/test_vision_processor.py, which compares its output with the live
// transformers processor and Pillow on images it makes: decodes one image, runs the processor of
// a preprocessor_config.json folder and writes <out>.decoded, <out>.resized (uint8 HWC RGB) and
// <out>.pixels (float32 pixel_values); prints the shapes, grid and token count as JSON.
// Usage: vision_process_tool CONFIG_DIR IMAGE drop|composite_on_white pillow13|pillow12 OUT
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "vision/decode_image.h"
#include "vision/image_processor.h"
#include "vision/image_source.h"

namespace {

void write_file(const std::string& path, const void* data, size_t size) {
  std::ofstream stream(path, std::ios::binary);
  stream.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace surogate::vision;
  if (argc != 6) {
    std::cerr << "usage: vision_process_tool CONFIG_DIR IMAGE drop|composite_on_white pillow13|pillow12 OUT\n";
    return 64;
  }
  try {
    ImageProcessorConfig config = ImageProcessorConfig::from_folder(argv[1]);
    config.resample_order = std::string(argv[4]) == "pillow12" ? ResampleOrder::pillow12 : ResampleOrder::pillow13;
    DecodeOptions options;
    options.alpha = std::string(argv[3]) == "drop" ? AlphaHandling::drop : AlphaHandling::composite_on_white;
    const RgbImage rgb = decode_image(load_image_reference(argv[2], ".", "image"), options);
    const ImageProcessor processor(config);
    const RgbImage resized = processor.resize(rgb, argv[2]);
    const ProcessedImages processed = processor.process({rgb}, {argv[2]});
    const std::string out = argv[5];
    write_file(out + ".decoded", rgb.pixels.data(), rgb.pixels.size());
    write_file(out + ".resized", resized.pixels.data(), resized.pixels.size());
    write_file(out + ".pixels", processed.pixel_values.data(), processed.pixel_values.size() * sizeof(float));
    const nlohmann::json result{{"decoded", {rgb.height, rgb.width}},
                                {"resized", {resized.height, resized.width}},
                                {"patch_dim", processed.patch_dim},
                                {"grid_thw", processed.grid_thw[0]},
                                {"tokens", processed.tokens_per_image[0]}};
    std::cout << result.dump() << "\n";
  } catch (const surogate::UserError& error) {
    std::cerr << error.what() << "\n";
    return 2;
  }
  return 0;
}
