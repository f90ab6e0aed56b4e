// The HTML report (html_report.hpp): a data document (JSON) and the page that embeds it with its
// script and style (html_assets.cpp). The data is compact on purpose: ops as column arrays of
// integers (ticks of 1 ns), names once per op; a p = 2, m = 64 study run is about 1 MB, and the
// page embeds it in shorter forms still (compact_for_page), about 0.6 MB.
#include <cmath>
#include <cstdint>
#include <map>
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

// ---- the page's compact columns --------------------------------------------------------------
// The page embeds the data document with some columns in a shorter form than --report-data
// writes them: the same values, exactly, in fewer bytes (a 5-schedule compare at m = 128 holds
// 120,000 ops). web/report.js (decodeColumn, decodeRun) restores the plain columns before
// drawing. Each form is a JSON object naming itself, so a column left plain stays readable:
//   {"dict": [distinct values], "index": [...]}   value i = dict[index[i]]
//   {"delta": COLUMN}                             value i = the sum of the column's first i + 1
//   {"concat": [COLUMN, COLUMN]}                  value i = a[i] + b[i] (two strings)
//   ops.start {"gap": COLUMN}                     start i = gap i + the end (start + dur) of op
//                                                 i - 1 when it is on the same rank and stream

bool is_string(const json& v) { return v.is_string(); }

// An integer whose steps and sums (the gaps: three values) a browser still holds exactly, below
// 2^53: |v| <= 2^51 (26 days in ns, 2 PiB). A column with any other value is left plain.
bool is_exact_integer(const json& v) {
  constexpr std::int64_t kExact = std::int64_t{1} << 51;
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(kExact);
  return v.is_number_integer() && v.get<std::int64_t>() >= -kExact &&
         v.get<std::int64_t>() <= kExact;
}

bool all_of_type(const json& column, bool (*is)(const json&)) {
  if (!column.is_array()) return false;
  for (const json& v : column)
    if (!is(v)) return false;
  return true;
}

json dictionary(const json& column) {
  json dict = json::array(), index = json::array();
  std::map<std::string, int> seen;  // a value's dump -> its place in dict
  for (const json& v : column) {
    const auto [at, fresh] = seen.emplace(v.dump(), static_cast<int>(dict.size()));
    if (fresh) dict.push_back(v);
    index.push_back(at->second);
  }
  return json{{"dict", dict}, {"index", index}};
}

json deltas(const json& column) {
  json out = json::array();
  std::int64_t previous = 0;
  for (const json& v : column) {
    const auto value = v.get<std::int64_t>();
    out.push_back(value - previous);
    previous = value;
  }
  return out;
}

// An op's name splits into the part that names its microbatch (up to the end of the first word
// holding a digit: "F3.1", "AR F3.1", "send B3.1", "OFFLOAD 3.1") and the rest (" Attn L7",
// " r0->r1"), each with a short dictionary: about 8 bytes an op instead of 18.
json split_names(const json& column) {
  json heads = json::array(), tails = json::array();
  for (const json& v : column) {
    const auto& text = v.get_ref<const std::string&>();
    const std::size_t digit = text.find_first_of("0123456789");
    const std::size_t cut = digit == std::string::npos ? text.size() : text.find(' ', digit);
    const std::size_t at = cut == std::string::npos ? text.size() : cut;
    heads.push_back(text.substr(0, at));
    tails.push_back(text.substr(at));
  }
  return json{{"concat", json::array({dictionary(heads), dictionary(tails)})}};
}

// Ops on a stream run one after another, so most start where the one before ended: gap 0.
json start_gaps(const json& ops) {
  const json &start = ops["start"], &dur = ops["dur"], &rank = ops["rank"], &stream = ops["stream"];
  json gap = json::array();
  for (std::size_t i = 0; i < start.size(); ++i) {
    const bool same_lane = i > 0 && rank[i] == rank[i - 1] && stream[i] == stream[i - 1];
    const std::int64_t after =
        same_lane ? start[i - 1].get<std::int64_t>() + dur[i - 1].get<std::int64_t>() : 0;
    gap.push_back(start[i].get<std::int64_t>() - after);
  }
  return json{{"gap", gap}};
}

void compact_ops(json& ops) {
  for (const char* column : {"kind", "unit", "phase"})
    if (ops.contains(column) && all_of_type(ops[column], is_string))
      ops[column] = dictionary(ops[column]);
  if (ops.contains("name") && all_of_type(ops["name"], is_string))
    ops["name"] = split_names(ops["name"]);
  bool integers = true;
  for (const char* column : {"start", "dur", "rank", "stream"})
    integers = integers && ops.contains(column) && all_of_type(ops[column], is_exact_integer) &&
               ops[column].size() == ops["start"].size();
  if (integers) ops["start"] = start_gaps(ops);
}

// Memory samples: times as steps from the one before; activation bytes as steps too, which
// repeat (each unit allocates and frees the same sizes), so the steps get a dictionary.
void compact_memory(json& memory) {
  for (json& rank : memory) {
    if (!rank.is_object()) continue;
    if (rank.contains("t") && all_of_type(rank["t"], is_exact_integer))
      rank["t"] = json{{"delta", deltas(rank["t"])}};
    if (rank.contains("activation_bytes") &&
        all_of_type(rank["activation_bytes"], is_exact_integer))
      rank["activation_bytes"] = json{{"delta", dictionary(deltas(rank["activation_bytes"]))}};
  }
}

void compact_for_page(json& doc) {
  for (json& run : doc["runs"]) {
    if (!run.is_object()) continue;
    if (run.contains("ops") && run["ops"].is_object()) compact_ops(run["ops"]);
    if (run.contains("memory") && run["memory"].is_array()) compact_memory(run["memory"]);
  }
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
  // The TP ring's copy-engine lane (the last stream) is listed only where a rank runs one, so a
  // run without TP-communication overlap writes the streams it always did.
  int listed = kStreamsPerRank - 1;
  for (int r = 0; r < dag.pp; ++r) {
    const int sid = dag.stream_id(r, StreamKind::TpRing);
    if (dag.stream_begin[sid] < dag.stream_begin[sid + 1]) listed = kStreamsPerRank;
  }
  json streams = json::array();
  for (int s = 0; s < listed; ++s) streams.push_back(name(static_cast<StreamKind>(s)));
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
                            {"global_batch", p.global_batch},
                            {"sp", p.sp},
                            {"recompute", p.recompute},
                            {"status", p.status},
                            {"tokens_per_s", p.tokens_per_s},
                            {"peak_gib", p.peak_gib},
                            {"thin", p.thin}});
    doc["sweep"] =
        json{{"cap_gib", sweep->cap_gib},
             {"global_batch_note",
              sweep->global_batch_note.empty() ? json(nullptr) : json(sweep->global_batch_note)},
             {"points", points}};
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
  json doc = parse_document(data, "report data");
  compact_for_page(doc);
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
