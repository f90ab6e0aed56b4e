// Published collective rows (links.<name>.published): how the cost model reads a table of
// nccl-tests points between, below and above its rows and for a group size it does not list; that
// a profile with rows loads and `braid info` names each row's source; that bad rows are one line
// and exit code 2; and how the inter-node DP sync combines the rows with the NIC sharing model.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/profile.hpp"
#include "cli_run.hpp"

using namespace braid;
using braid::test::count_lines;
using braid::test::run_braid;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = BRAID_SOURCE_DIR;

fs::path scratch(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("braid-published-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path file = dir / name;
  std::ofstream(file) << text;
  return file;
}

std::string shipped_a100() {
  std::ifstream in(kRoot / "profiles/a100.yaml");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `text` with the first `from` replaced by `to` (which must be there).
std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// A link with two published all-reduce rows for 8 ranks: 1 MB in 20 us, 3 MB in 40 us.
LinkProfile small_table() {
  LinkProfile link;
  link.latency_s = 5e-6;
  link.bus_bandwidth_Bps = 1;  // would dominate if the rows were ignored
  link.measured = std::make_shared<const CollectiveRows>(
      CollectiveRows{{CollectiveKind::AllReduce, {{8, 1e6, 20e-6}, {8, 3e6, 40e-6}}}});
  link.published = true;
  return link;
}

// A cluster file of two A100 nodes with `nics` NICs of `gbps` each.
fs::path a100_cluster(const std::string& name, int nics, double gbps) {
  return scratch(name + ".yaml", "name: " + name +
                                     "\nnodes: 2\ngpus_per_node: 8\nprofile: a100\n"
                                     "network:\n  nics_per_node: " +
                                     std::to_string(nics) + "\n  nic_gbps: " +
                                     std::to_string(gbps) + "\n  nic_efficiency: 0.9\n");
}

}  // namespace

TEST_CASE(
    "published rows are interpolated log-log between rows and keep the last row's busbw above",
    "[cost][collective][published]") {
  const LinkProfile link = small_table();
  const auto ar = CollectiveKind::AllReduce;
  // Exactly at a row: its time.
  CHECK(collective_time_s(link, ar, 8, 1e6) == Approx(20e-6));
  // Between the rows: log-linear, 20 us x 2^(ln 2 / ln 3) at 2 MB.
  CHECK(collective_time_s(link, ar, 8, 2e6) ==
        Approx(20e-6 * std::pow(2.0, std::log(2.0) / std::log(3.0))));
  // Above the last row: the last row's bus bandwidth, time in proportion to bytes.
  CHECK(collective_time_s(link, ar, 8, 6e6) == Approx(80e-6));
  // Below the first row: the first row's bus bandwidth (0.5 MB in 10 us) down to the latency.
  CHECK(collective_time_s(link, ar, 8, 0.5e6) == Approx(10e-6));
  CHECK(collective_time_s(link, ar, 8, 1e3) == Approx(5e-6));
  // A collective without rows keeps the latency + bandwidth model.
  CHECK(collective_time_s(link, CollectiveKind::AllGather, 8, 1e6) == Approx(5e-6 + 7.0 / 8 * 1e6));
  CHECK(has_measured_rows(link, ar, 4));
  CHECK_FALSE(has_measured_rows(link, CollectiveKind::AllGather, 8));
}

TEST_CASE("a group size the table does not list reads the nearest listed one at the same busbw",
          "[cost][collective][published]") {
  LinkProfile link = small_table();
  const auto ar = CollectiveKind::AllReduce;
  // 4 ranks: the 8-rank rows' bus bandwidth with 4 ranks' bus factor, 2(3)/4 against 2(7)/8.
  CHECK(collective_time_s(link, ar, 4, 1e6) == Approx(20e-6 * 1.5 / 1.75));
  CHECK(collective_time_s(link, ar, 16, 3e6) == Approx(40e-6 * 1.875 / 1.75));
  // Rows for 4 and 16 ranks: 8 is as near to both, the larger group's rows answer; 6 reads 4's.
  link.measured = std::make_shared<const CollectiveRows>(
      CollectiveRows{{ar, {{4, 1e6, 30e-6}, {16, 1e6, 60e-6}}}});
  CHECK(collective_time_s(link, ar, 10, 1e6) == Approx(60e-6 * (2.0 * 9 / 10) / 1.875));
  CHECK(collective_time_s(link, ar, 6, 1e6) == Approx(30e-6 * (2.0 * 5 / 6) / 1.5));
}

TEST_CASE("the a100 profile's published rows load and braid info shows each row's source",
          "[profile][published]") {
  const Profile p = load_profile("a100");
  const LinkProfile& nv = p.link("nvlink");
  REQUIRE(nv.published);
  const auto& rows = nv.measured->at(CollectiveKind::AllReduce);
  REQUIRE(rows.size() == 6);
  CHECK(rows[0].ranks == 8);
  CHECK(rows[0].bytes == 33554432);
  CHECK(rows[0].time_s == Approx(344.8e-6));
  CHECK(nv.row_sources.at(CollectiveKind::AllReduce)[0] ==
        "C21 single-node output, 33554432 B row");
  // A busbw row: time = (n-1)/n x bytes / busbw.
  CHECK(nv.measured->at(CollectiveKind::AllGather)[0].time_s ==
        Approx(7.0 / 8 * 33554432 / 170.31e9));
  CHECK(p.link("ib").measured->at(CollectiveKind::AllReduce).back().time_s == Approx(11013e-6));
  // 48 MiB, 8 ranks: between the 32 and 64 MiB rows, log-linear.
  const double t = collective_time_s(nv, CollectiveKind::AllReduce, 8, 48 * 1048576.0);
  CHECK(t == Approx(344.8e-6 * std::pow(557.4 / 344.8, std::log(1.5) / std::log(2.0))));

  const auto text = run_braid("info --study configs/studies/megatron/gpt3-175b-full.yaml");
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("published collective rows of profile a100"));
  CHECK_THAT(text.out, Catch::Contains("nvlink   all_reduce          8     33554432      344.80"));
  CHECK_THAT(text.out, Catch::Contains("C21 two-node output, 1073741824 B row"));
  const auto json = run_braid("info --study configs/studies/megatron/gpt3-175b-full.yaml --json");
  REQUIRE(json.exit_code == 0);
  CHECK_THAT(json.out, Catch::Contains("\"published_collective_rows\""));
  CHECK_THAT(json.out, Catch::Contains("\"source\": \"C21 single-node output, 33554432 B row\""));
  // A profile without published rows lists none.
  const auto a800 = run_braid("info");
  REQUIRE(a800.exit_code == 0);
  CHECK_THAT(a800.out, !Catch::Contains("published collective rows"));
}

TEST_CASE("bad published rows are one line naming the row and exit code 2",
          "[profile][published][errors]") {
  const std::string good = shipped_a100();
  const std::string first = "bytes: 33554432, time_us: 344.8";
  const struct {
    const char* what;
    std::string text;
    const char* expect;
  } cases[] = {
      {"negative size", with(good, first, "bytes: -33554432, time_us: 344.8"),
       "links.nvlink.published.all_reduce[0].bytes"},
      {"unsorted", with(good, first, "bytes: 2147483648, time_us: 344.8"),
       "links.nvlink.published.all_reduce[1]: rows must be in increasing (ranks, bytes) order"},
      {"duplicate", with(good, "bytes: 67108864, time_us: 557.4", first),
       "links.nvlink.published.all_reduce[1]: rows must be in increasing"},
      {"unknown collective", with(good, "      all_gather:", "      broadcast:"),
       "links.nvlink.published.broadcast: unknown field; allowed here: all_gather, all_reduce, "
       "all_to_all, "
       "reduce_scatter"},
      {"no source", with(good, ", source: \"C21 single-node output, 33554432 B row\"", ""),
       "links.nvlink.published.all_reduce[0].source"},
      {"time and busbw", with(good, first, first + ", busbw_gbps: 170"),
       "give exactly one of time_us"},
      {"one rank", with(good, "ranks: 8, bytes: 33554432", "ranks: 1, bytes: 33554432"),
       "must be at least 2"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const fs::path file = scratch("bad.yaml", c.text);
    const auto r = run_braid("info --profile " + file.string());
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains(c.expect));
  }
}

TEST_CASE("the inter-node DP sync is the slower of the published rows and the NIC share",
          "[cost][dp][published]") {
  const Profile p = load_profile("a100");
  const LinkProfile& ib = p.link("ib");
  StudyOverrides o;
  o.model = "qwen2-7b";
  o.tp = 1;
  o.pp = 1;
  o.vpp = 1;
  o.seq = 2048;
  o.microbatches = 8;
  const double bytes = 134217728;
  const auto ar = CollectiveKind::AllReduce;
  {
    // 2 nodes x 8 HDR 200 Gb/s x 0.9 = 180 GB/s per node, all 8 GPUs in the group on each node:
    // the share model gives 46 us + 1.875 x 128 MiB / 180 GB/s = 1.44 ms, the 16-rank row
    // 1740.3 us (as measured with the whole node in the collective): the row answers.
    o.cluster = a100_cluster("a100-fast", 8, 200).string();
    const Study s = load_study(resolve_config("studies", "default"), o);
    REQUIRE(s.parallel.dp == 16);
    CHECK(dp_collective_time_s(s, p, ar, 16, 8, 8, bytes) == Approx(1740.3e-6));
    // A group of 4 with 2 per node reads the 16-rank rows at its bus factor (2 x 3/4) unless the
    // share (180 x 2 / 8 = 45 GB/s) is slower, as it is here.
    CHECK(dp_collective_time_s(s, p, ar, 4, 2, 8, bytes) ==
          Approx(ib.latency_s + 1.5 * bytes / 45e9));
  }
  {
    // One 100 Gb/s NIC per node: 11.25 GB/s for the node, far below the table's network.
    o.cluster = a100_cluster("a100-slow", 1, 100).string();
    const Study s = load_study(resolve_config("studies", "default"), o);
    CHECK(dp_collective_time_s(s, p, ar, 16, 8, 8, bytes) ==
          Approx(ib.latency_s + 1.875 * bytes / 11.25e9));
  }
}

TEST_CASE("a measured profile's own rows for a link replace its published ones",
          "[profile][published]") {
  std::ifstream in(kRoot / "tests/data/profile-synthetic-measured.yaml");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string published =
      "    published:\n"
      "      all_reduce:\n"
      "        - {ranks: 8, bytes: 1048576, time_us: 99, source: \"test row\"}\n";
  // nvlink has measured.comm rows in the file: they win. ib has none: its published rows stay.
  std::string both =
      with(text, "    p2p_bandwidth_gbps: 300.0\n", "    p2p_bandwidth_gbps: 300.0\n" + published);
  both = with(both, "    p2p_bandwidth_gbps: 50\n", "    p2p_bandwidth_gbps: 50\n" + published);
  const Profile p = load_profile(scratch("measured-and-published.yaml", both));
  const LinkProfile& nv = p.link("nvlink");
  CHECK_FALSE(nv.published);
  CHECK(nv.row_sources.empty());
  CHECK(nv.measured->at(CollectiveKind::AllReduce).front().ranks == 2);
  const LinkProfile& ib = p.link("ib");
  CHECK(ib.published);
  CHECK(collective_time_s(ib, CollectiveKind::AllReduce, 8, 1048576) == Approx(99e-6));
}
