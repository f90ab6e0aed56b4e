// libFuzzer target: the YAML loaders (model, cluster, study, profile). The first byte picks the
// loader ('m', 'c', 's', 'p'; anything else: byte % 4), the rest is the file. A loader may accept
// the file or throw InputError; any other exception, a crash or a sanitizer report is a bug.
// Seeds: tools/fuzz writes every shipped config with its loader byte in front.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <unistd.h>

#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"

namespace {

// The loaders read files, so each input goes through one temp file per process, removed when
// the fuzzer exits.
const std::filesystem::path& temp_file() {
  struct File {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("braid-fuzz-" + std::to_string(getpid()) + ".yaml");
    File() = default;
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    ~File() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  };
  static const File file;
  return file.path;
}

char loader(std::uint8_t byte) {
  switch (byte) {
    case 'm':
    case 'c':
    case 's':
    case 'p':
      return static_cast<char>(byte);
    default:
      return "mcsp"[byte % 4];
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const char kind = loader(data[0]);
  {
    std::ofstream out(temp_file(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  try {
    switch (kind) {
      case 'm':
        braid::load_model(temp_file());
        break;
      case 'c':
        braid::load_cluster(temp_file());
        break;
      case 's':
        braid::load_study(temp_file());
        break;
      default:
        braid::load_profile(temp_file());
        break;
    }
  } catch (const braid::InputError&) {
    // Bad input, reported as such: fine.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_yaml: %c loader let %s escape: %s\n", kind, typeid(e).name(),
                 e.what());
    std::abort();
  }
  return 0;
}
