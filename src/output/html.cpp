// The HTML report (html_report.hpp): a data document (JSON) and the page that embeds it with its
// script and style (html_assets.cpp). The data is compact on purpose: ops as column arrays of
// integers (ticks of 1 ns), names once per op; a p = 2, m = 64 study run is about 1 MB.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/error.hpp"
#include "braid/html_report.hpp"
#include "braid/svg_text.hpp"
#include "html_assets.hpp"

namespace braid {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kFormat = "braid-report-data";
constexpr int kVersion = 1;

json parse_document(const std::string& text, const std::string& name) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("format") || doc["format"] != kFormat)
    throw InputError(name, "format",
                     "not a braid report data file; write one with braid simulate --report-data");
  if (!doc.contains("version") || doc["version"] != kVersion)
    throw InputError(name, "version",
                     "only version " + std::to_string(kVersion) + " is read; rewrite the file");
  if (!doc.contains("runs") || !doc["runs"].is_array())
    throw InputError(name, "runs", "missing; rewrite the file with braid simulate --report-data");
  return doc;
}

}  // namespace

std::string html_run_data(const Dag& dag, const Timeline& timeline, const Report& report) {
  // Ticks: 1 ns of real time; uniform reports have symbolic time, 1000 ticks per unit.
  const double ticks_per_unit = report.uniform ? 1000.0 : 1e9;
  auto tick = [&](double t) { return std::llround(t * ticks_per_unit); };
  json run;
  run["report"] = json::parse(report_json(report));
  run["tick_s"] = 1.0 / ticks_per_unit;
  run["time_unit"] = report.uniform ? "unit" : "s";
  json streams = json::array();
  for (int s = 0; s < kStreamsPerRank; ++s) streams.push_back(name(static_cast<StreamKind>(s)));
  run["streams"] = streams;
  json ranks = json::array(), stream = json::array(), start = json::array(), dur = json::array(),
       names = json::array(), mb = json::array(), chunk = json::array(), unit = json::array(),
       phase = json::array(), kind = json::array(), instruction = json::array(),
       side = json::array();
  for (int r = 0; r < dag.pp; ++r)
    for (int s = 0; s < kStreamsPerRank; ++s) {
      const int sid = dag.stream_id(r, static_cast<StreamKind>(s));
      for (int k = dag.stream_begin[sid]; k < dag.stream_begin[sid + 1]; ++k) {
        const int i = dag.stream_ops[k];
        const DagOp& op = dag.ops[i];
        const std::int64_t b = tick(timeline.start_s[i]), e = tick(timeline.end_s[i]);
        ranks.push_back(r);
        stream.push_back(s);
        start.push_back(b);
        dur.push_back(e - b);
        names.push_back(op_name(dag, i));
        mb.push_back(op.mb);
        chunk.push_back(op.chunk);
        const bool has_unit = op.kind == OpKind::Compute || op.kind == OpKind::Collective;
        unit.push_back(has_unit ? name(op.unit) : "");
        phase.push_back(name(op.phase));
        kind.push_back(name(op.kind));
        instruction.push_back(op.instruction);
        side.push_back(static_cast<int>(op.side));  // 0 plain, 1 side a, 2 side b
      }
    }
  run["ops"] = json{{"rank", ranks},
                    {"stream", stream},
                    {"start", start},
                    {"dur", dur},
                    {"name", names},
                    {"mb", mb},
                    {"chunk", chunk},
                    {"unit", unit},
                    {"phase", phase},
                    {"kind", kind},
                    {"instruction", instruction},
                    {"side", side}};
  // Exposed collective time per stream and rank (the report's attribution): tp always, the other
  // collective streams where they have any.
  json exposed = json::object();
  for (const StreamKind s : kCollectiveStreams) {
    json per_rank = json::array();
    bool any = false;
    for (const RankReport& rr : report.ranks) {
      json iv = json::array();
      for (const TimeInterval& t : exposed_intervals(rr, s))
        iv.push_back(json::array({tick(t.begin_s), tick(t.end_s)}));
      any = any || !iv.empty();
      per_rank.push_back(iv);
    }
    if (any || s == StreamKind::Tp) exposed[name(s)] = per_rank;
  }
  run["exposed"] = exposed;
  json memory = json::array();
  for (int r = 0; r < dag.pp; ++r) {
    json t = json::array(), bytes = json::array();
    for (const MemorySample& m : timeline.memory) {
      if (m.rank != r) continue;
      t.push_back(tick(m.time_s));
      bytes.push_back(std::llround(m.activation_bytes));
    }
    memory.push_back(json{{"t", t}, {"activation_bytes", bytes}});
  }
  run["memory"] = memory;
  return run.dump();
}

std::string html_report_data(const std::string& title, const std::vector<std::string>& runs,
                             const HtmlSweep* sweep) {
  json doc;
  doc["format"] = kFormat;
  doc["version"] = kVersion;
  doc["title"] = title;
  json list = json::array();
  for (const std::string& r : runs) list.push_back(json::parse(r));
  doc["runs"] = list;
  if (sweep) {
    json points = json::array();
    for (const HtmlSweepPoint& p : sweep->points)
      points.push_back(json{{"schedule", p.schedule},
                            {"tp", p.tp},
                            {"pp", p.pp},
                            {"vpp", p.vpp},
                            {"seq", p.seq},
                            {"mbs", p.mbs},
                            {"m", p.microbatches},
                            {"sp", p.sp},
                            {"recompute", p.recompute},
                            {"status", p.status},
                            {"tokens_per_s", p.tokens_per_s},
                            {"peak_gib", p.peak_gib},
                            {"thin", p.thin}});
    doc["sweep"] = json{{"cap_gib", sweep->cap_gib}, {"points", points}};
  } else {
    doc["sweep"] = nullptr;
  }
  return doc.dump() + "\n";
}

std::string merge_report_data(const std::vector<std::string>& documents,
                              const std::vector<std::string>& names, const std::string& title) {
  json out;
  out["format"] = kFormat;
  out["version"] = kVersion;
  out["title"] = title;
  out["runs"] = json::array();
  out["sweep"] = nullptr;
  for (std::size_t i = 0; i < documents.size(); ++i) {
    const json doc = parse_document(documents[i], i < names.size() ? names[i] : "report data");
    if (i == 0 && title.empty()) out["title"] = doc.value("title", std::string("braid report"));
    for (const json& r : doc["runs"]) out["runs"].push_back(r);
    if (out["sweep"].is_null() && doc.contains("sweep")) out["sweep"] = doc["sweep"];
  }
  return out.dump() + "\n";
}

std::string html_report(const std::string& data) {
  const json doc = parse_document(data, "report data");
  std::string payload = doc.dump();
  // "</" would end the script element; "<\/" is the same JSON string.
  std::string safe;
  safe.reserve(payload.size());
  for (std::size_t i = 0; i < payload.size(); ++i) {
    safe += payload[i];
    if (payload[i] == '<' && i + 1 < payload.size() && payload[i + 1] == '/') safe += '\\';
  }
  const std::string title = doc.value("title", std::string("braid report"));
  std::string out;
  out.reserve(safe.size() + 64 * 1024);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + xml_escape(title) + "</title>\n<style>\n";
  out += html_report_css();
  out +=
      "</style>\n</head>\n<body>\n<div id=\"app\"></div>\n<div id=\"tip\" class=\"tip\"></div>\n";
  out += "<script type=\"application/json\" id=\"braid-data\">";
  out += safe;
  out += "</script>\n<script>\n";
  out += html_report_js();
  out += "</script>\n</body>\n</html>\n";
  return out;
}

}  // namespace braid
