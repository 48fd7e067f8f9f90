// Atomic file replacement: content goes to a temporary file in the destination's folder, is
// fsync'ed, then renamed over the destination (and the folder fsync'ed). Readers see either the
// old file or the complete new one, never a torn write.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace surogate::io {

// Streams the content through `write` (called with a writer that appends bytes; it throws
// UserError on I/O failure). On any exception the temporary file is removed and the
// destination is left untouched.
using ByteSink = std::function<void(const void* data, size_t size)>;
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(const ByteSink&)>& write);

// Convenience: the whole content at once.
void write_text_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace surogate::io
