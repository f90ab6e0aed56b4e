// tools/check-includes: the module order of the #include edges. On a small tree with one edge
// running back up, one sideways and one into a private header it names exactly those (exit 1);
// on braid's own tree it passes.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_run.hpp"
#include "fixtures.hpp"

namespace fs = std::filesystem;
using braid::test::run_program;
using braid::test::write_file;

namespace {

const std::string kScript = std::string(BRAID_SOURCE_DIR) + "/tools/check-includes";

}  // namespace

TEST_CASE("check-includes names each include that runs up, sideways or into a private header",
          "[tools]") {
  const fs::path root =
      fs::temp_directory_path() / ("braid_check_includes." + std::to_string(::getpid()));
  fs::remove_all(root);
  write_file(root / "include/braid/report.hpp", "#pragma once\n");
  write_file(root / "include/braid/explore.hpp", "#pragma once\n#include \"braid/report.hpp\"\n");
  write_file(root / "src/util/text_table.hpp", "#pragma once\n");
  write_file(root / "src/explore/format.hpp", "#pragma once\n");
  write_file(root / "src/explore/sweep.cpp",
             "#include \"../util/text_table.hpp\"\n#include \"braid/explore.hpp\"\n"
             "#include \"braid/report.hpp\"\n#include \"format.hpp\"\n#include <vector>\n");
  write_file(root / "src/report/metrics.cpp", "#include \"braid/report.hpp\"\n");
  const auto clean = run_program(kScript, "--root '" + root.string() + "'");
  CHECK(clean.exit_code == 0);
  CHECK(clean.out.empty());

  write_file(root / "src/report/metrics.cpp",
             "#include \"braid/report.hpp\"\n#include \"braid/explore.hpp\"\n");
  write_file(root / "src/theory/run.cpp",
             "#include \"../explore/format.hpp\"\n  #  include \"braid/explore.hpp\"\n");
  const auto bad = run_program(kScript, "--root '" + root.string() + "'");
  CHECK(bad.exit_code == 1);
  CHECK(bad.out ==
        "src/report/metrics.cpp:2 includes braid/explore.hpp, which is above it (module "
        "explore, from module report)\n"
        "src/theory/run.cpp:1 includes ../explore/format.hpp, a private header of module "
        "explore\n"
        "src/theory/run.cpp:2 includes braid/explore.hpp, which is beside it (module explore, "
        "from module theory)\n");
  fs::remove_all(root);
}

TEST_CASE("braid's own tree keeps the module order of its includes", "[tools]") {
  const auto r = run_program(kScript, "");
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
}
