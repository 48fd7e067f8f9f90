// Pre-tokenizers of tokenizer.json: they cut normalized text into the "words" the BPE model sees.
// Supported: Split (literal or regex pattern, every split behavior, invert), ByteLevel
// (add_prefix_space, use_regex with the GPT-2 pattern), Metaspace (replacement, prepend_scheme,
// split), and Sequence of those (flattened).
//
// Byte-level models do not re-spell text in the GPT-2 byte alphabet here: the BPE model keys
// its vocabulary by raw bytes instead (see bpe_model.h), so ByteLevel only prefixes and splits.
// That is why ByteLevel must be the last step of a Sequence.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/text_growth.h"

namespace surogate::tokenizer {

class JsonPath;

// Text cut into pieces: `spans` are byte ranges of `text`, in order, non-empty.
struct Pieces {
  std::string text;
  std::vector<ByteSpan> spans;
};

// How a Split keeps the pattern's matches (HF `SplitDelimiterBehavior`).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Per-thread reusable memory for pre-tokenization.
struct PreTokenizerScratch {
  Pieces other;
  std::vector<ByteSpan> matches;
  std::vector<std::pair<ByteSpan, bool>> segments;
  RegexScratch regex;
};

// Cuts `text[span]` at the given matches (absolute offsets inside span) and appends the kept
// pieces per `behavior` to `out` (exposed for tests).
void split_span(ByteSpan span, const std::vector<ByteSpan>& matches, SplitBehavior behavior,
                bool invert, std::vector<std::pair<ByteSpan, bool>>& segments,
                std::vector<ByteSpan>& out);

class PreTokenizer {
 public:
  // A `null` component gives the identity pre-tokenizer (the whole text is one word).
  static PreTokenizer from_json(const nlohmann::json& component, const JsonPath& where);

  // True when a ByteLevel step is present: the model's vocabulary is spelled in the byte alphabet.
  bool byte_level() const { return byte_level_; }
  // How much longer pre_tokenize() can make a text (text_growth.h): ByteLevel's prefix space 2
  // (a piece is at least one byte), Metaspace 1 + the length of its replacement character.
  const TextGrowth& growth() const { return growth_; }
  // Splits `pieces` in place. `at_text_start` says whether pieces.text begins the input text
  // (Metaspace's prepend_scheme "first" only prefixes there).
  void pre_tokenize(Pieces& pieces, bool at_text_start, PreTokenizerScratch& scratch) const;

 private:
  struct SplitStep {
    std::string literal;
    std::shared_ptr<const Regex> regex;
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
  };
  struct ByteLevelStep {
    bool add_prefix_space = false;
    std::shared_ptr<const Regex> regex;  // null when use_regex is false
  };
  enum class PrependScheme { Always, First, Never };
  struct MetaspaceStep {
    std::string replacement;
    PrependScheme prepend_scheme = PrependScheme::Always;
    bool split = true;
  };
  using Step = std::variant<SplitStep, ByteLevelStep, MetaspaceStep>;

  void append_steps(const nlohmann::json& component, const JsonPath& where);
  void apply_split(const SplitStep& step, Pieces& pieces, PreTokenizerScratch& scratch) const;
  void apply_byte_level(const ByteLevelStep& step, Pieces& pieces,
                        PreTokenizerScratch& scratch) const;
  void apply_metaspace(const MetaspaceStep& step, Pieces& pieces, bool at_text_start,
                       PreTokenizerScratch& scratch) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
  TextGrowth growth_;
};

}  // namespace surogate::tokenizer
