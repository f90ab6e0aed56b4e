// Command-line values (src/cli/option_values.cpp, issue 41 finding 7): no "not given" sentinel
// can be given (-1 for --mem-cap and --mem-margin), --group-size is 1 or more, NaN and values
// past the documented bounds are refused where CLI11's own checks let them through, and an empty
// output name is refused rather than skipped. Each is one line on stderr and exit code 2, before
// any work.
#include <catch2/catch.hpp>

#include <string>

#include "cli_run.hpp"

using braid::test::CliRun;
using braid::test::count_lines;
using braid::test::run_braid;

namespace {

// `args` is refused with exit 2 and exactly `line` on stderr.
void check_refused(const std::string& args, const std::string& line) {
  INFO("braid " << args);
  const CliRun r = run_braid(args);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "braid: " + line + "\n");
  CHECK(count_lines(r.err) == 1);
}

const std::string kSimulate = "simulate --study default --schedule 1f1b ";

}  // namespace

TEST_CASE("the memory cap's 'not given' sentinel -1 is refused like -2", "[option_values]") {
  check_refused(kSimulate + "--mem-cap -1",
                "--mem-cap: -1; allowed: GiB above 0, at most 100000 (see braid simulate --help)");
  check_refused(kSimulate + "--mem-cap -2",
                "--mem-cap: -2; allowed: GiB above 0, at most 100000 (see braid simulate --help)");
  check_refused(kSimulate + "--mem-margin -1",
                "--mem-margin: -1; allowed: GiB from 0 to 100000 (see braid simulate --help)");
  check_refused("sweep --study default --mem-cap -1",
                "--mem-cap: -1; allowed: GiB above 0, at most 100000 (see braid sweep --help)");
}

TEST_CASE("NaN and values past the bounds are refused where CLI11's checks pass them",
          "[option_values]") {
  check_refused(kSimulate + "--mem-cap nan",
                "--mem-cap: nan; allowed: GiB above 0, at most 100000 (see braid simulate --help)");
  check_refused(kSimulate + "--mem-margin 1e308",
                "--mem-margin: 1e308; allowed: GiB from 0 to 100000 (see braid simulate --help)");
  check_refused(
      "sweep --study default --design-budget nan",
      "--design-budget: nan; allowed: seconds above 0, at most 1e+06 (see braid sweep --help)");
  check_refused("design --study default --budget nan",
                "--budget: nan; allowed: seconds from 0 to 1e+06 (see braid design --help)");
}

TEST_CASE("the microbatch group size (--group-size) is 1 or more", "[option_values]") {
  check_refused(kSimulate + "--group-size 0",
                "--group-size: 0; allowed: 1 or more (see braid simulate --help)");
  check_refused(kSimulate + "--group-size -3",
                "--group-size: -3; allowed: 1 or more (see braid simulate --help)");
}

TEST_CASE("an empty output file name is refused, not skipped", "[option_values]") {
  check_refused("sweep --study default --csv ''",
                "--csv: empty; give a file name (see braid sweep --help)");
  check_refused(kSimulate + "--html ''",
                "--html: empty; give a file name (see braid simulate --help)");
}
