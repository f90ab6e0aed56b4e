// Fixtures several test files share: the default study (qwen2-12.1b on 2 x 8 A800) with a short
// sequence so that explorer tests stay fast, with its profile; and writing a small file into a
// scratch tree. Test-only; each test file keeps its own scenario-specific set-up.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <unistd.h>

#include "braid/config.hpp"
#include "braid/profile.hpp"

namespace braid::test {

struct StudyFixture {
  Study study;
  Profile profile;
};

// Loaded once per test binary.
inline const StudyFixture& short_default_study() {
  static const StudyFixture f = [] {
    StudyFixture x;
    x.study = load_study(resolve_config("studies", "default"));
    x.study.training.seq = 2048;
    x.profile = load_profile(x.study.cluster.profile);
    return x;
  }();
  return f;
}

// A folder of this test process's own under the temp folder, removed when the process exits.
// ctest runs every test case as its own process, so the pid keeps parallel cases apart.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("braid-test-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    Dir(const Dir&) = delete;
    Dir& operator=(const Dir&) = delete;
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Writes `text` to `file`, creating its folders.
inline void write_file(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

}  // namespace braid::test
