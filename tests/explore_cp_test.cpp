// Context parallelism in the explorer: cp as an axis of sweep (dp = GPUs / (tp x cp x pp)) and
// search (the CP rule at long sequences), as a column of every rendering and a field of the shard
// rows, and as a lever of "what would make it fit".
#include <catch2/catch.hpp>

#include "cli_run.hpp"

using braid::test::CliRun;
using braid::test::run_braid;
using braid::test::slurp;

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "fixtures.hpp"

namespace {

using namespace braid;
namespace fs = std::filesystem;

using Fixture = braid::test::StudyFixture;
const Fixture& fixture() { return braid::test::short_default_study(); }

// A scratch folder for CLI outputs, removed at the end of the test.
struct Scratch {
  fs::path dir =
      fs::temp_directory_path() / ("braid_explore_cp_test." + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

}  // namespace

TEST_CASE("the cp axis: cross product order, dp = GPUs / (tp x cp x pp), invalid products",
          "[explore][cp]") {
  const Fixture& f = fixture();  // qwen2-12.1b on 2 x 8 A800, seq 2048
  SweepAxes axes = test::small_sweep_axes({4, 8}, {2});
  axes.schedules = {"1f1b-i"};
  axes.cp = {1, 2};
  const std::vector<Configuration> configs = cross_product(axes);
  // tp {4, 8} x cp {1, 2} x pp {2}, one schedule: 4 rows, cp right inside tp.
  REQUIRE(configs.size() == 4);
  CHECK(configs[0].tp == 4);
  CHECK(configs[0].cp == 1);
  CHECK(configs[1].tp == 4);
  CHECK(configs[1].cp == 2);
  CHECK(configs[2].tp == 8);
  CHECK(configs[2].cp == 1);
  // No cp list: cp 1, the grid of before.
  SweepAxes plain = axes;
  plain.cp.clear();
  for (const Configuration& c : cross_product(plain)) CHECK(c.cp == 1);
  CHECK(cross_product(plain).size() == 2);

  ExploreOptions options;
  options.jobs = 1;
  const SweepResult r = sweep(f.study, f.profile, configs, options);
  // 16 GPUs: tp 4 cp 1 pp 2 -> dp 2; tp 4 cp 2 pp 2 -> dp 1; tp 8 cp 1 pp 2 -> dp 1;
  // tp 8 cp 2 pp 2 = 32 does not divide 16.
  CHECK(r.rows[0].dp == 2);
  CHECK(r.rows[1].dp == 1);
  CHECK(r.rows[2].dp == 1);
  CHECK(r.rows[3].status == RowStatus::Invalid);
  CHECK_THAT(r.rows[3].reason, Catch::Contains("tp x cp x pp = 8 x 2 x 2 = 32 does not divide"));
  // The study the row was simulated with has the row's cp.
  CHECK(configure(f.study, configs[1]).parallel.cp == 2);
  CHECK(configure(f.study, configs[1]).parallel.dp == 1);
  CHECK(r.rows[1].status != RowStatus::Invalid);
}

TEST_CASE("search candidates with the cp axis, counted by hand", "[explore][cp][search]") {
  const Study study = with_gpus(fixture().study, 128);  // 16 x 8 GPUs
  SearchSpace space;
  space.gpus = 128;
  space.global_batch = 128;  // every dp of 128 GPUs (a power of two) divides it
  space.mbs = {1};
  space.schedules = {"1f1b"};  // one chunk per rank: the vpp list adds nothing
  // tp = 2^a, cp = 2^b, pp = 2^c, dp = 2^d with a + b + c + d = 7. cp 1 (b = 0): the
  // solutions of a + c + d = 7, C(9, 2) = 36. cp 2 (b = 1): a + c + d = 6, C(8, 2) = 28.
  space.cp = {1};
  CHECK(search_candidates(study, space).size() == 36);
  space.cp = {1, 2};
  const std::vector<Configuration> both = search_candidates(study, space);
  CHECK(both.size() == 36 + 28);
  // cp 3 divides no power of two: no candidate of its own.
  space.cp = {1, 2, 3};
  CHECK(search_candidates(study, space).size() == 36 + 28);
  // In order: tp, then cp, then pp; the first are tp 1 cp 1 pp 1..128 (8 of them), then tp 1
  // cp 2 pp 1..64.
  CHECK(both[7].cp == 1);
  CHECK(both[7].pp == 128);
  CHECK(both[8].cp == 2);
  CHECK(both[8].pp == 1);
}

TEST_CASE("the search's CP rule: CP tried at long sequences, where the sequence splits",
          "[explore][cp][search]") {
  Study s = fixture().study;  // cp 1, a fused attention kernel, no vision encoder
  s.training.seq = 2048;
  CHECK(default_cp_values(s) == std::vector<int>{1});
  CHECK(cp_rule_text(s) == "CP not tried: seq 2048 < 32768 (--cp tries it)");
  s.training.seq = 131072;
  CHECK(default_cp_values(s) == std::vector<int>{1, 2, 4, 8});
  CHECK(cp_rule_text(s) == "CP tried: seq 131072 >= 32768");
  // 32772 = 4 x 8193: splits into 2 x 2 chunks, not into 2 x 4.
  s.training.seq = 32772;
  CHECK(default_cp_values(s) == std::vector<int>{1, 2});
  // 32770 = 2 x 16385: not even into 2 x 2 chunks.
  s.training.seq = 32770;
  CHECK(default_cp_values(s) == std::vector<int>{1});
  // The study's own cp stays whatever the rule says.
  s.training.seq = 131072;
  s.parallel.cp = 16;
  CHECK(default_cp_values(s) == std::vector<int>{1, 2, 4, 8, 16});
  s.parallel.cp = 1;
  // A model without a fused attention kernel cannot run CP (config/load.cpp).
  s.model.flash_attention = false;
  CHECK(default_cp_values(s) == std::vector<int>{1});
  CHECK(cp_rule_text(s) == "CP not tried: model qwen2-12.1b runs unfused attention");
}

TEST_CASE("sweep --cp: the cp column in the table, CSV and JSON, alike for --jobs 1 and 2",
          "[explore][cp][cli]") {
  const Scratch scratch;
  const std::string csv1 = (scratch.dir / "a.csv").string(),
                    csv2 = (scratch.dir / "b.csv").string();
  const std::string grid =
      "sweep --tp 4,8 --cp 1,2 --pp 2 --seq 2048 --microbatches 8 --schedules 1f1b-i,stp";
  const CliRun a = run_braid(grid + " --jobs 1 --show-invalid --csv " + csv1, scratch.dir);
  REQUIRE(a.exit_code == 0);
  const CliRun b = run_braid(grid + " --jobs 2 --show-invalid --csv " + csv2, scratch.dir);
  REQUIRE(b.exit_code == 0);
  CHECK(a.out == b.out);
  CHECK(slurp(csv1) == slurp(csv2));
  // 2 tp x 2 cp x 2 schedules = 8 rows; tp 8 x cp 2 x pp 2 = 32 does not divide 16 GPUs.
  CHECK_THAT(a.out, Catch::StartsWith("sweep of study default: 8 configurations, 6 valid"));
  CHECK_THAT(a.out, Catch::Contains("schedule  tp  cp  pp  vpp  dp"));
  CHECK_THAT(a.out,
             Catch::Contains("  stp tp 8 cp 2 pp 2 vpp 2 seq 2048 mbs 1 m 8 sp off recompute "
                             "none: parallel: tp x cp x pp = 8 x 2 x 2 = 32 does not "
                             "divide the 16 GPUs"));
  const std::string csv = slurp(csv1);
  CHECK_THAT(csv, Catch::StartsWith("rank,status,reason,group_best,speedup_vs_1f1b_i,schedule,tp,"
                                    "cp,pp,vpp,dp,seq,mbs,microbatches,global_batch,sp,recompute,"
                                    "gpus,"));
  // tp 4 cp 2 pp 2 on 16 GPUs: dp 1, global batch 1 x 1 x 8.
  CHECK_THAT(csv, Catch::Contains(",stp,4,2,2,2,1,2048,1,8,8,off,none,16,"));
  const CliRun js = run_braid(grid + " --json", scratch.dir);
  REQUIRE(js.exit_code == 0);
  const auto json = nlohmann::json::parse(js.out);
  int cp2 = 0;
  for (const auto& row : json["rows"])
    if (row["cp"] == 2) {
      ++cp2;
      if (row["tp"] == 4) CHECK(row["dp"] == 1);
    }
  CHECK(cp2 == 4);  // tp 4 and 8, two schedules each
}

TEST_CASE("sweep --cp 1,2 --cp-comm-type p2p,a2a: one cp-1 row and one cp-2 row per type",
          "[explore][cp][cli]") {
  // At cp 1 no context-parallel traffic exists, so the types would give identical rows: only the
  // first runs there. 2 schedules x (1 at cp 1 + 2 types at cp 2) = 6 rows.
  const Scratch scratch;
  const CliRun js = run_braid(
      "sweep --tp 4 --cp 1,2 --cp-comm-type p2p,a2a --pp 2 --seq 2048 --microbatches 8 "
      "--schedules 1f1b-i,stp --json",
      scratch.dir);
  REQUIRE(js.exit_code == 0);
  const auto json = nlohmann::json::parse(js.out);
  REQUIRE(json["rows"].size() == 6);
  for (const std::string schedule : {"1f1b-i", "stp"}) {
    INFO(schedule);
    std::vector<std::string> cp1, cp2;
    for (const auto& row : json["rows"])
      if (row["schedule"] == schedule)
        (row["cp"] == 1 ? cp1 : cp2).push_back(row["cp_comm_type"].get<std::string>());
    CHECK(cp1 == std::vector<std::string>{"p2p"});
    std::sort(cp2.begin(), cp2.end());
    CHECK(cp2 == std::vector<std::string>{"a2a", "p2p"});
  }
}

TEST_CASE("shard rows carry cp, and a shard of another format version is refused in one line",
          "[explore][cp][shard]") {
  const Fixture& f = fixture();
  SweepAxes axes = test::small_sweep_axes({4}, {2});
  axes.schedules = {"1f1b-i"};
  axes.cp = {1, 2};
  ExploreOptions o;
  o.jobs = 1;
  const SweepShard shard = sweep_shard(f.study, f.profile, cross_product(axes), o, 1, 1, "t");
  const SweepShard back = decode_shard(encode_shard(shard), "part.bin");
  REQUIRE(back.rows.size() == 2);
  CHECK(back.rows[0].config.cp == 1);
  CHECK(back.rows[1].config.cp == 2);
  CHECK(back.rows[0].dp == 2);  // 16 / (4 x 1 x 2)
  CHECK(back.rows[1].dp == 1);  // 16 / (4 x 2 x 2)
  std::string old = encode_shard(shard);
  REQUIRE(old.rfind("braid-sweep-shard 8 ", 0) == 0);
  old[std::string("braid-sweep-shard ").size()] = '4';
  CHECK_THROWS_WITH(decode_shard(old, "part.bin"),
                    "part.bin: shard: shard format 4 from another braid; this one reads format 8: "
                    "run its braid sweep --shard again with this braid");
}

TEST_CASE("a layout the search rules out by the activations it holds at once is over the cap",
          "[explore][cp][search]") {
  // The memory bound that keeps a long-sequence search fast must never rule out a layout that
  // fits: each such candidate, simulated in a sweep of the same space, is oom.
  const Fixture& f = fixture();
  SearchSpace space;
  space.gpus = 16;
  space.global_batch = 64;
  space.mbs = {1, 2};
  space.schedules = schedule_names();  // stp-offload too (the bound without one-each)
  space.exhaustive_limit = 0;          // the bound applies to a space larger than this
  space.try_levers = false;
  ExploreOptions options;
  options.jobs = 2;
  options.mem_cap_bytes = 26.0 * 1024 * 1024 * 1024;  // 24 GiB + the 2 GiB fixed overhead
  const SearchResult r = search(f.study, f.profile, space, options);
  const Study study = with_gpus(f.study, 16);
  const SweepResult all = sweep(study, f.profile, search_candidates(study, space), options);
  int ruled_out = 0;
  for (const Evaluation& e : r.rows) {
    if (e.reason.find("activations held at once") == std::string::npos) continue;
    ++ruled_out;
    for (const Evaluation& s : all.rows)
      if (s.config == e.config) {
        INFO(e.reason);
        CHECK(s.status == RowStatus::Oom);
      }
  }
  CHECK(ruled_out > 0);  // the bound is tried here
  // And the best layouts are the sweep's.
  REQUIRE(!r.best.empty());
  CHECK(r.best.front().config == all.rows[all.ranking.front()].config);
}

TEST_CASE(
    "Llama-3.1-70B on 16 DGX H100 at seq 131072: search chooses cp > 1 and names --cp "
    "when nothing fits without it",
    "[explore][cp][search][cli]") {
  // Issue 36's question, with full recomputation (without it nothing fits at this length, CP or
  // not) and one schedule and micro-batch size to keep the test short. SP off (the job defaults
  // turn it on, and with it cp 1 fits): at cp 1 no layout fits (even at tp 8 x pp 16 the
  // activations of the microbatches in flight exceed the cap); the CP lever tries cp 2, 4, 8 in
  // turn and the first that fits is 8.
  const std::string common =
      "search --model llama3.1-70b --cluster dgx-h100 --nodes 16 --global-batch 512 --seq 131072 "
      "--recompute full --sp off --schedules 1f1b-i --mbs 1 --json";
  const CliRun r = run_braid(common);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK_THAT(j["setting"].get<std::string>(),
             Catch::Contains("cp 1,2,4,8 (CP tried: seq 131072 >= 32768)"));
  REQUIRE(!j["best"].empty());
  CHECK(j["best"][0]["cp"].get<int>() > 1);

  const CliRun no_cp = run_braid(common + " --cp 1");
  INFO(no_cp.err);
  REQUIRE(no_cp.exit_code == 0);
  const auto k = nlohmann::json::parse(no_cp.out);
  CHECK(k["best"].empty());
  bool named = false;
  for (const auto& l : k["levers"])
    if (l["lever"] == "--cp 8") {
      named = true;
      CHECK(l["fits"] == true);
      CHECK(l["best"]["cp"] == 8);
    }
  CHECK(named);
}

TEST_CASE("the cp_comm_type axis: one row per type, a column only when more than one is swept",
          "[explore][cp]") {
  const Fixture& f = fixture();  // qwen2-12.1b (64 heads, 8 KV heads) on 2 x 8 A800, seq 2048
  SweepAxes axes = test::small_sweep_axes({4}, {2});
  axes.schedules = {"1f1b-i"};
  axes.cp = {2};
  axes.cp_comm_types = {CpCommType::P2P, CpCommType::A2A, CpCommType::AllGather};
  const std::vector<Configuration> configs = cross_product(axes);
  // tp 4 x cp 2 x three types x pp 2: one row per type, in the list's order.
  REQUIRE(configs.size() == 3);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    INFO(i);
    CHECK(configs[i].cp_comm_type == axes.cp_comm_types[i]);
    CHECK(configure(f.study, configs[i]).parallel.cp_comm_type == axes.cp_comm_types[i]);
  }
  ExploreOptions options;
  options.jobs = 1;
  const SweepResult r = sweep(f.study, f.profile, configs, options);
  REQUIRE(r.valid == 3);
  // Each row ran its own type: the ring hides what the exposed all-to-alls and gathers do not.
  CHECK(r.rows[0].report.iteration_time_s < r.rows[1].report.iteration_time_s);
  CHECK(r.rows[0].report.iteration_time_s < r.rows[2].report.iteration_time_s);
  CHECK_THAT(sweep_table(r), Catch::Contains("cp comm"));
  CHECK_THAT(sweep_csv(r), Catch::Contains(",cp,cp_comm_type,pp,"));
  CHECK(decode_rows(encode_rows(r.rows))[2].config.cp_comm_type == CpCommType::AllGather);
  // One type: the study's is replaced before the sweep (the CLI's part), the rows name none.
  axes.cp_comm_types = {CpCommType::A2A};
  const std::vector<Configuration> one = cross_product(axes);
  REQUIRE(one.size() == 1);
  CHECK_FALSE(one[0].cp_comm_type.has_value());
  const SweepResult plain = sweep(f.study, f.profile, one, options);
  CHECK_THAT(sweep_table(plain), !Catch::Contains("cp comm"));
  CHECK_THAT(sweep_csv(plain), !Catch::Contains("cp_comm_type"));
  CHECK_FALSE(decode_rows(encode_rows(plain.rows))[0].config.cp_comm_type.has_value());
}
