// Reliability: the fuzzers' crash inputs replayed (tests/data/fuzz/), byte-identical outputs
// across runs, numeric edge cases (zero costs, zero-size collectives, TP 1, PP 1, huge and tiny
// bandwidths) giving finite results whose per-rank sum identity holds, and the size guard that
// refuses oversized simulations up front. See docs/reliability.md and docs/limits.md.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "braid/size_limit.hpp"
#include "cli_run.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kRoot = BRAID_SOURCE_DIR;

using braid::test::slurp;
using Run = braid::test::CliRun;  // exit_code -1: killed by a signal (a crash)

fs::path scratch_dir() {
  static int counter = 0;
  fs::path dir =
      fs::temp_directory_path() /
      ("braid_reliability_test." + std::to_string(::getpid()) + "." + std::to_string(counter++));
  fs::create_directories(dir);
  return dir;
}

std::string quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A command that must refuse before it allocates runs under this address-space limit: a missing
// guard then ends in bad_alloc or a kill (a failed test) instead of filling the machine.
constexpr long kGuardedMemoryKib = 3L << 20;  // 3 GiB

// Runs the built braid in the source tree with these arguments, each passed verbatim; with
// `memory_kib`, under that memory limit.
Run run_braid(const std::vector<std::string>& args, long memory_kib = 0) {
  const std::string prefix = memory_kib > 0 ? braid::test::memory_limit(memory_kib) : std::string();
  std::string line;
  for (const std::string& a : args) line += " " + quote(a);
  return braid::test::run_program(BRAID_EXE, line, BRAID_SOURCE_DIR, prefix);
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Every number in the report is finite (nlohmann writes NaN and inf as null).
void check_finite(const json& j, const std::string& path = "") {
  // oom_rank is null by design when nothing is out of memory.
  if (j.is_null() && path != ".oom_rank") FAIL("null (NaN or inf) at " << path);
  if (j.is_number()) {
    INFO(path);
    CHECK(std::isfinite(j.get<double>()));
  }
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) check_finite(it.value(), path + "." + it.key());
  if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i)
      check_finite(j[i], path + "[" + std::to_string(i) + "]");
}

// busy + tp, cp, ep and dp exposure + optimizer + pp_idle + offload_stall == iteration time on
// every rank, each term a real number of seconds.
void check_sum_identity(const json& report) {
  const double t = report["iteration_time_s"].get<double>();
  CHECK(t >= 0);
  REQUIRE(!report["ranks"].empty());
  for (const json& r : report["ranks"]) {
    double sum = 0;
    for (const char* f : {"busy_s", "tp_exposed_s", "cp_exposed_s", "ep_exposed_s", "dp_exposed_s",
                          "optimizer_s", "pp_idle_s", "offload_stall_s"}) {
      INFO(f);
      REQUIRE(r[f].is_number());
      CHECK(r[f].get<double>() >= 0);
      sum += r[f].get<double>();
    }
    CHECK(sum == Approx(t).epsilon(1e-9).margin(1e-12));
  }
}

// A simulation that exits 0 prints a finite report whose identity holds; exit 2 is a refusal
// (one line on stderr); anything else is a bug.
void check_simulation(const std::vector<std::string>& args) {
  std::vector<std::string> full = args;
  full.push_back("--json");
  const Run r = run_braid(full);
  INFO(r.err);
  REQUIRE((r.exit_code == 0 || r.exit_code == 2));
  if (r.exit_code == 2) {
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    return;
  }
  const json report = json::parse(r.out);
  check_finite(report);
  check_sum_identity(report);
}

// ---- fuzz regressions -------------------------------------------------------------------------
//
// Each input X in tests/data/fuzz/<target>/ comes with X.expected: its first line is the outcome
// ("ok", "input error", or for cli/ "exit N"), the following lines are texts the message (or, for
// "ok" and "exit 0", the output) must contain. A missing expectation or an empty folder fails.

struct Expected {
  std::string outcome;
  std::vector<std::string> contains;
};

// The inputs of one target's folder with their expectations, in name order; never empty.
std::vector<std::pair<fs::path, Expected>> regression_inputs(const std::string& target) {
  std::vector<std::pair<fs::path, Expected>> cases;
  for (const fs::path& input : files_in(kRoot / "tests/data/fuzz" / target)) {
    if (input.extension() == ".expected") continue;
    const fs::path expected_file = input.string() + ".expected";
    INFO(input.string());
    REQUIRE(fs::is_regular_file(expected_file));
    Expected e;
    std::stringstream lines(slurp(expected_file));
    std::getline(lines, e.outcome);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) e.contains.push_back(line);
    cases.emplace_back(input, e);
  }
  INFO("tests/data/fuzz/" << target);
  REQUIRE_FALSE(cases.empty());
  return cases;
}

void check_outcome(const Expected& expected, const std::string& outcome, const std::string& text) {
  INFO(text);
  CHECK(outcome == expected.outcome);
  for (const std::string& part : expected.contains) CHECK_THAT(text, Catch::Contains(part));
}

// The microbatch hint of a fuzz_csv input: '0'..'8' as digits, any other byte % 9.
int hint(char byte) {
  const auto b = static_cast<unsigned char>(byte);
  return b >= '0' && b <= '8' ? b - '0' : b % 9;
}

}  // namespace

TEST_CASE("fuzz regressions: YAML inputs load or throw the InputError they expect",
          "[reliability][fuzz]") {
  // Same entry as fuzz/fuzz_yaml.cpp: the first byte picks the loader, the rest is the file.
  const fs::path dir = scratch_dir();
  for (const auto& [input, expected] : regression_inputs("yaml")) {
    INFO(input.string());
    const std::string data = slurp(input);
    REQUIRE_FALSE(data.empty());
    const char kind = std::string("mcsp").find(data[0]) != std::string::npos
                          ? data[0]
                          : "mcsp"[static_cast<unsigned char>(data[0]) % 4];
    const fs::path file = dir / "input.yaml";
    std::ofstream(file, std::ios::binary) << data.substr(1);
    std::string outcome = "ok", message;
    try {
      switch (kind) {
        case 'm':
          braid::load_model(file);
          break;
        case 'c':
          braid::load_cluster(file);
          break;
        case 's':
          braid::load_study(file);
          break;
        default:
          braid::load_profile(file);
          break;
      }
    } catch (const braid::InputError& e) {
      outcome = "input error";
      message = e.what();
    }
    check_outcome(expected, outcome, message);
  }
  fs::remove_all(dir);
}

TEST_CASE(
    "fuzz regressions: CSV schedules import, validate, lower and simulate or throw the "
    "InputError they expect",
    "[reliability][fuzz]") {
  // Same entry as fuzz/fuzz_csv.cpp: the first byte is the microbatch hint.
  for (const auto& [input, expected] : regression_inputs("csv")) {
    INFO(input.string());
    const std::string data = slurp(input);
    REQUIRE_FALSE(data.empty());
    std::istringstream in(data.substr(1));
    std::string outcome = "ok", message;
    try {
      const braid::Schedule s = braid::read_pytorch_csv(in, input.string(), hint(data[0]));
      const braid::ValidationResult check = braid::validate(s);
      if (!check.ok()) {
        outcome = "invalid";
        message = check.error;
      } else {
        const braid::Dag dag =
            braid::lower(s, braid::uniform_cost_model({1, 2, 1, 0.5, 1}, s.virtual_stages()));
        message = "iteration " + std::to_string(braid::simulate(dag).iteration_time_s);
      }
    } catch (const braid::InputError& e) {
      outcome = "input error";
      message = e.what();
    }
    check_outcome(expected, outcome, message);
  }
}

TEST_CASE("fuzz regressions: command lines exit as expected with one line, never crash",
          "[reliability][fuzz]") {
  // fuzz/fuzz_cli.cpp parses one argument per line; here the real binary runs them, under a
  // memory limit so that a missing size guard fails the test instead of filling the machine.
  for (const auto& [input, expected] : regression_inputs("cli")) {
    INFO(input.string());
    std::vector<std::string> args;
    std::stringstream lines(slurp(input));
    for (std::string line; std::getline(lines, line);) args.push_back(line);
    REQUIRE_FALSE(args.empty());
    const Run r = run_braid(args, kGuardedMemoryKib);
    const std::string outcome = "exit " + std::to_string(r.exit_code);
    if (r.exit_code != 0) CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    check_outcome(expected, outcome, r.exit_code == 0 ? r.out : r.err);
  }
}

// ---- input files ------------------------------------------------------------------------------

namespace {

// One reader of a file braid is given: the command line with FILE where the file goes, the
// file's extension, and the cap of its kind (docs/configuration.md).
struct InputReader {
  std::vector<std::string> args;
  std::string extension;
  std::uint64_t cap_bytes;
};

std::vector<std::string> with_file(std::vector<std::string> args, const fs::path& file) {
  for (std::string& a : args) {
    if (a == "FILE") a = file.string();
    if (a == "hf:FILE") a = "hf:" + file.string();
  }
  return args;
}

// A refusal is exit 2 with one line; `timeout` turns a reader that blocks on a pipe into a
// failure instead of a hung test.
Run run_guarded(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& a : args) line += " " + quote(a);
  return braid::test::run_program(BRAID_EXE, line, BRAID_SOURCE_DIR,
                                  braid::test::memory_limit(kGuardedMemoryKib) + "timeout 20 ");
}

}  // namespace

TEST_CASE("every file braid reads is a regular file under its kind's cap", "[reliability][input]") {
  constexpr std::uint64_t MiB = 1 << 20;
  const std::vector<InputReader> readers = {
      {{"schedule", "--schedule-csv", "FILE"}, ".csv", 64 * MiB},
      {{"simulate", "--schedule-csv", "FILE", "--unit-costs", "1,2,1,0.5"}, ".csv", 64 * MiB},
      {{"schedule", "--schedule-file", "FILE"}, ".json", 256 * MiB},
      {{"merge", "FILE"}, ".bin", 1024 * MiB},
      {{"report", "FILE", "--html", "unused.html"}, ".json", 1024 * MiB},
      {{"simulate", "--study", "FILE", "--schedule", "1f1b"}, ".yaml", 16 * MiB},
      {{"simulate", "--study", "default", "--profile", "FILE", "--schedule", "1f1b"},
       ".yaml",
       16 * MiB},
      {{"simulate", "--study", "default", "--model", "hf:FILE", "--schedule", "1f1b"},
       ".json",
       16 * MiB},
      {{"simulate", "--study", "default", "--megatron-args-file", "FILE", "--schedule", "1f1b"},
       ".txt",
       1 * MiB},
  };
  const fs::path dir = scratch_dir();
  const fs::path pipe = dir / "pipe", big = dir / "big", folder = dir / "folder";
  for (const InputReader& reader : readers) {
    INFO(reader.args[0] << " " << reader.args[1]);
    fs::remove_all(dir);
    fs::create_directories(folder);
    REQUIRE(::mkfifo(pipe.c_str(), 0600) == 0);
    // Sparse: one byte over the cap costs no disk.
    std::ofstream(big.string() + reader.extension).put('x');
    fs::resize_file(big.string() + reader.extension, reader.cap_bytes + 1);

    const Run fifo = run_guarded(with_file(reader.args, pipe));
    CHECK(fifo.exit_code == 2);
    CHECK(braid::test::count_lines(fifo.err) == 1);
    CHECK_THAT(fifo.err, Catch::Contains(pipe.string() + ": not a regular file: a named pipe"));

    const Run over = run_guarded(with_file(reader.args, big.string() + reader.extension));
    CHECK(over.exit_code == 2);
    CHECK(braid::test::count_lines(over.err) == 1);
    CHECK_THAT(over.err,
               Catch::Contains(big.string() + reader.extension + ": is " +
                               std::to_string(reader.cap_bytes + 1) + " bytes, above the cap of " +
                               std::to_string(reader.cap_bytes) + " bytes"));

    const Run directory = run_guarded(with_file(reader.args, folder));
    CHECK(directory.exit_code == 2);
    CHECK(braid::test::count_lines(directory.err) == 1);
    CHECK_THAT(directory.err, Catch::Contains(folder.string()));
  }
  fs::remove_all(dir);
}

// ---- determinism ------------------------------------------------------------------------------

TEST_CASE("same inputs, byte-identical JSON, CSV, trace and SVG across runs",
          "[reliability][determinism]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"simulate", "--study", "default", "--schedule", "stp"},
        {"simulate", "--study", "qwen2-7b-h20x16", "--schedule", "zb-v"},
        {"simulate", "--unit-costs", "1,2,1,0.5,1", "--pp", "4", "--microbatches", "8",
         "--schedule", "1f1b-i"}}) {
    for (const char* format : {"--json", "--csv", ""}) {
      std::vector<std::string> a = args;
      if (*format) a.push_back(format);
      const Run first = run_braid(a), second = run_braid(a);
      REQUIRE(first.exit_code == 0);
      CHECK(first.out == second.out);
      CHECK(!first.out.empty());
    }
    const fs::path dir = scratch_dir();
    std::vector<std::string> files[2];
    for (int run = 0; run < 2; ++run) {
      const fs::path trace = dir / ("t" + std::to_string(run) + ".json");
      const fs::path svg = dir / ("s" + std::to_string(run) + ".svg");
      std::vector<std::string> a = args;
      a.insert(a.end(), {"--trace", trace.string(), "--svg", svg.string()});
      REQUIRE(run_braid(a).exit_code == 0);
      files[run] = {slurp(trace), slurp(svg)};
    }
    CHECK(files[0][0] == files[1][0]);
    CHECK(files[0][1] == files[1][1]);
    CHECK(files[0][0].size() > 100);
    fs::remove_all(dir);
  }
  // compare: all schedules in one process, the same bytes twice.
  for (const char* format : {"--json", "--csv"}) {
    const Run a = run_braid({"compare", "--study", "default", format});
    REQUIRE(a.exit_code == 0);
    CHECK(run_braid({"compare", "--study", "default", format}).out == a.out);
  }
  // sweep: one thread or two, the same bytes (rows are evaluated out of order with --jobs 2).
  for (const char* format : {"--json", ""}) {
    std::vector<std::string> one = {"sweep", "--study", "default",        "--tp", "2,4",
                                    "--pp",  "2",       "--microbatches", "8,16"};
    if (*format) one.push_back(format);
    std::vector<std::string> two = one;
    one.insert(one.end(), {"--jobs", "1"});
    two.insert(two.end(), {"--jobs", "2"});
    const Run a = run_braid(one);
    REQUIRE(a.exit_code == 0);
    CHECK(a.out.size() > 100);
    CHECK(run_braid(two).out == a.out);
  }
}

// ---- numeric edge cases -----------------------------------------------------------------------

TEST_CASE("zero-cost units and zero-size collectives give finite reports", "[reliability][edge]") {
  for (const char* costs : {"1,0,0,0", "1,0,0,0,0", "1,1,1,0", "1e-9,0,1e-9,0", "1e6,1e6,1e6,1e6"})
    for (const char* schedule : {"1f1b", "1f1b-i", "zb-v", "stp", "dualpipe-v"}) {
      INFO(costs << " " << schedule);
      check_simulation({"simulate", "--unit-costs", costs, "--pp", "4", "--microbatches", "8",
                        "--schedule", schedule});
    }
}

TEST_CASE("a collective of zero bytes costs its latency, and a group of one costs nothing",
          "[reliability][edge]") {
  const braid::Profile a800 = braid::load_profile(kRoot / "profiles/a800.yaml");
  const braid::LinkProfile& nvlink = a800.link("nvlink");
  for (auto kind : {braid::CollectiveKind::AllReduce, braid::CollectiveKind::AllGather,
                    braid::CollectiveKind::ReduceScatter}) {
    const double t0 = braid::collective_time_s(nvlink, kind, 8, 0);
    CHECK(std::isfinite(t0));
    CHECK(t0 >= 0);
    CHECK(t0 <= braid::collective_time_s(nvlink, kind, 8, 1e6));
    CHECK(braid::collective_time_s(nvlink, kind, 1, 1e9) == 0);
  }
}

TEST_CASE("TP 1 (no collectives) and PP 1 (no pipeline) give finite reports",
          "[reliability][edge]") {
  for (const char* schedule : {"gpipe", "1f1b", "1f1b-i", "zb-h1", "zb-v", "stp", "dualpipe-v"}) {
    INFO(schedule);
    check_simulation({"simulate", "--study", "default", "--tp", "1", "--schedule", schedule});
    check_simulation({"simulate", "--study", "default", "--pp", "1", "--schedule", schedule});
  }
  // TP 1 has nothing to expose.
  const Run r =
      run_braid({"simulate", "--study", "default", "--tp", "1", "--schedule", "1f1b", "--json"});
  REQUIRE(r.exit_code == 0);
  const json report = json::parse(r.out);
  CHECK(report["tp_bubble_rate"].get<double>() == 0);
  // PP 1 has no pipeline to wait for: all idle time is TP (or start-up) on the one rank.
  const Run p = run_braid({"simulate", "--study", "default", "--pp", "1", "--vpp", "1",
                           "--schedule", "1f1b", "--json"});
  REQUIRE(p.exit_code == 0);
  CHECK(json::parse(p.out)["ranks"].size() == 1);
}

TEST_CASE("huge and tiny link and host bandwidths give finite reports", "[reliability][edge]") {
  const std::string a800 = slurp(kRoot / "profiles/a800.yaml");
  const fs::path dir = scratch_dir();
  for (const char* gbps : {"1e6", "1e-6"}) {
    INFO("bandwidths " << gbps << " GB/s");
    const std::regex bandwidth(R"(((bandwidth_gbps|d2h_gbps|h2d_gbps): )[0-9.e+-]+)");
    const std::string text = std::regex_replace(a800, bandwidth, std::string("$1") + gbps);
    REQUIRE(text != a800);
    const fs::path profile = dir / (std::string("bw") + gbps + ".yaml");
    std::ofstream(profile) << text;
    for (const char* schedule : {"1f1b-i", "zb-v", "stp-offload"})
      check_simulation({"simulate", "--study", "default", "--profile", profile.string(),
                        "--schedule", schedule});
  }
  fs::remove_all(dir);
}

// ---- size guard -------------------------------------------------------------------------------

TEST_CASE("the size estimate counts the ops lowering makes, as an upper bound",
          "[reliability][limits]") {
  const braid::Schedule s = braid::make_schedule("1f1b-i", {4, 2, 8});
  const braid::CostModel cost = braid::uniform_cost_model({1, 2, 1, 0.5, 1}, s.virtual_stages());
  const braid::Dag dag = braid::lower(s, cost);
  const braid::SizeEstimate e = braid::estimate_size(
      braid::uniform_cost_model({1, 2, 1, 0.5, 1}, 1), s.virtual_stages(), s.virtual_stages(), 8);
  CHECK(e.ops >= dag.size());
  CHECK(e.ops <= 2 * dag.size());
  CHECK(e.bytes == e.ops * braid::kBytesPerOp);
}

TEST_CASE("oversized simulations are refused up front with the estimate", "[reliability][limits]") {
  const Run r = run_braid({"simulate", "--unit-costs", "1,2,1,0.5", "--pp", "64", "--microbatches",
                           "20000", "--schedule", "1f1b"});
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err,
             Catch::Contains("estimated") && Catch::Contains("GiB") && Catch::Contains("--force"));
  // --force does not lift the hard limit of int32 indices.
  const Run h = run_braid({"simulate", "--unit-costs", "1,2,1,0.5", "--pp", "1024",
                           "--microbatches", "1000000", "--schedule", "1f1b", "--force"});
  CHECK(h.exit_code == 2);
  CHECK_THAT(h.err, Catch::Contains("hard limit"));
  // A study: the model's layers count.
  const Run s = run_braid({"compare", "--study", "default", "--microbatches", "1000000"});
  CHECK(s.exit_code == 2);
  CHECK_THAT(s.err, Catch::Contains("estimated"));
}

TEST_CASE("a large uniform case simulates: p = 16, m = 1024", "[reliability][limits][scale]") {
  const Run r = run_braid({"simulate", "--unit-costs", "1,2,1,0.5", "--pp", "16", "--microbatches",
                           "1024", "--schedule", "1f1b-i", "--json"});
  REQUIRE(r.exit_code == 0);
  const json report = json::parse(r.out);
  check_finite(report);
  check_sum_identity(report);
  CHECK(report["ops"].get<int>() > 500000);
}

TEST_CASE("oversized schedules are refused before they are built", "[reliability][limits]") {
  const Run r = run_braid({"schedule", "--schedule", "1f1b-i", "--pp", "1024", "--vpp", "16",
                           "--microbatches", "100000"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("estimated") && Catch::Contains("instructions"));
}

// ---- error kinds ------------------------------------------------------------------------------

TEST_CASE("an InputError joins its non-empty parts with one ': ' and carries its kind",
          "[reliability][errors]") {
  const braid::InputError file("study.yaml", "training.seq", "must be 1 or more");
  CHECK(std::string(file.what()) == "study.yaml: training.seq: must be 1 or more");
  CHECK(file.kind == braid::InputKind::Field);
  CHECK(std::string(braid::InputError("empty.yaml", "", "is empty").what()) ==
        "empty.yaml: is empty");
  const braid::InputError option("--vpp", "3", "applies to 1f1b-i only", braid::InputKind::Value);
  CHECK(std::string(option.what()) == "--vpp: 3: applies to 1f1b-i only");
  CHECK(option.kind == braid::InputKind::Value);
  // A bug is not bad input: main tells them apart by type.
  const braid::InternalError bug("lowering failed");
  CHECK(dynamic_cast<const braid::InputError*>(static_cast<const std::exception*>(&bug)) ==
        nullptr);
}
