// HTML report: one self-contained page (scripts and styles inline, no network) that draws
// simulated runs — per run a zoomable timeline per rank (compute, TP, P2P, copy streams; exposed
// TP from the report's attribution), per-rank stacked time bars and memory over time — and, for a
// sweep, the throughput-memory scatter with its Pareto front. The page draws; it computes no
// metric. Its input is a data document (JSON, byte-stable) that `braid report` can read back.
#pragma once

#include <string>
#include <vector>

#include "braid/dag.hpp"
#include "braid/report.hpp"
#include "braid/simulator.hpp"

namespace braid {

// One simulated run as the page draws it: the report (report_json), every op of the timeline
// (rank, stream, start, duration, name, microbatch, chunk, unit, phase) in integer ticks of
// 1 ns (uniform reports: 1 ns per 1/1000 symbolic unit), the tp_exposed intervals per rank and
// the activation memory samples. A JSON object.
std::string html_run_data(const Dag& dag, const Timeline& timeline, const Report& report);

// One point of the sweep scatter (a row that was simulated: status "ok" or "oom").
struct HtmlSweepPoint {
  std::string schedule;
  int tp = 1, pp = 1, vpp = 1, seq = 0, mbs = 1, microbatches = 1;
  int global_batch = 0;  // samples per iteration: dp x mbs x microbatches
  bool sp = false;
  std::string recompute;
  std::string status;  // "ok" or "oom"
  double tokens_per_s = 0;
  double peak_gib = 0;  // largest peak memory of a rank (the report's max_peak_memory_gib)
  bool thin = false;    // fits with a thin margin (the report's thin_margin)
};

struct HtmlSweep {
  std::vector<HtmlSweepPoint> points;
  double cap_gib = 0;  // the memory cap (explore.hpp, MemoryCap: the peak's terms); 0: none
  std::string global_batch_note;  // global_batch_note() of the sweep; "" (null): one global batch
};

// The data document: {"format":"braid-report-data","version":1,"title":..,"runs":[..],
// "sweep":{..} or null}. `runs` are html_run_data() objects.
std::string html_report_data(const std::string& title, const std::vector<std::string>& runs,
                             const HtmlSweep* sweep = nullptr);

// Merges data documents into one (runs in order; the first sweep kept; an empty title keeps the
// first document's): `braid report A B`.
// Throws InputError naming `names[i]` when documents[i] is not a data document.
std::string merge_report_data(const std::vector<std::string>& documents,
                              const std::vector<std::string>& names, const std::string& title);

// The page for a data document. Throws InputError("report data", ...) when it is not one.
std::string html_report(const std::string& data);

}  // namespace braid
