// vision_model_tool MODEL_DIR INPUTS.safetensors OUT_DIR: runs the Qwen2.5-VL model graph on the
// CPU (fp32, forward and backward of the LM loss; vision_model_run.h) for the inputs input_ids,
// labels (I32 [B, T]), pixel_values (F32) and grid_thw (I32 [images, 3]), and writes
// OUT_DIR/loss.f32, OUT_DIR/position_ids.i32 ([3, B, T]) and OUT_DIR/grad.<checkpoint name>.f32
// (raw little-endian). Driven by tests/python/test_vision_model.py against live transformers.
#include <cstdio>
#include <exception>
#include <fstream>

#include "vision_model_run.h"

namespace {

template <typename T>
void write_values(const std::filesystem::path& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!out) surogate::fail_user("{}: cannot write", path.string());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace surogate;
  if (argc != 4) {
    std::fprintf(stderr, "usage: vision_model_tool MODEL_DIR INPUTS.safetensors OUT_DIR\n");
    return 2;
  }
  try {
    const std::filesystem::path model_dir = argv[1], out_dir = argv[3];
    const models::VisionModelConfig config = models::VisionModelConfig::from_folder(model_dir);
    const io::SafetensorsFile inputs = io::SafetensorsFile::open(argv[2]);
    const models::testing::VisionModelRun run = models::testing::run_vision_model(model_dir, config, inputs);
    write_values(out_dir / "loss.f32", std::vector<float>{run.loss});
    write_values(out_dir / "position_ids.i32", run.position_ids);
    for (const auto& [name, gradient] : run.gradients) write_values(out_dir / ("grad." + name + ".f32"), gradient);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
