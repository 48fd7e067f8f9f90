// libFuzzer target: any byte string is treated as the text of a model folder's tokenizer.json
// (HF `tokenizers` format) and loaded as the engine loads it; when it loads, a fixed short text
// with special tokens and odd Unicode is encoded and decoded (tokenizer_json_case.h). The only
// acceptable outcomes are a tokenizer that keeps its contract, or a UserError; anything else
// (crash, sanitizer report, nlohmann / standard-library exception escaping, a load or encode that
// runs past libFuzzer's -timeout or memory limit) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "tokenizer_json_case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::string broken = surogate::fuzz::run_tokenizer_json_case(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/tokenizer.json");
    if (!broken.empty()) {
      std::fprintf(stderr, "tokenizer contract broken: %s\n", broken.c_str());
      std::abort();
    }
  } catch (const surogate::UserError&) {
    // Rejected cleanly: fine.
  }
  return 0;
}
