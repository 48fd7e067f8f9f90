// config.json sizes no machine could hold are refused where the file is read, naming the key:
// vocab_size 2^56 ended `sft` in "cannot create std::vector larger than max_size()", 2^62 let
// `--dry-run` predict 15.2 MiB ("fits"), and intermediate_size 2^62 gave a graph error naming
// neither the file nor the key.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io/model_config_bounds.h"
#include "io_test_helpers.h"

namespace surogate::io {
namespace {

using nlohmann::json;
using testing::expect_user_error;
using testing::read_bytes;

const std::filesystem::path kQwen3 = std::filesystem::path(SUROGATE_SOURCE_DIR) / "tests/io/data/configs/qwen3-0.6b.json";

std::string with(const char* key, const json& value) {
  json config = json::parse(read_bytes(kQwen3));
  config[key] = value;
  return config.dump();
}

TEST(ModelSizeBounds, RealModelsPass) {
  EXPECT_NO_THROW(parse_model_config(read_bytes(kQwen3), "qwen3/config.json"));
  // Llama-3.1-405B's sizes, the largest published dense model.
  json large = json::parse(read_bytes(kQwen3));
  large.merge_patch({{"hidden_size", 16384}, {"intermediate_size", 53248}, {"num_hidden_layers", 126},
                     {"num_attention_heads", 128}, {"num_key_value_heads", 8}, {"head_dim", 128},
                     {"vocab_size", 128256}, {"max_position_embeddings", 131072}});
  const ModelConfig config = parse_model_config(large.dump(), "405b/config.json");
  EXPECT_EQ(config.intermediate_size, 53248);
}

TEST(ModelSizeBounds, AbsurdDimensionsNameTheKey) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "head_dim", "num_attention_heads"}) {
    SCOPED_TRACE(key);
    for (int64_t value : {int64_t{1} << 56, int64_t{1} << 62, kMaxModelDimension * 2}) {
      expect_user_error([&] { parse_model_config(with(key, value), "/m/config.json"); },
                        {"/m/config.json", fmt::format("'{}' is {}, larger than any model's", key, value)});
    }
  }
}

TEST(ModelSizeBounds, SizesThatTogetherDescribeTooManyParameters) {
  // Each size within bounds, the model past 2^42 parameters: 10000 layers of 2^24 × 2^16 MLPs.
  json config = json::parse(read_bytes(kQwen3));
  config["num_hidden_layers"] = 10000;
  config["hidden_size"] = 65536;
  config["intermediate_size"] = kMaxModelDimension;
  expect_user_error([&] { parse_model_config(config.dump(), "/m/config.json"); },
                    {"/m/config.json", "'hidden_size' and the other sizes", "more than any machine holds"});
}

}  // namespace
}  // namespace surogate::io
