// Explorer: sweep rows equal the `braid simulate` chain configuration by configuration; output
// identical for any --jobs; invalid combinations carry their reasons; the cache changes nothing;
// search returns the best of an exhaustive sweep of its space; the CLI end to end (bad input:
// exit 2 and one line).
#include <catch2/catch.hpp>

#include "cli_run.hpp"

using braid::test::CliRun;
using braid::test::count_lines;
using braid::test::run_braid;
using braid::test::slurp;

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../src/explore/study_fields.hpp"
#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "fixtures.hpp"

namespace {

using namespace braid;
namespace fs = std::filesystem;

// The default study with a short sequence so that tests stay fast.
using Fixture = braid::test::StudyFixture;
const Fixture& fixture() { return braid::test::short_default_study(); }

SweepAxes small_axes() { return test::small_sweep_axes({4, 8}, {2}); }

// What `braid simulate` computes for one configuration (src/cli/simulation.cpp, simulate_schedule).
Report simulate_one(const Study& base, const Profile& profile, const Configuration& c) {
  const Study s = configure(base, c);
  ScheduleOptions o;
  o.pp = s.parallel.pp;
  o.vpp = s.parallel.vpp;
  o.microbatches = s.training.microbatches;
  const Schedule schedule = make_schedule(c.schedule, o);
  const CostModel cost = build_cost_model(s, profile, schedule.virtual_stages());
  const Dag dag = lower(schedule, cost);
  const Timeline timeline = simulate(dag);
  Report r = make_report(s.name, schedule, cost, dag, timeline);
  apply_memory_cap(r, memory_cap(profile, ExploreOptions{}));  // as simulate with a study does
  return r;
}

std::string csv_cell(const std::string& csv, int line, const std::string& column) {
  std::stringstream in(csv);
  std::string header, row;
  std::getline(in, header);
  for (int i = 0; i <= line; ++i) std::getline(in, row);
  auto cells = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string c;
    while (std::getline(ss, c, ',')) out.push_back(c);
    return out;
  };
  const auto h = cells(header), r = cells(row);
  for (std::size_t k = 0; k < h.size(); ++k)
    if (h[k] == column) return k < r.size() ? r[k] : "";
  return "<no column " + column + ">";
}

std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

TEST_CASE("a small sweep's rows are exactly what simulate computes per configuration",
          "[explore]") {
  const Fixture& f = fixture();
  const auto configs = cross_product(small_axes());
  REQUIRE(configs.size() == 6);
  ExploreOptions options;
  options.jobs = 2;
  const SweepResult result = sweep(f.study, f.profile, configs, options);
  REQUIRE(result.valid == 6);
  const std::string csv = sweep_csv(result);
  for (std::size_t line = 0; line < result.ranking.size(); ++line) {
    const Evaluation& e = result.rows[result.ranking[line]];
    const Report expected = simulate_one(f.study, f.profile, e.config);
    CHECK(report_json(e.report) == report_json(expected));
    // A row keeps the figures, not the exposed pieces simulate draws from (they grow with every
    // op of every row a sweep keeps; size_limit.hpp, kKeptBytesPerOp).
    std::size_t pieces = 0;
    for (const RankReport& r : expected.ranks) pieces += r.exposed_pieces.size();
    CHECK(pieces > 0);
    for (const RankReport& r : e.report.ranks) CHECK(r.exposed_pieces.empty());
    CHECK(csv_cell(csv, line, "schedule") == e.config.schedule);
    CHECK(csv_cell(csv, line, "tp") == std::to_string(e.config.tp));
    CHECK(csv_cell(csv, line, "tokens_per_s") == exact(expected.tokens_per_s));
    CHECK(csv_cell(csv, line, "iteration_time_s") == exact(expected.iteration_time_s));
    CHECK(csv_cell(csv, line, "mfu") == exact(expected.mfu));
    CHECK(csv_cell(csv, line, "tp_bubble_rate") == exact(expected.tp_bubble_rate));
    CHECK(csv_cell(csv, line, "pp_bubble_rate") == exact(expected.pp_bubble_rate));
    CHECK(csv_cell(csv, line, "max_peak_memory_gib") == exact(expected.max_peak_memory_gib));
  }
  // Ranked by tokens/s; the 1f1b-i rows are their own baseline.
  for (std::size_t k = 1; k < result.ranking.size(); ++k)
    CHECK(result.rows[result.ranking[k - 1]].report.tokens_per_s >=
          result.rows[result.ranking[k]].report.tokens_per_s);
  for (const Evaluation& e : result.rows)
    if (e.config.schedule == "1f1b-i") CHECK(e.speedup == 1.0);
  // One best per (tp, pp, seq) group: two groups here.
  int best = 0;
  for (const Evaluation& e : result.rows) best += e.group_best;
  CHECK(best == 2);
}

TEST_CASE("sweep output is byte-identical for --jobs 1, 2 and 3", "[explore]") {
  const Fixture& f = fixture();
  SweepAxes axes = small_axes();
  axes.tp = {2, 4, 8, 16};
  axes.microbatches = {4, 8};
  const auto configs = cross_product(axes);
  std::vector<std::string> outputs;
  for (int jobs : {1, 2, 3}) {
    ExploreOptions options;
    options.jobs = jobs;
    const SweepResult r = sweep(f.study, f.profile, configs, options);
    outputs.push_back(sweep_csv(r) + sweep_json(r) + sweep_table(r) + sweep_svg(r, "t"));
  }
  CHECK(outputs[0] == outputs[1]);
  CHECK(outputs[0] == outputs[2]);
}

TEST_CASE("the cache (shared schedules and cost models) changes no result", "[explore]") {
  const Fixture& f = fixture();
  SweepAxes axes = small_axes();
  axes.tp = {4, 8, 3};
  axes.vpp = {2, 3};
  axes.mbs = {1, 2};
  axes.recompute = {Recompute::None, Recompute::Selective};
  axes.schedules = {"1f1b-i", "zb-v", "stp", "1f1b"};
  const auto configs = cross_product(axes);
  ExploreOptions cached, plain;
  cached.jobs = plain.jobs = 2;
  plain.cache = false;
  const SweepResult a = sweep(f.study, f.profile, configs, cached);
  const SweepResult b = sweep(f.study, f.profile, configs, plain);
  CHECK(a.valid > 0);
  CHECK(a.invalid > 0);
  CHECK(sweep_json(a) == sweep_json(b));
  CHECK(sweep_csv(a) == sweep_csv(b));
  // And each row equals the configuration evaluated alone.
  for (std::size_t i = 0; i < configs.size(); i += 5) {
    const Evaluation alone = evaluate(f.study, f.profile, configs[i], cached);
    CHECK(alone.reason == a.rows[i].reason);
    CHECK(report_json(alone.report) == report_json(a.rows[i].report));
  }
}

TEST_CASE("re-timing lowered DAGs changes no byte of a sweep", "[explore]") {
  const Fixture& f = fixture();
  SweepAxes axes = small_axes();
  // tp 1 and dp 1 (tp 8 x pp 2) change the structure, seq and mbs only the costs, full
  // recomputation and sequence parallelism the structure again.
  axes.tp = {1, 4, 8};
  axes.seq = {2048, 3072};
  axes.mbs = {1, 2};
  axes.sp = {false, true};
  axes.recompute = {Recompute::None, Recompute::Full};
  axes.schedules = {"1f1b", "1f1b-i", "zb-h1", "zb-v", "stp", "dualpipe-v"};
  const auto configs = cross_product(axes);
  for (const int jobs : {1, 2}) {
    ExploreOptions retimed, lowered;
    retimed.jobs = lowered.jobs = jobs;
    retimed.retime = true;
    lowered.retime = false;
    const SweepResult a = sweep(f.study, f.profile, configs, retimed);
    const SweepResult b = sweep(f.study, f.profile, configs, lowered);
    CHECK(a.valid > 100);
    CHECK(sweep_csv(a) == sweep_csv(b));
    CHECK(sweep_json(a) == sweep_json(b));
    CHECK(sweep_table(a) == sweep_table(b));
  }
  // A shard re-times its own share the same way.
  ExploreOptions one;
  one.jobs = 2;
  one.retime = true;
  ExploreOptions plain = one;
  plain.retime = false;
  CHECK(encode_shard(sweep_shard(f.study, f.profile, configs, one, 2, 3, "t")) ==
        encode_shard(sweep_shard(f.study, f.profile, configs, plain, 2, 3, "t")));
}

TEST_CASE("invalid combinations are listed with their reasons", "[explore]") {
  const Fixture& f = fixture();
  auto reason = [&](Configuration c) {
    const SweepResult r = [&] {
      // Pair the invalid configuration with a valid one so the sweep itself succeeds.
      Configuration ok;
      ok.schedule = "1f1b";
      ok.tp = 8;
      ok.pp = 2;
      ok.vpp = 1;
      ok.seq = 2048;
      ok.microbatches = 4;
      return sweep(f.study, f.profile, {ok, c}, ExploreOptions{});
    }();
    CHECK(r.rows[1].status == RowStatus::Invalid);
    return r.rows[1].reason;
  };
  const Configuration c{
      .schedule = "stp", .tp = 8, .pp = 2, .vpp = 2, .seq = 2048, .microbatches = 8};
  Configuration tp16 = c;
  tp16.tp = 16;
  CHECK_THAT(reason(tp16), Catch::Contains("tp 16 > 8 GPUs per node"));
  Configuration tp3 = c;
  tp3.tp = 3;
  CHECK_THAT(reason(tp3), Catch::Contains("does not divide the heads (64)"));
  Configuration tp8pp4 = c;
  tp8pp4.pp = 4;
  CHECK_THAT(reason(tp8pp4), Catch::Contains("does not divide the 16 GPUs"));
  Configuration pp8 = c;
  pp8.tp = 2;
  pp8.pp = 8;
  pp8.microbatches = 16;
  CHECK_THAT(reason(pp8), Catch::Contains("11 layers, fewer than the 16 virtual stages"));
  Configuration few = c;
  few.microbatches = 3;
  CHECK(reason(few) == "microbatches 3 below the minimum 4 of stp at pp 2");
  {
    // Full recomputation is modelled (cost model, lowering), so it is a valid row, not a reason.
    const Configuration ok{
        .schedule = "1f1b", .tp = 8, .pp = 2, .vpp = 1, .seq = 2048, .microbatches = 4};
    Configuration full = c;
    full.recompute = Recompute::Full;
    const SweepResult r = sweep(f.study, f.profile, {ok, full}, ExploreOptions{});
    CHECK(r.rows[1].status != RowStatus::Invalid);
  }
  Configuration sp = c;
  sp.sp = true;
  sp.seq = 2047;
  CHECK_THAT(reason(sp), Catch::Contains("must be divisible by tp 8"));

  // The table lists them after the ranking, each with its reason.
  const SweepResult r = sweep(f.study, f.profile, cross_product([] {
                                SweepAxes a = small_axes();
                                a.tp = {8, 16};
                                a.schedules = {"stp"};
                                return a;
                              }()),
                              ExploreOptions{});
  const std::string table = sweep_table(r, 0, /*show_invalid=*/true);
  CHECK_THAT(table,
             Catch::Contains("invalid (1):\n  stp tp 16 cp 1 pp 2 vpp 2 seq 2048 mbs 1 m 8 sp off "
                             "recompute none: tp 16 > 8 GPUs per node"));
}

TEST_CASE("the table counts invalid rows by reason and --show-invalid lists each", "[explore]") {
  const Fixture& f = fixture();
  const Configuration ok{
      .schedule = "stp", .tp = 8, .pp = 2, .vpp = 2, .seq = 2048, .microbatches = 8};
  Configuration tp16 = ok, tp32 = ok, few = ok;
  tp16.tp = 16;
  tp32.tp = 32;
  few.microbatches = 3;
  const SweepResult r = sweep(f.study, f.profile, {ok, few, tp16, tp32}, ExploreOptions{});
  REQUIRE(r.invalid == 3);
  // tp 16 and tp 32 share a reason but for the tp: it prints as N, the 8 both share stays.
  // Most frequent first.
  CHECK_THAT(sweep_table(r),
             Catch::EndsWith("\ninvalid (3, by reason; --show-invalid lists them):\n"
                             "  2 x tp N > 8 GPUs per node of cluster a800x16 (TP across nodes "
                             "is off; --tp-across-nodes allows it)\n"
                             "  1 x microbatches 3 below the minimum 4 of stp at pp 2\n"));
  // Every row, in configuration order, with --show-invalid.
  CHECK_THAT(
      sweep_table(r, 0, true),
      Catch::EndsWith("\ninvalid (3):\n"
                      "  stp tp 8 cp 1 pp 2 vpp 2 seq 2048 mbs 1 m 3 sp off recompute none: "
                      "microbatches 3 below the minimum 4 of stp at pp 2\n"
                      "  stp tp 16 cp 1 pp 2 vpp 2 seq 2048 mbs 1 m 8 sp off recompute none: "
                      "tp 16 > 8 GPUs per node of cluster a800x16 (TP across nodes is off; "
                      "--tp-across-nodes allows it)\n"
                      "  stp tp 32 cp 1 pp 2 vpp 2 seq 2048 mbs 1 m 8 sp off recompute none: "
                      "tp 32 > 8 GPUs per node of cluster a800x16 (TP across nodes is off; "
                      "--tp-across-nodes allows it)\n"));
  // CSV keeps every row: a header, the valid one and the three invalid ones.
  CHECK(count_lines(sweep_csv(r)) == 1 + 4);
}

TEST_CASE(
    "memory cap: oom rows are kept and flagged, and a cap below all static memory is an error",
    "[explore]") {
  const Fixture& f = fixture();
  const auto configs = cross_product(small_axes());
  const SweepResult free_run = sweep(f.study, f.profile, configs, ExploreOptions{});
  // Default cap: the GPU less the allocator margin, so the flag agrees with simulate's.
  for (const Evaluation& e : free_run.rows) CHECK((e.status == RowStatus::Oom) == e.report.oom);
  // The cap is compared to the whole peak: static memory with the fixed overhead in it.
  double least_static = 1e30;
  for (const Evaluation& e : free_run.rows) least_static = std::min(least_static, e.static_gib);
  ExploreOptions tight;
  tight.mem_cap_bytes = (least_static + 0.001) * 1024.0 * 1024.0 * 1024.0;
  const SweepResult all_oom = sweep(f.study, f.profile, configs, tight);
  CHECK(all_oom.oom == 6);
  CHECK(all_oom.ranking.size() == 6);
  CHECK_THAT(sweep_table(all_oom), Catch::Contains("OOM"));
  ExploreOptions below;
  below.mem_cap_bytes = (least_static - 0.01) * 1024.0 * 1024.0 * 1024.0;
  CHECK_THROWS_AS(sweep(f.study, f.profile, configs, below), InputError);
  below.cache = false;
  CHECK_THROWS_AS(sweep(f.study, f.profile, configs, below), InputError);
  CHECK_THROWS_AS(sweep(f.study, f.profile, {}, ExploreOptions{}), InputError);
}

TEST_CASE(
    "sweep's and search's static-memory check counts a tied embedding pair on one rank once, as "
    "the report does",
    "[explore]") {
  // Megatron 22B (tied embeddings) at tp 8, pp 2 with stp: the V placement puts the embedding
  // and the last stage's copy of it on rank 0, which keeps one (the report's 23.67 GiB of
  // weights, gradients and optimizer state, fixed overhead aside). Counting both copies (24.33
  // GiB) put this configuration over a 24 GiB cap (26 GiB with the 2 GiB fixed overhead, as the
  // cap counts it now) without simulating it.
  Study study =
      load_study(fs::path(BRAID_SOURCE_DIR) / "configs/studies/megatron/megatron-22b-full.yaml");
  study = with_gpus(study, 16);
  const Profile profile = load_profile(study.cluster.profile);
  Configuration c;
  c.tp = 8;
  c.pp = 2;
  c.vpp = 2;
  c.seq = study.training.seq;
  c.mbs = study.training.micro_batch_size;
  c.microbatches = 8;
  c.sp = study.parallel.sequence_parallel;
  c.recompute = study.training.recompute;
  c.schedule = "stp";
  ExploreOptions options;
  options.mem_cap_bytes = 26.0 * 1024 * 1024 * 1024;
  const SweepResult r = sweep(study, profile, {c}, options);
  REQUIRE(r.rows.size() == 1);
  const Evaluation& e = r.rows[0];
  CHECK(e.status == RowStatus::Oom);  // simulated: the activations put it over the cap
  CHECK(e.static_gib - r.fixed_overhead_gib == Approx(23.67).margin(0.005));
  SearchSpace space;
  space.gpus = 16;
  space.global_batch = 8 * study.training.micro_batch_size;
  space.mbs = {study.training.micro_batch_size};
  space.schedules = {"stp"};
  space.try_levers = false;
  const SearchResult found = search(study, profile, space, options);
  int seen = 0;
  for (const Evaluation& row : found.rows)
    if (row.config.tp == 8 && row.config.pp == 2) {
      ++seen;
      CHECK(row.reason.find("static memory") == std::string::npos);
    }
  CHECK(seen == 1);
}

TEST_CASE(
    "search designs no configuration whose static memory is over the cap in every layout a "
    "design may return",
    "[explore][search]") {
  // Default study on 16 GPUs, global batch 16, cap 16 GiB: at tp 4, pp 4 every layout (V, and
  // the loop of 1f1b-i) holds 16.26 GiB of weights, gradients and optimizer state on its fullest
  // rank, 18.26 GiB with the 2 GiB fixed overhead, so no candidate of a design could fit; a design
  // would simulate its 300 candidates to find that. At tp 8, pp 2 (15.66 GiB) the design runs.
  const Fixture& f = fixture();
  SearchSpace space;
  space.gpus = 16;
  space.global_batch = 16;
  space.mbs = {1};
  space.schedules = {"designed"};
  space.try_levers = false;
  ExploreOptions options;
  options.mem_cap_bytes = 16.0 * 1024 * 1024 * 1024;
  const SearchResult r = search(f.study, f.profile, space, options);
  int static_rows = 0;
  for (const Evaluation& e : r.rows) {
    INFO(e.config.tp << " x " << e.config.pp << ": " << e.reason);
    static_rows += e.reason.find("static memory") != std::string::npos;
    if (e.config.tp == 4 && e.config.pp == 4)
      CHECK(e.reason ==
            "designed: static memory (weights, gradients, optimizer state, fixed overhead) 18.26 "
            "GiB over the 16.00 GiB cap; not designed");
    if (e.config.tp == 8 && e.config.pp == 2)
      CHECK(e.reason.find("static memory") == std::string::npos);
  }
  CHECK(static_rows == r.pruned_memory);
  CHECK(r.pruned_memory >= 8);
}

TEST_CASE("the Configuration visitor lists every member for the row codec and differences()",
          "[explore]") {
  std::size_t n = 0;
  Configuration blank;
  blank.cp_comm_type = CpCommType::A2A;  // listed only when set (a swept type)
  blank.ep = 2;                          // ep and etp: listed only for an MoE model's rows
  visit_config_fields(blank, [&n](const ConfigField&, auto&) { ++n; });
  CHECK(n == braid::test::member_count<Configuration>());
  CHECK(braid::test::member_count<Configuration>() == 13);  // the count itself works
  // Every field away from its default survives the row codec.
  Evaluation a;
  a.config = {"zb-v", 4, 8, 2, 4096, 2, 16, true, Recompute::Selective, 2};
  a.dp = 2;
  Evaluation b;
  b.config = {"1f1b", 1, 2, 1, 2048, 1, 8, false, Recompute::None};
  b.dp = 1;
  const std::vector<Evaluation> back = decode_rows(encode_rows({a, b}));
  REQUIRE(back.size() == 2);
  CHECK(back[0].config == a.config);
  CHECK(back[1].config == b.config);
  Evaluation typed = a;  // a swept context-parallel communication type
  typed.config.cp_comm_type = CpCommType::A2AP2P;
  CHECK(decode_rows(encode_rows({typed, b}))[0].config == typed.config);
  CHECK(decode_rows(encode_rows({typed, b}))[1].config == b.config);
  Evaluation expert = a;  // an MoE model's row: its expert sizes
  expert.config.ep = 4;
  expert.config.etp = 1;
  CHECK(decode_rows(encode_rows({b, expert}))[1].config == expert.config);
  CHECK(decode_rows(encode_rows({b, expert}))[0].config == b.config);
  Evaluation fewer = expert;
  fewer.config.ep = 2;
  CHECK(differences(expert, fewer) == "differs in ep 4 vs 2");
  // Every field in the visitor's order, dp beside the tp and pp it comes from.
  CHECK(differences(a, b) ==
        "differs in schedule zb-v vs 1f1b, tp 4 vs 1, cp 2 vs 1, pp 8 vs 2, dp 2 vs 1, vpp 2 vs 1, "
        "seq 4096 vs 2048, mbs 2 vs 1, m 16 vs 8, sp on vs off, recompute selective vs none");
  CHECK(differences(a, a).empty());
}

TEST_CASE("the shard fingerprint's visitors list every member of the study's structs",
          "[explore][shard]") {
  using braid::test::member_count;
  auto visited = [](const auto& value) {
    std::size_t n = 0;
    explore::visit_study_fields(value, [&n](const char*, const auto&) { ++n; });
    return n;
  };
  CHECK(visited(Study{}) == member_count<Study>());
  CHECK(visited(ModelConfig{}) == member_count<ModelConfig>());
  CHECK(visited(VisionConfig{}) == member_count<VisionConfig>());
  CHECK(visited(MoeConfig{}) == member_count<MoeConfig>());
  CHECK(visited(MlaConfig{}) == member_count<MlaConfig>());
  CHECK(visited(MoeRouting{}) == member_count<MoeRouting>());
  CHECK(visited(ClusterConfig{}) == member_count<ClusterConfig>());
  CHECK(visited(LinkConfig{}) == member_count<LinkConfig>());
  CHECK(visited(NetworkConfig{}) == member_count<NetworkConfig>());
  CHECK(visited(ParallelConfig{}) == member_count<ParallelConfig>());
  CHECK(visited(TrainingConfig{}) == member_count<TrainingConfig>());
  CHECK(visited(LayoutConfig{}) == member_count<LayoutConfig>());
  CHECK(visited(LowerOptions{}) == member_count<LowerOptions>());
  CHECK(visited(SimOptions{}) == member_count<SimOptions>());
  CHECK(visited(MemoryCap{}) == member_count<MemoryCap>());
  // The explorer's options: those that change a row and those that do not, together.
  std::size_t options = 0;
  auto count = [&options](const char*, const auto&) { ++options; };
  explore::visit_study_fields(ExploreOptions{}, count, count);
  CHECK(options == member_count<ExploreOptions>());
  CHECK(member_count<TrainingConfig>() == 24);  // the count itself works
  CHECK(member_count<ModelConfig>() == 24);     // std::optional<VisionConfig> counts as one
}

TEST_CASE("shards of studies that differ only in gradient_accumulation_fusion refuse to merge",
          "[explore][shard]") {
  const Fixture& f = fixture();
  const Study& fused = f.study;
  REQUIRE(fused.training.gradient_accumulation_fusion);  // Megatron's default
  Study unfused = fused;
  unfused.training.gradient_accumulation_fusion = false;
  SweepAxes axes = small_axes();
  axes.schedules = {"1f1b-i", "stp"};
  const std::vector<Configuration> configs = cross_product(axes);
  REQUIRE(configs.size() == 4);
  ExploreOptions o;
  o.jobs = 1;
  // The field changes every row: unfused, each W unit also reads and writes the gradients.
  const SweepResult a = sweep(fused, f.profile, configs, o);
  const SweepResult b = sweep(unfused, f.profile, configs, o);
  REQUIRE(a.valid == 4);
  for (std::size_t i = 0; i < configs.size(); ++i)
    CHECK(a.rows[i].report.iteration_time_s < b.rows[i].report.iteration_time_s);
  const SweepShard first = sweep_shard(fused, f.profile, configs, o, 1, 2, "t");
  const SweepShard foreign = sweep_shard(unfused, f.profile, configs, o, 2, 2, "t");
  CHECK_THROWS_WITH(merge_shards({first, foreign}, {"fused-1.bin", "unfused-2.bin"}),
                    "unfused-2.bin: shard: from another sweep than fused-1.bin (grid, study, "
                    "profile, cap, options or shard count differ); merge the shards of one sweep");
  // The shards of one study merge into its sweep.
  const SweepShard second = sweep_shard(fused, f.profile, configs, o, 2, 2, "t");
  CHECK(sweep_csv(merge_shards({first, second}, {"fused-1.bin", "fused-2.bin"})) == sweep_csv(a));
  // The other fields the DP sync reads, and the TP-overlap switch, change the fingerprint too.
  std::vector<Study> others(4, fused);
  others[0].training.overlap_grad_reduce = !fused.training.overlap_grad_reduce;
  others[1].training.overlap_param_gather = !fused.training.overlap_param_gather;
  others[2].training.bucket_params = fused.training.bucket_params + 1e6;
  others[3].training.tp_comm_overlap = !fused.training.tp_comm_overlap;
  for (const Study& s : others)
    CHECK(sweep_shard(s, f.profile, configs, o, 1, 2, "t").grid != first.grid);
}

TEST_CASE("the throughput bound is never below the simulated throughput", "[explore]") {
  const Fixture& f = fixture();
  SweepAxes axes = small_axes();
  axes.schedules = {"1f1b", "1f1b-i", "zb-h1", "zb-v", "stp", "stp-offload", "dualpipe-v"};
  const std::vector<Configuration> configs = cross_product(axes);
  REQUIRE(configs.size() == 14);  // tp 4 and 8, seven schedules
  for (const Configuration& c : configs) {
    const Study s = configure(f.study, c);
    ScheduleOptions o;
    o.pp = c.pp;
    o.vpp = c.vpp;
    o.microbatches = c.microbatches;
    const Schedule schedule = make_schedule(c.schedule, o);
    const CostModel cost = build_cost_model(s, f.profile, schedule.virtual_stages());
    const Report r = simulate_one(f.study, f.profile, c);
    INFO(c.schedule << " tp " << c.tp);
    CHECK(throughput_upper_bound(cost, schedule) >= r.tokens_per_s);
  }
}

TEST_CASE("search returns the best of an exhaustive sweep of its space", "[explore][search]") {
  const Fixture& f = fixture();
  SearchSpace space;
  space.gpus = 16;
  space.global_batch = 16;
  space.mbs = {1, 2};
  space.schedules = {"1f1b-i", "zb-v", "stp"};
  space.top = 3;
  ExploreOptions options;
  options.jobs = 2;
  const Study study = with_gpus(f.study, 16);
  const SweepResult all = sweep(study, f.profile, search_candidates(study, space), options);
  REQUIRE(all.ranking.size() >= 3);
  for (int limit : {0, 1000}) {  // pruned, then exhaustive
    space.exhaustive_limit = limit;
    const SearchResult r = search(f.study, f.profile, space, options);
    CHECK(r.exhaustive == (limit > 0));
    REQUIRE(r.best.size() == 3);
    for (int k = 0; k < 3; ++k) {
      const Evaluation& e = all.rows[all.ranking[k]];
      REQUIRE(e.status == RowStatus::Ok);
      CHECK(r.best[k].config == e.config);
      CHECK(report_json(r.best[k].report) == report_json(e.report));
    }
    CHECK(r.candidates == static_cast<int>(all.rows.size()));
    CHECK(!r.why_runner_up.empty());
    if (limit == 0) {
      // The bound really prunes here: 16 of 51 simulated (one batch), 35 skipped.
      CHECK(r.pruned_bound > 0);
      CHECK(r.simulated + r.pruned_bound + r.pruned_memory + r.invalid == r.candidates);
    }
  }
}

namespace {}  // namespace

TEST_CASE("braid sweep and search on the command line", "[explore][cli]") {
  const fs::path dir =
      fs::temp_directory_path() / ("braid_explore_test." + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string csv = (dir / "s.csv").string(), svg = (dir / "s.svg").string();
  const std::string common =
      "--tp 4,8,16 --pp 2 --seq 2048 --microbatches 8 --schedules 1f1b-i,stp";
  const CliRun a = run_braid("sweep " + common + " --jobs 1 --csv " + csv + " --svg " + svg, dir);
  REQUIRE(a.exit_code == 0);
  CHECK(a.err.empty());  // not a terminal: no progress bar
  CHECK_THAT(a.out, Catch::Contains("tp 16 > 8 GPUs per node"));
  const std::string csv1 = slurp(csv);
  CHECK(count_lines(csv1) == 1 + 6);
  CHECK_THAT(slurp(svg), Catch::Contains("Pareto front"));
  const CliRun b = run_braid("sweep " + common + " --jobs 2 --csv " + csv, dir);
  CHECK(b.out == a.out);
  CHECK(slurp(csv) == csv1);
  // The CSV row of each configuration is what the library's simulate chain gives.
  const Fixture& f = fixture();
  Configuration c;
  c.schedule = "stp";
  c.tp = 8;
  c.pp = 2;
  c.vpp = 2;
  c.seq = 2048;
  c.microbatches = 8;
  const Report expected = simulate_one(f.study, f.profile, c);
  CHECK_THAT(csv1, Catch::Contains(",stp,8,1,2,2,1,2048,1,8,8,off,none,16," +
                                   exact(expected.iteration_time_s) + "," +
                                   exact(expected.tokens_per_s) + ","));

  // And `braid simulate` itself prints the same report as the sweep's JSON row.
  const CliRun sim =
      run_braid("simulate --schedule stp --tp 8 --pp 2 --seq 2048 --microbatches 8 --json", dir);
  REQUIRE(sim.exit_code == 0);
  const CliRun js = run_braid("sweep " + common + " --json", dir);
  REQUIRE(js.exit_code == 0);
  const auto rows = nlohmann::json::parse(js.out)["rows"];
  int matched = 0;
  for (const auto& row : rows)
    if (row["schedule"] == "stp" && row["tp"] == 8) {
      CHECK(row["report"] == nlohmann::json::parse(sim.out));
      ++matched;
    }
  CHECK(matched == 1);

  // Bad input: one line on stderr, exit 2, no output file.
  for (const char* bad : {"--tp 2,,4", "--tp x", "--tp ''", "--jobs 0", "--sp maybe",
                          "--schedules stp,nope", "--mem-cap 1", "--tp 3 --schedules stp"}) {
    const std::string out_csv = (dir / "bad.csv").string();
    const CliRun r = run_braid(
        std::string("sweep --pp 2 --seq 2048 --microbatches 8 ") + bad + " --csv " + out_csv, dir);
    INFO(bad << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(!fs::exists(out_csv));
  }

  const CliRun s = run_braid(
      "search --gpus 16 --global-batch 16 --mbs 1,2 --schedules 1f1b-i,stp --seq 2048", dir);
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  CHECK_THAT(s.out, Catch::Contains("exhaustive"));
  CHECK_THAT(s.out, Catch::Contains("the runner-up"));
  fs::remove_all(dir);
}

TEST_CASE("a shard with a flipped byte is refused, naming its file and the row or header",
          "[explore][shard]") {
  const Fixture& f = fixture();
  SweepAxes axes = small_axes();
  axes.schedules = {"1f1b-i", "stp"};
  const std::vector<Configuration> configs = cross_product(axes);
  ExploreOptions o;
  o.jobs = 1;
  const SweepShard shard = sweep_shard(f.study, f.profile, configs, o, 1, 1, "t");
  REQUIRE(shard.rows.size() == 4);
  const std::string bytes = encode_shard(shard);
  CHECK(decode_shard(bytes, "part.bin").rows.size() == 4);
  // Row 2's iteration time, once in the file: its lowest byte flipped still decodes (a wrong
  // number, as the 0.0 that merged as 6.3e-322), so only the checksum can tell.
  const double t = shard.rows[1].report.iteration_time_s;
  const std::string pattern(reinterpret_cast<const char*>(&t), sizeof t);
  const std::size_t at = bytes.find(pattern);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes.rfind(pattern) == at);
  std::string flipped = bytes;
  flipped[at] = static_cast<char>(flipped[at] ^ 1);
  CHECK_THROWS_WITH(decode_shard(flipped, "part.bin"),
                    "part.bin: row 2 of 4 (configuration " + std::to_string(shard.indices[1] + 1) +
                        "): damaged shard file: the row does not match the checksum it was "
                        "written with; run its braid sweep --shard again");
  // A digit of the header: the number of configurations.
  std::string header = bytes;
  const std::size_t count = header.find("\"configurations\":4");
  REQUIRE(count != std::string::npos);
  header[count + std::string("\"configurations\":").size()] = '5';
  CHECK_THROWS_WITH(decode_shard(header, "part.bin"),
                    Catch::StartsWith("part.bin: shard: damaged shard file: its header (line 2)"));
}

TEST_CASE("merge refuses a shard number outside 1..N before it counts the shards",
          "[explore][shard]") {
  const Fixture& f = fixture();
  const std::vector<Configuration> configs = cross_product(small_axes());
  ExploreOptions o;
  o.jobs = 1;
  SweepShard shard = sweep_shard(f.study, f.profile, configs, o, 1, 2, "t");
  for (const int number : {3, 0, -1}) {
    shard.shard = number;
    CHECK_THROWS_WITH(merge_shards({shard}, {"part.bin"}),
                      "part.bin: shard: shard " + std::to_string(number) +
                          "/2 is out of range: expected i/N with 1 <= i <= N");
  }
}

TEST_CASE("every sweep row carries its global batch, and rows of several batches carry a note",
          "[explore][global-batch]") {
  const Fixture& f = fixture();
  SweepAxes axes = small_axes();  // tp 4, 8; pp 2; m 8 per replica; 16 GPUs
  axes.mbs = {1, 2};
  axes.schedules = {"stp"};
  const SweepResult r = sweep(f.study, f.profile, cross_product(axes), ExploreOptions{});
  REQUIRE(r.valid == 4);
  // dp x mbs x m: tp 4 gives dp 16 / (4 x 2) = 2, tp 8 gives dp 1.
  const std::map<std::pair<int, int>, int> expected{
      {{4, 1}, 2 * 1 * 8}, {{4, 2}, 2 * 2 * 8}, {{8, 1}, 1 * 1 * 8}, {{8, 2}, 1 * 2 * 8}};
  const std::string csv = sweep_csv(r);
  CHECK_THAT(csv, Catch::Contains(",mbs,microbatches,global_batch,sp,"));
  for (int line = 0; line < 4; ++line) {
    const int tp = std::stoi(csv_cell(csv, line, "tp")),
              mbs = std::stoi(csv_cell(csv, line, "mbs"));
    CHECK(csv_cell(csv, line, "global_batch") == std::to_string(expected.at({tp, mbs})));
  }
  const auto json = nlohmann::json::parse(sweep_json(r));
  for (const auto& row : json["rows"])
    CHECK(row["global_batch"] == expected.at({row["tp"].get<int>(), row["mbs"].get<int>()}));
  // Ranked together by tokens/s, they run 8 to 32 samples per step: said under the cap line.
  const std::string note =
      "rows span global batches 8..32 samples: tokens/s compares different batch sizes; "
      "--fixed-global-batch B compares at one";
  CHECK(global_batch_note(r) == note);
  CHECK_THAT(sweep_table(r), Catch::Contains("is thin\n" + note + "\n* = best"));
  CHECK(json["global_batch_note"] == note);

  // One batch size per row set: no note.
  SweepAxes one = small_axes();
  one.tp = {8};
  one.schedules = {"stp"};
  const SweepResult same = sweep(f.study, f.profile, cross_product(one), ExploreOptions{});
  CHECK(global_batch_note(same).empty());
  CHECK_THAT(sweep_table(same), !Catch::Contains("rows span"));
  CHECK(nlohmann::json::parse(sweep_json(same))["global_batch_note"].is_null());
}

TEST_CASE("at a fixed global batch each configuration's microbatches are B / (mbs x dp)",
          "[explore][global-batch]") {
  const Fixture& f = fixture();
  SweepAxes axes = small_axes();
  axes.tp = {2, 4, 8};  // dp 4, 2, 1 at pp 2 on 16 GPUs
  axes.mbs = {1, 2};
  axes.schedules = {"stp"};
  ExploreOptions options;
  options.fixed_global_batch = 36;
  const std::vector<Configuration> configs =
      at_global_batch(cross_product(axes), f.study, options.fixed_global_batch);
  // 36 / (1 x 4) = 9; 36 / (2 x 4) is not whole (0: none); 36 / 2 = 18; 36 / 4 = 9; 36; 18.
  std::vector<int> m;
  for (const Configuration& c : configs) m.push_back(c.microbatches);
  CHECK(m == std::vector<int>{9, 0, 18, 9, 36, 18});
  const SweepResult r = sweep(f.study, f.profile, configs, options);
  CHECK(r.valid == 5);
  REQUIRE(r.invalid == 1);
  CHECK(r.rows[1].status == RowStatus::Invalid);
  CHECK(r.rows[1].reason == "global batch 36 is not a multiple of mbs x dp = 8");
  for (const Evaluation& e : r.rows)
    if (e.status != RowStatus::Invalid) CHECK(e.dp * e.config.mbs * e.config.microbatches == 36);
  // Counted in the invalid summary; every ranked row runs 36 samples, so no note.
  const std::string table = sweep_table(r);
  CHECK_THAT(table, Catch::EndsWith("\ninvalid (1, by reason; --show-invalid lists them):\n"
                                    "  1 x global batch 36 is not a multiple of mbs x dp = 8\n"));
  CHECK_THAT(table, !Catch::Contains("rows span"));
  CHECK(global_batch_note(r).empty());

  // The layout's own rules come first: tp 3 breaks the heads rule whatever the batch; 0 samples
  // per microbatch (mbs x dp above B) is not a multiple either.
  Configuration tp3 = configs[0];
  tp3.tp = 3;
  const Configuration odd = at_global_batch({tp3}, f.study, 36).front();
  CHECK(odd.microbatches == 0);
  CHECK_THAT(evaluate(f.study, f.profile, odd, options).reason,
             Catch::Contains("does not divide the heads (64)"));
  ExploreOptions small = options;
  small.fixed_global_batch = 2;
  const Configuration few = at_global_batch({configs[0]}, f.study, 2).front();
  CHECK(few.microbatches == 0);
  CHECK(evaluate(f.study, f.profile, few, small).reason ==
        "global batch 2 is not a multiple of mbs x dp = 4");
}

TEST_CASE("braid sweep --fixed-global-batch on the command line, its refusals, and the note",
          "[explore][global-batch][cli]") {
  const fs::path& dir = braid::test::scratch_dir();
  const std::string html = (dir / "s.html").string();
  const std::string common = "sweep --pp 2 --seq 2048 --mbs 1,2 --schedules stp --jobs 1 ";
  // Per-replica microbatches: 8 to 32 samples per step, said in the table and the HTML data.
  const CliRun mixed = run_braid(common + "--tp 4,8 --microbatches 8 --html " + html, dir);
  REQUIRE(mixed.exit_code == 0);
  CHECK_THAT(mixed.out, Catch::Contains("\nrows span global batches 8..32 samples: tokens/s "
                                        "compares different batch sizes; --fixed-global-batch B "
                                        "compares at one\n"));
  const std::string page = slurp(html);
  CHECK_THAT(page, Catch::Contains("\"global_batch_note\":\"rows span global batches 8..32"));
  CHECK_THAT(page, Catch::Contains("\"global_batch\":32,"));
  // At one global batch: the microbatches derived, the non-dividing row invalid, no note.
  const CliRun fixed = run_braid(common + "--tp 2,4,8 --fixed-global-batch 36 --json", dir);
  REQUIRE(fixed.exit_code == 0);
  const auto j = nlohmann::json::parse(fixed.out);
  CHECK(j["global_batch_note"].is_null());
  CHECK(j["valid"] == 5);
  for (const auto& row : j["rows"]) {
    if (row["status"] == "invalid")
      CHECK(row["reason"] == "global batch 36 is not a multiple of mbs x dp = 8");
    else
      CHECK(row["global_batch"] == 36);
  }
  // Refusals: one line, exit 2, naming the option.
  for (const char* bad : {"0", "-4", "x", "1.5", "''", "9999999999"}) {
    const CliRun r = run_braid(common + "--tp 4 --fixed-global-batch " + bad, dir);
    INFO(bad << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::StartsWith("braid: --fixed-global-batch: ") &&
                          Catch::Contains("must be a positive integer"));
  }
  const CliRun both = run_braid(common + "--tp 4 --fixed-global-batch 36 --microbatches 8", dir);
  CHECK(both.exit_code == 2);
  CHECK(both.err ==
        "braid: --fixed-global-batch: 36: derives the microbatches per replica (B / (mbs x dp)) "
        "and --microbatches gives them; give one of the two\n");
  // search takes it as its --global-batch.
  const CliRun s = run_braid(
      "search --gpus 16 --fixed-global-batch 16 --mbs 1 --schedules stp --seq 2048 --json", dir);
  REQUIRE(s.exit_code == 0);
  CHECK(nlohmann::json::parse(s.out)["global_batch"] == 16);
}

TEST_CASE("a study with layout-bound switches sweeps: each configuration is checked for them",
          "[explore][cli]") {
  // TP overlap needs SP with tp > 1, deferred head gradients a pipeline: the explorer's base
  // study (tp 1, pp 1, SP off) must not be refused for them; configurations that break them are
  // invalid rows with the reason.
  const fs::path dir = braid::test::scratch_dir() / "layout-switches";
  fs::create_directories(dir);
  const fs::path study = dir / "switches.yaml";
  {
    std::ofstream out(study);
    out << "name: switches\nmodel: qwen2-12.1b\ncluster: a800x16\nparallel:\n  tp: 8\n  pp: 2\n"
           "  sequence_parallel: true\ntraining:\n  seq: 2048\n  microbatches: 8\n"
           "  tp_comm_overlap: true\n  defer_embedding_wgrad_compute: true\n";
  }
  const CliRun r = run_braid("sweep --study " + study.string() +
                             " --tp 8 --pp 1,2 --sp on --schedules 1f1b --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = nlohmann::json::parse(r.out)["rows"];
  REQUIRE(rows.size() == 2);
  for (const auto& row : rows) {
    INFO(row.dump());
    if (row["pp"] == 2) {
      CHECK(row["status"] == "ok");
    } else {
      CHECK(row["status"] == "invalid");
      CHECK_THAT(row["reason"].get<std::string>(), Catch::Contains("pp > 1"));
    }
  }
}

namespace {

// A small MoE model: 2 layers, hidden 1024, 8 heads of 128, 4 experts of width 2048, top-2,
// SwiGLU, every layer MoE (the model of moe_test), with the default study on one DGX H100 node
// (8 GPUs), seq 1024, 4 microbatches.
Fixture tiny_moe_study() {
  const fs::path file = braid::test::scratch_dir() / "explore-tiny-moe.yaml";
  braid::test::write_file(file,
                          "name: tiny-moe\nlayers: 2\nhidden: 1024\nheads: 8\nkv_heads: 8\n"
                          "head_dim: 128\nffn: 4096\nvocab: 32000\ntied_embeddings: false\n"
                          "activation: swiglu\nmoe:\n  experts: 4\n  top_k: 2\n"
                          "  expert_ffn: 2048\n");
  StudyOverrides o = braid::test::layout_overrides(file.string(), "dgx-h100", 1, 1, 1024);
  o.nodes = 1;
  o.microbatches = 4;
  Fixture f;
  f.study = load_study(resolve_config("studies", "default"), o);
  f.profile = load_profile(f.study.cluster.profile);
  return f;
}

}  // namespace

TEST_CASE("an MoE sweep over ep 1,2,4: a row per (tp, ep, pp), etp x ep x pp over the GPUs invalid",
          "[explore][moe]") {
  const Fixture f = tiny_moe_study();
  SweepAxes axes = test::small_sweep_axes({1, 2}, {1, 2});
  axes.vpp = {1};
  axes.seq = {1024};
  axes.microbatches = {4};
  axes.sp = {true};  // an MoE model with tp > 1 needs it
  axes.schedules = {"1f1b"};
  axes.ep = {1, 2, 4};  // etp left out: each row's tp
  const std::vector<Configuration> configs = cross_product(axes);
  // 2 tp x 3 ep x 2 pp x 1 schedule = 12 rows, ep right inside tp, pp inside ep.
  REQUIRE(configs.size() == 12);
  CHECK(configs[0].ep == 1);
  CHECK(configs[1].ep == 1);
  CHECK(configs[1].pp == 2);
  CHECK(configs[2].ep == 2);
  for (const Configuration& c : configs) CHECK(c.etp == c.tp);
  CHECK(configure(f.study, configs[4]).parallel.ep == 4);
  ExploreOptions options;
  options.jobs = 1;
  const SweepResult r = sweep(f.study, f.profile, configs, options);
  // On 8 GPUs etp x ep x pp must divide 8: only tp 2 (etp 2), ep 4, pp 2 gives 16. The 4
  // experts divide by 1, 2 and 4 alike.
  CHECK(r.valid == 11);
  REQUIRE(r.invalid == 1);
  const Evaluation& bad = r.rows[11];  // the last: tp 2, ep 4, pp 2
  CHECK(bad.config.tp == 2);
  CHECK(bad.config.ep == 4);
  CHECK(bad.config.pp == 2);
  CHECK(bad.status == RowStatus::Invalid);
  CHECK_THAT(bad.reason, Catch::Contains("parallel.ep: etp x ep x pp = 2 x 4 x 2 = 16 does not "
                                         "divide the 8 GPUs"));
  // The expert sizes split the experts' weights: at tp 1, pp 1 each rank's static memory falls
  // with ep (4 experts on 1, 2, 4 ranks).
  CHECK(r.rows[0].static_gib > r.rows[2].static_gib);
  CHECK(r.rows[2].static_gib > r.rows[4].static_gib);
  // The columns name them: table, CSV, JSON, and the row codec keeps them.
  CHECK_THAT(sweep_table(r), Catch::Contains("etp"));
  CHECK_THAT(sweep_csv(r), Catch::Contains(",cp,ep,etp,pp,"));
  CHECK(nlohmann::json::parse(sweep_json(r))["rows"][4]["ep"] == 4);
  CHECK(decode_rows(encode_rows(r.rows))[4].config == configs[4]);
  // ep 3 does not divide the 4 experts: invalid, naming the rule and the sizes allowed.
  axes.tp = {1};
  axes.pp = {1};
  axes.ep = {3};
  const Evaluation three = evaluate(f.study, f.profile, cross_product(axes).at(0), options);
  CHECK(three.status == RowStatus::Invalid);
  CHECK_THAT(three.reason, Catch::Contains("parallel.ep: ep 3 does not divide the 4 experts of "
                                           "model tiny-moe; allowed ep: 1, 2, 4"));
}

TEST_CASE("search on Mixtral 8x7b over 16 GPUs needs ep > 1 to fit", "[explore][moe][search]") {
  // Mixtral's experts: 32 layers x 8 x 3 x 4096 x 14336 = 45.1e9 parameters. At ep 1 (etp 1)
  // every rank holds all 8 experts of its layers, whose bf16 weights and fp32 gradients alone
  // are 6 bytes each: only pp 16 (2 layers, 2.8e9 expert parameters a rank, with Adam's 12 bytes
  // over edp = 16 / (1 x 1 x 16) = 1: 51 GB) stays under the default cap, and its peak is about
  // 61 GiB. Under a 58 GiB cap no ep-1 layout fits, and the search must pick ep > 1 (ep 8: one
  // expert a rank).
  StudyOverrides o = test::layout_overrides("mixtral-8x7b", "dgx-h100", 1, 1, 1024);
  o.nodes = 2;
  const Study study = load_study(resolve_config("studies", "default"), o);
  const Profile profile = load_profile(study.cluster.profile);
  SearchSpace space;
  space.gpus = 16;
  space.global_batch = 16;
  space.mbs = {1};
  space.sp = {true};
  space.schedules = {"1f1b"};
  space.top = 1;
  ExploreOptions options;
  options.jobs = 2;
  options.mem_cap_bytes = 58.0 * 1024 * 1024 * 1024;  // 58 GiB
  const std::vector<Configuration> candidates = search_candidates(study, space);
  // Every candidate names its expert sizes; etp 1 by default, ep dividing 16 / pp.
  for (const Configuration& c : candidates) {
    CHECK(c.etp == 1);
    CHECK(16 % (c.ep * c.pp) == 0);
  }
  const SearchResult r = search(study, profile, space, options);
  REQUIRE(!r.best.empty());
  CHECK(r.best.front().config.ep > 1);
  CHECK_THAT(search_text(r), Catch::Contains(" ep "));
  // The same search held to ep 1 finds nothing that fits.
  space.ep = {1};
  space.try_levers = false;
  const SearchResult one = search(study, profile, space, options);
  CHECK(one.best.empty());
  CHECK(one.candidates > 0);
}

TEST_CASE("a dense model ignores --ep and --etp: its sweep and search are as without them",
          "[explore][moe][cli]") {
  const std::string sweep = "sweep --tp 4,8 --pp 2 --seq 2048 --microbatches 8 --schedules 1f1b-i";
  const CliRun plain = run_braid(sweep + " --json");
  const CliRun with = run_braid(sweep + " --ep 2 --etp 2 --json");
  REQUIRE(plain.exit_code == 0);
  CHECK(with.out == plain.out);
  CHECK_THAT(plain.out, !Catch::Contains("\"ep\""));
  const std::string search =
      "search --gpus 16 --global-batch 16 --mbs 1 --schedules 1f1b-i --seq 2048";
  const CliRun s_plain = run_braid(search);
  const CliRun s_with = run_braid(search + " --ep 2,4");
  REQUIRE(s_plain.exit_code == 0);
  CHECK(s_with.out == s_plain.out);
}
