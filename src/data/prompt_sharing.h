// Prompt sharing: a preference micro-batch whose pairs hold their prompt once.
//
// A preference row (data/preference_formatter.h) is two documents: the chosen sequence (prompt +
// chosen completion) and the rejected one (prompt + rejected completion). Both start with the same
// prompt tokens, so every projection, norm and MLP computes the prompt twice. The shared layout
// holds each row as
//     [prefix | A | B | padding]      (shared_length tokens)
// where prefix is the first L tokens of both sequences (L: the common unlabelled start less one
// token, so the last prompt token, whose logits predict each completion's first token, is in A
// and in B), A the rest of the chosen sequence and B the rest of the rejected one. Positions are
// the sequences' own (B's restart at L), so every token sees exactly the q / k / v it has in the
// two-document row. Attention alone needs the two-document layout ("expanded", the row as packed):
// the graph pass (train/objective/prompt_sharing_graph.h) gathers q, k and v into it, attends
// there with its document masks, and gathers each shared token's output back. Those gathers read
// the index tables below (gather_rows, ops/gather_rows.h).
//
// The shared batch is a PackedBatch of [B, shared_length] whose documents are prefix + A (one
// document) and B, its labels the rows' own; its token counts (num_tokens, num_loss_tokens) stay
// the expanded rows', so tokens/s counts each pair's two sequences in full. KTO rows (a completion
// and its KL completion, both after the same prompt) share the same way; a row without two
// documents (padding) is laid out as it is.
#pragma once

#include <cstdint>

#include "data/packing.h"

namespace surogate::data {

// The longest row of `rows` in the shared layout (0 without rows).
int64_t longest_shared_row(const PackedRowsView& rows);

// `expanded` (rows of two documents) in the shared layout of `shared_length` tokens (at least every
// row's; a row that does not fit is an internal error), padded with `pad_id`. Fills the result's
// `shared_prompts`.
PackedBatch share_prompts(const PackedBatch& expanded, int64_t shared_length, int32_t pad_id);

}  // namespace surogate::data
