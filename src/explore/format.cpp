// Renderings of a sweep: the ranked terminal table (invalid rows listed after it with their
// reasons), CSV and JSON with every metric. Fixed number formats: byte-stable output.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/csv.hpp"
#include "../util/format.hpp"
#include "../util/units.hpp"
#include "braid/explore.hpp"
#include "format.hpp"

namespace braid {

namespace explore {

std::string describe(const Configuration& c) {
  std::string out;
  visit_config_fields(c, [&out](const ConfigField& f, const auto& v) {
    // The schedule leads, bare: "stp tp 8 ...".
    out += out.empty() && std::string_view(f.key) == "schedule"
               ? field_text(v)
               : " " + std::string(f.label) + " " + field_text(v);
  });
  return out;
}

namespace {

// The columns of the sweep and search tables: column(label, cell) for each, header and cells from
// this one list.
template <typename F>
void layout_columns(const Evaluation& e, F&& column) {
  visit_layout_fields(e,
                      [&](const ConfigField& f, const auto& v) { column(f.label, field_text(v)); });
  const Report& r = e.report;
  column("step s", util::format("%.3f", r.iteration_time_s));
  column("tokens/s", util::format("%.0f", r.tokens_per_s));
  column("MFU", percent(r.mfu));
  column("TP bubble", percent(r.tp_bubble_rate));
  column("PP bubble", percent(r.pp_bubble_rate));
  column("peak GiB", util::format("%.2f", r.max_peak_memory_gib));
  // The report's margin under the cap (apply_memory_cap), marked when thin.
  column("margin GiB", util::format("%.2f", r.margin_gib) + (r.thin_margin ? " thin" : ""));
}

}  // namespace

std::vector<std::string> layout_header(const Evaluation& sample) {
  std::vector<std::string> h;
  layout_columns(sample, [&h](const char* label, const std::string&) { h.push_back(label); });
  return h;
}

std::vector<std::string> layout_cells(const Evaluation& e) {
  std::vector<std::string> cells;
  layout_columns(e, [&cells](const char*, std::string cell) { cells.push_back(std::move(cell)); });
  return cells;
}

namespace {

bool is_word_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// A reason cut into text and the numbers standing alone in it ("tp 16 > 8 GPUs" -> "tp ", 16,
// " > ", 8, " GPUs"; the digits of "a800x16" or "1f1b-i" are part of a word): numbers[k] follows
// texts[k], and texts has one more piece than numbers.
struct ReasonShape {
  std::vector<std::string> texts;
  std::vector<std::string> numbers;
};

ReasonShape shape_of(const std::string& reason) {
  ReasonShape s{{""}, {}};
  std::size_t i = 0;
  while (i < reason.size()) {
    std::size_t end = i;
    const bool starts = i == 0 || (!is_word_char(reason[i - 1]) && reason[i - 1] != '.');
    while (starts && end < reason.size() && reason[end] >= '0' && reason[end] <= '9') ++end;
    if (end > i && end + 1 < reason.size() && reason[end] == '.' && reason[end + 1] >= '0' &&
        reason[end + 1] <= '9') {
      ++end;
      while (end < reason.size() && reason[end] >= '0' && reason[end] <= '9') ++end;
    }
    if (end > i && (end == reason.size() || !is_word_char(reason[end]))) {
      s.numbers.push_back(reason.substr(i, end - i));
      s.texts.emplace_back();
      i = end;
    } else {
      s.texts.back() += reason[i++];
    }
  }
  return s;
}

// The reasons that differ only in their numbers, counted; the numbers that are not the same in
// every row of the group print as N.
struct ReasonGroup {
  ReasonShape first;
  std::vector<bool> varies;
  int count = 0;
};

std::string group_text(const ReasonGroup& g) {
  std::string out = g.first.texts[0];
  for (std::size_t k = 0; k < g.first.numbers.size(); ++k)
    out += (g.varies[k] ? std::string("N") : g.first.numbers[k]) + g.first.texts[k + 1];
  return out;
}

std::string grouped_reasons(const std::vector<const Evaluation*>& invalid) {
  std::vector<ReasonGroup> groups;
  std::map<std::vector<std::string>, std::size_t> index;  // the texts -> the group
  for (const Evaluation* e : invalid) {
    ReasonShape s = shape_of(e->reason);
    auto [it, added] = index.emplace(s.texts, groups.size());
    if (added) {
      groups.push_back({s, std::vector<bool>(s.numbers.size(), false), 0});
    } else {
      ReasonGroup& g = groups[it->second];
      for (std::size_t k = 0; k < s.numbers.size(); ++k)
        if (s.numbers[k] != g.first.numbers[k]) g.varies[k] = true;
    }
    ++groups[it->second].count;
  }
  // Most frequent first; equal counts in the order their first row came.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const ReasonGroup& a, const ReasonGroup& b) { return a.count > b.count; });
  const int width = static_cast<int>(std::to_string(groups.front().count).size());
  std::string out;
  for (const ReasonGroup& g : groups)
    out += "  " + util::format("%*d", width, g.count) + " x " + group_text(g) + "\n";
  return out;
}

}  // namespace

std::string invalid_text(const std::vector<const Evaluation*>& invalid, const std::string& title,
                         bool show_all) {
  if (invalid.empty()) return "";
  const std::string count = std::to_string(invalid.size());
  if (!show_all)
    return "\n" + title + " (" + count + ", by reason; --show-invalid lists them):\n" +
           grouped_reasons(invalid);
  std::string out = "\n" + title + " (" + count + "):\n";
  for (const Evaluation* e : invalid) out += "  " + describe(e->config) + ": " + e->reason + "\n";
  return out;
}

}  // namespace explore

namespace {

std::string exact(double v) { return util::format("%.17g", v); }

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

// "p2p", or with a2a+p2p its two levels: "a2a+p2p 2 x 4".
std::string cp_comm_text(const ParallelConfig& p) {
  std::string text = name(p.cp_comm_type);
  if (p.cp_comm_type == CpCommType::A2AP2P && p.hierarchical_cp.size() == 2)
    text +=
        " " + std::to_string(p.hierarchical_cp[0]) + " x " + std::to_string(p.hierarchical_cp[1]);
  return text;
}

}  // namespace

std::string study_setting(const Study& st) {
  const ParallelConfig& p = st.parallel;
  const TrainingConfig& t = st.training;
  return "model " + st.model.name + " on " + st.cluster.name + " (" +
         std::to_string(st.cluster.nodes) + " x " + std::to_string(st.cluster.gpus_per_node) +
         " GPUs): tp " + std::to_string(p.tp) + ", pp " + std::to_string(p.pp) +
         (p.cp > 1 ? ", cp " + std::to_string(p.cp) + " (" + cp_comm_text(p) + ")"
                   : std::string()) +
         ", dp " + std::to_string(p.dp) + ", seq " + std::to_string(t.seq) + ", mbs " +
         std::to_string(t.micro_batch_size) + ", m " + std::to_string(t.microbatches) +
         ", global batch " + std::to_string(p.dp * t.micro_batch_size * t.microbatches) + ", sp " +
         (p.sequence_parallel ? "on" : "off") + ", recompute " + name(t.recompute) + ", offload " +
         util::format("%g", t.offload) + ", distributed optimizer " +
         (t.distributed_optimizer ? "on" : "off") +
         // Written only when not bf16, so that bf16 studies read as before.
         (t.precision != Precision::Bf16 ? std::string(", precision ") + name(t.precision)
                                         : std::string());
}

std::string global_batch_note(const SweepResult& result) {
  if (result.ranking.empty()) return "";
  int least = explore::global_batch(result.rows[result.ranking.front()]), most = least;
  for (int i : result.ranking) {
    least = std::min(least, explore::global_batch(result.rows[i]));
    most = std::max(most, explore::global_batch(result.rows[i]));
  }
  if (least == most) return "";
  return "rows span global batches " + std::to_string(least) + ".." + std::to_string(most) +
         " samples: tokens/s compares different batch sizes; --fixed-global-batch B compares at "
         "one";
}

std::string sweep_table(const SweepResult& result, int top, bool show_invalid) {
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
  if (const std::string note = global_batch_note(result); !note.empty()) out += note + "\n";
  out +=
      "* = best of its (tp, pp, seq) group that fits; speed-up: tokens/s over 1f1b-i at the "
      "same sizes\n\n";
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> head{"#", ""};
  for (const std::string& h : explore::layout_header(rows.empty() ? Evaluation{} : rows.front()))
    head.push_back(h);
  head.push_back("vs 1f1b-i");
  head.push_back("status");
  table.push_back(head);
  const int shown = top > 0 ? std::min(top, static_cast<int>(result.ranking.size()))
                            : static_cast<int>(result.ranking.size());
  for (int k = 0; k < shown; ++k) {
    const Evaluation& e = rows[result.ranking[k]];
    std::vector<std::string> row{std::to_string(k + 1), e.group_best ? "*" : ""};
    for (std::string& cell : explore::layout_cells(e)) row.push_back(cell);
    row.push_back(e.speedup > 0 ? util::format("%.3fx", e.speedup) : "-");
    row.push_back(e.status == RowStatus::Oom ? "OOM" : "ok");
    table.push_back(row);
  }
  out += explore::text_table(table);
  if (shown < static_cast<int>(result.ranking.size()))
    out += "(" + std::to_string(result.ranking.size() - shown) + " more valid rows: see --csv)\n";
  std::vector<const Evaluation*> invalid;
  for (const Evaluation& e : rows)
    if (e.status == RowStatus::Invalid) invalid.push_back(&e);
  return out + explore::invalid_text(invalid, "invalid", show_invalid);
}

namespace {

// One row of sweep_csv: the evaluation and its place in the output (0 for an invalid row).
struct CsvRow {
  const Evaluation* e = nullptr;
  int rank = 0;
};

// The columns of sweep_csv (and search_csv): column(key, cell) for each, header and cells from
// this one list. An invalid row has empty metric cells.
template <typename F>
void sweep_columns(const CsvRow& row, F&& column) {
  const Evaluation& e = *row.e;
  const Report& r = e.report;
  const bool sim = e.status != RowStatus::Invalid;
  column("rank", sim ? std::to_string(row.rank) : std::string());
  column("status", name(e.status));
  column("reason", util::csv_quoted(e.reason));
  column("group_best", e.group_best ? "1" : "0");
  column("speedup_vs_1f1b_i", e.speedup > 0 ? exact(e.speedup) : std::string());
  explore::visit_layout_fields(
      e, [&](const ConfigField& f, const auto& v) { column(f.key, explore::field_text(v)); });
  column("gpus", std::to_string(e.gpus));
  auto metric = [&](const char* key, const std::string& cell) {
    column(key, sim ? cell : std::string());
  };
  metric("iteration_time_s", exact(r.iteration_time_s));
  metric("tokens_per_s", exact(r.tokens_per_s));
  metric("samples_per_s", exact(r.samples_per_s));
  metric("tflops_per_gpu", exact(r.tflops_per_gpu));
  metric("mfu", exact(r.mfu));
  metric("tp_bubble_rate", exact(r.tp_bubble_rate));
  metric("pp_bubble_rate", exact(r.pp_bubble_rate));
  metric("offload_stall_rate", exact(r.offload_stall_rate));
  metric("max_peak_memory_gib", exact(r.max_peak_memory_gib));
  metric("cap_gib", exact(r.cap_gib));
  metric("margin_gib", exact(r.margin_gib));
  metric("thin_margin", r.thin_margin ? "1" : "0");
  metric("static_gib", exact(e.static_gib));
  metric("max_activation_peak_ma", exact(max_peak_ma(r)));
  metric("ma_gib", exact(r.ma_bytes / kGiB));
  metric("hbm_gib", exact(r.hbm_gib));
  metric("ops", std::to_string(r.ops));
  metric("tp_comm_rate", exact(r.tp_comm_rate));
  metric("dp_exposed_rate", exact(r.dp_exposed_rate));
  metric("optimizer_rate", exact(r.optimizer_rate));
}

}  // namespace

std::string sweep_csv(const SweepResult& result) {
  const std::vector<int> order = output_order(result);
  std::vector<CsvRow> rows;
  for (std::size_t k = 0; k < order.size(); ++k)
    rows.push_back({&result.rows[order[k]], static_cast<int>(k + 1)});
  const Evaluation none;
  return util::csv_text(CsvRow{rows.empty() ? &none : rows.front().e}, rows,
                        [](const CsvRow& row, auto&& column) { sweep_columns(row, column); });
}

std::string sweep_json(const SweepResult& result) {
  nlohmann::ordered_json j;
  j["cap_gib"] = result.mem_cap_gib;
  j["thin_under_gib"] = result.cap.thin_bytes() / kGiB;
  j["fixed_overhead_gib"] = result.fixed_overhead_gib;
  j["hbm_gib"] = result.cap.hbm_bytes / kGiB;
  j["allocator_margin_gib"] =
      result.cap.given ? nlohmann::ordered_json(nullptr)
                       : nlohmann::ordered_json(result.cap.allocator_margin_bytes / kGiB);
  j["configurations"] = result.rows.size();
  j["valid"] = result.valid;
  j["oom"] = result.oom;
  j["invalid"] = result.invalid;
  const std::string note = global_batch_note(result);
  j["global_batch_note"] =
      note.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(note);
  auto& arr = j["rows"] = nlohmann::ordered_json::array();
  const std::vector<int> order = output_order(result);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Evaluation& e = result.rows[order[k]];
    const bool sim = e.status != RowStatus::Invalid;
    nlohmann::ordered_json row;
    row["rank"] = sim ? nlohmann::ordered_json(k + 1) : nlohmann::ordered_json(nullptr);
    row["status"] = name(e.status);
    row["reason"] = e.reason;
    row["group_best"] = e.group_best;
    row["speedup_vs_1f1b_i"] =
        e.speedup > 0 ? nlohmann::ordered_json(e.speedup) : nlohmann::ordered_json(nullptr);
    explore::visit_layout_fields(
        e, [&row](const ConfigField& f, const auto& v) { row[f.key] = explore::field_json(v); });
    row["gpus"] = e.gpus;
    if (sim) {
      row["static_gib"] = e.static_gib;
      row["margin_gib"] = e.report.margin_gib;
      row["thin_margin"] = e.report.thin_margin;
      row["report"] = nlohmann::ordered_json::parse(report_json(e.report));
    }
    arr.push_back(std::move(row));
  }
  return j.dump(2) + "\n";
}

}  // namespace braid
