// The size guard covers what a sweep keeps (issue 41, finding 4): the rows of a long
// --microbatches list grow with the square of its length (each row keeps a report sized by its
// microbatches), and used to climb past 7 GB before an internal error. They are now estimated
// with the configurations before the first is simulated, and refused in one line.
#include <catch2/catch.hpp>

#include <string>

#include "cli_run.hpp"

using braid::test::CliRun;
using braid::test::count_lines;
using braid::test::run_program;

TEST_CASE("a sweep whose rows would not fit is refused before any is simulated", "[sweep_size]") {
  std::string values = "1";
  for (int m = 2; m <= 5000; ++m) values += "," + std::to_string(m);
  // Under a 4 GiB memory limit: the refusal needs none of it, a sweep that ran would fail.
  const CliRun r = run_program(
      BRAID_EXE, "sweep --study default --schedules 1f1b --jobs 2 --microbatches " + values,
      BRAID_SOURCE_DIR, braid::test::memory_limit(4194304));
  CHECK(r.exit_code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.rfind("braid: sweep: size: its 5000 rows would keep about ", 0) == 0);
  CHECK(r.err.find("give fewer values (--microbatches") != std::string::npos);
}

TEST_CASE("a sweep of a thousand microbatch counts is not refused by the guard", "[sweep_size]") {
  std::string values = "1";  // 673 MB at its peak, 8 s on two cores
  for (int m = 2; m <= 1000; ++m) values += "," + std::to_string(m);
  const CliRun r = run_program(BRAID_EXE,
                               "sweep --study default --schedules 1f1b --jobs 2 --top 1 "
                               "--microbatches " +
                                   values,
                               BRAID_SOURCE_DIR, braid::test::memory_limit(4194304));
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
}
