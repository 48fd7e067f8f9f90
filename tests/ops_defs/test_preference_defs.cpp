// The preference-tuning graph ops (ops/defs/preference_logps_def.cpp, preference_loss_def.cpp):
// every loss type's gradient through sequence_logps into the hidden states and the LM head,
// compiled by autodiff and checked by finite differences in F64 (check_gradients), and the shape
// errors naming the input.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "ops/defs/preference_attrs.h"
#include "ops_defs_test_util.h"

namespace surogate {
namespace {
using namespace ops_defs_testing;

// Two pairs over 8 rows: rows 0-1 chosen 0, 2-3 chosen 1, 4-5 rejected 0, 6 rejected 1, 7 none.
TensorId build_preference(GraphBuilder& b, const std::string& type) {
  TensorId hidden = b.parameter("hidden", DType::F64, {8, 4});
  TensorId head = b.parameter("head", DType::F64, {7, 4});
  TensorId targets = b.input("targets", DType::I32, {8});
  TensorId sequence_ids = b.input("sequence_ids", DType::I32, {8});
  auto logps = b.op("sequence_logps", {hidden, head, targets, sequence_ids}, {{"sequences", 4}});
  auto fixed = [&](const char* name, int64_t size) { return b.parameter(name, DType::F64, {size}, false); };
  ops::PreferenceLossOptions options;
  EXPECT_TRUE(ops::parse_preference_loss_type(type, options.type));
  return b.op("preference_loss", {logps[0], fixed("reference", 4), fixed("lengths", 4), fixed("labels", 2), fixed("scales", 2)},
              ops::defs::preference_loss_attrs(options), "loss");
}

TEST(PreferenceDefs, EveryLossTypeGradientMatchesFiniteDifferences) {
  const IntInputs ints{{"targets", {1, 5, 2, 6, 0, 3, 4, -100}}, {"sequence_ids", {0, 0, 1, 1, 2, 2, 3, 3}}};
  for (const char* type : {"dpo", "ipo", "simpo", "orpo", "kto"}) {
    // ORPO's odds need log-probs per token below 0 (they are) and lengths > 0; the reference is a
    // constant (with random weights the log-ratios still differ per pair).
    const size_t checked = check_gradients([&](GraphBuilder& b) { return build_preference(b, type); }, ints,
                                           {{"reference", -2.0}, {"lengths", 2.0}, {"labels", 1.0}, {"scales", 0.5}});
    EXPECT_EQ(checked, 2u) << type;
  }
}

TEST(PreferenceDefs, ShapeErrorsNameTheInput) {
  GraphBuilder b(registry());
  TensorId logps = b.input("logps", DType::F32, {3});
  TensorId other = b.input("other", DType::F32, {3});
  TensorId labels = b.input("labels", DType::F32, {1});
  TensorId scales = b.input("scales", DType::F32, {2});
  EXPECT_THROW(b.op("preference_loss", {logps, other, other, labels, scales}), UserError);  // 3 is not 2·P
  TensorId hidden = b.input("hidden", DType::F32, {4, 2});
  TensorId head = b.input("head", DType::F32, {5, 2});
  TensorId targets = b.input("targets", DType::I32, {4});
  TensorId sequence_ids = b.input("sequence_ids", DType::I32, {3});
  try {
    b.op("sequence_logps", {hidden, head, targets, sequence_ids}, {{"sequences", 2}});
    FAIL() << "expected a UserError";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("one value per row"), std::string::npos) << error.what();
  }
  ops::PreferenceLossOptions options;
  nlohmann::json attrs = ops::defs::preference_loss_attrs(options);
  attrs["type"] = "hinge";
  TensorId pair = b.input("pair", DType::F32, {2});
  EXPECT_THROW(b.op("preference_loss", {pair, pair, pair, labels, scales}, attrs), UserError);
}

}  // namespace
}  // namespace surogate
