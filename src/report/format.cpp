// Renderings of Reports: JSON (nlohmann; field names carry their units), CSV, and the terminal
// tables of `simulate` (summary + per-rank detail) and `compare` (one row per schedule). Numbers
// are printed with fixed formats so the output is byte-stable for the same input.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/csv.hpp"
#include "../util/format.hpp"
#include "../util/text_table.hpp"
#include "../util/units.hpp"
#include "braid/report.hpp"

namespace braid {

namespace {

template <typename T>
nlohmann::ordered_json to_json(const T& value);

// One member as JSON: a visited struct as an object, a list of them as an array.
template <typename T>
nlohmann::ordered_json member_json(const T& v, bool gib) {
  if constexpr (std::is_floating_point_v<T>)
    return gib ? v / kGiB : v;
  else if constexpr (HasFields<const T>)
    return to_json(v);
  else if constexpr (ListOfFields<T>) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& x : v) a.push_back(to_json(x));
    return a;
  } else
    return v;
}

// The fields visit_fields() lists with a JSON key, in its order; "a/b" goes into object a.
template <typename T>
nlohmann::ordered_json to_json(const T& value) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  visit_fields(value, [&](const FieldInfo& f, const auto& v) {
    const std::string key = f.json;
    if (key.empty()) return;
    const std::size_t slash = key.find('/');
    if (slash == std::string::npos)
      j[key] = member_json(v, f.json_gib);
    else
      j[key.substr(0, slash)][key.substr(slash + 1)] = member_json(v, f.json_gib);
  });
  if constexpr (std::is_same_v<T, Report>)
    if (!value.oom) j["oom_rank"] = nullptr;
  return j;
}

// Seconds with a unit that suits the magnitude (fixed digits, so byte-stable).
std::string seconds(double s) {
  if (s == 0) return "0";
  if (s >= 1) return util::format("%.3f s", s);
  if (s >= 1e-3) return util::format("%.3f ms", s * 1e3);
  return util::format("%.3f us", s * 1e6);
}

// A time unit for a column: the one seconds() would pick for its largest value.
struct Unit {
  std::string name;
  double per_s = 1;
};
Unit unit_for(double largest_s) {
  if (largest_s >= 1) return {"s", 1};
  if (largest_s >= 1e-3) return {"ms", 1e3};
  return {"us", 1e6};
}
std::string in_unit(double s, const Unit& u) { return util::format("%.3f", s * u.per_s); }

// "r0 75.1% (18.760 ms), r1 24.9% (6.168 ms); 5 visits: r0 -> r1 -> r0 -> r1 -> r0": the time the
// critical path spends on each rank, then the order in which it visits them.
std::string path_by_rank(const CriticalPathSummary& cp, double total_s, bool symbolic) {
  std::string out;
  for (std::size_t k = 0; k < cp.rank_s.size(); ++k) {
    if (cp.rank_s[k] <= 0) continue;
    out += (out.empty() ? "" : ", ") + std::string("r") + std::to_string(k) + " " +
           util::format("%.1f%%", cp.rank_s[k] / total_s * 100) + " (" +
           (symbolic ? util::format("%.6g", cp.rank_s[k]) : seconds(cp.rank_s[k])) + ")";
  }
  constexpr std::size_t kShown = 12;
  const std::size_t n = cp.rank_sequence.size();
  out += "; " + std::to_string(n) + (n == 1 ? " visit: " : " visits: ");
  for (std::size_t k = 0; k < n && k < kShown; ++k)
    out += (k ? " -> r" : "r") + std::to_string(cp.rank_sequence[k]);
  if (n > kShown) out += " -> ... (" + std::to_string(n - kShown) + " more)";
  return out;
}

using util::percent;

bool uniform(const Report& r) { return r.uniform; }

std::string csv_number(double v) { return util::format("%.9g", v); }

}  // namespace

std::string report_json(const Report& report) { return to_json(report).dump(2) + "\n"; }

namespace {

void add_moe(nlohmann::ordered_json& j, const std::optional<MoeLoadReport>& moe) {
  if (!moe) return;
  auto& o = j["moe"];
  o["routing"] = moe->routing;
  o["busiest_rank"] = moe->busiest_rank;
  o["busiest_rank_factor"] = moe->busiest_rank_factor;
  o["dropped_fraction"] = moe->dropped_fraction;
  o["padded_fraction"] = moe->padded_fraction;
}

}  // namespace

std::string report_json(const Report& report, const std::optional<MoeLoadReport>& moe) {
  nlohmann::ordered_json j = to_json(report);
  add_moe(j, moe);
  return j.dump(2) + "\n";
}

std::string moe_load_line(const MoeLoadReport& moe) {
  return "MoE routing      " + moe.routing + ": busiest EP rank " +
         std::to_string(moe.busiest_rank) +
         util::format(" at %.2fx balanced", moe.busiest_rank_factor) + ", capacity drops " +
         percent(moe.dropped_fraction) + " and pads " + percent(moe.padded_fraction) +
         " of the routed tokens\n";
}

std::string reports_json(const std::vector<Report>& reports) {
  return reports_json(reports, std::nullopt);
}

std::string reports_json(const std::vector<Report>& reports,
                         const std::optional<MoeLoadReport>& moe) {
  nlohmann::ordered_json j;
  auto& arr = j["reports"] = nlohmann::ordered_json::array();
  for (const Report& r : reports) arr.push_back(to_json(r));
  add_moe(j, moe);
  return j.dump(2) + "\n";
}

namespace {

// The columns of reports_csv: column(key, cell) for each, header and cells from this one list.
template <typename F>
void report_columns(const Report& r, F&& column) {
  double peak_ma = 0;
  for (const RankReport& rr : r.ranks) peak_ma = std::max(peak_ma, rr.activation_peak_ma);
  column("study", r.study);
  column("schedule", r.schedule);
  column("pp", std::to_string(r.pp));
  column("vpp", std::to_string(r.vpp));
  column("tp", std::to_string(r.tp));
  column("microbatches", std::to_string(r.microbatches));
  column("gpus", std::to_string(r.gpus));
  column("iteration_time_s", csv_number(r.iteration_time_s));
  column("tp_bubble_rate", csv_number(r.tp_bubble_rate));
  column("pp_bubble_rate", csv_number(r.pp_bubble_rate));
  column("offload_stall_rate", csv_number(r.offload_stall_rate));
  column("mfu", csv_number(r.mfu));
  column("hfu", csv_number(r.hfu));
  column("tokens_per_s", csv_number(r.tokens_per_s));
  column("samples_per_s", csv_number(r.samples_per_s));
  column("tflops_per_gpu", csv_number(r.tflops_per_gpu));
  column("max_peak_memory_gib", csv_number(r.max_peak_memory_gib));
  column("cap_gib", csv_number(r.cap_gib));
  column("margin_gib", csv_number(r.margin_gib));
  column("thin_margin", r.thin_margin ? "true" : "false");
  column("max_activation_peak_ma", csv_number(peak_ma));
  column("oom", r.oom ? "true" : "false");
  column("oom_rank", r.oom ? std::to_string(r.oom_rank) : std::string());
  column("oom_over_gib", csv_number(r.oom_over_gib));
  column("tp_comm_rate", csv_number(r.tp_comm_rate));
  column("dp_exposed_rate", csv_number(r.dp_exposed_rate));
  column("optimizer_rate", csv_number(r.optimizer_rate));
  column("cp_exposed_rate", csv_number(r.cp_exposed_rate));
  column("cp_comm_rate", csv_number(r.cp_comm_rate));
  column("ep_exposed_rate", csv_number(r.ep_exposed_rate));
  column("ep_comm_rate", csv_number(r.ep_comm_rate));
  column("dp_comm_rate", csv_number(r.dp_comm_rate));
}

// The columns of ranks_csv (one row per rank of `report`), as report_columns.
template <typename F>
void rank_columns(const Report& report, const RankReport& r, F&& column) {
  column("schedule", report.schedule);
  column("rank", std::to_string(r.rank));
  column("iteration_time_s", csv_number(report.iteration_time_s));
  column("busy_s", csv_number(r.busy_s));
  column("tp_exposed_s", csv_number(r.tp_exposed_s));
  column("pp_idle_s", csv_number(r.pp_idle_s));
  column("offload_stall_s", csv_number(r.offload_stall_s));
  column("static_gib", csv_number(r.static_bytes / kGiB));
  column("activation_peak_gib", csv_number(r.activation_peak_bytes / kGiB));
  column("activation_peak_ma", csv_number(r.activation_peak_ma));
  column("peak_memory_gib", csv_number(r.peak_memory_gib));
  column("oom", r.oom ? "true" : "false");
  column("over_gib", csv_number(r.over_bytes / kGiB));
  column("dp_exposed_s", csv_number(r.dp_exposed_s));
  column("optimizer_s", csv_number(r.optimizer_s));
  column("static_layers_gib", csv_number(r.static_layers_bytes / kGiB));
  column("static_embeddings_gib", csv_number(r.static_embeddings_bytes / kGiB));
  column("static_other_gib", csv_number(r.static_other_bytes / kGiB));
  column("static_fixed_gib", csv_number(r.static_fixed_bytes / kGiB));
  column("cp_exposed_s", csv_number(r.cp_exposed_s));
  column("ep_exposed_s", csv_number(r.ep_exposed_s));
}

}  // namespace

std::string reports_csv(const std::vector<Report>& reports) {
  return util::csv_text(Report{}, reports,
                        [](const Report& r, auto&& column) { report_columns(r, column); });
}

std::string ranks_csv(const Report& report) {
  return util::csv_text(RankReport{}, report.ranks, [&report](const RankReport& r, auto&& column) {
    rank_columns(report, r, column);
  });
}

namespace {

// "40.23 GiB, cap 70.78 GiB, margin 30.55 GiB": the peak and the cap side by side, the fixed
// overhead in both; the margin is the report's (set with the cap), flagged when thin.
std::string memory_line(const Report& r) {
  std::string out = util::format("%.2f GiB, cap %.2f GiB", r.max_peak_memory_gib, r.cap_gib);
  if (r.oom)
    return out + "  OUT OF MEMORY on rank " + std::to_string(r.oom_rank) + " by " +
           util::format("%.2f GiB", r.oom_over_gib);
  out += util::format(", margin %.2f GiB", r.margin_gib);
  if (r.thin_margin) out += util::format(" (thin: under %.2f GiB)", r.thin_under_gib);
  return out;
}

}  // namespace

std::string simulate_table(const Report& r) { return simulate_table(r, std::nullopt); }

std::string simulate_table(const Report& r, const std::optional<MoeLoadReport>& moe) {
  std::string out;
  out += "schedule " + r.schedule + " on " + (uniform(r) ? "uniform unit costs" : r.study) +
         ": pp " + std::to_string(r.pp) + ", " + std::to_string(r.vpp) + " chunk(s) per rank, " +
         (uniform(r) ? std::string() : "tp " + std::to_string(r.tp) + ", ") +
         std::to_string(r.microbatches) + " microbatches" +
         (uniform(r) ? std::string() : ", " + std::to_string(r.gpus) + " GPUs") + ", " +
         std::to_string(r.ops) + " ops\n";
  // Uniform mode has symbolic times: print them as plain numbers.
  auto time = [&](double s) { return uniform(r) ? util::format("%.6g", s) : seconds(s); };
  // The per-rank columns share one unit (the iteration time's), named in the header.
  const Unit unit = unit_for(r.iteration_time_s);
  auto cell = [&](double s) { return uniform(r) ? util::format("%.6g", s) : in_unit(s, unit); };
  auto head = [&](const std::string& name) { return uniform(r) ? name : name + " " + unit.name; };
  out += "iteration time   " + time(r.iteration_time_s) + "\n";
  out += "TP bubble        " + percent(r.tp_bubble_rate) +
         (uniform(r) ? std::string()
                     : "  (TP collectives take " + percent(r.tp_comm_rate) + " of the time)") +
         "\n";
  // Context and expert parallelism, when the job has their collectives.
  if (r.cp_comm_rate > 0)
    out += "CP exposed       " + percent(r.cp_exposed_rate) + "  (CP collectives take " +
           percent(r.cp_comm_rate) + " of the time)\n";
  if (r.ep_comm_rate > 0)
    out += "EP exposed       " + percent(r.ep_exposed_rate) + "  (EP collectives take " +
           percent(r.ep_comm_rate) + " of the time)\n";
  if (moe) out += moe_load_line(*moe);
  out += "PP bubble        " + percent(r.pp_bubble_rate) + "\n";
  if (r.offload_stall_rate > 0) out += "offload stall    " + percent(r.offload_stall_rate) + "\n";
  if (!uniform(r)) {
    out += "DP sync exposed  " + percent(r.dp_exposed_rate) + "\n";
    out += "optimizer step   " + percent(r.optimizer_rate) + "\n";
  }
  if (!uniform(r)) {
    out += "MFU              " + percent(r.mfu) + "\n";
    out += "HFU              " + percent(r.hfu) + "  (hardware FLOPs: recomputation included)\n";
    out += "throughput       " + util::format("%.0f tokens/s", r.tokens_per_s) + ", " +
           util::format("%.2f samples/s", r.samples_per_s) + ", " +
           util::format("%.1f TFLOP/s per GPU", r.tflops_per_gpu) + "\n";
    out += "peak memory      " + memory_line(r) + "\n";
  }
  out += "\n";
  std::vector<std::vector<std::string>> rows;
  const bool has_cp = r.cp_comm_rate > 0, has_ep = r.ep_comm_rate > 0;
  // Inserts the CP and EP columns after tp_exposed, when the job has them.
  auto with_groups = [&](std::vector<std::string> row, const std::string& cp_cell,
                         const std::string& ep_cell) {
    auto at = row.begin() + 3;
    if (has_ep) at = row.insert(at, ep_cell);
    if (has_cp) row.insert(at, cp_cell);
    return row;
  };
  if (uniform(r))
    rows.push_back(
        with_groups({"rank", "busy", "tp_exposed", "pp_idle", "offload_stall", "act_peak_Ma"},
                    "cp_exposed", "ep_exposed"));
  else
    rows.push_back(
        with_groups({"rank", head("busy"), head("tp_exposed"), head("pp_idle"),
                     head("offload_stall"), head("dp_exposed"), head("optimizer"), "act_peak_Ma",
                     "static_GiB", "layers/emb/other/fixed", "peak_GiB", "oom"},
                    head("cp_exposed"), head("ep_exposed")));
  for (const RankReport& rr : r.ranks) {
    std::vector<std::string> row =
        with_groups({std::to_string(rr.rank), cell(rr.busy_s), cell(rr.tp_exposed_s),
                     cell(rr.pp_idle_s), cell(rr.offload_stall_s)},
                    cell(rr.cp_exposed_s), cell(rr.ep_exposed_s));
    if (!uniform(r)) {
      row.push_back(cell(rr.dp_exposed_s));
      row.push_back(cell(rr.optimizer_s));
    }
    row.push_back(util::format("%.2f", rr.activation_peak_ma));
    if (!uniform(r)) {
      row.push_back(util::format("%.2f", rr.static_bytes / kGiB));
      row.push_back(util::format("%.2f", rr.static_layers_bytes / kGiB) + "/" +
                    util::format("%.2f", rr.static_embeddings_bytes / kGiB) + "/" +
                    util::format("%.2f", rr.static_other_bytes / kGiB) + "/" +
                    util::format("%.2f", rr.static_fixed_bytes / kGiB));
      row.push_back(util::format("%.2f", rr.peak_memory_gib));
      row.push_back(rr.oom ? util::format("+%.2f GiB", rr.over_bytes / kGiB) : "");
    }
    rows.push_back(row);
  }
  out += util::text_table(rows);
  const CriticalPathSummary& cp = r.critical_path;
  const double total = r.iteration_time_s > 0 ? r.iteration_time_s : 1;
  out += "\ncritical path    " + std::to_string(cp.ops) + " ops: compute " +
         percent(cp.compute_s / total) + ", collectives " + percent(cp.collective_s / total) +
         ", P2P " + percent(cp.p2p_s / total) + ", copies " + percent(cp.copy_s / total) + "\n";
  out += "path by rank     " + path_by_rank(cp, total, uniform(r)) + "\n";
  return out;
}

std::string compare_table(const std::vector<Report>& reports, const std::string& baseline) {
  if (reports.empty()) return "";
  const Report* base = nullptr;
  for (const Report& r : reports)
    if (r.schedule == baseline) base = &r;
  // Best: the fastest that fits in memory (the fastest overall if none fits).
  int best = -1;
  for (int pass = 0; pass < 2 && best < 0; ++pass)
    for (std::size_t i = 0; i < reports.size(); ++i) {
      if (pass == 0 && reports[i].oom) continue;
      if (best < 0 || reports[i].iteration_time_s < reports[best].iteration_time_s)
        best = static_cast<int>(i);
    }
  const bool uni = uniform(reports.front());
  std::string out = "study " + (uni ? std::string("uniform unit costs") : reports.front().study) +
                    ": pp " + std::to_string(reports.front().pp) + ", " +
                    std::to_string(reports.front().microbatches) + " microbatches" +
                    (uni ? ""
                         : ", tp " + std::to_string(reports.front().tp) + ", " +
                               std::to_string(reports.front().gpus) + " GPUs") +
                    "\n\n";
  std::vector<std::vector<std::string>> rows;
  double longest = 0;
  for (const Report& r : reports) longest = std::max(longest, r.iteration_time_s);
  const Unit unit = unit_for(longest);  // one unit for the whole column
  // CP and EP columns after the TP bubble when any run has their collectives.
  bool has_cp = false, has_ep = false;
  for (const Report& r : reports) {
    has_cp = has_cp || r.cp_comm_rate > 0;
    has_ep = has_ep || r.ep_comm_rate > 0;
  }
  auto with_groups = [&](std::vector<std::string> row, const std::string& cp_cell,
                         const std::string& ep_cell) {
    auto at = row.begin() + 4;
    if (has_ep) at = row.insert(at, ep_cell);
    if (has_cp) row.insert(at, cp_cell);
    return row;
  };
  rows.push_back(with_groups(
      {"schedule", uni ? "iteration" : "iteration " + unit.name,
       base ? "speed-up vs " + baseline : "speed-up", "TP bubble", "PP bubble", "offload stall",
       "DP exposed", "MFU", "HFU", "tokens/s", "act peak Ma", "peak GiB", ""},
      "CP exposed", "EP exposed"));
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const Report& r = reports[i];
    double peak_ma = 0;
    for (const RankReport& rr : r.ranks) peak_ma = std::max(peak_ma, rr.activation_peak_ma);
    const double ref = base ? base->iteration_time_s : reports.front().iteration_time_s;
    std::string mark = static_cast<int>(i) == best ? "<- best" : "";
    if (r.oom) mark = (mark.empty() ? "" : mark + ", ") + "OOM";
    if (r.thin_margin) mark = (mark.empty() ? "" : mark + ", ") + "thin margin";
    rows.push_back(with_groups(
        {r.schedule,
         uni ? util::format("%.6g", r.iteration_time_s) : in_unit(r.iteration_time_s, unit),
         util::format("%.3fx", r.iteration_time_s > 0 ? ref / r.iteration_time_s : 0),
         percent(r.tp_bubble_rate), percent(r.pp_bubble_rate), percent(r.offload_stall_rate),
         uni ? "-" : percent(r.dp_exposed_rate), uni ? "-" : percent(r.mfu),
         uni ? "-" : percent(r.hfu), uni ? "-" : util::format("%.0f", r.tokens_per_s),
         util::format("%.2f", peak_ma), uni ? "-" : util::format("%.2f", r.max_peak_memory_gib),
         mark},
        percent(r.cp_exposed_rate), percent(r.ep_exposed_rate)));
  }
  out += util::text_table(rows);
  return out;
}

}  // namespace braid
