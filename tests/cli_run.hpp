// Runs the built `braid` binary (BRAID_EXE) for the CLI tests: exit code, stdout and stderr, from
// the source root so that names like `--study default` resolve as they do for a user.
#pragma once

#include <filesystem>
#include <string>

namespace braid::test {

struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& file);
CliRun run_braid(const std::string& args,
                 const std::filesystem::path& cwd = std::filesystem::path(BRAID_SOURCE_DIR));
// The same for another program (braid-profile, xmllint, a script in tools/): `exe` as one shell
// word, `args` as shell text; `prefix` runs first in the same shell (e.g. "ulimit -v N && ").
// A program killed by a signal has exit code -1.
CliRun run_program(const std::string& exe, const std::string& args,
                   const std::filesystem::path& cwd = std::filesystem::path(BRAID_SOURCE_DIR),
                   const std::string& prefix = "");
int count_lines(const std::string& text);

// The shell prefix that runs a command under `memory_kib` of memory: an address-space limit
// (ulimit -v), or in a sanitizer build, whose ASan reserves terabytes of shadow address space and
// cannot start under one, ASan's own RSS limit.
std::string memory_limit(long memory_kib);

}  // namespace braid::test
