// gzip for output files whose name ends in `.gz` (src/util/atomic_file.cpp compresses them before
// staging, so the writer's guarantees hold for the compressed bytes). Internal (src/util/, usable
// by every module); zlib does the work.
#pragma once

#include <string>
#include <string_view>

namespace braid::detail {

// True when `path` names a gzip file: it ends in ".gz" (as gzip itself names them).
bool names_gzip(std::string_view path);

// `data` as one gzip member (RFC 1952) with no file name and mtime 0, so the same data always
// gives the same bytes (as `gzip -n`). zlib's default level: about 15x on a trace, at tens of
// MB/s.
std::string gzip_compress(std::string_view data);

}  // namespace braid::detail
