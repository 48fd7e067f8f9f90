// vision_tower_tool MODEL_DIR INPUTS.safetensors OUT_DIR: runs the vision tower graph on the CPU
// (fp32, forward and backward of sum(features · projection); vision_tower_run.h) for the inputs
// pixel_values (F32 [P, C·T·p·p]), grid_thw (I32 [images, 3]) and projection (F32 [P / m², out]),
// and writes OUT_DIR/features.f32 and OUT_DIR/grad.<parameter>.f32 (raw little-endian float32).
// Driven by tests/python/test_vision_tower.py against the live transformers tower.
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "vision_tower_run.h"

namespace {

void write_floats(const std::filesystem::path& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!out) surogate::fail_user("{}: cannot write", path.string());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace surogate;
  if (argc != 4) {
    std::fprintf(stderr, "usage: vision_tower_tool MODEL_DIR INPUTS.safetensors OUT_DIR\n");
    return 2;
  }
  try {
    const std::filesystem::path model_dir = argv[1], out_dir = argv[3];
    const models::VisionTowerConfig config = models::VisionTowerConfig::from_config_json(model_dir / "config.json");
    const io::SafetensorsFile inputs = io::SafetensorsFile::open(argv[2]);
    const io::SafetensorsTensor& grid = inputs.tensor("grid_thw");
    if (grid.dtype != DType::I32) fail_user("{}: grid_thw must be I32", argv[2]);
    std::vector<int32_t> flat(static_cast<size_t>(grid.element_count()));
    std::memcpy(flat.data(), grid.bytes.data(), grid.bytes.size());
    std::vector<std::array<int64_t, 3>> grids;
    for (size_t i = 0; i + 2 < flat.size(); i += 3) grids.push_back({flat[i], flat[i + 1], flat[i + 2]});
    const models::testing::VisionTowerRun run = models::testing::run_vision_tower(
        model_dir, config, grids, io::read_tensor_as_float32(inputs.tensor("pixel_values")),
        io::read_tensor_as_float32(inputs.tensor("projection")));
    write_floats(out_dir / "features.f32", run.features);
    for (const auto& [name, gradient] : run.gradients) write_floats(out_dir / ("grad." + name + ".f32"), gradient);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
