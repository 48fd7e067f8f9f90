// The window scheme of incremental detokenization (as vLLM and TGI do it) and the stop-string
// hold-back of text_stream.h.
#include "generate/text_stream.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::generate {
namespace {

constexpr std::string_view kReplacement =
    "\xEF\xBF\xBD";  // U+FFFD: what decode() makes of a split character

// The length of the longest suffix of `text` that is a proper prefix of a stop string.
size_t partial_stop_length(std::string_view text, const std::vector<std::string>& stop_strings) {
  size_t longest = 0;
  for (const std::string& stop : stop_strings) {
    for (size_t length = std::min(stop.size() - 1, text.size()); length > longest; --length) {
      if (text.substr(text.size() - length) == std::string_view(stop).substr(0, length)) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

// A byte-fallback token (<0xNN>, SentencePiece vocabularies): its decoder turns a whole run of
// them into U+FFFDs when the run's bytes are not valid UTF-8 together, so a later byte token can
// still change the text of earlier ones (an 'r' as <0x72> becomes U+FFFD when <0xB2> follows).
bool is_byte_token(const tokenizer::Tokenizer& tokenizer, int32_t id) {
  const std::optional<std::string> token = tokenizer.id_to_token(id);
  return token && token->size() == 6 && token->starts_with("<0x") && token->ends_with(">");
}

}  // namespace

TextStream::TextStream(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop_strings,
                       bool skip_special_tokens)
    : tokenizer_(tokenizer),
      stop_strings_(std::move(stop_strings)),
      skip_special_tokens_(skip_special_tokens) {
  for (const std::string& stop : stop_strings_) {
    if (stop.empty()) fail_user("a stop string must not be empty");
  }
}

std::string TextStream::decode_range(size_t begin, size_t end) const {
  return tokenizer_.decode(std::span<const int32_t>(ids_).subspan(begin, end - begin),
                           skip_special_tokens_);
}

std::string TextStream::push(int32_t token) {
  if (stopped_) return "";
  ids_.push_back(token);
  // A run of byte tokens may go on; skipped special tokens do not end it (decode drops them first).
  if (is_byte_token(tokenizer_, token)) {
    in_byte_run_ = true;
  } else if (!(skip_special_tokens_ && tokenizer_.is_special_token(token))) {
    in_byte_run_ = false;
  }
  if (in_byte_run_) return "";
  const std::string window = decode_range(prefix_begin_, ids_.size());
  // Wait while the window adds nothing or ends in a character still missing bytes.
  if (window.size() <= prefix_text_.size() || window.ends_with(kReplacement)) return "";
  std::string more = window.substr(prefix_text_.size());
  // The chunk just decoded starts the next window, unless alone it decodes to nothing (skipped
  // special tokens, a lone space a decoder strips): then the window keeps its start.
  std::string chunk = decode_range(read_end_, ids_.size());
  if (chunk.empty()) {
    prefix_text_ = window;
  } else {
    prefix_begin_ = read_end_;
    prefix_text_ = std::move(chunk);
  }
  read_end_ = ids_.size();
  return release(std::move(more));
}

std::string TextStream::flush() {
  if (stopped_) return "";
  // The exact text of all ids; what the window gave is its beginning.
  const std::string all = tokenizer_.decode(ids_, skip_special_tokens_);
  prefix_begin_ = read_end_ = ids_.size();
  prefix_text_.clear();
  std::string rest = all.size() > text_.size() ? all.substr(text_.size()) : std::string();
  std::string released = release(std::move(rest));
  released += text_.substr(shown_);  // nothing is held back at the end
  shown_ = text_.size();
  return released;
}

std::string TextStream::release(std::string more) {
  text_ += more;
  if (stop_strings_.empty()) {
    std::string shown = text_.substr(shown_);
    shown_ = text_.size();
    return shown;
  }
  size_t longest_stop = 0;
  for (const std::string& stop : stop_strings_) longest_stop = std::max(longest_stop, stop.size());
  // A stop string may span the old text and the new: search from longest_stop - 1 bytes back.
  const size_t from = searched_ > longest_stop - 1 ? searched_ - (longest_stop - 1) : 0;
  size_t cut = std::string::npos;
  for (const std::string& stop : stop_strings_) cut = std::min(cut, text_.find(stop, from));
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
  }
  searched_ = text_.size();
  const size_t safe_end =
      stopped_ ? text_.size() : text_.size() - partial_stop_length(text_, stop_strings_);
  std::string shown = safe_end > shown_ ? text_.substr(shown_, safe_end - shown_) : std::string();
  shown_ = std::max(shown_, safe_end);
  return shown;
}

}  // namespace surogate::generate
