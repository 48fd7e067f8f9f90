// The oracle NextTokenModel (next_token_model.h): a slot is its token history, and every feed runs
// ModelSession's whole [slots, max_context] forward over the histories of the slots fed.
#include <fmt/format.h>

#include "core/error.h"
#include "generate/feed_checks.h"
#include "generate/next_token_model.h"
#include "models/model_session.h"

namespace surogate::generate {
namespace {

class FullForwardModel final : public NextTokenModel {
public:
  FullForwardModel(const std::filesystem::path& model_dir, const ModelOptions& options)
      : session_(model_dir, models::SessionOptions{options.slots, options.max_context, options.adapter, options.cuda,
                                                    options.definition}),
        histories_(static_cast<size_t>(options.slots)) {}

  std::span<float> feed_in_place(std::span<const SlotFeed> feeds) override {
    check_feeds(feeds, *this);
    std::vector<models::TokenSequence> rows;
    for (const SlotFeed& fed : feeds) {
      std::vector<int32_t>& history = histories_[static_cast<size_t>(fed.slot)];
      history.insert(history.end(), fed.tokens.begin(), fed.tokens.end());
      rows.push_back({history, std::vector<int32_t>(history.size(), -100)});
    }
    const models::SessionOutput output = session_.run(rows, true);
    const size_t vocab = static_cast<size_t>(vocab_size()), sequence = static_cast<size_t>(max_context());
    logits_.resize(feeds.size() * vocab);
    for (size_t row = 0; row < rows.size(); ++row) {
      const size_t last = rows[row].input_ids.size() - 1;
      const float* from = output.logits.data() + (row * sequence + last) * vocab;
      std::copy(from, from + vocab, logits_.data() + row * vocab);
    }
    return logits_;
  }

  bool copies_prefixes() const override { return true; }
  void copy_prefixes(std::span<const PrefixCopy> copies) override {
    check_prefix_copies(copies, *this);
    for (const PrefixCopy& copy : copies) {
      const std::vector<int32_t>& from = histories_[static_cast<size_t>(copy.from)];
      histories_[static_cast<size_t>(copy.to)].assign(from.begin(), from.begin() + copy.tokens);
    }
  }
  void clear(int64_t slot) override {
    check_slot(slot, slots());
    histories_[static_cast<size_t>(slot)].clear();
  }
  int64_t held(int64_t slot) const override {
    check_slot(slot, slots());
    return static_cast<int64_t>(histories_[static_cast<size_t>(slot)].size());
  }
  int64_t slots() const override { return static_cast<int64_t>(histories_.size()); }
  int64_t max_context() const override { return session_.sequence(); }
  int64_t vocab_size() const override { return session_.vocab_size(); }

private:
  models::ModelSession session_;
  std::vector<std::vector<int32_t>> histories_;
  std::vector<float> logits_;  // the last feed's
};

}  // namespace

std::unique_ptr<NextTokenModel> open_full_forward_model(const std::filesystem::path& model_dir,
                                                        const ModelOptions& options) {
  return std::make_unique<FullForwardModel>(model_dir, options);
}

}  // namespace surogate::generate
