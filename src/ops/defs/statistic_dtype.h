// The dtype of an op's fp32-class side outputs (rmsnorm's rstd, attention's and the LM head's
// logsumexp, loss scalars, counts) given its floating input's dtype: bf16 / f16 graphs keep these
// in F32, since a bf16 logsumexp (error ~0.03 at magnitude 10) would corrupt the backward and a
// bf16 count stops being exact past 256. F32 and F64 graphs use their own dtype.
#pragma once

#include "core/dtype.h"

namespace surogate::ops::defs {

inline DType statistic_dtype(DType input) {
  return input == DType::BF16 || input == DType::F16 ? DType::F32 : input;
}

}  // namespace surogate::ops::defs
