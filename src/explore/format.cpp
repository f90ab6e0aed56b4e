// Renderings of a sweep: the ranked terminal table (invalid rows listed after it with their
// reasons), CSV and JSON with every metric. Fixed number formats: byte-stable output.
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/format.hpp"
#include "../util/units.hpp"
#include "braid/explore.hpp"
#include "format.hpp"

namespace braid {

namespace explore {

std::string describe(const Configuration& c) {
  return c.schedule + " tp " + std::to_string(c.tp) + " pp " + std::to_string(c.pp) + " vpp " +
         std::to_string(c.vpp) + " seq " + std::to_string(c.seq) + " mbs " + std::to_string(c.mbs) +
         " m " + std::to_string(c.microbatches) + " sp " + (c.sp ? "on" : "off") + " recompute " +
         name(c.recompute);
}

const std::vector<std::string>& layout_header() {
  static const std::vector<std::string> header = {
      "schedule", "tp",  "pp",           "vpp",       "dp",        "seq",
      "mbs",      "m",   "global batch", "sp",        "recompute", "step s",
      "tokens/s", "MFU", "TP bubble",    "PP bubble", "peak GiB",  "margin GiB"};
  return header;
}

std::vector<std::string> layout_cells(const Evaluation& e, double cap_gib) {
  const Configuration& c = e.config;
  return {c.schedule,
          std::to_string(c.tp),
          std::to_string(c.pp),
          std::to_string(c.vpp),
          std::to_string(e.dp),
          std::to_string(c.seq),
          std::to_string(c.mbs),
          std::to_string(c.microbatches),
          std::to_string(e.dp * c.mbs * c.microbatches),
          c.sp ? "on" : "off",
          name(c.recompute),
          util::format("%.3f", e.report.iteration_time_s),
          util::format("%.0f", e.report.tokens_per_s),
          percent(e.report.mfu),
          percent(e.report.tp_bubble_rate),
          percent(e.report.pp_bubble_rate),
          util::format("%.2f", e.report.max_peak_memory_gib),
          util::format("%.2f", cap_gib - e.model_peak_gib)};
}

}  // namespace explore

namespace {

std::string exact(double v) { return util::format("%.17g", v); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

double max_peak_ma(const Report& r) {
  double peak = 0;
  for (const RankReport& rr : r.ranks) peak = std::max(peak, rr.activation_peak_ma);
  return peak;
}

// Ranked rows, then the invalid ones in configuration order.
std::vector<int> output_order(const SweepResult& result) {
  std::vector<int> order = result.ranking;
  for (int i = 0; i < static_cast<int>(result.rows.size()); ++i)
    if (result.rows[i].status == RowStatus::Invalid) order.push_back(i);
  return order;
}

}  // namespace

std::string study_setting(const Study& st) {
  const ParallelConfig& p = st.parallel;
  const TrainingConfig& t = st.training;
  return "model " + st.model.name + " on " + st.cluster.name + " (" +
         std::to_string(st.cluster.nodes) + " x " + std::to_string(st.cluster.gpus_per_node) +
         " GPUs): tp " + std::to_string(p.tp) + ", pp " + std::to_string(p.pp) + ", dp " +
         std::to_string(p.dp) + ", seq " + std::to_string(t.seq) + ", mbs " +
         std::to_string(t.micro_batch_size) + ", m " + std::to_string(t.microbatches) +
         ", global batch " + std::to_string(p.dp * t.micro_batch_size * t.microbatches) + ", sp " +
         (p.sequence_parallel ? "on" : "off") + ", recompute " + name(t.recompute) + ", offload " +
         util::format("%g", t.offload) + ", distributed optimizer " +
         (t.distributed_optimizer ? "on" : "off");
}

std::string sweep_table(const SweepResult& result, int top) {
  const std::vector<Evaluation>& rows = result.rows;
  std::string study;
  for (const Evaluation& e : rows)
    if (e.status != RowStatus::Invalid) {
      study = e.report.study;
      break;
    }
  std::string out = "sweep";
  if (!study.empty()) out += " of study " + study;
  out += ": " + std::to_string(rows.size()) + " configurations, " + std::to_string(result.valid) +
         " valid (" + std::to_string(result.oom) + " oom), " + std::to_string(result.invalid) +
         " invalid\n" + memory_cap_text(result.cap) + "\n";
  out +=
      "* = best of its (tp, pp, seq) group that fits; speed-up: tokens/s over 1f1b-i at the "
      "same sizes\n\n";
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> head{"#", ""};
  for (const std::string& h : explore::layout_header()) head.push_back(h);
  head.push_back("vs 1f1b-i");
  head.push_back("status");
  table.push_back(head);
  const int shown = top > 0 ? std::min(top, static_cast<int>(result.ranking.size()))
                            : static_cast<int>(result.ranking.size());
  for (int k = 0; k < shown; ++k) {
    const Evaluation& e = rows[result.ranking[k]];
    std::vector<std::string> row{std::to_string(k + 1), e.group_best ? "*" : ""};
    for (std::string& cell : explore::layout_cells(e, result.mem_cap_gib)) row.push_back(cell);
    row.push_back(e.speedup > 0 ? util::format("%.3fx", e.speedup) : "-");
    row.push_back(e.status == RowStatus::Oom ? "OOM" : "ok");
    table.push_back(row);
  }
  out += explore::text_table(table);
  if (shown < static_cast<int>(result.ranking.size()))
    out += "(" + std::to_string(result.ranking.size() - shown) + " more valid rows: see --csv)\n";
  if (result.invalid > 0) {
    out += "\ninvalid (" + std::to_string(result.invalid) + "):\n";
    for (const Evaluation& e : rows)
      if (e.status == RowStatus::Invalid)
        out += "  " + explore::describe(e.config) + ": " + e.reason + "\n";
  }
  return out;
}

std::string sweep_csv(const SweepResult& result) {
  std::string out =
      "rank,status,reason,group_best,speedup_vs_1f1b_i,schedule,tp,pp,vpp,dp,seq,mbs,"
      "microbatches,sp,recompute,gpus,iteration_time_s,tokens_per_s,samples_per_s,"
      "tflops_per_gpu,mfu,tp_bubble_rate,pp_bubble_rate,offload_stall_rate,max_peak_memory_gib,"
      "model_peak_gib,static_gib,max_activation_peak_ma,ma_gib,hbm_gib,ops,tp_comm_rate,"
      "dp_exposed_rate,optimizer_rate\n";
  const std::vector<int> order = output_order(result);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Evaluation& e = result.rows[order[k]];
    const Configuration& c = e.config;
    const bool sim = e.status != RowStatus::Invalid;
    const Report& r = e.report;
    out += (sim ? std::to_string(k + 1) : std::string()) + "," + name(e.status) + "," +
           csv_field(e.reason) + "," + (e.group_best ? "1" : "0") + "," +
           (e.speedup > 0 ? exact(e.speedup) : "") + "," + c.schedule + "," + std::to_string(c.tp) +
           "," + std::to_string(c.pp) + "," + std::to_string(c.vpp) + "," + std::to_string(e.dp) +
           "," + std::to_string(c.seq) + "," + std::to_string(c.mbs) + "," +
           std::to_string(c.microbatches) + "," + (c.sp ? "on" : "off") + "," + name(c.recompute) +
           "," + std::to_string(e.gpus);
    if (sim) {
      out += "," + exact(r.iteration_time_s) + "," + exact(r.tokens_per_s) + "," +
             exact(r.samples_per_s) + "," + exact(r.tflops_per_gpu) + "," + exact(r.mfu) + "," +
             exact(r.tp_bubble_rate) + "," + exact(r.pp_bubble_rate) + "," +
             exact(r.offload_stall_rate) + "," + exact(r.max_peak_memory_gib) + "," +
             exact(e.model_peak_gib) + "," + exact(e.static_gib) + "," + exact(max_peak_ma(r)) +
             "," + exact(r.ma_bytes / kGiB) + "," + exact(r.hbm_gib) + "," + std::to_string(r.ops) +
             "," + exact(r.tp_comm_rate) + "," + exact(r.dp_exposed_rate) + "," +
             exact(r.optimizer_rate);
    } else {
      out += ",,,,,,,,,,,,,,,,,,";
    }
    out += "\n";
  }
  return out;
}

std::string sweep_json(const SweepResult& result) {
  nlohmann::ordered_json j;
  j["mem_cap_gib"] = result.mem_cap_gib;
  j["fixed_overhead_gib"] = result.fixed_overhead_gib;
  j["hbm_gib"] = result.cap.hbm_bytes / (1024.0 * 1024.0 * 1024.0);
  j["allocator_margin_gib"] =
      result.cap.given
          ? nlohmann::ordered_json(nullptr)
          : nlohmann::ordered_json(result.cap.margin_bytes / (1024.0 * 1024.0 * 1024.0));
  j["configurations"] = result.rows.size();
  j["valid"] = result.valid;
  j["oom"] = result.oom;
  j["invalid"] = result.invalid;
  auto& arr = j["rows"] = nlohmann::ordered_json::array();
  const std::vector<int> order = output_order(result);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Evaluation& e = result.rows[order[k]];
    const Configuration& c = e.config;
    const bool sim = e.status != RowStatus::Invalid;
    nlohmann::ordered_json row;
    row["rank"] = sim ? nlohmann::ordered_json(k + 1) : nlohmann::ordered_json(nullptr);
    row["status"] = name(e.status);
    row["reason"] = e.reason;
    row["group_best"] = e.group_best;
    row["speedup_vs_1f1b_i"] =
        e.speedup > 0 ? nlohmann::ordered_json(e.speedup) : nlohmann::ordered_json(nullptr);
    row["schedule"] = c.schedule;
    row["tp"] = c.tp;
    row["pp"] = c.pp;
    row["vpp"] = c.vpp;
    row["dp"] = e.dp;
    row["seq"] = c.seq;
    row["mbs"] = c.mbs;
    row["microbatches"] = c.microbatches;
    row["sp"] = c.sp;
    row["recompute"] = name(c.recompute);
    row["gpus"] = e.gpus;
    if (sim) {
      row["static_gib"] = e.static_gib;
      row["model_peak_gib"] = e.model_peak_gib;
      row["report"] = nlohmann::ordered_json::parse(report_json(e.report));
    }
    arr.push_back(std::move(row));
  }
  return j.dump(2) + "\n";
}

}  // namespace braid
