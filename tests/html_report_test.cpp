// The HTML report (html_report.hpp): the data document holds every op, the report and its
// tp_exposed intervals; the page is one self-contained file with the data inline and is
// byte-stable; braid report over --report-data gives the same page as --html; bad data and bad
// options are refused with exit 2 and no file. The page's drawing is tested in a real browser
// (tests/browser/report_test.mjs, ctest browser_report).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "braid/error.hpp"
#include "braid/html_report.hpp"
#include "braid/report.hpp"
#include "braid/simulator.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"
#include "hand_schedules.hpp"

using namespace braid;
using namespace braid::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("braid-html-test-" + name + "." + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("html: the run data holds every op, the report and its exposed intervals", "[html]") {
  const Simulated r = simulated(interleaved_p2_m2(), uniform_cost_model(unit_costs(), 4));
  const json run = json::parse(html_run_data(r.dag, r.timeline, r.report));
  const json& ops = run["ops"];
  REQUIRE(ops["start"].size() == static_cast<std::size_t>(r.dag.size()));
  for (const char* column : {"rank", "stream", "dur", "name", "mb", "chunk", "unit", "phase",
                             "kind", "instruction", "side"})
    CHECK(ops[column].size() == ops["start"].size());
  // Uniform reports: 1000 ticks per symbolic unit, so one-unit ops last 1000 ticks.
  CHECK(run["tick_s"] == 0.001);
  CHECK(run["report"]["schedule"] == "1f1b-i");
  CHECK(run["report"]["ranks"].size() == 2);
  // Exposed time by collective stream: tp always; no cp or ep collectives in this run.
  REQUIRE(run["exposed"].size() == 1);
  REQUIRE(run["exposed"]["tp"].size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    const auto intervals = exposed_intervals(r.report.ranks[rank], StreamKind::Tp);
    REQUIRE(run["exposed"]["tp"][rank].size() == intervals.size());
    CHECK(!intervals.empty());
    double ticks = 0;
    for (const json& iv : run["exposed"]["tp"][rank])
      ticks += iv[1].get<double>() - iv[0].get<double>();
    CHECK(ticks / 1000 == Approx(r.report.ranks[rank].tp_exposed_s));
  }
  CHECK(run["memory"].size() == 2);
  CHECK(!run["memory"][0]["t"].empty());
}

TEST_CASE("html: one self-contained, byte-stable page with the data inline", "[html]") {
  const CostModel cost = uniform_cost_model(unit_costs(), 4);
  const Simulated a = simulated(interleaved_p2_m2(), cost),
                  b = simulated(interleaved_p2_m2(), cost);
  const std::string page_a =
      html_report(html_report_data("t", {html_run_data(a.dag, a.timeline, a.report)}));
  const std::string page_b =
      html_report(html_report_data("t", {html_run_data(b.dag, b.timeline, b.report)}));
  CHECK(page_a == page_b);
  CHECK(page_a.rfind("<!DOCTYPE html>", 0) == 0);
  // Nothing is fetched: no external script, style sheet, image or font.
  CHECK(page_a.find("<script src") == std::string::npos);
  CHECK(page_a.find("<link") == std::string::npos);
  CHECK(page_a.find("@import") == std::string::npos);
  CHECK(page_a.find("https://") == std::string::npos);
  CHECK(count(page_a, "http://") == count(page_a, "http://www.w3.org/2000/svg"));
  CHECK(count(page_a, "<script") == 2);  // the data and the script
  CHECK(page_a.find("id=\"braid-data\"") != std::string::npos);
}

namespace {

// The page's embedded data document.
json page_data(const std::string& page) {
  const std::size_t b = page.find("id=\"braid-data\">") + 16;
  return json::parse(page.substr(b, page.find("</script>", b) - b));
}

// The plain column of a compact one, as web/report.js's decodeColumn restores it.
json decode_column(const json& c) {
  if (c.is_array()) return c;
  json out = json::array();
  if (c.contains("dict")) {
    for (const json& k : c["index"]) out.push_back(c["dict"][k.get<std::size_t>()]);
  } else if (c.contains("delta")) {
    std::int64_t sum = 0;
    for (const json& d : decode_column(c["delta"])) out.push_back(sum += d.get<std::int64_t>());
  } else if (c.contains("concat")) {
    const json a = decode_column(c["concat"][0]), b = decode_column(c["concat"][1]);
    for (std::size_t i = 0; i < a.size(); ++i)
      out.push_back(a[i].get<std::string>() + b[i].get<std::string>());
  }
  return out;
}

}  // namespace

TEST_CASE("html: the page's compact columns restore the data document's exactly", "[html]") {
  const Simulated r = simulated(interleaved_p2_m2(), uniform_cost_model(unit_costs(), 4));
  const json plain = json::parse(html_run_data(r.dag, r.timeline, r.report));
  const json run = page_data(html_report(html_report_data("t", {plain.dump()})))["runs"][0];
  const json& ops = run["ops"];
  // The string columns have a handful of values: F, B, W is the phase dictionary.
  CHECK(ops["phase"]["dict"] == json::array({"F", "B", "W"}));
  CHECK(ops["kind"]["dict"].size() < 6);
  for (const char* column : {"kind", "unit", "phase", "name"})
    CHECK(decode_column(ops[column]) == plain["ops"][column]);
  for (const char* column : {"rank", "stream", "dur", "mb", "chunk", "instruction", "side"})
    CHECK(ops[column] == plain["ops"][column]);  // left plain
  // Start: the gap after the op before on the same lane; the first op of rank 0 starts at 0.
  const json& gap = ops["start"]["gap"];
  REQUIRE(gap.size() == plain["ops"]["start"].size());
  CHECK(gap[0] == 0);
  for (std::size_t i = 0; i < gap.size(); ++i) {
    const json& p = plain["ops"];
    const bool same =
        i > 0 && p["rank"][i] == p["rank"][i - 1] && p["stream"][i] == p["stream"][i - 1];
    const std::int64_t after =
        same ? p["start"][i - 1].get<std::int64_t>() + p["dur"][i - 1].get<std::int64_t>() : 0;
    CHECK(gap[i].get<std::int64_t>() + after == p["start"][i].get<std::int64_t>());
  }
  for (std::size_t rank = 0; rank < 2; ++rank) {
    CHECK(decode_column(run["memory"][rank]["t"]) == plain["memory"][rank]["t"]);
    CHECK(decode_column(run["memory"][rank]["activation_bytes"]) ==
          plain["memory"][rank]["activation_bytes"]);
  }
  CHECK(run["report"] == plain["report"]);
  CHECK(run["exposed"] == plain["exposed"]);
}

TEST_CASE("html: a column a browser could not restore exactly is embedded plain", "[html]") {
  // 2^60 ticks is past what the page's sums hold exactly (2^51 is the bound): start stays plain,
  // and a column of mixed types too; the string columns are still compacted.
  const std::string run =
      R"({"ops":{"rank":[0,0],"stream":[0,0],"start":[0,1152921504606846976],"dur":[5,5],)"
      R"("name":["F0.0 Attn L0",7],"phase":["F","F"]},"memory":[{"t":[0,3],)"
      R"("activation_bytes":[1,-1152921504606846976]}]})";
  const json page = page_data(html_report(html_report_data("t", {run})))["runs"][0];
  CHECK(page["ops"]["start"] == json::array({0, 1152921504606846976}));
  CHECK(page["ops"]["name"] == json::array({"F0.0 Attn L0", 7}));
  CHECK(page["ops"]["phase"]["dict"] == json::array({"F"}));
  CHECK(page["memory"][0]["t"]["delta"] == json::array({0, 3}));
  CHECK(page["memory"][0]["activation_bytes"] == json::array({1, -1152921504606846976}));
}

TEST_CASE("html: text that would close the script element is escaped", "[html]") {
  const std::string page = html_report(html_report_data("a </script><b> title", {}));
  CHECK(page.find("a <\\/script><b> title") != std::string::npos);
  CHECK(page.find("<title>a &lt;/script&gt;&lt;b&gt; title</title>") != std::string::npos);
  CHECK(count(page, "</script>") == 2);
}

TEST_CASE("html: a document that is not report data is refused", "[html]") {
  CHECK_THROWS_AS(html_report("{\"traceEvents\":[]}"), InputError);
  CHECK_THROWS_AS(html_report("not json"), InputError);
  CHECK_THROWS_AS(
      merge_report_data({"{\"format\":\"braid-report-data\",\"version\":7,\"runs\":[]}"},
                        {"old.json"}, ""),
      InputError);
}

TEST_CASE("html: braid report over --report-data gives the page --html writes", "[html][cli]") {
  const fs::path dir = temp_dir("report");
  const std::string data = (dir / "stp.json").string(), direct = (dir / "stp.html").string(),
                    again = (dir / "again.html").string();
  REQUIRE(run_braid("simulate --unit-costs 4,8,8,2,4 --pp 2 --microbatches 4 --schedule stp "
                    "--report-data '" +
                    data + "' --html '" + direct + "'")
              .exit_code == 0);
  REQUIRE(run_braid("report '" + data + "' --html '" + again + "'").exit_code == 0);
  CHECK(slurp(direct) == slurp(again));
  // Two files: both runs in one page.
  REQUIRE(run_braid("report '" + data + "' '" + data + "' --html '" + again + "'").exit_code == 0);
  const std::string two = slurp(again);
  CHECK(two.find("braid report: 2 runs") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("html: bad input to braid report and --html exits 2 and writes nothing", "[html][cli]") {
  const fs::path dir = temp_dir("bad");
  const fs::path trace = dir / "trace.json", out = dir / "out.html";
  REQUIRE(run_braid("simulate --unit-costs 4,8,8,2 --pp 2 --microbatches 4 --schedule stp "
                    "--trace '" +
                    trace.string() + "'")
              .exit_code == 0);
  CliRun r = run_braid("report '" + trace.string() + "' --html '" + out.string() + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("not a braid report data file") != std::string::npos);
  CHECK(count_lines(r.err) == 1);
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(out.string() + ".tmp"));
  r = run_braid("report '" + (dir / "missing.json").string() + "' --html '" + out.string() + "'");
  CHECK(r.exit_code == 2);
  CHECK_FALSE(fs::exists(out));
  // A missing directory is found before any work.
  r = run_braid("simulate --unit-costs 4,8,8,2 --pp 2 --microbatches 4 --schedule stp --html '" +
                (dir / "no" / "x.html").string() + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--html") != std::string::npos);
  // SVG options: labels from a list, a window whose end follows its start.
  const std::string base = "simulate --unit-costs 4,8,8,2 --pp 2 --microbatches 4 --schedule stp ";
  r = run_braid(base + "--svg '" + out.string() + "' --labels big");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--labels") != std::string::npos);
  r = run_braid(base + "--svg '" + out.string() + "' --from 20 --to 10");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--to") != std::string::npos);
  r = run_braid(base + "--svg '" + out.string() + "' --detail fine");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--detail") != std::string::npos);
  r = run_braid(base + "--svg '" + out.string() + "' --from 3parsecs");
  CHECK(r.exit_code == 2);
  CHECK_FALSE(fs::exists(out));
  CHECK(run_braid(base + "--svg '" + out.string() + "' --from 4 --to 12 --width 800 --labels op")
            .exit_code == 0);
  CHECK(slurp(out).find("window 4 to 12") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("html: compare and sweep write their reports", "[html][cli]") {
  const fs::path dir = temp_dir("cmp");
  const std::string cmp = (dir / "cmp.html").string(), sweep = (dir / "sweep.html").string();
  REQUIRE(run_braid("compare --unit-costs 4,8,8,2 --pp 2 --microbatches 4 --schedules "
                    "1f1b-i,stp --html '" +
                    cmp + "'")
              .exit_code == 0);
  const std::string page = slurp(cmp);
  const std::size_t b = page.find("id=\"braid-data\">") + 16;
  const json data = json::parse(page.substr(b, page.find("</script>", b) - b));
  REQUIRE(data["runs"].size() == 2);
  CHECK(data["runs"][0]["report"]["schedule"] == "1f1b-i");
  CHECK(data["runs"][1]["report"]["schedule"] == "stp");
  REQUIRE(run_braid("sweep --study default --tp 4,8 --pp 2 --schedules 1f1b-i,stp --html '" +
                    sweep + "'")
              .exit_code == 0);
  const std::string sp = slurp(sweep);
  const std::size_t sb = sp.find("id=\"braid-data\">") + 16;
  const json sd = json::parse(sp.substr(sb, sp.find("</script>", sb) - sb));
  REQUIRE(sd["sweep"].is_object());
  CHECK(sd["sweep"]["points"].size() == 4);  // 2 tp x 2 schedules, all valid at pp 2
  CHECK(sd["sweep"]["cap_gib"].get<double>() > 0);
  for (const json& p : sd["sweep"]["points"]) {
    CHECK(p["pp"] == 2);
    CHECK(p["tokens_per_s"].get<double>() > 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("html: the page carries web/report.js and web/report.css verbatim", "[html]") {
  // The build embeds them in pieces (web/embed.cmake); joined, they must be the files as written.
  const std::string page = html_report(html_report_data("t", {}));
  const std::string js = slurp(fs::path(BRAID_SOURCE_DIR) / "web" / "report.js");
  const std::string css = slurp(fs::path(BRAID_SOURCE_DIR) / "web" / "report.css");
  REQUIRE(js.size() > 1000);
  CHECK(page.find(js) != std::string::npos);
  CHECK(page.find(css) != std::string::npos);
}
