// M-RoPE (ops/mrope.h) against transformers: Qwen2VLRotaryEmbedding + apply_rotary_pos_emb at the
// positions of a real image row, forward and gradient (tests/fixtures/vision/rows/mrope.json,
// scripts/make_vision_row_fixtures.py), in float32. Tolerance: 2e-6 absolute on values of
// magnitude ≤ 5 (a few float32 ulps: std::cos / std::pow and torch's may round the last bit
// differently). Also: equal axes give ordinary RoPE bit for bit; a bad mrope_section is refused.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ops/mrope.h"

namespace surogate::ops {
namespace {

nlohmann::json load_fixture() {
  std::ifstream stream(std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "rows" / "mrope.json");
  return nlohmann::json::parse(stream);
}

io::RopeConfig default_rope(double theta, int64_t rotary_dim) {
  io::RopeConfig config;
  config.theta = theta;
  config.rotary_dim = rotary_dim;
  return config;
}

TEST(Mrope, ForwardAndBackwardEqualTransformers) {
  const auto fixture = load_fixture();
  const int64_t heads = fixture["heads"];
  const int64_t head_dim = fixture["head_dim"];
  std::vector<int32_t> positions;
  for (const auto& axis : fixture["position_ids"]) {
    for (const auto& value : axis) positions.push_back(value.get<int32_t>());
  }
  const auto tokens = static_cast<int64_t>(positions.size() / 3);
  const auto sections = fixture["mrope_section"].get<std::vector<int64_t>>();
  const auto frequencies = rope_frequencies<float>(default_rope(fixture["theta"], head_dim), tokens);
  std::vector<float> cos(tokens * head_dim / 2), sin(cos.size());
  mrope_tables(frequencies, positions.data(), tokens, sections, cos.data(), sin.data());

  const auto q = fixture["q"].get<std::vector<float>>();
  const auto upstream = fixture["upstream"].get<std::vector<float>>();
  ASSERT_EQ(q.size(), static_cast<size_t>(tokens * heads * head_dim));
  std::vector<float> out(q.size()), d_q(q.size());
  rope_forward(q.data(), cos.data(), sin.data(), tokens, heads, head_dim, head_dim, out.data());
  rope_backward(upstream.data(), cos.data(), sin.data(), tokens, heads, head_dim, head_dim, d_q.data());
  const auto expected_out = fixture["out"].get<std::vector<float>>();
  const auto expected_d_q = fixture["d_q"].get<std::vector<float>>();
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_NEAR(out[i], expected_out[i], 2e-6) << "out " << i;
    ASSERT_NEAR(d_q[i], expected_d_q[i], 2e-6) << "d_q " << i;
  }
}

TEST(Mrope, EqualAxesAreOrdinaryRope) {
  const int64_t tokens = 7;
  std::vector<int32_t> one_axis{0, 1, 2, 5, 9, 30, 400};
  std::vector<int32_t> three_axes;
  for (int axis = 0; axis < 3; ++axis) three_axes.insert(three_axes.end(), one_axis.begin(), one_axis.end());
  const auto frequencies = rope_frequencies<float>(default_rope(1e6, 32), tokens);
  std::vector<float> cos(tokens * 16), sin(cos.size()), rope_cos(cos.size()), rope_sin(cos.size());
  const std::vector<int64_t> sections{4, 6, 6};
  mrope_tables(frequencies, three_axes.data(), tokens, sections, cos.data(), sin.data());
  rope_tables(frequencies, one_axis.data(), tokens, rope_cos.data(), rope_sin.data());
  EXPECT_EQ(cos, rope_cos);
  EXPECT_EQ(sin, rope_sin);
}

TEST(Mrope, EachSectionTurnsWithItsAxis) {
  // Only the height axis moves: the temporal and width sections keep angle 0.
  const std::vector<int32_t> positions{0, 0, 3, 3, 0, 0};  // [3, 2]
  const auto frequencies = rope_frequencies<double>(default_rope(100.0, 12), 2);
  std::vector<double> cos(12), sin(12);
  const std::vector<int64_t> sections{1, 2, 3};
  mrope_tables(frequencies, positions.data(), 2, sections, cos.data(), sin.data());
  for (int64_t token = 0; token < 2; ++token) {
    for (int64_t i = 0; i < 6; ++i) {
      const double expected = (i == 1 || i == 2) ? std::sin(3.0 * frequencies.inverse_frequency[i]) : 0.0;
      EXPECT_DOUBLE_EQ(sin[token * 6 + i], expected) << token << " " << i;
    }
  }
}

TEST(Mrope, SectionsMustCoverTheFrequencies) {
  const std::vector<int32_t> positions{0, 0, 0};
  const auto frequencies = rope_frequencies<float>(default_rope(100.0, 12), 1);
  std::vector<float> cos(6), sin(6);
  const std::vector<int64_t> short_sections{1, 2, 2};
  EXPECT_THROW(mrope_tables(frequencies, positions.data(), 1, short_sections, cos.data(), sin.data()),
               std::exception);
}

}  // namespace
}  // namespace surogate::ops

namespace surogate::ops {
namespace {

// The vision tower's 2-D rotary tables (vision/patch_positions.h): M-RoPE tables with
// inv_freq = [f, f] and sections [0, q, q] over (frame, row, column) positions equal
// transformers' Qwen2VLVisionRotaryEmbedding (vision_rope.json; 2e-6 absolute, as above).
TEST(Mrope, VisionRotaryTablesEqualTransformers) {
  std::ifstream stream(std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "rows" / "vision_rope.json");
  const auto fixture = nlohmann::json::parse(stream);
  const int64_t head_dim = fixture["head_dim"];
  const auto& rows_columns = fixture["position_ids"];
  const auto patches = static_cast<int64_t>(rows_columns.size());
  std::vector<int32_t> positions(static_cast<size_t>(3 * patches), 0);
  for (int64_t p = 0; p < patches; ++p) {
    positions[patches + p] = rows_columns[p][0].get<int32_t>();
    positions[2 * patches + p] = rows_columns[p][1].get<int32_t>();
  }
  RopeFrequencies<float> frequencies = rope_frequencies<float>(default_rope(fixture["theta"], head_dim / 2), patches);
  const std::vector<float> single = frequencies.inverse_frequency;
  frequencies.inverse_frequency.insert(frequencies.inverse_frequency.end(), single.begin(), single.end());
  const std::vector<int64_t> sections{0, head_dim / 4, head_dim / 4};
  std::vector<float> cos(patches * head_dim / 2), sin(cos.size());
  mrope_tables(frequencies, positions.data(), patches, sections, cos.data(), sin.data());
  const auto expected_cos = fixture["cos"].get<std::vector<float>>();
  const auto expected_sin = fixture["sin"].get<std::vector<float>>();
  ASSERT_EQ(cos.size(), expected_cos.size());
  for (size_t i = 0; i < cos.size(); ++i) {
    ASSERT_NEAR(cos[i], expected_cos[i], 2e-6) << i;
    ASSERT_NEAR(sin[i], expected_sin[i], 2e-6) << i;
  }
}

}  // namespace
}  // namespace surogate::ops

namespace surogate::ops {
namespace {

// Qwen3-VL's interleaved M-RoPE (mrope_interleaved) against transformers'
// Qwen3VLTextRotaryEmbedding at random positions (mrope_interleaved.json, written by
// scripts/make_interleaved_mrope_fixture.py): Qwen3-VL-8B's head_dim 128 / [24, 20, 20] and a
// small [2, 5, 5] whose height and width runs reach the last frequency, at positions below 400.
// 2e-6 absolute, as above (at positions in the thousands the last bit of inv_freq, rounded by
// another pow than torch's, moves float32 angles by more).
TEST(Mrope, InterleavedTablesEqualTransformers) {
  std::ifstream stream(std::filesystem::path(SUROGATE_FIXTURES_DIR) / "vision" / "rows" / "mrope_interleaved.json");
  const auto fixture = nlohmann::json::parse(stream);
  ASSERT_EQ(fixture["cases"].size(), 2u);
  for (const auto& spec : fixture["cases"]) {
    const int64_t head_dim = spec["head_dim"], tokens = spec["tokens"];
    std::vector<int32_t> positions;
    for (const auto& axis : spec["position_ids"]) {
      for (const auto& value : axis) positions.push_back(value.get<int32_t>());
    }
    const auto sections = spec["mrope_section"].get<std::vector<int64_t>>();
    const auto frequencies = rope_frequencies<float>(default_rope(spec["theta"], head_dim), tokens);
    std::vector<float> cos(static_cast<size_t>(tokens * head_dim / 2)), sin(cos.size());
    mrope_tables(frequencies, positions.data(), tokens, sections, cos.data(), sin.data(), /*interleaved=*/true);
    const auto expected_cos = spec["cos"].get<std::vector<float>>();
    const auto expected_sin = spec["sin"].get<std::vector<float>>();
    ASSERT_EQ(cos.size(), expected_cos.size());
    for (size_t i = 0; i < cos.size(); ++i) {
      ASSERT_NEAR(cos[i], expected_cos[i], 2e-6) << "head_dim " << head_dim << " entry " << i;
      ASSERT_NEAR(sin[i], expected_sin[i], 2e-6) << "head_dim " << head_dim << " entry " << i;
    }
  }
}

TEST(Mrope, InterleavedAxesFollowTransformersLayout) {
  // [1, 2, 2] over 5 frequencies: height at i % 3 == 1 below 6 (1, 4), width at i % 3 == 2 (2).
  const std::vector<int64_t> sections{1, 2, 2};
  EXPECT_EQ(mrope_axes(sections, 5, true), (std::vector<int64_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(mrope_axes(sections, 5, false), (std::vector<int64_t>{0, 1, 1, 2, 2}));
  // Qwen3-VL's [24, 20, 20]: frequencies 60..63 turn with the temporal axis.
  const std::vector<int64_t> qwen3{24, 20, 20};
  const std::vector<int64_t> axes = mrope_axes(qwen3, 64, true);
  EXPECT_EQ(axes[58], 1);
  EXPECT_EQ(axes[59], 2);
  EXPECT_EQ(axes[60], 0);
  EXPECT_EQ(axes[61], 0);
  EXPECT_EQ(axes[62], 0);
  EXPECT_EQ(axes[63], 0);
}

}  // namespace
}  // namespace surogate::ops
