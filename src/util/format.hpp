// printf into a std::string: the one formatter behind every fixed-digit number braid prints
// (tables, CSV cells, SVG coordinates, fingerprints). Internal (src/util/, usable by every module).
// The compiler checks each call's arguments against its format string.
#pragma once

#include <string>

namespace braid::util {

// The text std::printf would print, of any length.
[[gnu::format(printf, 1, 2)]] std::string format(const char* format, ...);

}  // namespace braid::util
