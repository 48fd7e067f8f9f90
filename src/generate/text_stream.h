// Incremental detokenization for streaming: push the generated token ids one at a time and get
// the text that became final, so a client can be shown text as it is generated.
//   - Never an incomplete UTF-8 sequence (a character split over byte tokens waits for its rest;
//     a run of byte-fallback tokens <0xNN> waits for the token after it, since decode() turns a
//     whole run into U+FFFDs when one byte of it is invalid).
//   - Never a part of a stop string: text that could be the start of one is held back until the
//     next tokens rule it out; once a stop string appears, the text is cut before it and the
//     stream is stopped() (push returns nothing more).
//   - Everything pushed, once flush()ed, comes out as exactly tokenizer.decode(ids,
//     skip_special_tokens) (cut before the first stop string, if one appeared).
// Cost per token: up to three decodes of a window of the last few tokens, not of the whole text.
//
//   TextStream stream(tokenizer, {"\n\n"});
//   for (int32_t id : generated) { print(stream.push(id)); if (stream.stopped()) break; }
//   print(stream.flush());
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace surogate::generate {

class TextStream {
 public:
  // `tokenizer` must outlive the stream. UserError when a stop string is empty.
  explicit TextStream(const tokenizer::Tokenizer& tokenizer,
                      std::vector<std::string> stop_strings = {}, bool skip_special_tokens = true);

  // Appends one token; returns the text that became final with it (often empty).
  std::string push(int32_t token);
  // The end of the sequence: returns all text not yet returned (what was held back, an incomplete
  // UTF-8 tail as decode() renders it). Call once, after the last push.
  std::string flush();

  // A stop string appeared; text() ends just before it.
  bool stopped() const { return stopped_; }
  // All the text decoded so far, returned or held back (cut before a stop string).
  const std::string& text() const { return text_; }

 private:
  std::string decode_range(size_t begin, size_t end) const;
  // Appends `more` to text_ and returns what of text_ is now safe to show.
  std::string release(std::string more);

  const tokenizer::Tokenizer& tokenizer_;
  std::vector<std::string> stop_strings_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  // The decode window: ids_[prefix_begin_, read_end_) were turned into text already (their text,
  // decoded alone, is prefix_text_); the text of new tokens is what decoding from prefix_begin_
  // adds to prefix_text_. Starting the window a chunk back keeps what a decoder does to the
  // first token of a text (Strip, Metaspace drop its leading space) inside the prefix.
  size_t prefix_begin_ = 0;
  size_t read_end_ = 0;
  std::string prefix_text_;
  bool in_byte_run_ = false;  // the last token decode keeps is a byte-fallback token
  std::string text_;          // all final text
  size_t shown_ = 0;          // bytes of text_ returned so far
  size_t searched_ = 0;       // text_ before this holds no stop string
  bool stopped_ = false;
};

}  // namespace surogate::generate
