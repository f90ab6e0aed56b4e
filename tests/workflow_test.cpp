// The what-if workflow as a user meets it: paths inside YAML files resolve against the file's
// folder, one memory cap stated the same way by every command, search over the study options with
// its invalid candidates and, when nothing fits, the levers that would make it fit.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/explore.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

namespace {

using namespace braid;
using test::CliRun;
using test::count_lines;
using test::run_braid;
using test::slurp;
namespace fs = std::filesystem;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("braid_workflow_test." + std::to_string(::getpid()) + "." + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

using braid::test::write_file;

const fs::path kSource(BRAID_SOURCE_DIR);

// The line of `text` that starts with `prefix` (empty if none).
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end - pos);
    if (line.rfind(prefix, 0) == 0) return line;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "";
}

}  // namespace

TEST_CASE("paths inside a study, cluster and profile resolve against the file's own folder",
          "[workflow][config]") {
  const fs::path dir = scratch("paths");
  // cfg/study.yaml names its model next to it, its cluster in a subfolder, and the cluster names
  // its profile one folder up from itself.
  fs::create_directories(dir / "cfg");
  fs::copy_file(kSource / "configs/models/qwen2-7b.yaml", dir / "cfg/my-model.yaml",
                fs::copy_options::overwrite_existing);
  write_file(dir / "cfg/clusters/pair.yaml",
             "name: pair\nnodes: 1\ngpus_per_node: 8\nprofile: ../gpu.yaml\n");
  fs::copy_file(kSource / "profiles/a800.yaml", dir / "cfg/gpu.yaml");
  write_file(
      dir / "cfg/study.yaml",
      "name: travel\nmodel: my-model.yaml\ncluster: clusters/pair.yaml\nparallel:\n  tp: 4\n  "
      "pp: 2\ntraining:\n  seq: 2048\n  microbatches: 8\n");
  fs::create_directories(dir / "elsewhere");
  // From another working directory, by a relative and by an absolute path.
  const CliRun rel = run_braid("info --study ../cfg/study.yaml --json", dir / "elsewhere");
  INFO(rel.err);
  REQUIRE(rel.exit_code == 0);
  const CliRun abs =
      run_braid("info --study " + (dir / "cfg/study.yaml").string() + " --json", dir / "elsewhere");
  REQUIRE(abs.exit_code == 0);
  CHECK(abs.out == rel.out);
  const Study s = load_study(dir / "cfg/study.yaml");
  CHECK(s.model.file == (dir / "cfg/my-model.yaml").string());
  CHECK(s.cluster.profile == (dir / "cfg/clusters/../gpu.yaml").string());
  // A name that is not next to the file says where it looked.
  write_file(
      dir / "cfg/broken.yaml",
      "model: missing.yaml\ncluster: a800x16\nparallel:\n  tp: 8\n  pp: 2\ntraining:\n  seq: "
      "2048\n  microbatches: 8\n");
  const CliRun bad = run_braid("info --study ../cfg/broken.yaml", dir / "elsewhere");
  CHECK(bad.exit_code == 2);
  CHECK(count_lines(bad.err) == 1);
  CHECK_THAT(bad.err, Catch::Contains("no such file 'missing.yaml' (looked next to"));
  fs::remove_all(dir);
}

TEST_CASE("the memory cap is HBM less the allocator margin, compared to the whole peak",
          "[workflow][cap]") {
  const Profile a800 = load_profile("a800");
  const MemoryCap by_default = memory_cap(a800, ExploreOptions{});
  CHECK(by_default.hbm_bytes == 80e9);  // 80 GB
  CHECK(by_default.fixed_overhead_bytes == 2 * kGiB);
  CHECK(by_default.allocator_margin_bytes == 0.05 * 80e9);
  CHECK(by_default.cap_bytes == 80e9 - 0.05 * 80e9);  // 70.78 GiB
  CHECK(by_default.thin_bytes() == 0.05 * 80e9);      // 3.73 GiB
  CHECK(memory_cap_text(by_default) ==
        "memory cap 70.78 GiB = HBM 74.51 - allocator margin 3.73 GiB, compared to the peak "
        "(fixed overhead 2.00 GiB included); a margin under 3.73 GiB is thin");
  ExploreOptions no_margin;
  no_margin.mem_margin_bytes = 0;
  CHECK(memory_cap(a800, no_margin).cap_bytes == 80e9);
  ExploreOptions given;
  given.mem_cap_bytes = 30 * kGiB;
  CHECK(memory_cap(a800, given).cap_bytes == 30 * kGiB);
  CHECK(memory_cap(a800, given).given);

  // A rank is over the cap when its peak (the fixed overhead in it) exceeds it.
  MemoryCap cap;
  cap.fixed_overhead_bytes = 2 * kGiB;
  cap.cap_bytes = 11 * kGiB;
  cap.hbm_bytes = 30 * kGiB;  // thin under 5% of it: 1.5 GiB
  Report r;
  r.ranks.resize(2);
  r.ranks[0].rank = 0;
  r.ranks[0].peak_memory_bytes = 10 * kGiB;
  r.ranks[1].rank = 1;
  r.ranks[1].peak_memory_bytes = 12 * kGiB;
  apply_memory_cap(r, cap);
  CHECK_FALSE(r.ranks[0].oom);
  CHECK(r.ranks[1].oom);
  CHECK(r.ranks[1].over_bytes == 1 * kGiB);
  CHECK(r.oom);
  CHECK(r.oom_rank == 1);
  CHECK(r.oom_over_gib == 1.0);
  CHECK(r.cap_gib == 11.0);
  CHECK(r.margin_gib == -1.0);  // 11 - 12: the largest peak's
  CHECK_FALSE(r.thin_margin);   // over the cap is oom, not thin
}

TEST_CASE("a margin under the threshold is thin, one at or over it is not", "[workflow][cap]") {
  // Cap 10 GiB, threshold 5% of 20 GiB = 1 GiB: a peak of 9.01 GiB leaves 0.99 (thin), 8.99
  // leaves 1.01 (not), 9 leaves exactly the threshold (not: thin is strictly under), 10.5 is over
  // the cap (oom).
  MemoryCap cap;
  cap.cap_bytes = 10 * kGiB;
  cap.hbm_bytes = 20 * kGiB;
  CHECK(cap.margin_bytes(9.01 * kGiB) == Approx(0.99 * kGiB));
  CHECK(cap.thin(9.01 * kGiB));
  CHECK_FALSE(cap.thin(8.99 * kGiB));
  CHECK_FALSE(cap.thin(9 * kGiB));
  CHECK_FALSE(cap.thin(10.5 * kGiB));
  CHECK(cap.thin(10 * kGiB));  // a margin of 0 still fits
}

TEST_CASE("simulate, compare, sweep and search state the memory cap in the same words",
          "[workflow][cap][cli]") {
  const std::string sizes = " --seq 2048 --microbatches 8";
  std::vector<std::string> lines;
  for (const std::string& cmd :
       {"simulate --schedule stp" + sizes, "compare --schedules stp,1f1b-i" + sizes,
        "sweep --tp 4,8 --pp 2 --schedules stp" + sizes,
        std::string("search --gpus 16 --global-batch 16 --mbs 1 --schedules stp --seq 2048")}) {
    const CliRun r = run_braid(cmd + " --mem-margin 1.5");
    INFO(cmd << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    lines.push_back(line_starting(r.out, "memory cap "));
  }
  const std::string expected =
      "memory cap 73.01 GiB = HBM 74.51 - allocator margin 1.50 GiB, compared to the peak (fixed "
      "overhead 2.00 GiB included); a margin under 3.73 GiB is thin";
  for (const std::string& line : lines) CHECK(line == expected);
  // --mem-cap replaces the formula; with --mem-margin it is a conflict (exit 2, one line).
  const CliRun both = run_braid("simulate --schedule stp" + sizes + " --mem-cap 40 --mem-margin 1");
  CHECK(both.exit_code == 2);
  CHECK(count_lines(both.err) == 1);
  CHECK_THAT(both.err, Catch::Contains("--mem-margin"));
}

namespace {

// The cell of `column` in the first data row of a CSV text (no quoted commas in these rows).
std::string csv_cell(const std::string& csv, const std::string& column) {
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::size_t from = 0;
    for (std::size_t comma; (comma = line.find(',', from)) != std::string::npos; from = comma + 1)
      cells.push_back(line.substr(from, comma - from));
    cells.push_back(line.substr(from));
    return cells;
  };
  const std::size_t eol = csv.find('\n');
  const std::vector<std::string> head = split(csv.substr(0, eol));
  const std::vector<std::string> row =
      split(csv.substr(eol + 1, csv.find('\n', eol + 1) - eol - 1));
  for (std::size_t k = 0; k < head.size() && k < row.size(); ++k)
    if (head[k] == column) return row[k];
  return "(no column " + column + ")";
}

// The number after the first `key` in `text` ("\"cap_gib\":" in an HTML report's data).
double number_after(const std::string& text, const std::string& key) {
  const std::size_t at = text.find(key);
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + key.size()));
}

// One configuration (default study, stp, tp 8, pp 2, seq 2048, m 8): its peak is 19.74 GiB.
const std::string kOneLayout = " --tp 8 --pp 2 --seq 2048 --microbatches 8";

}  // namespace

TEST_CASE(
    "one cap, the peak's, in simulate's text, JSON and HTML and sweep's table, CSV, JSON, "
    "SVG and HTML",
    "[workflow][cap][cli]") {
  // --mem-margin 1.5: cap = 80e9 B - 1.5 GiB = 74.506 - 1.5 = 73.006 GiB, printed 73.01; the
  // peak 19.74 GiB (the 2 GiB fixed overhead in it) leaves 73.006 - 19.739 = 53.27 GiB.
  const fs::path dir = scratch("one-cap");
  const double cap = 80e9 / kGiB - 1.5;
  const CliRun sim = run_braid("simulate --schedule stp --mem-margin 1.5" + kOneLayout +
                               " --html " + (dir / "s.html").string());
  REQUIRE(sim.exit_code == 0);
  CHECK_THAT(line_starting(sim.out, "memory cap "), Catch::StartsWith("memory cap 73.01 GiB = "));
  CHECK(line_starting(sim.out, "peak memory") ==
        "peak memory      19.74 GiB, cap 73.01 GiB, margin 53.27 GiB");
  CHECK(number_after(slurp(dir / "s.html"), "\"cap_gib\":") == Approx(cap).epsilon(1e-12));
  const auto report = nlohmann::json::parse(
      run_braid("simulate --schedule stp --json --mem-margin 1.5" + kOneLayout).out);
  CHECK(report["cap_gib"].get<double>() == Approx(cap).epsilon(1e-12));
  CHECK(report["margin_gib"].get<double>() ==
        Approx(cap - report["max_peak_memory_gib"].get<double>()).epsilon(1e-12));

  const std::string sweep = "sweep --schedules stp --mem-margin 1.5" + kOneLayout;
  const CliRun table = run_braid(sweep + " --csv " + (dir / "w.csv").string() + " --svg " +
                                 (dir / "w.svg").string() + " --html " + (dir / "w.html").string());
  REQUIRE(table.exit_code == 0);
  CHECK(line_starting(table.out, "memory cap ") == line_starting(sim.out, "memory cap "));
  CHECK_THAT(table.out, Catch::Contains(" 19.74       53.27 "));  // peak GiB, margin GiB
  const std::string csv = slurp(dir / "w.csv");
  CHECK(std::stod(csv_cell(csv, "cap_gib")) == Approx(cap).epsilon(1e-12));
  CHECK(std::stod(csv_cell(csv, "margin_gib")) == report["margin_gib"].get<double>());
  CHECK(csv_cell(csv, "thin_margin") == "0");
  const auto json = nlohmann::json::parse(run_braid(sweep + " --json").out);
  CHECK(json["cap_gib"].get<double>() == Approx(cap).epsilon(1e-12));
  CHECK(json["rows"][0]["margin_gib"] == report["margin_gib"]);
  CHECK_THAT(slurp(dir / "w.svg"), Catch::Contains(">memory cap 73.01 GiB<"));
  CHECK(number_after(slurp(dir / "w.html"), "\"cap_gib\":") == Approx(cap).epsilon(1e-12));
  fs::remove_all(dir);
}

TEST_CASE("a margin just under the threshold is flagged thin in every output, just over it not",
          "[workflow][cap][cli]") {
  // Threshold 5% of 80 GB = 3.73 GiB (3.7253). Peak 19.74 GiB (19.7395): --mem-cap 23.46 leaves
  // 3.7205 GiB (thin), --mem-cap 23.47 leaves 3.7305 GiB (not thin).
  const fs::path dir = scratch("thin");
  for (const bool thin : {true, false}) {
    const std::string cap = thin ? " --mem-cap 23.46" : " --mem-cap 23.47";
    INFO(cap);
    const CliRun sim = run_braid("simulate --schedule stp" + kOneLayout + cap);
    REQUIRE(sim.exit_code == 0);
    CHECK(line_starting(sim.out, "peak memory") ==
          (thin
               ? "peak memory      19.74 GiB, cap 23.46 GiB, margin 3.72 GiB (thin: under 3.73 GiB)"
               : "peak memory      19.74 GiB, cap 23.47 GiB, margin 3.73 GiB"));
    const std::string sweep = "sweep --schedules stp" + kOneLayout + cap;
    const CliRun table =
        run_braid(sweep + " --csv " + (dir / "w.csv").string() + " --svg " +
                  (dir / "w.svg").string() + " --html " + (dir / "w.html").string());
    REQUIRE(table.exit_code == 0);
    CHECK_THAT(table.out, Catch::Contains(thin ? " 3.72 thin " : " 3.73 "));
    CHECK((table.out.find(" thin ") != std::string::npos) == thin);
    CHECK(csv_cell(slurp(dir / "w.csv"), "thin_margin") == (thin ? "1" : "0"));
    const auto json = nlohmann::json::parse(run_braid(sweep + " --json").out);
    CHECK(json["rows"][0]["thin_margin"] == thin);
    CHECK(json["rows"][0]["report"]["thin_margin"] == thin);
    CHECK((slurp(dir / "w.svg").find("class=\"thin\"") != std::string::npos) == thin);
    CHECK((slurp(dir / "w.html").find("\"thin\":true") != std::string::npos) == thin);
  }
  // Over the cap is oom, not thin.
  const CliRun over = run_braid("simulate --schedule stp" + kOneLayout + " --mem-cap 19");
  CHECK_THAT(line_starting(over.out, "peak memory"), Catch::Contains("OUT OF MEMORY"));
  CHECK_THAT(line_starting(over.out, "peak memory"), !Catch::Contains("thin"));
  fs::remove_all(dir);
}

TEST_CASE("a rank over the cap is oom in simulate exactly when the sweep row is oom",
          "[workflow][cap][cli]") {
  // 22 GiB lies between the static memory and the peak of stp at seq 4096 on 16 A800s (both with
  // the 2 GiB fixed overhead).
  const std::string sizes = " --tp 8 --pp 2 --seq 4096 --microbatches 16 --mem-cap 22";
  const CliRun sim = run_braid("simulate --schedule stp --json" + sizes);
  REQUIRE(sim.exit_code == 0);
  const auto report = nlohmann::json::parse(sim.out);
  const CliRun sw = run_braid("sweep --schedules stp --json" + sizes);
  REQUIRE(sw.exit_code == 0);
  const auto row = nlohmann::json::parse(sw.out)["rows"][0];
  CHECK(row["status"] == "oom");
  CHECK(report["oom"] == true);
  CHECK(row["report"] == report);
}

TEST_CASE("search tries every sp and recompute value it is given", "[workflow][search]") {
  Study study = load_study(resolve_config("studies", "default"));
  study.training.seq = 2048;
  SearchSpace space;
  space.gpus = 16;
  space.global_batch = 16;
  space.mbs = {1};
  space.schedules = {"stp"};
  const std::size_t plain = search_candidates(with_gpus(study, 16), space).size();
  space.sp = {false, true};
  space.recompute = {Recompute::None, Recompute::Selective, Recompute::Full};
  const std::vector<Configuration> all = search_candidates(with_gpus(study, 16), space);
  CHECK(all.size() == 6 * plain);
  int sp_full = 0;
  for (const Configuration& c : all) sp_full += c.sp && c.recompute == Recompute::Full;
  CHECK(sp_full == static_cast<int>(plain));
}

TEST_CASE("the runner-up explanation names every field that differs", "[workflow][search]") {
  Evaluation a, b;
  a.config.schedule = b.config.schedule = "stp";
  a.config.tp = 4;
  b.config.tp = 8;
  a.config.mbs = 2;
  b.config.mbs = 1;
  a.config.microbatches = b.config.microbatches = 8;
  a.dp = 4;
  b.dp = 2;
  CHECK(differences(a, b) == "differs in tp 4 vs 8, dp 4 vs 2, mbs 2 vs 1");
  b = a;
  CHECK(differences(a, b).empty());
  b.config.recompute = Recompute::Full;
  b.config.sp = true;
  CHECK(differences(a, b) == "differs in sp off vs on, recompute none vs full");
}

TEST_CASE("when nothing fits, search says which lever would make it fit and at what cost",
          "[workflow][search][cli]") {
  // 8 A800s, seq 4096, a 30 GiB cap: the fastest layouts peak at about 34 GiB.
  const std::string common =
      "search --gpus 8 --global-batch 8 --mbs 1 --schedules 1f1b-i,stp --seq 4096 --mem-cap 30";
  const CliRun r = run_braid(common + " --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["best"].empty());
  std::map<std::string, nlohmann::json> levers;
  for (const auto& l : j["levers"]) levers[l["lever"]] = l;
  REQUIRE(levers.count("--sp on"));
  REQUIRE(levers.count("--recompute full"));
  REQUIRE(levers.count("--offload 1"));
  for (const auto& [name, l] : levers) {
    INFO(name);
    if (!l["fits"]) {
      CHECK(!l["detail"].get<std::string>().empty());
      continue;
    }
    CHECK(l["best"]["report"]["max_peak_memory_gib"].get<double>() <= 30.0);
    CHECK(l["best"]["margin_gib"].get<double>() >= 0);
  }
  CHECK(levers["--sp on"]["fits"] == true);
  CHECK(levers["--sp on"]["best"]["sp"] == true);
  CHECK(levers["--recompute full"]["fits"] == true);
  CHECK(levers["--recompute full"]["best"]["recompute"] == "full");
  // The lever's answer is what a search with that option finds.
  const CliRun with_sp = run_braid(common + " --sp on --json");
  REQUIRE(with_sp.exit_code == 0);
  const auto direct = nlohmann::json::parse(with_sp.out)["best"][0];
  CHECK(direct == levers["--sp on"]["best"]);
  // The text says it in words, with the cost against the fastest layout over the cap.
  const CliRun text = run_braid(common);
  CHECK_THAT(text.out, Catch::Contains("no layout fits in the memory cap"));
  CHECK_THAT(text.out, Catch::Contains("--sp on: fits: "));
  CHECK_THAT(text.out, Catch::Contains("step time against the fastest layout over the cap"));
}

TEST_CASE("search rows show step time, global batch, dp, peak and margin, and list the invalid",
          "[workflow][search][cli]") {
  const fs::path dir = scratch("search");
  const std::string csv = (dir / "s.csv").string();
  const CliRun r = run_braid(
      "search --gpus 16 --global-batch 16 --mbs 1,2 --schedules 1f1b-i,stp --seq 2048 --csv " +
      csv);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string header = line_starting(r.out, "#  schedule");
  for (const char* column : {"dp", "global batch", "step s", "peak GiB", "margin GiB"})
    CHECK_THAT(header, Catch::Contains(column));
  // Counted by reason (pp 1, 2, 4 and 8 fall short of stp's 2p), each listed with --show-invalid.
  CHECK_THAT(r.out, Catch::Contains("invalid or ruled out (27, by reason; --show-invalid lists "
                                    "them):\n  12 x parallel.pp: model qwen2-12.1b has 11 layers"));
  CHECK_THAT(r.out,
             Catch::Contains("\n   8 x microbatches N below the minimum N of stp at pp N\n"));
  const CliRun each = run_braid(
      "search --gpus 16 --global-batch 16 --mbs 1,2 --schedules 1f1b-i,stp --seq 2048 "
      "--show-invalid");
  CHECK_THAT(each.out, Catch::Contains("invalid or ruled out (27):\n"));
  CHECK_THAT(each.out, Catch::Contains(" m 2 sp off recompute none: microbatches 2 below the "
                                       "minimum 4 of stp at pp 2\n"));
  const std::string rows = slurp(csv);
  CHECK(rows.rfind("rank,status,reason,", 0) == 0);
  CHECK_THAT(rows, Catch::Contains(",invalid,microbatches 2 below the minimum 4 of stp at pp 2,"));
  CHECK_THAT(rows, Catch::Contains("\n1,ok,,"));
  // Every ok row's global batch is the one asked for.
  const CliRun js = run_braid(
      "search --gpus 16 --global-batch 16 --mbs 1,2 --schedules 1f1b-i,stp --seq 2048 --json");
  REQUIRE(js.exit_code == 0);
  const auto j = nlohmann::json::parse(js.out);
  REQUIRE(!j["best"].empty());
  for (const auto& b : j["best"]) CHECK(b["global_batch"] == 16);
  CHECK(!j["invalid_rows"].empty());
  // The study's own tp x pp (8 x 2) need not fit the GPUs searched: search chooses them.
  const CliRun one_node =
      run_braid("search --gpus 8 --nodes 1 --global-batch 8 --mbs 1 --schedules stp --seq 2048");
  INFO(one_node.err);
  CHECK(one_node.exit_code == 0);
  fs::remove_all(dir);
}

TEST_CASE("sweep shards joined by braid merge are byte-identical to the unsharded sweep",
          "[workflow][shard][cli]") {
  const fs::path dir = scratch("shard");
  const std::string grid =
      "sweep --tp 2,4,8,16 --pp 1,2 --seq 2048 --microbatches 8 --schedules 1f1b-i,stp,zb-v";
  const CliRun full = run_braid(grid + " --csv full.csv --svg full.svg --html full.html", dir);
  REQUIRE(full.exit_code == 0);
  const CliRun full_json = run_braid(grid + " --json", dir);
  REQUIRE(full_json.exit_code == 0);
  int rows = 0;
  for (int i = 1; i <= 3; ++i) {
    const std::string file = "part" + std::to_string(i) + ".bin";
    const CliRun part =
        run_braid(grid + " --shard " + std::to_string(i) + "/3 --shard-out " + file, dir);
    INFO(part.err);
    REQUIRE(part.exit_code == 0);
    const SweepShard s = decode_shard(slurp(dir / file), file);
    CHECK(s.shard == i);
    CHECK(s.shards == 3);
    rows += static_cast<int>(s.rows.size());
    CHECK(!s.rows.empty());  // the split by cost gives every shard some work
  }
  CHECK(rows == 24);  // every configuration in exactly one shard (merge checks the indices)
  // Any order of the files gives the same bytes as the unsharded sweep.
  const CliRun merged =
      run_braid("merge part3.bin part1.bin part2.bin --csv m.csv --svg m.svg --html m.html", dir);
  INFO(merged.err);
  REQUIRE(merged.exit_code == 0);
  CHECK(merged.out == full.out);
  CHECK(slurp(dir / "m.csv") == slurp(dir / "full.csv"));
  CHECK(slurp(dir / "m.svg") == slurp(dir / "full.svg"));
  CHECK(slurp(dir / "m.html") == slurp(dir / "full.html"));
  const CliRun merged_json = run_braid("merge part1.bin part2.bin part3.bin --json", dir);
  CHECK(merged_json.out == full_json.out);
  // The same shard twice, a missing one, a shard of another grid, a file that is no shard.
  const CliRun other = run_braid(
      "sweep --tp 2,4 --pp 1,2 --seq 2048 --microbatches 8 --schedules stp --shard 1/3 "
      "--shard-out other.bin",
      dir);
  REQUIRE(other.exit_code == 0);
  std::ofstream(dir / "junk.bin") << "not a shard";
  for (const char* bad : {"part1.bin part1.bin part2.bin part3.bin", "part1.bin part2.bin",
                          "other.bin part2.bin part3.bin", "junk.bin",
                          "part1.bin part2.bin part3.bin --csv /nope/x.csv"}) {
    const CliRun r = run_braid(std::string("merge ") + bad, dir);
    INFO(bad << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
  for (const char* bad : {"--shard 0/3 --shard-out x.bin", "--shard 4/3 --shard-out x.bin",
                          "--shard 1/3", "--shard 1/3 --shard-out x.bin --csv y.csv",
                          "--shard-out x.bin", "--shard a/b --shard-out x.bin"}) {
    const CliRun r = run_braid(grid + " " + bad, dir);
    INFO(bad << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(!fs::exists(dir / "x.bin"));
  }
  fs::remove_all(dir);
}

TEST_CASE("a schedule CSV gives its pp and m to the study and names the option that disagrees",
          "[workflow][schedule-csv][cli]") {
  const fs::path dir = scratch("csv");
  REQUIRE(run_braid("export --format pytorch-csv --schedule zb-v --pp 2 --microbatches 12 "
                    "--output zbv.csv",
                    dir)
              .exit_code == 0);
  // The default study has 64 microbatches; the file has 12 and is enough on its own.
  const CliRun own = run_braid("simulate --study default --schedule-csv zbv.csv --json", dir);
  INFO(own.err);
  REQUIRE(own.exit_code == 0);
  const CliRun named =
      run_braid("simulate --study default --schedule zb-v --microbatches 12 --json", dir);
  REQUIRE(named.exit_code == 0);
  const auto a = nlohmann::json::parse(own.out), b = nlohmann::json::parse(named.out);
  CHECK(a["microbatches"] == 12);
  CHECK(a["iteration_time_s"] == b["iteration_time_s"]);
  // An option that disagrees with the file is named, with the value to give.
  const CliRun pp = run_braid("simulate --study default --schedule-csv zbv.csv --pp 4", dir);
  CHECK(pp.exit_code == 2);
  CHECK(count_lines(pp.err) == 1);
  CHECK_THAT(pp.err, Catch::Contains("--pp: 4: conflicts with --schedule-csv zbv.csv, which has "
                                     "2 ranks (rows); drop --pp or give --pp 2"));
  const CliRun m =
      run_braid("simulate --study default --schedule-csv zbv.csv --microbatches 8", dir);
  CHECK(m.exit_code == 2);
  CHECK_THAT(m.err, Catch::Contains("give --microbatches 12"));

  // compare: the user's schedule in the same table as the named ones, at the file's m.
  const CliRun cmp =
      run_braid("compare --study default --schedules stp,zb-v --schedule-csv zbv.csv --json", dir);
  INFO(cmp.err);
  REQUIRE(cmp.exit_code == 0);
  const auto reports = nlohmann::json::parse(cmp.out)["reports"];
  REQUIRE(reports.size() == 3);
  CHECK(reports[2]["schedule"] == "zbv.csv");
  for (const auto& r : reports) CHECK(r["microbatches"] == 12);
  CHECK(reports[2]["iteration_time_s"] == reports[1]["iteration_time_s"]);  // zb-v replayed
  REQUIRE(run_braid("export --format pytorch-csv --schedule stp --pp 2 --microbatches 8 "
                    "--output stp8.csv",
                    dir)
              .exit_code == 0);
  const CliRun clash =
      run_braid("compare --study default --schedule-csv zbv.csv --schedule-csv stp8.csv", dir);
  CHECK(clash.exit_code == 2);
  CHECK_THAT(clash.err, Catch::Contains("stp8.csv"));

  // theory: the file beside the named schedules, uniform costs, no closed form.
  const CliRun th = run_braid(
      "theory --schedules zb-v --pp 2 --microbatches 12 --unit-costs 1,1,1,0.25 "
      "--schedule-csv zbv.csv --json",
      dir);
  INFO(th.err);
  REQUIRE(th.exit_code == 0);
  const auto rows = nlohmann::json::parse(th.out)["rows"];
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["schedule"] == "zbv.csv");
  CHECK(rows[0]["tp_bubble"]["formula"].is_null());
  CHECK(rows[0]["tp_bubble"]["simulated_s"] == rows[1]["tp_bubble"]["simulated_s"]);
  fs::remove_all(dir);
}

TEST_CASE("every command's help has examples and points to its doc", "[workflow][cli]") {
  for (const char* cmd : {"info", "schedule", "export", "simulate", "compare", "theory", "sweep",
                          "merge", "search", "calibrate", "design", "report"}) {
    const CliRun r = run_braid(std::string(cmd) + " --help");
    INFO(cmd);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("Examples:\n  braid " + std::string(cmd)));
    CHECK_THAT(r.out, Catch::Contains("docs/"));
  }
}

TEST_CASE("search reports its progress once per simulated candidate", "[workflow][search]") {
  Study study = load_study(resolve_config("studies", "default"));
  study.training.seq = 2048;
  const Profile profile = load_profile(study.cluster.profile);
  SearchSpace space;
  space.gpus = 16;
  space.global_batch = 16;
  space.mbs = {1};
  space.schedules = {"stp", "1f1b-i"};
  int calls = 0, last_total = 0;
  bool in_order = true;
  ExploreOptions options;
  options.jobs = 2;
  options.progress = [&](int done, int total) {
    in_order = in_order && done == calls + 1;
    ++calls;
    last_total = total;
  };
  const SearchResult r = search(study, profile, space, options);
  CHECK(in_order);
  CHECK(calls == last_total);  // exhaustive: every candidate left after the memory check
  REQUIRE(r.exhaustive);
  CHECK(r.simulated > 0);
  CHECK(calls == r.simulated);  // no candidate here fails after its schedule and costs are built
}
