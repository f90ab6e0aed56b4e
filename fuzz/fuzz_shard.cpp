// libFuzzer target: the shard reader of braid merge (decode_shard), then merge_shards of the one
// shard. Bad input may only surface as InputError; any other exception, a crash or a sanitizer
// report is a bug. The first byte picks the mode: 'r' hands the rest to decode_shard as it is
// (the magic line and its checksum); anything else puts the rest behind a magic line with its
// right checksum, so that mutations reach the header's JSON and the rows instead of stopping at
// the checksum. Seeds: tools/fuzz writes the shards of a small sweep, both ways.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "braid/error.hpp"
#include "braid/explore.hpp"

namespace {

// The checksum of shard files (src/explore/shard.cpp): FNV-1a, 64 bits, as 16 hex digits.
std::string fnv1a64(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string bytes =
      data[0] == 'r' ? rest : "braid-sweep-shard 5 " + fnv1a64(rest) + "\n" + rest;
  try {
    const braid::SweepShard shard = braid::decode_shard(bytes, "fuzz.bin");
    // A shard of a huge grid sizes merge's tables by its configuration count: not fuzzed here.
    if (shard.configurations > 4096) return 0;
    braid::merge_shards({shard}, {"fuzz.bin"});
  } catch (const braid::InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_shard: %s escaped: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
  return 0;
}
