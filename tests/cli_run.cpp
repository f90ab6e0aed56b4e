#include "cli_run.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>

#if defined(__SANITIZE_ADDRESS__)
#define BRAID_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRAID_TEST_ASAN 1
#endif
#endif
#ifndef BRAID_TEST_ASAN
#define BRAID_TEST_ASAN 0
#endif

namespace braid::test {

std::string memory_limit(long memory_kib) {
#if BRAID_TEST_ASAN
  return "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:hard_rss_limit_mb=" + std::to_string(memory_kib / 1024) +
         "\" ";
#else
  return "ulimit -v " + std::to_string(memory_kib) + " && ";
#endif
}

namespace fs = std::filesystem;

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun run_braid(const std::string& args, const fs::path& cwd) {
  return run_program(BRAID_EXE, args, cwd);
}

CliRun run_program(const std::string& exe, const std::string& args, const fs::path& cwd,
                   const std::string& prefix) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::temp_directory_path() / ("braid_cli_test." + std::to_string(::getpid()) +
                                                    "." + std::to_string(counter++));
  fs::create_directories(dir);
  const fs::path out = dir / "out.txt", err = dir / "err.txt";
  const std::string cmd = "cd '" + cwd.string() + "' && " + prefix + "'" + exe + "' " + args +
                          " >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  CliRun r;
  // The shell reports a child killed by signal N as exit code 128 + N.
  r.exit_code = WIFEXITED(status) && WEXITSTATUS(status) < 128 ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove_all(dir);
  return r;
}

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace braid::test
