// Sanity bounds on config.json's sizes, checked when it is read: a typo or a hostile file
// (vocab_size: 2^56) would otherwise reach the graph builder, the memory planner and the
// loaders, whose size products overflow 64 bits and end in a crash, an allocation of terabytes,
// or a memory prediction that wrapped around to "fits". The bounds are far above every published
// model, so they refuse only sizes no machine could hold; each refusal names config.json and the key.
#pragma once

#include "io/json_fields.h"
#include "io/model_config.h"

namespace surogate::io {

// Largest size any one dimension key may hold (vocab_size, hidden_size, intermediate_size, ...):
// 2^24 = 16,777,216, 64 times the largest published vocabulary.
inline constexpr int64_t kMaxModelDimension = int64_t{1} << 24;
// Largest parameter count the sizes may describe together: 2^42 ≈ 4.4 trillion.
inline constexpr double kMaxModelParameters = 4398046511104.0;

// UserError through `fields` (naming config.json and the key) when a size is out of bounds.
void check_model_size_bounds(const ModelConfig& model, const JsonFields& fields);

}  // namespace surogate::io
