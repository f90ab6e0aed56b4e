// Output files written by commands: checked for writability before any work starts, and written
// whole or not at all (a temporary beside the target, renamed at the end), so bad input or a
// failure never leaves a half-written file.
#pragma once

#include <string>

namespace braid::cli {

// Throws InputError(option, path, reason) if `path` cannot be created or written.
void check_writable(const std::string& option, const std::string& path);
// Writes `content` to `path` atomically; throws InputError on failure.
void write_file(const std::string& option, const std::string& path, const std::string& content);

}  // namespace braid::cli
