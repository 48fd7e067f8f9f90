// libFuzzer target: any byte string is treated as the Jinja text of a chat template (as found in
// a model folder's tokenizer_config.json) and rendered for a fixed small conversation
// (chat_template_case.h). The only acceptable outcomes are rendered text or a UserError; anything
// else (crash, sanitizer report, other exception, a render that runs past libFuzzer's -timeout or
// memory limit) is a bug: a looping or ever-growing template must be stopped by the engine's
// limits (src/chat_template/render_limits.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat_template_case.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)surogate::fuzz::render_chat_template_case(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/chat_template.jinja");
  } catch (const surogate::UserError&) {
    // Rejected cleanly: fine.
  }
  return 0;
}
