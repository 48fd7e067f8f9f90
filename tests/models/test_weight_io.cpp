// Loading fixture checkpoints by the parameter list, saving them back, and the errors for
// missing / extra / misshapen tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "core/error.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "models/weight_io.h"
#include "quant/fp8_blocks.h"
#include "user_error_of.h"

namespace surogate::models {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) { return fs::path(SUROGATE_FIXTURES_DIR) / name; }

fs::path scratch_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("surogate_models_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(WeightIo, LoadsEveryFixtureAndRoundTrips) {
  // Every architecture and flag combination of the fixtures: Llama (GQA, biases, tied), Mistral,
  // Qwen2 (q/k/v bias, tied), Qwen3 (q/k norm), and the MoE models, whose stacked experts are
  // read from and written to one tensor per expert.
  for (const char* name : {"llama_gqa_llama3", "llama_bias_untied", "llama_rope_parameters_yarn", "mistral_sliding",
                           "qwen2_bias_tied", "qwen3_qknorm", "qwen3_moe_topk", "qwen2_moe_shared", "mixtral_topk"}) {
    io::ModelConfig config = io::load_model_config(fixture(name));
    std::vector<ParameterSpec> specs = parameter_specs(config);
    std::vector<std::vector<float>> values = load_hf_weights_as_float32(fixture(name), specs);
    ASSERT_EQ(values.size(), specs.size());
    fs::path out = scratch_dir(name);
    save_hf_weights(out, specs, values);
    // Bit-exact: F32 in, F32 out, same HF names as the original file.
    io::SafetensorsCheckpoint original = io::SafetensorsCheckpoint::open(fixture(name));
    io::SafetensorsCheckpoint saved = io::SafetensorsCheckpoint::open(out);
    EXPECT_EQ(saved.tensor_names(), original.tensor_names());
    for (const std::string& tensor : original.tensor_names()) {
      EXPECT_EQ(io::read_tensor_as_float32(saved.tensor(tensor)), io::read_tensor_as_float32(original.tensor(tensor)))
          << tensor;
    }
    fs::remove_all(out);
  }
}

TEST(WeightIo, FusedExpertsAsTransformers5SavesThemLoadLikePerExpert) {
  // save_pretrained(save_original_format=False) in transformers 5 writes the experts fused:
  // mlp.experts.gate_up_proj [E, 2I, H] (each expert's gate rows, then its up rows) and
  // mlp.experts.down_proj [E, H, I]; Mixtral's router moves from block_sparse_moe.gate to mlp.gate.
  for (const char* name : {"qwen3_moe_topk", "mixtral_topk"}) {
    SCOPED_TRACE(name);
    const io::ModelConfig config = io::load_model_config(fixture(name));
    const std::vector<ParameterSpec> specs = parameter_specs(config);
    const std::vector<std::vector<float>> per_expert = load_hf_weights_as_float32(fixture(name), specs);
    auto values_of = [&](const std::string& engine) -> const std::vector<float>& {
      for (size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].name == engine) return per_expert[i];
      }
      throw std::runtime_error("no " + engine);
    };
    std::vector<std::vector<float>> storage;
    std::vector<io::TensorToWrite> tensors;
    auto add = [&](std::string tensor, graph::Shape shape, std::vector<float> values) {
      storage.push_back(std::move(values));
      tensors.push_back({std::move(tensor), DType::F32, std::move(shape), std::as_bytes(std::span<const float>(storage.back()))});
    };
    storage.reserve(specs.size() * 2);
    for (size_t i = 0; i < specs.size(); ++i) {
      const ParameterSpec& spec = specs[i];
      std::string hf = spec.hf_name;
      if (const size_t moe = hf.find(".block_sparse_moe."); moe != std::string::npos) hf.replace(moe, 18, ".mlp.");
      if (spec.experts == 0) {
        add(hf, spec.shape, per_expert[i]);
        continue;
      }
      const std::string prefix = hf.substr(0, hf.find(".experts."));
      if (spec.name.ends_with("down_proj.weight")) {
        add(prefix + ".experts.down_proj", spec.shape, per_expert[i]);
      } else if (spec.name.ends_with("gate_proj.weight")) {
        const std::string stem = spec.name.substr(0, spec.name.size() - std::string("gate_proj.weight").size());
        const std::vector<float>& gate = per_expert[i];
        const std::vector<float>& up = values_of(stem + "up_proj.weight");
        const int64_t block = spec.shape[1] * spec.shape[2];
        std::vector<float> fused;
        for (int64_t e = 0; e < spec.experts; ++e) {
          fused.insert(fused.end(), gate.begin() + e * block, gate.begin() + (e + 1) * block);
          fused.insert(fused.end(), up.begin() + e * block, up.begin() + (e + 1) * block);
        }
        add(prefix + ".experts.gate_up_proj", {spec.shape[0], 2 * spec.shape[1], spec.shape[2]}, std::move(fused));
      }
    }
    const fs::path out = scratch_dir(std::string(name) + "_fused");
    fs::create_directories(out);
    io::write_safetensors(out / "model.safetensors", tensors);
    EXPECT_EQ(load_hf_weights_as_float32(out, specs), per_expert);
    fs::remove_all(out);
  }
}

TEST(WeightIo, ShardedSaveLoadsBack) {
  io::ModelConfig config = io::load_model_config(fixture("mistral_sliding"));
  std::vector<ParameterSpec> specs = parameter_specs(config);
  std::vector<std::vector<float>> values = load_hf_weights_as_float32(fixture("mistral_sliding"), specs);
  fs::path out = scratch_dir("sharded");
  save_hf_weights(out, specs, values, 20'000);
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  EXPECT_EQ(load_hf_weights_as_float32(out, specs), values);
  fs::remove_all(out);
}

// Writes the fixture's tensors minus / plus / reshaped ones into a scratch folder.
fs::path altered_copy(const std::string& tag, const std::string& drop, bool add_extra, bool reshape_first) {
  io::SafetensorsCheckpoint original = io::SafetensorsCheckpoint::open(fixture("llama_gqa_llama3"));
  std::vector<std::vector<float>> storage;
  std::vector<io::TensorToWrite> tensors;
  storage.reserve(original.tensor_count() + 1);
  for (const std::string& name : original.tensor_names()) {
    if (name == drop) continue;
    storage.push_back(io::read_tensor_as_float32(original.tensor(name)));
    std::vector<int64_t> shape = original.tensor(name).shape;
    if (reshape_first && name == "model.norm.weight") {
      storage.back().push_back(0.0f);
      shape = {static_cast<int64_t>(storage.back().size())};
    }
    tensors.push_back({name, DType::F32, shape, std::as_bytes(std::span<const float>(storage.back()))});
  }
  if (add_extra) {
    storage.push_back(std::vector<float>(4, 1.0f));
    tensors.push_back({"model.layers.2.input_layernorm.weight", DType::F32, {4},
                       std::as_bytes(std::span<const float>(storage.back()))});
  }
  fs::path dir = scratch_dir(tag);
  io::write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

TEST(WeightIo, MissingExtraAndMisshapenTensorsAreUserErrors) {
  std::vector<ParameterSpec> specs = parameter_specs(io::load_model_config(fixture("llama_gqa_llama3")));
  auto sink = [](const ParameterSpec&, const io::SafetensorsTensor&) {};

  fs::path missing = altered_copy("missing", "model.layers.1.mlp.up_proj.weight", false, false);
  std::string message = error_of([&] { load_hf_weights(missing, specs, sink); });
  EXPECT_NE(message.find("lacks 1 tensor(s)"), std::string::npos) << message;
  EXPECT_NE(message.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << message;

  fs::path extra = altered_copy("extra", "", true, false);
  message = error_of([&] { load_hf_weights(extra, specs, sink); });
  EXPECT_NE(message.find("does not describe"), std::string::npos) << message;
  EXPECT_NE(message.find("model.layers.2.input_layernorm.weight"), std::string::npos) << message;

  fs::path misshapen = altered_copy("misshapen", "", false, true);
  message = error_of([&] { load_hf_weights(misshapen, specs, sink); });
  EXPECT_NE(message.find("model.norm.weight has shape [33]"), std::string::npos) << message;
  EXPECT_NE(message.find("[32]"), std::string::npos) << message;

  for (const fs::path& dir : {missing, extra, misshapen}) fs::remove_all(dir);
}

TEST(WeightIo, ConfigOfAnotherModelIsCaught) {
  // Qwen2's config says tied + qkv bias; the Llama weights have lm_head and no biases.
  std::vector<ParameterSpec> specs = parameter_specs(io::load_model_config(fixture("qwen2_bias_tied")));
  std::string message = error_of([&] {
    load_hf_weights(fixture("llama_gqa_llama3"), specs, [](const ParameterSpec&, const io::SafetensorsTensor&) {});
  });
  EXPECT_NE(message.find("q_proj.bias"), std::string::npos) << message;
}

// A copy of llama_gqa_llama3 with model.layers.0.mlp.up_proj.weight saved in FP8 blocks of 16 x 16
// (its scale_inv shaped `scale_shape`, or absent when empty).
fs::path fp8_copy(const std::string& tag, const std::vector<float>& weight, const graph::Shape& shape,
                  const graph::Shape& scale_shape, std::vector<uint8_t>& codes, std::vector<float>& scale_inv) {
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  io::SafetensorsCheckpoint original = io::SafetensorsCheckpoint::open(fixture("llama_gqa_llama3"));
  const quant::Fp8BlockShape blocks{shape[0], shape[1], 16, 16};
  codes.resize(weight.size());
  scale_inv.assign(static_cast<size_t>(blocks.blocks()), 0.0f);
  quant::quantize_fp8_blocks(weight.data(), blocks, 0, blocks.row_blocks(), codes.data(), scale_inv.data());
  std::vector<io::TensorToWrite> tensors;
  for (const std::string& tensor : original.tensor_names()) {
    const io::SafetensorsTensor& t = original.tensor(tensor);
    if (tensor == name) {
      tensors.push_back({name, DType::F8_E4M3, shape, std::as_bytes(std::span<const uint8_t>(codes))});
    } else {
      tensors.push_back({tensor, t.dtype, t.shape, t.bytes});
    }
  }
  if (!scale_shape.empty()) {
    tensors.push_back({name + "_scale_inv", DType::F32, scale_shape, std::as_bytes(std::span<const float>(scale_inv))});
  }
  fs::path dir = scratch_dir(tag);
  io::write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

TEST(WeightIo, Fp8BlockWeightsAreDequantizedOrTakenAsStored) {
  io::ModelConfig config = io::load_model_config(fixture("llama_gqa_llama3"));
  const std::vector<ParameterSpec> plain_specs = parameter_specs(config);
  config.fp8_block_checkpoint = io::Fp8BlockCheckpoint{16, 16};
  const std::vector<ParameterSpec> specs = parameter_specs(config);
  const std::vector<std::vector<float>> original = load_hf_weights_as_float32(fixture("llama_gqa_llama3"), specs);
  size_t index = 0;
  while (specs[index].hf_name != "model.layers.0.mlp.up_proj.weight") ++index;
  const graph::Shape shape = specs[index].shape;
  const quant::Fp8BlockShape blocks{shape[0], shape[1], 16, 16};
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv;
  const fs::path dir = fp8_copy("fp8", original[index], shape, {blocks.row_blocks(), blocks.col_blocks()}, codes, scale_inv);

  // Dequantized on load, exactly as quant/fp8_blocks.h computes it; every other tensor as before.
  const std::vector<std::vector<float>> loaded = load_hf_weights_as_float32(dir, specs);
  std::vector<float> expected(original[index].size());
  quant::dequantize_fp8_blocks(codes.data(), scale_inv.data(), blocks, 0, blocks.row_blocks(), expected.data());
  EXPECT_EQ(loaded[index], expected);
  EXPECT_NE(loaded[index], original[index]);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i != index) EXPECT_EQ(loaded[i], original[i]) << specs[i].hf_name;
  }
  // Taken as stored by an Fp8BlockSink: the codes and scales as written, and not passed to the sink.
  int sunk = 0, taken = 0;
  load_hf_weights(dir, specs, [&](const ParameterSpec&, const io::SafetensorsTensor&) { ++sunk; },
                  [&](const ParameterSpec& spec, const Fp8BlockTensor& tensor) {
                    EXPECT_EQ(spec.hf_name, "model.layers.0.mlp.up_proj.weight");
                    EXPECT_EQ(tensor.shape.block_rows, 16);
                    EXPECT_TRUE(std::equal(codes.begin(), codes.end(),
                                           reinterpret_cast<const uint8_t*>(tensor.codes.bytes.data())));
                    EXPECT_EQ(io::read_tensor_as_float32(tensor.scale_inv), scale_inv);
                    ++taken;
                    return true;
                  });
  EXPECT_EQ(taken, 1);
  EXPECT_EQ(sunk, static_cast<int>(specs.size()) - 1);

  // Without a quantization_config in config.json, F8_E4M3 weights are refused by name.
  std::string message = error_of([&] { load_hf_weights(dir, plain_specs, [](auto&, auto&) {}); });
  EXPECT_NE(message.find("model.layers.0.mlp.up_proj.weight"), std::string::npos) << message;
  fs::remove_all(dir);

  // A missing or misshapen scale_inv names the tensor.
  const fs::path no_scale = fp8_copy("fp8_no_scale", original[index], shape, {}, codes, scale_inv);
  message = error_of([&] { load_hf_weights(no_scale, specs, [](auto&, auto&) {}); });
  EXPECT_NE(message.find("model.layers.0.mlp.up_proj.weight_scale_inv are missing"), std::string::npos) << message;
  fs::remove_all(no_scale);
  const fs::path bad_scale = fp8_copy("fp8_bad_scale", original[index], shape, {1, blocks.blocks()}, codes, scale_inv);
  message = error_of([&] { load_hf_weights(bad_scale, specs, [](auto&, auto&) {}); });
  EXPECT_NE(message.find("weight_block_size"), std::string::npos) << message;
  fs::remove_all(bad_scale);
}

}  // namespace
}  // namespace surogate::models
