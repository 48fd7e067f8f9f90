// Small string helpers shared by modules: edit distance for "did you mean" suggestions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace surogate {

// Levenshtein distance (insertions, deletions, substitutions each cost 1).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, if it is close enough to be a plausible typo.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

// A memory size for messages: "34.1 MiB" below 1 GiB, "39.32 GiB" from there (powers of 1024).
std::string format_memory_size(size_t bytes);

}  // namespace surogate
