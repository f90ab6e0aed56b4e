// Output files written whole or not at all: checked for writability before any work starts, then
// written to a temporary beside the target and renamed at the end, so bad input or a failure never
// leaves a half-written file. Internal (src/util, any module may use it: the CLI and
// braid-profile); it knows nothing of what the files hold.
#pragma once

#include <string>

namespace braid::detail {

// Throws InputError(option, path, reason) if `path` cannot be created or written.
void check_writable(const std::string& option, const std::string& path);
// Writes `content` to `path` atomically; throws InputError on failure.
void write_file(const std::string& option, const std::string& path, const std::string& content);

}  // namespace braid::detail
