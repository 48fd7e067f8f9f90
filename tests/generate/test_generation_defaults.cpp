// generation_defaults.h: the settings of generation_config.json, else config.json, transformers'
// defaults for what neither says, the EOS ids from either file, and errors naming file and key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "generate/generation_defaults.h"
#include "user_error_of.h"

namespace surogate::generate {
namespace {

namespace fs = std::filesystem;

// A fresh model folder holding config.json and, when given, generation_config.json.
class ModelFolder {
 public:
  ModelFolder(const std::string& config, const std::string& generation_config = "") {
    static int count = 0;
    path_ =
        fs::temp_directory_path() / ("surogate_generation_defaults_" + std::to_string(::getpid()) +
                                     "_" + std::to_string(count++));
    fs::remove_all(path_);
    fs::create_directories(path_);
    if (!config.empty()) std::ofstream(path_ / "config.json") << config;
    if (!generation_config.empty())
      std::ofstream(path_ / "generation_config.json") << generation_config;
  }
  ~ModelFolder() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(GenerationDefaults, TransformersDefaultsWhenNothingIsSaid) {
  const ModelFolder folder(R"({"model_type": "llama"})");
  const GenerationDefaults defaults = read_generation_defaults(folder.path());
  EXPECT_FALSE(defaults.sampling.do_sample);
  EXPECT_EQ(defaults.sampling.temperature, 1.0);
  EXPECT_EQ(defaults.sampling.top_k, 50);
  EXPECT_EQ(defaults.sampling.top_p, 1.0);
  EXPECT_EQ(defaults.sampling.min_p, 0.0);
  EXPECT_EQ(defaults.sampling.repetition_penalty, 1.0);
  EXPECT_TRUE(defaults.eos_token_ids.empty());
  EXPECT_EQ(defaults.max_new_tokens, std::nullopt);
  EXPECT_EQ(defaults.max_length, std::nullopt);
  EXPECT_EQ(new_token_limit(defaults, 10), std::nullopt);
}

TEST(GenerationDefaults, GenerationConfigJsonIsRead) {
  // Qwen3's published generation_config.json, plus min_p, a penalty and lengths.
  const ModelFolder folder(
      R"({"eos_token_id": 151645, "temperature": 0.1})",
      R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
                               "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
                               "min_p": 0.05, "repetition_penalty": 1.1, "max_new_tokens": 64,
                               "max_length": 100, "transformers_version": "4.51.0"})");
  const GenerationDefaults defaults = read_generation_defaults(folder.path());
  EXPECT_EQ(defaults.sampling, (SamplingOptions{true, 0.6, 20, 0.95, 0.05, 1.1}));
  EXPECT_EQ(defaults.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(defaults.max_new_tokens, 64);
  EXPECT_EQ(defaults.max_length, 100);
  EXPECT_EQ(new_token_limit(defaults, 90), 64);  // max_new_tokens wins over max_length
}

TEST(GenerationDefaults, EosFromConfigJsonWhenGenerationConfigLacksIt) {
  const ModelFolder folder(R"({"eos_token_id": 2})", R"({"do_sample": true, "top_k": null})");
  const GenerationDefaults defaults = read_generation_defaults(folder.path());
  EXPECT_EQ(defaults.eos_token_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(defaults.sampling.top_k, 50);  // null is absent
}

TEST(GenerationDefaults, ConfigJsonHoldsTheSettingsWithoutAGenerationConfig) {
  const ModelFolder folder(R"({"eos_token_id": [1, 2], "temperature": 0.7, "max_length": 30})");
  const GenerationDefaults defaults = read_generation_defaults(folder.path());
  EXPECT_EQ(defaults.eos_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(defaults.sampling.temperature, 0.7);
  EXPECT_EQ(new_token_limit(defaults, 25), 5);
  EXPECT_EQ(new_token_limit(defaults, 40), 0);
}

TEST(GenerationDefaults, ErrorsNameTheFileAndKey) {
  const auto message = [](const std::string& config, const std::string& generation_config) {
    const ModelFolder folder(config, generation_config);
    return error_of([&] { read_generation_defaults(folder.path()); });
  };
  const std::string missing = message("", "");
  EXPECT_NE(missing.find("config.json: not found"), std::string::npos) << missing;
  EXPECT_NE(message("{", "").find("config.json: not valid JSON"), std::string::npos);
  EXPECT_NE(message("{}", "[1]").find("generation_config.json: must hold a JSON object"),
            std::string::npos);
  const std::string wrong_type = message("{}", R"({"temperature": "hot"})");
  EXPECT_NE(wrong_type.find("generation_config.json: 'temperature' must be a number"),
            std::string::npos)
      << wrong_type;
  EXPECT_NE(message("{}", R"({"do_sample": 1})").find("'do_sample' must be true or false"),
            std::string::npos);
  EXPECT_NE(message("{}", R"({"top_k": 2.5})").find("'top_k' must be an integer"),
            std::string::npos);
  const std::string bad_eos = message(R"({"eos_token_id": ["</s>"]})", "");
  EXPECT_NE(bad_eos.find("config.json: 'eos_token_id' must be a token id"), std::string::npos)
      << bad_eos;
  EXPECT_NE(message("{}", R"({"eos_token_id": -1})").find("'eos_token_id' must be a token id"),
            std::string::npos);
  const std::string range = message("{}", R"({"top_p": 1.5})");
  EXPECT_NE(range.find("generation_config.json: top_p must be in (0, 1]"), std::string::npos)
      << range;
  EXPECT_NE(message("{}", R"({"max_new_tokens": 0})").find("'max_new_tokens' must be positive"),
            std::string::npos);
}

TEST(GenerationDefaults, RequestOptionsOverrideABase) {
  const SamplingOptions base{true, 0.6, 20, 0.95, 0.0, 1.0};
  const nlohmann::json request = {
      {"temperature", 0}, {"top_p", nullptr}, {"min_p", 0.1}, {"model", "x"}};
  EXPECT_EQ(sampling_options_from_json(request, "request", base),
            (SamplingOptions{true, 0.0, 20, 0.95, 0.1, 1.0}));
  EXPECT_EQ(error_of([] {
              sampling_options_from_json({{"top_k", -2}}, "request");
            }),
            "request: top_k must be >= 0 (0 = off), got -2");
  EXPECT_EQ(error_of([] {
              sampling_options_from_json({{"top_p", "0.5"}}, "request");
            }),
            "request: 'top_p' must be a number");
}

}  // namespace
}  // namespace surogate::generate
