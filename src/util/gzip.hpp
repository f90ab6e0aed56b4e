// gzip for files whose name ends in `.gz`: outputs (src/util/atomic_file.cpp compresses them
// before staging, so the writer's guarantees hold for the compressed bytes) and inputs
// (src/util/input_file.cpp reads them back, so a `--shard-out p.bin.gz` merges). Internal
// (src/util/, usable by every module); zlib does the work.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace braid::detail {

// True when `path` names a gzip file: it ends in ".gz" (as gzip itself names them).
bool names_gzip(std::string_view path);

// `data` as one gzip member (RFC 1952) with no file name and mtime 0, so the same data always
// gives the same bytes (as `gzip -n`). zlib's default level: about 15x on a trace, at tens of
// MB/s.
std::string gzip_compress(std::string_view data);

// The bytes `data` (gzip members, one or more, as `gzip -d` reads them) decompress to, at most
// `max_bytes` of them. `problem` says why not ("" on success): not gzip data, truncated, or more
// than `max_bytes` (a small file may expand a thousandfold: the cap holds on what it becomes).
struct Gunzipped {
  std::string data;
  std::string problem;
};
Gunzipped gzip_decompress(std::string_view data, std::uint64_t max_bytes);

}  // namespace braid::detail
