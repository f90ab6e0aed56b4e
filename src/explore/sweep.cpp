// sweep: every configuration evaluated on a thread pool. With the cache on, the distinct
// schedules and cost models are built once each (a sweep over tp, seq, mbs, sp and recompute
// reuses one schedule per (name, pp, vpp, m); 1f1b-i with vpp 2 and the V schedules share one
// cost model), and the static memory is checked against the cap before anything is simulated;
// with ExploreOptions::retime the configurations of one schedule then run in turn on one thread,
// each re-timing the DAG the one before it lowered. Every row equals what evaluate() returns for it
// alone (tests/explore_test.cpp checks this).
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../util/format.hpp"
#include "../util/units.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "format.hpp"
#include "pipeline.hpp"

namespace braid {

namespace {

void rank_rows(SweepResult& result) {
  std::vector<Evaluation>& rows = result.rows;
  const int n = static_cast<int>(rows.size());
  std::vector<int> ok, oom;
  for (int i = 0; i < n; ++i) {
    if (rows[i].status == RowStatus::Ok) ok.push_back(i);
    if (rows[i].status == RowStatus::Oom) oom.push_back(i);
  }
  auto faster = [&](int a, int b) {
    if (rows[a].report.tokens_per_s != rows[b].report.tokens_per_s)
      return rows[a].report.tokens_per_s > rows[b].report.tokens_per_s;
    return a < b;
  };
  std::sort(ok.begin(), ok.end(), faster);
  std::sort(oom.begin(), oom.end(), faster);
  result.ranking = ok;
  result.ranking.insert(result.ranking.end(), oom.begin(), oom.end());
  result.valid = static_cast<int>(ok.size() + oom.size());
  result.oom = static_cast<int>(oom.size());
  result.invalid = n - result.valid;

  // Speed-up over the first simulated 1f1b-i row (configuration order) with the same sizes: every
  // field but the schedule and its chunks per rank (the text of the rest is the key, so a new
  // field is a size without a change here).
  auto size_key = [](Configuration c) {
    c.schedule.clear();
    c.vpp = 0;
    return explore::describe(c);
  };
  std::map<std::string, int> baseline;
  for (int i = 0; i < n; ++i)
    if (rows[i].status != RowStatus::Invalid &&
        rows[i].config.schedule == name(ScheduleKind::Interleaved))
      baseline.emplace(size_key(rows[i].config), i);
  for (Evaluation& e : rows) {
    e.speedup = 0;
    e.group_best = false;
    if (e.status == RowStatus::Invalid) continue;
    auto it = baseline.find(size_key(e.config));
    if (it != baseline.end() && rows[it->second].report.tokens_per_s > 0)
      e.speedup = e.report.tokens_per_s / rows[it->second].report.tokens_per_s;
  }
  // Best of each (tp, pp, seq) group: its first row in the ranking that fits.
  std::map<std::tuple<int, int, int>, int> best;
  for (int i : ok)
    best.emplace(std::tuple{rows[i].config.tp, rows[i].config.pp, rows[i].config.seq}, i);
  for (const auto& [key, i] : best) rows[i].group_best = true;
}

void check_static_cap(const std::vector<double>& static_bytes, double cap) {
  // static_bytes: per configuration that got that far; empty when none did.
  if (static_bytes.empty()) return;
  const double least = *std::min_element(static_bytes.begin(), static_bytes.end());
  if (least > cap) {
    throw InputError("--mem-cap", util::format("%.2f GiB", cap / kGiB),
                     util::format("below the static memory (weights, gradients, optimizer state, "
                                  "fixed overhead) "
                                  "of every configuration; the smallest needs %.2f GiB",
                                  least / kGiB));
  }
}

void check_some_valid(const std::vector<Evaluation>& rows) {
  for (const Evaluation& e : rows)
    if (e.status != RowStatus::Invalid) return;
  // Count the distinct reasons, most frequent first, for the one-line message.
  std::map<std::string, int> count;
  for (const Evaluation& e : rows) ++count[e.reason];
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [reason, k] : count) by_count.emplace_back(-k, reason);
  std::sort(by_count.begin(), by_count.end());
  std::string text = "none of the " + std::to_string(rows.size()) + " combinations is valid: ";
  text += std::to_string(-by_count.front().first) + " x " + by_count.front().second;
  if (by_count.size() > 1)
    text += " (and " + std::to_string(by_count.size() - 1) + " other reasons)";
  throw InputError("sweep", "configurations", text);
}

// This process's share of the configurations (all of them for one process).
struct Share {
  std::vector<double> costs;  // per configuration
  std::vector<int> mine;      // indices this process evaluates
  std::vector<int> all;       // 0 .. n-1
};
Share share_of(const Study& base, const std::vector<Configuration>& configs,
               const ExploreOptions& options) {
  Share s;
  const int n = static_cast<int>(configs.size());
  s.all.resize(n);
  for (int i = 0; i < n; ++i) s.all[i] = i;
  if (options.group.size <= 1) {
    s.mine = s.all;
    s.costs.assign(n, 1);
    return s;
  }
  s.costs.resize(n);
  for (int i = 0; i < n; ++i) s.costs[i] = estimated_cost(base, configs[i], options);
  s.mine = explore::share(options.group, s.costs);
  return s;
}

SweepResult sweep_plain(const Study& base, const Profile& profile,
                        const std::vector<Configuration>& configs, const ExploreOptions& options) {
  SweepResult result;
  const int n = static_cast<int>(configs.size());
  result.rows.resize(n);
  const Share share = share_of(base, configs, options);
  explore::Ticker progress{options, static_cast<int>(share.mine.size())};
  explore::parallel_for(static_cast<int>(share.mine.size()), options.jobs, [&](int k) {
    const int i = share.mine[k];
    result.rows[i] = evaluate(base, profile, configs[i], options);
    progress.tick();
  });
  explore::exchange_rows(options.group, share.costs, share.all, result.rows);
  check_some_valid(result.rows);
  std::vector<double> statics;
  for (const Evaluation& e : result.rows)
    if (e.status != RowStatus::Invalid) statics.push_back(e.static_gib * kGiB);
  check_static_cap(statics, memory_cap(profile, options).cap_bytes);
  return result;
}

// Shared among processes: each builds the schedules and cost models of its own share, the least
// static memory is agreed on (so every process raises the same --mem-cap error), each simulates
// its share, and the rows are exchanged.
SweepResult sweep_cached(const Study& base, const Profile& profile,
                         const std::vector<Configuration>& configs, const ExploreOptions& options) {
  SweepResult result;
  const int n = static_cast<int>(configs.size());
  result.rows.resize(n);
  const MemoryCap cap = memory_cap(profile, options);
  const Share share = share_of(base, configs, options);
  const int own = static_cast<int>(share.mine.size());
  std::vector<Configuration> own_configs;
  own_configs.reserve(own);
  for (int i : share.mine) own_configs.push_back(configs[i]);
  std::vector<Evaluation> own_rows(own);
  const explore::Workbench wb =
      explore::build_workbench(base, profile, own_configs, options, own_rows);

  // The static memory against the cap needs no simulation.
  std::vector<int> todo;
  double least = std::numeric_limits<double>::infinity();
  for (int k = 0; k < own; ++k) {
    if (!wb.ready(k)) continue;
    least = std::min(least, explore::max_static_bytes(wb.cost(k), wb.schedule(k)));
    todo.push_back(k);
  }
  least = explore::min_all(options.group, least);
  auto gather = [&] {
    for (int k = 0; k < own; ++k) result.rows[share.mine[k]] = std::move(own_rows[k]);
    explore::exchange_rows(options.group, share.costs, share.all, result.rows);
  };
  if (least == std::numeric_limits<double>::infinity()) {
    gather();  // nothing valid anywhere: every process needs every reason for the message
    check_some_valid(result.rows);
  }
  check_static_cap({least}, cap.cap_bytes);

  // Lower, simulate, report: the expensive part.
  explore::Ticker progress{options, static_cast<int>(todo.size())};
  explore::finish_rows(own_rows, wb, todo, cap, options, progress);
  gather();
  check_some_valid(result.rows);
  return result;
}

}  // namespace

SweepResult sweep(const Study& base, const Profile& profile,
                  const std::vector<Configuration>& configs, const ExploreOptions& options) {
  if (configs.empty())
    throw InputError("sweep", "configurations",
                     "the cross product is empty; give every list at "
                     "least one value");
  SweepResult result = options.cache ? sweep_cached(base, profile, configs, options)
                                     : sweep_plain(base, profile, configs, options);
  result.cap = memory_cap(profile, options);
  for (Evaluation& e : result.rows)  // the cap's fields are not in rows other processes sent
    if (e.status != RowStatus::Invalid) apply_memory_cap(e.report, result.cap);
  result.mem_cap_gib = result.cap.cap_bytes / kGiB;
  result.fixed_overhead_gib = profile.fixed_overhead_bytes / kGiB;
  rank_rows(result);
  return result;
}

SweepResult sweep_from_rows(std::vector<Evaluation> rows, const MemoryCap& cap) {
  if (rows.empty())
    throw InputError("sweep", "configurations",
                     "the cross product is empty; give every list at least one value");
  SweepResult result;
  result.rows = std::move(rows);
  check_some_valid(result.rows);
  std::vector<double> statics;
  for (Evaluation& e : result.rows)
    if (e.status != RowStatus::Invalid) {
      statics.push_back(e.static_gib * kGiB);
      apply_memory_cap(e.report, cap);  // the margin and thin flag rows do not carry (shards)
    }
  check_static_cap(statics, cap.cap_bytes);
  result.cap = cap;
  result.mem_cap_gib = cap.cap_bytes / kGiB;
  result.fixed_overhead_gib = cap.fixed_overhead_bytes / kGiB;
  rank_rows(result);
  return result;
}

}  // namespace braid
