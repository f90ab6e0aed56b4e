#include "gzip.hpp"

// next_in as a pointer to const (zlib's z_const), so the input needs no const_cast.
#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <limits>
#include <new>
#include <string>

#include "braid/error.hpp"

namespace braid::detail {

namespace {
// zlib's windowBits for a gzip wrapper (15, the largest window, + 16) instead of zlib's own.
constexpr int kGzipWindow = 15 + 16;
}  // namespace

bool names_gzip(std::string_view path) { return path.ends_with(".gz"); }

std::string gzip_compress(std::string_view data) {
  z_stream zs{};
  // Without deflateSetHeader zlib writes the minimal header: no name, no comment, mtime 0.
  constexpr int kMemLevel = 8;  // zlib's default
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindow, kMemLevel,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::bad_alloc();  // deflateInit2 fails only for memory with these constant arguments
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  // zlib's lengths are 32-bit: feed and drain in pieces that fit, whatever the data's size.
  constexpr std::size_t kPiece = std::numeric_limits<uInt>::max();
  std::size_t in_done = 0;
  int rc = Z_OK;
  while (rc == Z_OK) {
    const std::size_t in_piece = std::min(kPiece, data.size() - in_done);
    zs.next_in = reinterpret_cast<const Bytef*>(data.data() + in_done);
    zs.avail_in = static_cast<uInt>(in_piece);
    if (zs.total_out == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + zs.total_out);
    zs.avail_out = static_cast<uInt>(std::min(kPiece, out.size() - zs.total_out));
    const bool last = in_done + in_piece == data.size();
    rc = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
    in_done += in_piece - zs.avail_in;
  }
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw InternalError("gzip: deflate failed (" + std::to_string(rc) + ")");
  out.resize(zs.total_out);
  return out;
}

Gunzipped gzip_decompress(std::string_view data, std::uint64_t max_bytes) {
  Gunzipped result;
  z_stream zs{};
  if (inflateInit2(&zs, kGzipWindow) != Z_OK) throw std::bad_alloc();
  constexpr std::size_t kPiece = 1 << 20;
  std::string& out = result.data;
  std::size_t in_done = 0;
  int rc = Z_OK;
  while (result.problem.empty()) {
    const std::size_t in_piece = std::min(kPiece, data.size() - in_done);
    zs.next_in = reinterpret_cast<const Bytef*>(data.data() + in_done);
    zs.avail_in = static_cast<uInt>(in_piece);
    const std::size_t before = out.size();
    out.resize(before + kPiece);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    zs.avail_out = static_cast<uInt>(kPiece);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(before + kPiece - zs.avail_out);
    in_done += in_piece - zs.avail_in;
    if (out.size() > max_bytes)
      result.problem = "decompresses to more than " + std::to_string(max_bytes) + " bytes";
    else if (rc == Z_STREAM_END && in_done == data.size())
      break;
    else if (rc == Z_STREAM_END)  // another member follows (`cat a.gz b.gz`)
      inflateReset(&zs);
    else if (rc == Z_BUF_ERROR && in_done == data.size() && zs.avail_out != 0)
      result.problem = "gzip data ends early (truncated)";
    else if (rc != Z_OK && rc != Z_BUF_ERROR)
      result.problem = "not gzip data (" + std::string(zs.msg ? zs.msg : "zlib error") + ")";
  }
  inflateEnd(&zs);
  if (!result.problem.empty()) result.data.clear();
  return result;
}

}  // namespace braid::detail
