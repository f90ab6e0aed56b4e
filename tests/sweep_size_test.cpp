// The size guard covers what a sweep keeps (issue 41, finding 4): the rows of a long
// --microbatches list grow with the square of its length (each row keeps a report sized by its
// microbatches), and used to climb past 7 GB before an internal error. They are now estimated
// with the configurations before the first is simulated, and refused in one line.
#include <catch2/catch.hpp>

#include <string>

#include "../src/explore/pipeline.hpp"
#include "braid/error.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

using braid::test::CliRun;
using braid::test::count_lines;
using braid::test::run_program;

TEST_CASE("a sweep whose rows would not fit is refused before any is simulated", "[sweep_size]") {
  std::string values = "1";
  for (int m = 2; m <= 10000; ++m) values += "," + std::to_string(m);
  // Under a 4 GiB memory limit: the refusal needs none of it, a sweep that ran would fail.
  const CliRun r = run_program(
      BRAID_EXE, "sweep --study default --schedules 1f1b --jobs 2 --microbatches " + values,
      BRAID_SOURCE_DIR, braid::test::memory_limit(4194304));
  CHECK(r.exit_code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.rfind("braid: sweep: size: its 10000 rows would keep about ", 0) == 0);
  CHECK(r.err.find("give fewer values (--microbatches") != std::string::npos);
}

TEST_CASE("a sweep of a thousand microbatch counts is not refused by the guard", "[sweep_size]") {
  std::string values = "1";  // 153 MB at its peak, 13 s on two cores
  for (int m = 2; m <= 1000; ++m) values += "," + std::to_string(m);
  const CliRun r = run_program(BRAID_EXE,
                               "sweep --study default --schedules 1f1b --jobs 2 --top 1 "
                               "--microbatches " +
                                   values,
                               BRAID_SOURCE_DIR, braid::test::memory_limit(4194304));
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
}

TEST_CASE("a search is refused when the candidates it is about to simulate would not fit",
          "[sweep_size]") {
  // search() counts each batch before simulating it (an exhaustive search: all candidates in one
  // batch). The 16 GiB limit at 2 bytes per op and 16 KiB per row: 8e9 ops in 10 rows keep
  // 16,000,163,840 bytes (14.90 GiB) and pass; 8.6e9 keep 17,200,163,840 (16.02 GiB).
  const std::string way_out = "narrow it";
  CHECK_NOTHROW(braid::explore::check_rows_kept("search", 8e9, 10, "10 candidates", way_out));
  const std::string message = braid::test::input_error_of(
      [&] { braid::explore::check_rows_kept("search", 8.6e9, 10, "10 candidates", way_out); });
  CHECK(message ==
        "search: size: its 10 candidates would keep about 16.02 GiB (8.6e+09 ops simulated in "
        "all), over the 16.00 GiB limit; narrow it");
}
