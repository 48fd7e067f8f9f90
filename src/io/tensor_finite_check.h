// Damaged weights: a NaN or an infinity stored in a checkpoint or adapter tensor. Found by the
// stored bits (no conversion), so every loader can afford the check: the model and adapter
// loaders (models/weight_io.h, models/adapter_io.h) run it on every float tensor before handing
// it on, so training, `eval`, `merge` and the Python API all refuse a damaged file the same way,
// instead of training into NaN, printing `"loss": null` or writing NaN into a merged model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "io/safetensors.h"

namespace surogate::io {

struct NonFiniteValue {
  int64_t element = 0;
  std::string value;  // "nan", "inf" or "-inf"
};

// The first NaN / ±Inf of a float tensor (F64, F32, F16, BF16); nullopt when every value is
// finite or the dtype is not one of those.
std::optional<NonFiniteValue> find_non_finite(const SafetensorsTensor& tensor);

// UserError "<where>: tensor <name> holds a non-finite value (nan at element 5); <remedy>" when
// the tensor holds one.
void require_finite(const SafetensorsTensor& tensor, std::string_view where, std::string_view remedy);

}  // namespace surogate::io
