#include "format.hpp"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace braid::util {

std::string format(const char* format, ...) {
  // Most texts are a number or a table line: try a stack buffer first, then the exact size.
  char buf[256];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof buf) return {buf, static_cast<std::size_t>(n)};
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  va_start(args, format);
  std::vsnprintf(big.data(), big.size(), format, args);
  va_end(args);
  big.resize(static_cast<std::size_t>(n));
  return big;
}

}  // namespace braid::util
