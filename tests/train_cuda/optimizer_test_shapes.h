// The parameter shapes the device-optimizer tests update: NorMuon's two orientations, a pair of
// one shape (one batched group), a 1-D norm weight (AdamW under NorMuon, no decay), and 8-bit
// blocks with a partial last one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surogate::train {

struct OptimizerTestShape {
  std::string name;
  int64_t rows, cols;
  bool decay, hidden;
};

inline const std::vector<OptimizerTestShape>& optimizer_test_shapes() {
  static const std::vector<OptimizerTestShape> all = {{"layers.0.mlp.up.weight", 48, 160, true, true},
                                                      {"layers.0.mlp.down.weight", 200, 40, true, true},
                                                      {"layers.0.ln1.weight", 1, 70, false, false},
                                                      {"layers.1.mlp.up.weight", 48, 160, true, true},
                                                      {"layers.1.mlp.down.weight", 200, 40, false, true}};
  return all;
}

}  // namespace surogate::train
