// libFuzzer target: any byte string is treated as the text of a config.json and run through
// parse_model_config (architecture, sizes, head layout, both RoPE spellings, sliding windows,
// token ids). The only acceptable outcomes are a ModelConfig whose sizes satisfy the invariants
// later stages rely on, or a UserError; anything else (crash, sanitizer report, other
// exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    surogate::io::ModelConfig config = surogate::io::parse_model_config(text, "fuzz/config.json");
    const bool consistent = config.vocab_size > 0 && config.hidden_size > 0 && config.num_hidden_layers > 0 &&
                            config.num_attention_heads > 0 && config.num_key_value_heads > 0 &&
                            config.num_attention_heads % config.num_key_value_heads == 0 && config.head_dim > 0 &&
                            config.rope.rotary_dim > 0 && config.rope.rotary_dim % 2 == 0 &&
                            config.rope.rotary_dim <= config.head_dim &&
                            config.sliding_window_layers.size() == static_cast<size_t>(config.num_hidden_layers);
    if (!consistent) std::abort();
  } catch (const surogate::UserError&) {
    // Rejected cleanly: fine.
  }
  return 0;
}
