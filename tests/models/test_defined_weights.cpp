// A model definition's own weight table (models/defined_weights.h): the checkpoint_names of its IR
// file replace the C++ table, for an architecture Surogate has no C++ for (a GPT-NeoX-like
// config.json: fused query_key_value, LayerNorm biases, another prefix); loading and saving go by
// the declared names; malformed tables are refused naming the parameter.
#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "models/defined_weights.h"
#include "models/model_spec.h"
#include "models/weight_io.h"
#include "user_error_of.h"

namespace surogate::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("surogate_defined_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const json& document) { std::ofstream(path) << document.dump(1); }

json neox_config() {
  return {{"architectures", {"GPTNeoXForCausalLM"}}, {"model_type", "gpt_neox"}, {"vocab_size", 16},
          {"hidden_size", 8}, {"intermediate_size", 32}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
          {"hidden_act", "gelu"}, {"use_parallel_residual", true}, {"layer_norm_eps", 1e-5}};
}

// The parameter part of an IR file: (engine name, checkpoint name, shape) per parameter.
json ir_with(const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>& weights) {
  json ir{{"version", 1}, {"tensors", json::array()}, {"parameters", json::array()}, {"checkpoint_names", json::object()}};
  for (const auto& [name, hf, shape] : weights) {
    ir["tensors"].push_back({{"name", name}, {"dtype", "F32"}, {"shape", shape}, {"role", "parameter"}});
    ir["parameters"].push_back(name);
    ir["checkpoint_names"][name] = hf;
  }
  return ir;
}

const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>> kNeoxWeights = {
    {"embed.weight", "gpt_neox.embed_in.weight", {16, 8}},
    {"layers.0.attention.query_key_value.weight", "gpt_neox.layers.0.attention.query_key_value.weight", {24, 8}},
    {"layers.0.attention.query_key_value.bias", "gpt_neox.layers.0.attention.query_key_value.bias", {24}},
    {"layers.0.input_layernorm.bias", "gpt_neox.layers.0.input_layernorm.bias", {8}},
    {"lm_head.weight", "embed_out.weight", {16, 8}},
};

TEST(DefinedWeights, TheDefinitionsTableReplacesTheBuiltInOneAndRoundTrips) {
  const fs::path dir = scratch("table");
  write(dir / "config.json", neox_config());
  write(dir / "neox.json", ir_with(kNeoxWeights));
  // Without the definition: the built-in table refuses the architecture, naming it.
  const io::ModelConfig plain = load_model_config(dir, ModelDefinition{});
  EXPECT_EQ(plain.architecture, io::Architecture::Defined);
  const std::string refusal = error_of([&] { parameter_specs(plain); });
  EXPECT_NE(refusal.find("GPTNeoXForCausalLM"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("model_definition"), std::string::npos) << refusal;

  const io::ModelConfig config = load_model_config(dir, ModelDefinition{dir / "neox.json", "test"});
  const std::vector<ParameterSpec> specs = parameter_specs(config);
  ASSERT_EQ(specs.size(), kNeoxWeights.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, std::get<0>(kNeoxWeights[i]));
    EXPECT_EQ(specs[i].hf_name, std::get<1>(kNeoxWeights[i]));
    EXPECT_EQ(specs[i].shape, std::get<2>(kNeoxWeights[i]));
    EXPECT_EQ(specs[i].experts, 0);
  }
  // Saved under the checkpoint names, read back by them.
  std::vector<std::vector<float>> values;
  for (const ParameterSpec& spec : specs) {
    std::vector<float> tensor(static_cast<size_t>(graph::shape_numel(spec.shape)));
    for (size_t j = 0; j < tensor.size(); ++j) tensor[j] = static_cast<float>(values.size() * 100 + j);
    values.push_back(std::move(tensor));
  }
  save_hf_weights(dir, specs, values);
  EXPECT_EQ(load_hf_weights_as_float32(dir, specs), values);
  // The config goes back as it came, architecture and all.
  fs::create_directories(dir / "saved");
  io::save_model_config(config, dir / "saved");
  EXPECT_EQ(io::load_model_config(dir / "saved").architecture_class, "GPTNeoXForCausalLM");
  fs::remove_all(dir);
}

TEST(DefinedWeights, ExpertSlotsStackPerExpertTensors) {
  const fs::path dir = scratch("experts");
  write(dir / "ir.json", ir_with({{"layers.0.experts.w", "model.layers.0.experts.{expert}.w.weight", {3, 4, 2}}}));
  io::ModelConfig config;
  config.defined_parameters = read_checkpoint_names(dir / "ir.json", "test");
  const std::vector<ParameterSpec> specs = parameter_specs(config);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].experts, 3);
  EXPECT_EQ(hf_pieces(specs[0]).at(2).name, "model.layers.0.experts.2.w.weight");
  fs::remove_all(dir);
}

TEST(DefinedWeights, MalformedTablesNameTheParameter) {
  const fs::path dir = scratch("errors");
  json missing = ir_with(kNeoxWeights);
  missing["checkpoint_names"].erase("lm_head.weight");
  json stray = ir_with(kNeoxWeights);
  stray["checkpoint_names"]["layers.9.x.weight"] = "x";
  json twice = ir_with(kNeoxWeights);
  twice["checkpoint_names"]["lm_head.weight"] = "gpt_neox.embed_in.weight";
  const std::vector<std::pair<json, std::vector<std::string>>> cases = {
      {missing, {"'lm_head.weight'", "no checkpoint name"}},
      {stray, {"'layers.9.x.weight'", "not a parameter"}},
      {twice, {"'gpt_neox.embed_in.weight'", "'lm_head.weight'", "two parameters"}},
  };
  for (const auto& [document, fragments] : cases) {
    write(dir / "ir.json", document);
    const std::string message = error_of([&] { read_checkpoint_names(dir / "ir.json", "def.json"); });
    EXPECT_NE(message.find("def.json"), std::string::npos) << message;
    for (const std::string& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
  // A file without the key: the built-in table.
  write(dir / "ir.json", json{{"version", 1}, {"tensors", json::array()}, {"parameters", json::array()}});
  EXPECT_TRUE(read_checkpoint_names(dir / "ir.json", "def.json").empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace surogate::models
