// config.json parsing for the four supported architectures (samples modelled on the real
// Qwen3-0.6B, Llama-3.2-1B, Mistral-7B-v0.1 and Qwen2.5-0.5B configs), both RoPE spellings,
// the validation errors, and save → load round trips.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

using nlohmann::json;
using testing::expect_user_error;
using testing::read_bytes;
using testing::TemporaryFolder;

const std::filesystem::path kConfigs = std::filesystem::path(SUROGATE_SOURCE_DIR) / "tests/io/data/configs";

ModelConfig load_sample(const std::string& name) {
  return parse_model_config(read_bytes(kConfigs / name), name);
}

TEST(ModelConfig, Qwen3) {
  ModelConfig config = load_sample("qwen3-0.6b.json");
  EXPECT_EQ(config.architecture, Architecture::Qwen3);
  EXPECT_EQ(config.vocab_size, 151936);
  EXPECT_EQ(config.hidden_size, 1024);
  EXPECT_EQ(config.intermediate_size, 3072);
  EXPECT_EQ(config.num_hidden_layers, 28);
  EXPECT_EQ(config.num_attention_heads, 16);
  EXPECT_EQ(config.num_key_value_heads, 8);
  EXPECT_EQ(config.head_dim, 128);  // not hidden / heads (= 64)
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_TRUE(config.qk_norm);
  EXPECT_FALSE(config.qkv_bias);
  EXPECT_FALSE(config.o_proj_bias);
  EXPECT_FALSE(config.sliding_window.has_value());
  EXPECT_EQ(config.sliding_window_layers, std::vector<bool>(28, false));
  EXPECT_EQ(config.rope.type, RopeType::Default);
  EXPECT_DOUBLE_EQ(config.rope.theta, 1e6);
  EXPECT_EQ(config.rope.rotary_dim, 128);
  EXPECT_EQ(config.max_position_embeddings, 40960);
  EXPECT_EQ(config.torch_dtype, DType::BF16);
  EXPECT_EQ(config.bos_token_id, 151643);
  EXPECT_EQ(config.eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_FALSE(config.pad_token_id.has_value());
}

TEST(ModelConfig, LlamaWithLlama3Scaling) {
  ModelConfig config = load_sample("llama-3.2-1b.json");
  EXPECT_EQ(config.architecture, Architecture::Llama);
  EXPECT_EQ(config.head_dim, 64);
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-5);
  EXPECT_FALSE(config.qk_norm);
  EXPECT_FALSE(config.mlp_bias);
  EXPECT_EQ(config.rope.type, RopeType::Llama3);
  EXPECT_DOUBLE_EQ(config.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(config.rope.factor, 32.0);
  EXPECT_DOUBLE_EQ(config.rope.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(config.rope.high_freq_factor, 4.0);
  EXPECT_EQ(config.rope.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(config.rope.attention_factor, 1.0);
}

TEST(ModelConfig, MistralSlidingWindowOnEveryLayer) {
  ModelConfig config = load_sample("mistral-7b-v0.1.json");
  EXPECT_EQ(config.architecture, Architecture::Mistral);
  EXPECT_EQ(config.head_dim, 128);  // 4096 / 32
  EXPECT_EQ(config.sliding_window, 4096);
  EXPECT_EQ(config.sliding_window_layers, std::vector<bool>(32, true));
  EXPECT_FALSE(config.tie_word_embeddings);
  EXPECT_FALSE(config.qkv_bias);
  EXPECT_EQ(config.rope.original_max_position_embeddings, 32768);
}

TEST(ModelConfig, Qwen2HasQkvBiasAndOptionalWindow) {
  ModelConfig config = load_sample("qwen2.5-0.5b.json");
  EXPECT_EQ(config.architecture, Architecture::Qwen2);
  EXPECT_EQ(config.head_dim, 64);  // 896 / 14
  EXPECT_TRUE(config.qkv_bias);
  EXPECT_FALSE(config.o_proj_bias);
  EXPECT_FALSE(config.sliding_window.has_value());  // use_sliding_window: false

  json enabled = json::parse(read_bytes(kConfigs / "qwen2.5-0.5b.json"));
  enabled["use_sliding_window"] = true;
  enabled["max_window_layers"] = 20;
  ModelConfig windowed = parse_model_config(enabled.dump(), "config.json");
  EXPECT_EQ(windowed.sliding_window, 32768);
  for (int layer = 0; layer < 24; ++layer) EXPECT_EQ(windowed.sliding_window_layers[layer], layer >= 20);
}

TEST(ModelConfig, RopeParametersFormWithYarn) {
  ModelConfig config = load_sample("qwen3-0.6b-rope-parameters.json");
  EXPECT_EQ(config.rope.type, RopeType::Yarn);
  EXPECT_DOUBLE_EQ(config.rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(config.rope.factor, 4.0);
  EXPECT_EQ(config.rope.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(config.rope.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(config.rope.beta_slow, 1.0);
  EXPECT_TRUE(config.rope.truncate);
  EXPECT_NEAR(config.rope.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-12);
  EXPECT_EQ(config.torch_dtype, DType::BF16);  // from "dtype"
  EXPECT_EQ(config.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(config.sliding_window_layers, std::vector<bool>(2, false));
}

json minimal_llama() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 128}, {"hidden_size", 64},
          {"intermediate_size", 256}, {"num_hidden_layers", 2}, {"num_attention_heads", 4}};
}

TEST(ModelConfig, DefaultsFollowTransformers) {
  ModelConfig config = parse_model_config(minimal_llama().dump(), "config.json");
  EXPECT_EQ(config.num_key_value_heads, 4);
  EXPECT_EQ(config.head_dim, 16);
  EXPECT_EQ(config.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(config.rope.theta, 10000.0);
  EXPECT_EQ(config.hidden_act, "silu");
  EXPECT_FALSE(config.tie_word_embeddings);
  EXPECT_FALSE(config.torch_dtype.has_value());

  json by_model_type = minimal_llama();
  by_model_type.erase("architectures");
  by_model_type["model_type"] = "qwen3";
  ModelConfig qwen3 = parse_model_config(by_model_type.dump(), "config.json");
  EXPECT_EQ(qwen3.architecture, Architecture::Qwen3);
  EXPECT_EQ(qwen3.head_dim, 128);
}

TEST(ModelConfig, Olmo2HasWholeWidthQkNormAndItsOwnDefaults) {
  json olmo2 = minimal_llama();
  olmo2["architectures"] = {"Olmo2ForCausalLM"};
  ModelConfig config = parse_model_config(olmo2.dump(), "config.json");
  EXPECT_EQ(config.architecture, Architecture::Olmo2);
  EXPECT_TRUE(config.qk_norm);
  EXPECT_FALSE(config.qkv_bias);
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-5);  // Olmo2Config's default
  EXPECT_FALSE(config.sliding_window.has_value());
  json saved = json::parse(model_config_to_json(config));
  EXPECT_EQ(saved["model_type"], "olmo2");
  EXPECT_EQ(parse_model_config(saved.dump(), "config.json").architecture, Architecture::Olmo2);
}

TEST(ModelConfig, LegacyRopeScalingTypes) {
  json linear = minimal_llama();
  linear["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  ModelConfig config = parse_model_config(linear.dump(), "config.json");
  EXPECT_EQ(config.rope.type, RopeType::Linear);
  EXPECT_DOUBLE_EQ(config.rope.factor, 2.0);

  json dynamic = minimal_llama();
  dynamic["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 3.0}};
  EXPECT_EQ(parse_model_config(dynamic.dump(), "config.json").rope.type, RopeType::Dynamic);

  json yarn = minimal_llama();
  yarn["max_position_embeddings"] = 8192;
  yarn["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"mscale", 0.707}, {"mscale_all_dim", 1.0},
                          {"beta_fast", 16}, {"truncate", false}};
  RopeConfig rope = parse_model_config(yarn.dump(), "config.json").rope;
  EXPECT_EQ(rope.type, RopeType::Yarn);
  EXPECT_EQ(rope.original_max_position_embeddings, 8192);  // falls back to max_position_embeddings
  EXPECT_DOUBLE_EQ(rope.beta_fast, 16.0);
  EXPECT_FALSE(rope.truncate);
  double expected = (0.1 * 0.707 * std::log(4.0) + 1.0) / (0.1 * 1.0 * std::log(4.0) + 1.0);
  EXPECT_NEAR(rope.attention_factor, expected, 1e-12);

  json given = yarn;
  given["rope_scaling"]["attention_factor"] = 0.5;
  EXPECT_DOUBLE_EQ(parse_model_config(given.dump(), "config.json").rope.attention_factor, 0.5);

  json partial = minimal_llama();
  partial["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(parse_model_config(partial.dump(), "config.json").rope.rotary_dim, 8);
}

// The same RoPE settings written the legacy way (rope_theta + rope_scaling) and the transformers 5
// way (rope_parameters) must resolve to the same RopeConfig, for every supported type.
TEST(ModelConfig, BothRopeSpellingsResolveIdentically) {
  const std::vector<json> scalings = {
      {{"rope_type", "default"}},
      {{"rope_type", "linear"}, {"factor", 2.0}},
      {{"rope_type", "dynamic"}, {"factor", 3.0}},
      {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}, {"beta_fast", 16.0},
       {"mscale", 0.707}, {"mscale_all_dim", 1.0}},
      {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
       {"original_max_position_embeddings", 1024}},
  };
  for (const json& scaling : scalings) {
    SCOPED_TRACE(scaling.dump());
    json legacy = minimal_llama();
    legacy["max_position_embeddings"] = 4096;
    legacy["rope_theta"] = 250000.0;
    legacy["partial_rotary_factor"] = 0.5;
    legacy["rope_scaling"] = scaling;
    json modern = minimal_llama();
    modern["max_position_embeddings"] = 4096;
    modern["rope_parameters"] = scaling;
    modern["rope_parameters"]["rope_theta"] = 250000.0;
    modern["rope_parameters"]["partial_rotary_factor"] = 0.5;
    const RopeConfig a = parse_model_config(legacy.dump(), "legacy/config.json").rope;
    const RopeConfig b = parse_model_config(modern.dump(), "modern/config.json").rope;
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(rope_type_name(a.type), scaling["rope_type"].get<std::string>());
    EXPECT_DOUBLE_EQ(a.theta, 250000.0);
    EXPECT_DOUBLE_EQ(b.theta, 250000.0);
    EXPECT_EQ(a.rotary_dim, 8);  // head_dim 16 x 0.5
    EXPECT_EQ(b.rotary_dim, 8);
    EXPECT_DOUBLE_EQ(a.factor, b.factor);
    EXPECT_DOUBLE_EQ(a.factor, scaling.value("factor", 1.0));
    EXPECT_EQ(a.original_max_position_embeddings, b.original_max_position_embeddings);
    EXPECT_EQ(a.original_max_position_embeddings, scaling.value("original_max_position_embeddings", 4096));
    EXPECT_DOUBLE_EQ(a.low_freq_factor, b.low_freq_factor);
    EXPECT_DOUBLE_EQ(a.high_freq_factor, b.high_freq_factor);
    EXPECT_DOUBLE_EQ(a.beta_fast, b.beta_fast);
    EXPECT_DOUBLE_EQ(a.beta_slow, b.beta_slow);
    EXPECT_DOUBLE_EQ(a.attention_factor, b.attention_factor);

    // And each spelling survives save → load in its own form.
    for (const json* source : {&legacy, &modern}) {
      TemporaryFolder folder;
      ModelConfig loaded = parse_model_config(source->dump(), "config.json");
      save_model_config(loaded, folder.path());
      json saved = json::parse(read_bytes(folder.path() / "config.json"));
      EXPECT_EQ(saved.contains("rope_parameters"), source == &modern);
      const RopeConfig again = load_model_config(folder.path()).rope;
      EXPECT_EQ(again.type, a.type);
      EXPECT_DOUBLE_EQ(again.theta, a.theta);
      EXPECT_EQ(again.rotary_dim, a.rotary_dim);
      EXPECT_DOUBLE_EQ(again.factor, a.factor);
      EXPECT_DOUBLE_EQ(again.attention_factor, a.attention_factor);
      EXPECT_EQ(again.original_max_position_embeddings, a.original_max_position_embeddings);
    }
  }
}

struct BadConfig {
  const char* label;
  std::function<void(json&)> edit;
  std::vector<std::string> fragments;
};

TEST(ModelConfig, ErrorsNameTheKey) {
  const std::vector<BadConfig> cases = {
      {"no architecture", [](json& c) { c.erase("architectures"); }, {"'architectures'", "missing"}},
      {"missing hidden_size", [](json& c) { c.erase("hidden_size"); }, {"'hidden_size'", "missing"}},
      {"zero layers", [](json& c) { c["num_hidden_layers"] = 0; }, {"'num_hidden_layers'", "positive"}},
      {"absurd layer count", [](json& c) { c["num_hidden_layers"] = 1000000000; },
       {"'num_hidden_layers'", "1000000000", "more than the 10000 layers"}},
      {"negative vocab", [](json& c) { c["vocab_size"] = -5; }, {"'vocab_size'", "positive"}},
      {"string size", [](json& c) { c["intermediate_size"] = "big"; }, {"'intermediate_size'", "integer"}},
      {"heads do not divide", [](json& c) { c["num_attention_heads"] = 5; }, {"'num_attention_heads'", "divide hidden_size"}},
      {"kv heads do not divide", [](json& c) { c["num_key_value_heads"] = 3; }, {"'num_key_value_heads'", "divide"}},
      {"bad dtype", [](json& c) { c["torch_dtype"] = "float7"; }, {"'torch_dtype'", "float7"}},
      // Not a dtype outputs can be written in: refused when the config is read, not after training.
      {"integer dtype", [](json& c) { c["torch_dtype"] = "int8"; }, {"'torch_dtype'", "int8", "bfloat16, float16 or float32"}},
      {"float64 dtype", [](json& c) { c["dtype"] = "float64"; }, {"'dtype'", "float64"}},
      {"unknown rope", [](json& c) { c["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 2}}; },
       {"'rope_scaling.rope_type'", "longrope", "yarn"}},
      {"rope without factor", [](json& c) { c["rope_scaling"] = {{"type", "linear"}}; }, {"'rope_scaling.factor'", "missing"}},
      {"llama3 incomplete", [](json& c) { c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; },
       {"original_max_position_embeddings", "llama3"}},
      {"rope_parameters theta", [](json& c) { c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", -1}}; },
       {"'rope_parameters.rope_theta'", "positive"}},
      {"eos list", [](json& c) { c["eos_token_id"] = {1, "x"}; }, {"'eos_token_id'"}},
      {"layer types length", [](json& c) { c["architectures"] = {"Qwen3ForCausalLM"}; c["layer_types"] = {"full_attention"}; },
       {"'layer_types'", "one entry per layer"}},
  };
  for (const BadConfig& bad : cases) {
    SCOPED_TRACE(bad.label);
    json config = minimal_llama();
    bad.edit(config);
    std::vector<std::string> fragments = bad.fragments;
    fragments.push_back("config.json");
    try {
      parse_model_config(config.dump(), "/m/config.json");
      ADD_FAILURE() << "expected a UserError";
    } catch (const UserError& error) {
      for (const std::string& fragment : fragments) {
        EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what() << " / " << fragment;
      }
    }
  }
  expect_user_error([] { parse_model_config("{not json", "/m/config.json"); }, {"/m/config.json", "JSON"});
  TemporaryFolder folder;
  expect_user_error([&] { load_model_config(folder.path()); }, {"config.json", "not found"});
}

// An architecture without C++ and another hidden_act are read (a model definition brings the graph
// and the weights); the built-in tables refuse them with the message that names the key.
TEST(ModelConfig, ArchitecturesWithoutCppAreReadAndRefusedByTheBuiltInTables) {
  const std::vector<BadConfig> cases = {
      {"unsupported architecture", [](json& c) { c["architectures"] = {"GPT2LMHeadModel"}; },
       {"'architectures'", "GPT2LMHeadModel", "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM",
        "model_definition"}},
      {"unsupported model_type", [](json& c) { c.erase("architectures"); c["model_type"] = "gpt_neox"; },
       {"'model_type'", "'gpt_neox'", "model_definition"}},
      {"gelu", [](json& c) { c["hidden_act"] = "gelu"; }, {"'hidden_act'", "gelu", "silu", "model_definition"}},
  };
  for (const BadConfig& bad : cases) {
    SCOPED_TRACE(bad.label);
    json config = minimal_llama();
    bad.edit(config);
    const ModelConfig model = parse_model_config(config.dump(), "/m/config.json");
    std::vector<std::string> fragments = bad.fragments;
    fragments.push_back("/m/config.json");
    try {
      require_builtin_support(model);
      ADD_FAILURE() << "expected a UserError";
    } catch (const UserError& error) {
      for (const std::string& fragment : fragments) {
        EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what() << " / " << fragment;
      }
    }
  }
  json neox = minimal_llama();
  neox["architectures"] = {"GPTNeoXForCausalLM"};
  neox["model_type"] = "gpt_neox";
  neox["hidden_act"] = "gelu";
  neox["use_parallel_residual"] = true;
  const ModelConfig model = parse_model_config(neox.dump(), "/m/config.json");
  EXPECT_EQ(model.architecture, Architecture::Defined);
  EXPECT_EQ(model.architecture_class, "GPTNeoXForCausalLM");
  EXPECT_EQ(model.model_type, "gpt_neox");
  EXPECT_EQ(model.hidden_act, "gelu");
  EXPECT_EQ(model.hidden_size, 64);
  // Written back as it came (the keys Surogate does not interpret stay), with the weights' dtype.
  json saved = json::parse(model_config_to_json(model));
  EXPECT_EQ(saved["architectures"], json({"GPTNeoXForCausalLM"}));
  EXPECT_EQ(saved["model_type"], "gpt_neox");
  EXPECT_EQ(saved["use_parallel_residual"], true);
  EXPECT_FALSE(saved.contains("rms_norm_eps"));
  EXPECT_TRUE(parse_model_config(minimal_llama().dump(), "/m/config.json").builtin_refusal.empty());
}

TEST(ModelConfig, SaveThenLoadKeepsEveryField) {
  for (const char* sample : {"qwen3-0.6b.json", "llama-3.2-1b.json", "mistral-7b-v0.1.json", "qwen2.5-0.5b.json",
                             "qwen3-0.6b-rope-parameters.json"}) {
    SCOPED_TRACE(sample);
    TemporaryFolder folder;
    ModelConfig original = load_sample(sample);
    save_model_config(original, folder.path());
    ModelConfig reloaded = load_model_config(folder.path());
    EXPECT_EQ(reloaded.architecture, original.architecture);
    EXPECT_EQ(reloaded.hidden_size, original.hidden_size);
    EXPECT_EQ(reloaded.head_dim, original.head_dim);
    EXPECT_EQ(reloaded.num_key_value_heads, original.num_key_value_heads);
    EXPECT_EQ(reloaded.tie_word_embeddings, original.tie_word_embeddings);
    EXPECT_EQ(reloaded.qkv_bias, original.qkv_bias);
    EXPECT_EQ(reloaded.sliding_window, original.sliding_window);
    EXPECT_EQ(reloaded.sliding_window_layers, original.sliding_window_layers);
    EXPECT_EQ(reloaded.rope.type, original.rope.type);
    EXPECT_DOUBLE_EQ(reloaded.rope.theta, original.rope.theta);
    EXPECT_DOUBLE_EQ(reloaded.rope.factor, original.rope.factor);
    EXPECT_DOUBLE_EQ(reloaded.rope.attention_factor, original.rope.attention_factor);
    EXPECT_EQ(reloaded.rope.original_max_position_embeddings, original.rope.original_max_position_embeddings);
    EXPECT_EQ(reloaded.eos_token_ids, original.eos_token_ids);
    EXPECT_EQ(reloaded.torch_dtype, original.torch_dtype);
    json saved = json::parse(read_bytes(folder.path() / "config.json"));
    EXPECT_EQ(saved["initializer_range"].is_null(), !json::parse(original.source_json).contains("initializer_range"));
  }
}


TEST(ModelConfig, QuantizedCheckpointIsOneClearError) {
  json config = minimal_llama();
  config["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
  try {
    parse_model_config(config.dump(), "model/config.json");
    FAIL() << "a quantized checkpoint was accepted";
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("model/config.json"), std::string::npos) << message;
    EXPECT_NE(message.find("'awq'"), std::string::npos) << message;
    EXPECT_NE(message.find("full-precision"), std::string::npos) << message;
  }
}

TEST(ModelConfig, Bitsandbytes4bitCheckpointIsReadAndNotWrittenBack) {
  json config = minimal_llama();
  config["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"_load_in_4bit", true},
                                   {"load_in_4bit", true}, {"load_in_8bit", false},
                                   {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", true},
                                   {"bnb_4bit_compute_dtype", "bfloat16"}, {"bnb_4bit_quant_storage", "uint8"},
                                   {"llm_int8_skip_modules", nullptr}};
  const ModelConfig model = parse_model_config(config.dump(), "model/config.json");
  ASSERT_TRUE(model.bnb_4bit_checkpoint.has_value());
  EXPECT_FALSE(model.fp8_block_checkpoint.has_value());
  EXPECT_EQ(model.bnb_4bit_checkpoint->quant_type, "nf4");
  EXPECT_TRUE(model.bnb_4bit_checkpoint->double_quant);
  EXPECT_FALSE(json::parse(model_config_to_json(model)).contains("quantization_config"));
  // bitsandbytes' defaults: fp4 without double quantization.
  config["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}};
  const ModelConfig defaults = parse_model_config(config.dump(), "model/config.json");
  EXPECT_EQ(defaults.bnb_4bit_checkpoint->quant_type, "fp4");
  EXPECT_FALSE(defaults.bnb_4bit_checkpoint->double_quant);
}

TEST(ModelConfig, OtherBitsandbytesConfigsNameTheKey) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}}, "quantization_config.load_in_8bit"},
      {{{"quant_method", "bitsandbytes"}}, "without load_in_4bit"},
      {{{"quant_method", "bitsandbytes"}, {"load_in_4bit", "yes"}}, "quantization_config.load_in_4bit"},
      {{{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "int4"}},
       "quantization_config.bnb_4bit_quant_type"},
      {{{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_storage", "bfloat16"}},
       "quantization_config.bnb_4bit_quant_storage"},
  };
  for (const auto& [quantization, expected] : cases) {
    json config = minimal_llama();
    config["quantization_config"] = quantization;
    expect_user_error([&] { parse_model_config(config.dump(), "model/config.json"); }, {"model/config.json", expected});
  }
}

TEST(ModelConfig, Fp8BlockCheckpointIsReadAndNotWrittenBack) {
  json config = minimal_llama();
  config["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {128, 64}}};
  const ModelConfig model = parse_model_config(config.dump(), "model/config.json");
  ASSERT_TRUE(model.fp8_block_checkpoint.has_value());
  EXPECT_EQ(model.fp8_block_checkpoint->block_rows, 128);
  EXPECT_EQ(model.fp8_block_checkpoint->block_cols, 64);
  // What Surogate writes (merged models) is full precision: no quantization_config.
  EXPECT_FALSE(json::parse(model_config_to_json(model)).contains("quantization_config"));
  EXPECT_FALSE(parse_model_config(minimal_llama().dump(), "model/config.json").fp8_block_checkpoint.has_value());
}

TEST(ModelConfig, OtherFp8QuantizationConfigsNameTheKey) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}, "without weight_block_size"},
      {{{"quant_method", "fp8"}, {"weight_block_size", {128}}}, "quantization_config.weight_block_size"},
      {{{"quant_method", "fp8"}, {"weight_block_size", {128, 0}}}, "quantization_config.weight_block_size"},
      {{{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"fmt", "e5m2"}}, "quantization_config.fmt"},
      {{{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"activation_scheme", "static"}},
       "quantization_config.activation_scheme"},
      {{{"quant_method", "gptq"}, {"bits", 4}}, "'gptq'"},
  };
  for (const auto& [quantization, expected] : cases) {
    json config = minimal_llama();
    config["quantization_config"] = quantization;
    expect_user_error([&] { parse_model_config(config.dump(), "model/config.json"); }, {"model/config.json", expected});
  }
}
}  // namespace
}  // namespace surogate::io
