// Unit constants shared by every module (bytes per GiB, ...), so a conversion is written once.
// Internal (src/util, any module may use it); only constants, no formatting.
#pragma once

namespace braid {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;  // bytes
inline constexpr double kMiB = 1024.0 * 1024.0;           // bytes
inline constexpr double kGB = 1e9;                        // bytes (and bytes/s per GB/s)

}  // namespace braid
