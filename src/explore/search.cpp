// search: the fastest layout (tp, pp, dp, micro-batch size, microbatches, schedule) of a GPU count
// for a global batch, within the memory cap. Candidates whose static memory alone exceeds the cap
// are never simulated (memory first); when the space is large, the rest are simulated in order
// of an upper bound on their throughput (the busiest rank's compute alone), in fixed-size batches,
// and the search stops once no unsimulated candidate can enter the top K. The batches do not
// depend on --jobs, so neither does the result.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "format.hpp"
#include "pipeline.hpp"

namespace braid {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kBatch = 16;  // candidates simulated between two bound checks

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

double chunk_compute_s(const ChunkCost& c) {
  double t = 0;
  auto add = [&](const UnitCost& u) {
    for (const PhaseCost& p : u.phase) t += p.time_s;
  };
  for (const UnitCost& u : c.prologue) add(u);
  for (const LayerCost& l : c.layers)
    for (const UnitCost& u : l) add(u);
  for (const UnitCost& u : c.epilogue) add(u);
  return t;
}

using explore::fmt;

std::string pct(double rate) { return explore::percent(rate, 1); }
std::string pts(double a, double b) { return pct(a) + " vs " + pct(b); }

// Why `second` is slower than `best`: the bubble that grew most, else the compute itself (MFU at
// equal bubbles: thinner GEMMs at a larger tp, a smaller micro-batch, recomputation); and what it
// offers in exchange (memory).
std::string why_slower(const Evaluation& best, const Evaluation& second) {
  const Report& a = best.report;
  const Report& b = second.report;
  const double slower = 1 - b.tokens_per_s / a.tokens_per_s;
  std::string s = "the runner-up (" + explore::describe(second.config) + ", dp " +
                  std::to_string(second.dp) + ") is " + fmt("%.2f%%", slower * 100) + " slower: ";
  const double d_pp = b.pp_bubble_rate - a.pp_bubble_rate;
  const double d_tp = b.tp_bubble_rate - a.tp_bubble_rate;
  const double d_off = b.offload_stall_rate - a.offload_stall_rate;
  if (d_pp >= d_tp && d_pp >= d_off && d_pp > 0.001) {
    s += "mostly a larger PP bubble (" + pts(b.pp_bubble_rate, a.pp_bubble_rate) + ")";
  } else if (d_tp >= d_off && d_tp > 0.001) {
    s += "mostly a larger TP bubble (" + pts(b.tp_bubble_rate, a.tp_bubble_rate) + ")";
  } else if (d_off > 0.001) {
    s += "mostly offload stalls (" + pts(b.offload_stall_rate, a.offload_stall_rate) + ")";
  } else {
    s += "bubbles alike (PP " + pts(b.pp_bubble_rate, a.pp_bubble_rate) + ", TP " +
         pts(b.tp_bubble_rate, a.tp_bubble_rate) + "), its compute is slower";
    const Configuration& x = second.config;
    const Configuration& y = best.config;
    if (x.tp != y.tp)
      s += " (tp " + std::to_string(x.tp) + " vs " + std::to_string(y.tp) +
           " changes the GEMM sizes per GPU)";
    else if (x.mbs != y.mbs)
      s += " (micro-batch size " + std::to_string(x.mbs) + " vs " + std::to_string(y.mbs) + ")";
    else if (x.recompute != y.recompute)
      s += " (recomputation)";
  }
  s += "; MFU " + pts(b.mfu, a.mfu) + "; peak memory " + fmt("%.1f", b.max_peak_memory_gib) +
       " vs " + fmt("%.1f", a.max_peak_memory_gib) + " GiB";
  if (b.max_peak_memory_gib < a.max_peak_memory_gib - 0.05) s += " (its advantage)";
  return s;
}

std::string why_runner_up(const std::vector<Evaluation>& best) {
  std::string s;
  std::size_t k = 1;
  while (k < best.size() && best[k].report.tokens_per_s == best[0].report.tokens_per_s) ++k;
  if (k > 1) {
    s = std::to_string(k - 1) + " layout" + (k > 2 ? "s tie" : " ties") +
        " with the best (identical throughput: ";
    for (std::size_t i = 1; i < k; ++i) s += (i > 1 ? ", " : "") + best[i].config.schedule;
    s += " coincide" + std::string(k > 2 ? "" : "s") + " with " + best[0].config.schedule +
         " at these sizes); ";
  }
  if (k < best.size())
    s += why_slower(best[0], best[k]);
  else if (!s.empty())
    s += "no slower layout among the top results";
  return s;
}

}  // namespace

double throughput_upper_bound(const CostModel& cost, const Schedule& schedule) {
  double busiest = 0;
  for (int r = 0; r < schedule.pp; ++r) {
    double t = 0;
    for (int c = 0; c < schedule.vpp; ++c)
      t += chunk_compute_s(cost.chunks[schedule.virtual_stage(r, c)]);
    busiest = std::max(busiest, t * schedule.microbatches);
  }
  return busiest > 0 ? cost.tokens_per_iteration / busiest : 0;
}

Study with_gpus(const Study& base, int gpus) {
  Study s = base;
  const int per_node = base.cluster.gpus_per_node;
  if (gpus <= 0) throw InputError("--gpus", std::to_string(gpus), "must be 1 or more");
  if (gpus % per_node == 0) {
    s.cluster.nodes = gpus / per_node;
  } else if (gpus < per_node) {
    s.cluster.nodes = 1;
    s.cluster.gpus_per_node = gpus;
  } else {
    throw InputError("--gpus", std::to_string(gpus),
                     "cluster " + base.cluster.name + " has " + std::to_string(per_node) +
                         " GPUs per node; allowed: fewer than one node or a multiple of " +
                         std::to_string(per_node));
  }
  return s;
}

std::vector<Configuration> search_candidates(const Study& study, const SearchSpace& space) {
  if (space.global_batch <= 0)
    throw InputError("--global-batch", std::to_string(space.global_batch), "must be 1 or more");
  const int gpus = study.cluster.gpus();
  std::vector<int> vpps = space.vpp;
  if (vpps.empty()) vpps.push_back(study.parallel.vpp);
  std::vector<Configuration> out;
  for (int tp : divisors(gpus))
    for (int pp : divisors(gpus / tp)) {
      const int dp = gpus / (tp * pp);
      if (space.global_batch % dp != 0) continue;
      const int per_replica = space.global_batch / dp;
      for (int mbs : space.mbs) {
        if (per_replica % mbs != 0) continue;
        SweepAxes axes;
        axes.tp = {tp};
        axes.pp = {pp};
        axes.vpp = vpps;
        axes.seq = {study.training.seq};
        axes.mbs = {mbs};
        axes.microbatches = {per_replica / mbs};
        axes.sp = {study.parallel.sequence_parallel};
        axes.recompute = {study.training.recompute};
        axes.schedules = space.schedules;
        for (const Configuration& c : cross_product(axes)) out.push_back(c);
      }
    }
  if (out.empty())
    throw InputError("--global-batch", std::to_string(space.global_batch),
                     "no layout of " + std::to_string(gpus) +
                         " GPUs divides it into dp x mbs x microbatches with the given --mbs");
  return out;
}

SearchResult search(const Study& base, const Profile& profile, const SearchSpace& space,
                    const ExploreOptions& options) {
  const Study study = with_gpus(base, space.gpus);
  const std::vector<Configuration> configs = search_candidates(study, space);
  const int n = static_cast<int>(configs.size());
  const double cap = explore::cap_bytes(profile, options);
  SearchResult result;
  result.candidates = n;
  result.mem_cap_gib = cap / kGiB;
  std::vector<Evaluation> rows(n);
  const explore::Workbench wb = explore::build_workbench(study, profile, configs, options, rows);

  // Memory first: static memory over the cap rules a candidate out without simulating it.
  std::vector<int> open;
  std::vector<double> bound(n, 0);
  double least_static = -1;
  for (int i = 0; i < n; ++i) {
    if (!wb.ready(i)) {
      ++result.invalid;
      continue;
    }
    const double stat = explore::max_static_bytes(wb.cost(i), wb.schedule(i));
    least_static = least_static < 0 ? stat : std::min(least_static, stat);
    if (stat > cap) {
      ++result.pruned_memory;
      continue;
    }
    bound[i] = throughput_upper_bound(wb.cost(i), wb.schedule(i));
    open.push_back(i);
  }
  if (least_static < 0) {
    std::string first;
    for (const Evaluation& e : rows)
      if (!e.reason.empty()) {
        first = e.reason;
        break;
      }
    throw InputError(
        "search", "candidates",
        "none of the " + std::to_string(n) + " layouts is valid (first: " + first + ")");
  }
  if (open.empty())
    throw InputError("--mem-cap", fmt("%.2f GiB", cap / kGiB),
                     "below the static memory (weights, gradients, optimizer state) of every "
                     "layout; the smallest needs " +
                         fmt("%.2f GiB", least_static / kGiB));

  const int top = std::max(1, space.top);
  result.exhaustive = static_cast<int>(open.size()) <= space.exhaustive_limit;
  if (!result.exhaustive)
    std::stable_sort(open.begin(), open.end(), [&](int a, int b) { return bound[a] > bound[b]; });

  auto faster = [&](int a, int b) {
    if (rows[a].report.tokens_per_s != rows[b].report.tokens_per_s)
      return rows[a].report.tokens_per_s > rows[b].report.tokens_per_s;
    return a < b;
  };
  std::vector<int> fit, simulated;
  std::size_t next = 0;
  while (next < open.size()) {
    if (!result.exhaustive && static_cast<int>(fit.size()) >= top) {
      // The top K are final once the next bound is below the K-th throughput found.
      std::sort(fit.begin(), fit.end(), faster);
      if (bound[open[next]] < rows[fit[top - 1]].report.tokens_per_s) break;
    }
    const std::size_t end = result.exhaustive ? open.size() : std::min(open.size(), next + kBatch);
    explore::parallel_for(static_cast<int>(end - next), options.jobs, [&](int k) {
      const int i = open[next + k];
      explore::finish_row(rows[i], wb, i, cap, options);
    });
    for (std::size_t k = next; k < end; ++k) {
      const int i = open[k];
      if (rows[i].status == RowStatus::Invalid) {
        ++result.invalid;
        continue;
      }
      simulated.push_back(i);
      if (rows[i].status == RowStatus::Ok) fit.push_back(i);
    }
    result.simulated = static_cast<int>(simulated.size());
    next = end;
  }
  result.pruned_bound = static_cast<int>(open.size() - next);
  std::sort(fit.begin(), fit.end(), faster);
  const int shown = std::min(top, static_cast<int>(fit.size()));
  for (int k = 0; k < shown; ++k) result.best.push_back(rows[fit[k]]);
  // The fastest simulated candidate, if it does not fit: what the cap costs.
  std::sort(simulated.begin(), simulated.end(), faster);
  if (!simulated.empty() && rows[simulated.front()].status == RowStatus::Oom &&
      (fit.empty() || faster(simulated.front(), fit.front()))) {
    result.fastest_oom = rows[simulated.front()];
    result.has_fastest_oom = true;
  }
  if (result.best.size() >= 2) result.why_runner_up = why_runner_up(result.best);
  return result;
}

std::string search_text(const SearchResult& r) {
  std::string out = "search: " + std::to_string(r.candidates) + " candidate layouts, " +
                    std::to_string(r.invalid) + " invalid, " + std::to_string(r.pruned_memory) +
                    " ruled out by static memory (no simulation), " +
                    (r.exhaustive ? std::string("exhaustive: every other one simulated (") +
                                        std::to_string(r.simulated) + ")"
                                  : std::string("pruned: ") + std::to_string(r.simulated) +
                                        " simulated in order "
                                        "of a throughput upper bound, " +
                                        std::to_string(r.pruned_bound) +
                                        " skipped (bound below the top results)") +
                    "; memory cap " + fmt("%.2f", r.mem_cap_gib) + " GiB\n\n";
  if (r.best.empty()) {
    out += "no layout fits in the memory cap\n";
  } else {
    std::vector<std::vector<std::string>> t;
    t.push_back({"#", "schedule", "tp", "pp", "dp", "mbs", "m", "vpp", "tokens/s", "MFU",
                 "TP bubble", "PP bubble", "peak GiB"});
    for (std::size_t k = 0; k < r.best.size(); ++k) {
      const Evaluation& e = r.best[k];
      const Configuration& c = e.config;
      t.push_back({std::to_string(k + 1), c.schedule, std::to_string(c.tp), std::to_string(c.pp),
                   std::to_string(e.dp), std::to_string(c.mbs), std::to_string(c.microbatches),
                   std::to_string(c.vpp), fmt("%.0f", e.report.tokens_per_s),
                   explore::percent(e.report.mfu), explore::percent(e.report.tp_bubble_rate),
                   explore::percent(e.report.pp_bubble_rate),
                   fmt("%.2f", e.report.max_peak_memory_gib)});
    }
    out += explore::text_table(t);
    out += "\nbest: " + explore::describe(r.best[0].config) + " with dp " +
           std::to_string(r.best[0].dp) + "\n";
    if (!r.why_runner_up.empty()) out += r.why_runner_up + "\n";
  }
  if (r.has_fastest_oom)
    out += "faster but over the cap: " + explore::describe(r.fastest_oom.config) + " (" +
           fmt("%.0f", r.fastest_oom.report.tokens_per_s) + " tokens/s; " + r.fastest_oom.reason +
           ")\n";
  return out;
}

std::string search_json(const SearchResult& r) {
  nlohmann::ordered_json j;
  j["mode"] = r.exhaustive ? "exhaustive" : "pruned";
  j["candidates"] = r.candidates;
  j["invalid"] = r.invalid;
  j["pruned_memory"] = r.pruned_memory;
  j["pruned_bound"] = r.pruned_bound;
  j["simulated"] = r.simulated;
  j["mem_cap_gib"] = r.mem_cap_gib;
  auto& best = j["best"] = nlohmann::ordered_json::array();
  for (const Evaluation& e : r.best) {
    nlohmann::ordered_json b;
    b["schedule"] = e.config.schedule;
    b["tp"] = e.config.tp;
    b["pp"] = e.config.pp;
    b["dp"] = e.dp;
    b["mbs"] = e.config.mbs;
    b["microbatches"] = e.config.microbatches;
    b["vpp"] = e.config.vpp;
    b["model_peak_gib"] = e.model_peak_gib;
    b["report"] = nlohmann::ordered_json::parse(report_json(e.report));
    best.push_back(std::move(b));
  }
  j["why_runner_up"] = r.why_runner_up;
  return j.dump(2) + "\n";
}

}  // namespace braid
