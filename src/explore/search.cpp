// search: the fastest layout (tp, pp, dp, micro-batch size, microbatches, schedule) of a GPU count
// for a global batch, within the memory cap. Candidates whose static memory alone exceeds the cap
// are never simulated (memory first); when the space is large, the rest are simulated in order
// of an upper bound on their throughput (the busiest rank's compute alone), in fixed-size batches,
// and the search stops once no unsimulated candidate can enter the top K. The batches do not
// depend on --jobs, so neither does the result. When nothing fits, the same search runs again with
// each lever that lowers memory (SP, recomputation, offloading, the distributed optimizer).
#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/format.hpp"
#include "../util/units.hpp"
#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/rank_layout.hpp"
#include "braid/schedule.hpp"
#include "format.hpp"
#include "pipeline.hpp"

namespace braid {

namespace {

constexpr int kBatch = 16;  // candidates simulated between two bound checks

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

double chunk_compute_s(const ChunkCost& c) {
  double t = 0;
  for_each_unit(c, [&](const UnitCost& u) {
    for (const PhaseCost& p : u.phase) t += p.time_s;
  });
  return t;
}

using explore::field_json;
using explore::field_text;

std::string pct(double rate) { return explore::percent(rate, 1); }
std::string pts(double a, double b) { return pct(a) + " vs " + pct(b); }

// Why `second` is slower than `best`: every field in which it differs, the bubble that grew
// most, else the compute itself (MFU at equal bubbles: thinner GEMMs at a larger tp, a smaller
// micro-batch, recomputation); and what it offers in exchange (memory).
std::string why_slower(const Evaluation& best, const Evaluation& second) {
  const Report& a = best.report;
  const Report& b = second.report;
  const double slower = 1 - b.tokens_per_s / a.tokens_per_s;
  std::string s = "the runner-up (" + explore::describe(second.config) + ", dp " +
                  std::to_string(second.dp) + ") is " + util::format("%.2f%%", slower * 100) +
                  " slower; it " + differences(second, best) + ": ";
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
  }
  s += "; MFU " + pts(b.mfu, a.mfu) + "; peak memory " +
       util::format("%.1f", b.max_peak_memory_gib) + " vs " +
       util::format("%.1f", a.max_peak_memory_gib) + " GiB";
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

// A lower bound on a rank's peak without simulating: its static memory plus the activations it
// must hold at once. Every schedule runs a microbatch's forward through all of a rank's chunks
// before that microbatch's first backward there, and frees nothing it saved before that backward
// starts: one microbatch's saved activations on each chunk are held together. And at the
// moment the schedule has most chunk-microbatches on the device (validate()'s peak_on_device:
// forward done, backward not, not offloaded), each holds at least the smallest chunk's. A
// microbatch that is offloaded (`offloads`) may leave the device before its backward: the first
// term is then left out.
double peak_lower_bound(const CostModel& cost, const Schedule& schedule,
                        const std::vector<int>& on_device, bool offloads) {
  double worst = 0;
  for (int r = 0; r < schedule.pp; ++r) {
    const std::vector<int> stages = schedule.virtual_stages_of(r);
    double one_each = 0, least = cost.chunks[stages.front()].activation_bytes;
    for (int v : stages) {
      one_each += cost.chunks[v].activation_bytes;
      least = std::min(least, cost.chunks[v].activation_bytes);
    }
    const double held = std::max(offloads ? 0.0 : one_each, on_device[r] * least);
    worst = std::max(worst, total(rank_static_parts(cost, stages)) + held);
  }
  return worst + cost.fixed_overhead_bytes;  // the peak's terms, as the cap's
}

bool offloads(const Study& study, const Configuration& c) {
  return study.training.offload > 0 || c.schedule == name(ScheduleKind::StpOffload);
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

namespace {

// The data-parallel size of the study's cluster at tp x cp x pp (its rank layout's).
int data_parallel(const Study& study, int tp, int cp, int pp) {
  return make_rank_layout(study.cluster.gpus(), study.cluster.gpus_per_node, tp, cp, pp).dp;
}

// The model runs context parallelism at all (the rules of validate_context_parallel in
// config/load.cpp): a fused attention kernel, no vision encoder.
bool model_runs_cp(const ModelConfig& model) { return model.flash_attention && !model.vision; }

}  // namespace

std::vector<int> default_cp_values(const Study& study) {
  std::vector<int> out{study.parallel.cp};
  const int seq = study.training.seq;
  if (seq >= kLongSequence && model_runs_cp(study.model))
    for (int cp : {1, 2, 4, 8})
      if (seq % (2 * cp) == 0 && cp != study.parallel.cp) out.push_back(cp);
  std::sort(out.begin(), out.end());
  return out;
}

std::string cp_rule_text(const Study& study) {
  const std::string seq = std::to_string(study.training.seq);
  if (study.training.seq < kLongSequence)
    return "CP not tried: seq " + seq + " < " + std::to_string(kLongSequence) + " (--cp tries it)";
  if (!model_runs_cp(study.model))
    return "CP not tried: model " + study.model.name +
           (study.model.vision ? " has a vision encoder" : " runs unfused attention");
  return "CP tried: seq " + seq + " >= " + std::to_string(kLongSequence);
}

std::vector<int> default_ep_values(const Study& study, int pp, int etp) {
  std::vector<int> out;
  if (!study.model.moe) return out;
  const int gpus = study.cluster.gpus();
  for (int ep : divisors(study.model.moe->experts))
    if (gpus % (std::int64_t{etp} * ep * pp) == 0) out.push_back(ep);
  return out;
}

std::vector<Configuration> search_candidates(const Study& study, const SearchSpace& space) {
  if (space.global_batch <= 0)
    throw InputError("--global-batch", std::to_string(space.global_batch), "must be 1 or more");
  const int gpus = study.cluster.gpus();
  std::vector<int> vpps = space.vpp;
  if (vpps.empty()) vpps.push_back(study.parallel.vpp);
  std::vector<Configuration> out;
  const std::vector<int> cps = space.cp.empty() ? default_cp_values(study) : space.cp;
  for (int tp : divisors(gpus))
    for (int cp : cps) {
      if ((gpus / tp) % cp != 0) continue;
      for (int pp : divisors(gpus / (tp * cp))) {
        const int dp = data_parallel(study, tp, cp, pp);
        if (space.global_batch % dp != 0) continue;
        const int per_replica = space.global_batch / dp;
        for (int mbs : space.mbs) {
          if (per_replica % mbs != 0) continue;
          SweepAxes axes;
          axes.tp = {tp};
          axes.cp = {cp};
          axes.cp_comm_types = space.cp_comm_types;
          axes.pp = {pp};
          axes.vpp = vpps;
          axes.seq = {study.training.seq};
          axes.mbs = {mbs};
          axes.microbatches = {per_replica / mbs};
          axes.sp =
              space.sp.empty() ? std::vector<bool>{study.parallel.sequence_parallel} : space.sp;
          axes.recompute = space.recompute.empty()
                               ? std::vector<Recompute>{study.training.recompute}
                               : space.recompute;
          axes.schedules = space.schedules;
          if (!study.model.moe) {
            for (const Configuration& c : cross_product(axes)) out.push_back(c);
            continue;
          }
          // A Mixture-of-Experts model: every (etp, ep) too, etp 1 unless --etp gives more.
          for (int etp : space.etp.empty() ? std::vector<int>{1} : space.etp) {
            axes.etp = {etp};
            axes.ep =
                space.ep.empty() ? default_ep_values(study, pp, expert_tp(tp, etp)) : space.ep;
            if (axes.ep.empty()) continue;
            for (const Configuration& c : cross_product(axes)) out.push_back(c);
          }
        }
      }
    }
  if (out.empty())
    throw InputError("--global-batch", std::to_string(space.global_batch),
                     "no layout of " + std::to_string(gpus) +
                         " GPUs divides it into dp x mbs x microbatches with the given --mbs");
  return out;
}

namespace {

// The setting every row shares, for the header.
std::string setting_of(const Study& study, const SearchSpace& space) {
  std::string sp, rc;
  if (space.sp.empty()) sp = study.parallel.sequence_parallel ? "on" : "off";
  for (bool b : space.sp) sp += (sp.empty() ? "" : ",") + std::string(b ? "on" : "off");
  if (space.recompute.empty()) rc = name(study.training.recompute);
  for (Recompute r : space.recompute) rc += (rc.empty() ? "" : ",") + std::string(name(r));
  std::string cp;
  for (int c : space.cp.empty() ? default_cp_values(study) : space.cp)
    cp += (cp.empty() ? "" : ",") + std::to_string(c);
  cp += space.cp.empty() ? " (" + cp_rule_text(study) + ")" : std::string(" (--cp)");
  if (study.model.moe) {  // the expert sizes, only where they are an axis
    auto list = [](const std::vector<int>& v) {
      std::string out;
      for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
      return out;
    };
    cp += ", ep " +
          (space.ep.empty() ? "dividing the " + std::to_string(study.model.moe->experts) +
                                  " experts with etp x ep x pp dividing the GPUs"
                            : list(space.ep) + " (--ep)") +
          ", etp " + (space.etp.empty() ? std::string("1") : list(space.etp) + " (--etp)");
  }
  return std::to_string(study.cluster.gpus()) + " GPUs of " + study.cluster.name + " (" +
         std::to_string(study.cluster.nodes) + " x " + std::to_string(study.cluster.gpus_per_node) +
         "), model " + study.model.name + ", global batch " + std::to_string(space.global_batch) +
         ", seq " + std::to_string(study.training.seq) + ", cp " + cp + ", sp " + sp +
         ", recompute " + rc + ", offload " + util::format("%g", study.training.offload) +
         ", distributed optimizer " + (study.training.distributed_optimizer ? "on" : "off");
}

// What the simulated rows keep until the search ends (size_limit.hpp: kKeptBytesPerOp per op,
// kKeptBytesPerRow per row), counted batch by batch before each is simulated: an exhaustive
// search simulates every candidate in one batch, a pruned one stops early.
struct KeptRows {
  double ops = 0;
  int rows = 0;
  void add(const std::vector<double>& batch_ops) {
    for (double o : batch_ops) ops += o;
    rows += static_cast<int>(batch_ops.size());
    explore::check_rows_kept("search", ops, static_cast<std::size_t>(rows),
                             std::to_string(rows) + " simulated candidates",
                             "narrow it (fewer --schedules or --mbs values, one --sp or "
                             "--recompute choice, a smaller --exhaustive-limit)");
  }
};

// `lever`: a search for a lever, whose only answer is whether something fits and the fastest
// that does: the memory bound below then applies to every space, however small.
SearchResult search_once(const Study& base, const Profile& profile, const SearchSpace& space,
                         const ExploreOptions& options, bool lever = false) {
  const Study study = with_gpus(base, space.gpus);
  const std::vector<Configuration> configs = search_candidates(study, space);
  const int n = static_cast<int>(configs.size());
  SearchResult result;
  result.cap = memory_cap(profile, options);
  const double cap = result.cap.cap_bytes;  // for the peak, fixed overhead included
  result.candidates = n;
  result.mem_cap_gib = cap / kGiB;
  result.gpus = space.gpus;
  result.global_batch = space.global_batch;
  result.setting = setting_of(study, space);
  std::vector<Evaluation> rows(n);
  const explore::Workbench wb = explore::build_workbench(study, profile, configs, options, rows);
  std::vector<bool> listed(n, false);  // goes into result.rows

  // Memory first: static memory over the cap rules a candidate out without simulating it.
  std::vector<int> open;
  std::vector<double> bound(n, 0);
  std::map<const Schedule*, std::vector<int>> on_device;  // validate()'s, per shared schedule
  bool any_valid = false;
  for (int i = 0; i < n; ++i) {
    // A designed configuration may be ruled out before its design (its row has the reason).
    bool over = wb.static_over_cap[i];
    if (!over && !wb.ready(i)) {
      ++result.invalid;
      listed[i] = true;
      continue;
    }
    any_valid = true;
    if (!over) {
      const double stat = explore::max_static_bytes(wb.cost(i), wb.schedule(i));
      over = stat > cap;
      if (over) rows[i].reason = explore::static_over_cap_reason(stat, cap, "simulated");
    }
    if (over) {
      ++result.pruned_memory;
      rows[i].dp = data_parallel(study, configs[i].tp, configs[i].cp, configs[i].pp);
      listed[i] = true;
      continue;
    }
    bound[i] = throughput_upper_bound(wb.cost(i), wb.schedule(i));
    open.push_back(i);
  }
  if (!any_valid) {
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

  // A space too large to simulate whole: the activations a layout must hold at once rule out
  // more without simulating (at long sequences most layouts fail here, which keeps a search over
  // cp, sp and recomputation fast). A small space is simulated whole, so that the fastest layout
  // over the cap and what each lever costs against it stay known.
  if (lever || static_cast<int>(open.size()) > space.exhaustive_limit) {
    std::vector<int> kept;
    for (int i : open) {
      const Schedule& schedule = wb.schedule(i);
      auto it = on_device.find(&schedule);
      if (it == on_device.end()) {
        std::vector<int> peak = validate(schedule).peak_on_device;
        if (static_cast<int>(peak.size()) != schedule.pp) peak.assign(schedule.pp, 0);
        it = on_device.emplace(&schedule, std::move(peak)).first;
      }
      const double least =
          peak_lower_bound(wb.cost(i), schedule, it->second, offloads(study, configs[i]));
      if (least <= cap) {
        kept.push_back(i);
        continue;
      }
      rows[i].reason = "static memory and the activations held at once " +
                       util::format("%.2f GiB", least / kGiB) + " over the " +
                       util::format("%.2f GiB", cap / kGiB) + " cap; not simulated";
      ++result.pruned_memory;
      rows[i].dp = data_parallel(study, configs[i].tp, configs[i].cp, configs[i].pp);
      listed[i] = true;
    }
    open = std::move(kept);
  }

  const int top = std::max(1, space.top);
  result.exhaustive = static_cast<int>(open.size()) <= space.exhaustive_limit;
  if (!result.exhaustive)
    std::stable_sort(open.begin(), open.end(), [&](int a, int b) { return bound[a] > bound[b]; });

  auto faster = [&](int a, int b) {
    if (rows[a].report.tokens_per_s != rows[b].report.tokens_per_s)
      return rows[a].report.tokens_per_s > rows[b].report.tokens_per_s;
    return a < b;
  };
  explore::Ticker ticker{options, static_cast<int>(open.size())};
  KeptRows kept;
  std::vector<int> fit, simulated;
  // Simulates rows `todo` (`costs`: their estimated ops), shared among processes: each simulates
  // its part, then all hold every row.
  auto simulate = [&](const std::vector<int>& todo, const std::vector<double>& costs) {
    const std::vector<int> mine = explore::share(options.group, costs);
    explore::parallel_for(static_cast<int>(mine.size()), options.jobs, [&](int k) {
      const int i = todo[mine[k]];
      explore::finish_row(rows[i], wb, i, result.cap, options);
      ticker.tick();
    });
    explore::exchange_rows(options.group, costs, todo, rows);
    for (int i : todo)  // the cap's fields are not in the rows exchanged
      if (rows[i].status != RowStatus::Invalid) apply_memory_cap(rows[i].report, result.cap);
  };
  // A lever's search answers with the fastest layout that fits, and with those over the cap only
  // when none fits: a layout whose activation peak, known before timing it, puts it over the cap
  // is left unsimulated until then (`deferred`; one process: the others would hold different
  // rows). The layouts that fit, the order of the batches and where the bound ends them do not
  // change, nor does the answer. The rows it simulates carry only the figures that rank them
  // (finish_if_fits); the ones it answers with are finished again, whole, at the end.
  const bool untimed_oom = lever && options.group.size == 1;
  std::vector<char> over(n, 0);  // per candidate, written by the threads
  // Finishes row i whole if it holds only the figures that rank it (its ranking unchanged).
  auto whole = [&](int i) {
    if (!untimed_oom || rows[i].status == RowStatus::Invalid) return;
    explore::finish_row(rows[i], wb, i, result.cap, options);
  };
  std::vector<int> deferred;
  std::size_t next = 0;
  while (next < open.size()) {
    if (!result.exhaustive && static_cast<int>(fit.size()) >= top) {
      // The top K are final once the next bound is below the K-th throughput found.
      std::sort(fit.begin(), fit.end(), faster);
      if (bound[open[next]] < rows[fit[top - 1]].report.tokens_per_s) break;
    }
    const std::size_t end = result.exhaustive ? open.size() : std::min(open.size(), next + kBatch);
    // Shared among processes: each simulates its part of the batch, then all hold the batch.
    const std::vector<int> batch(open.begin() + static_cast<std::ptrdiff_t>(next),
                                 open.begin() + static_cast<std::ptrdiff_t>(end));
    std::vector<double> costs(batch.size(), 1);
    for (std::size_t k = 0; k < batch.size(); ++k)
      costs[k] = explore::estimated_ops(study, configs[batch[k]]);
    kept.add(costs);  // refused before the batch is simulated, not when the memory is gone
    if (untimed_oom) {
      // The largest first, so that the batch's last task to finish is short (each row is its
      // own: the order changes no result).
      std::vector<int> by_size(batch.size());
      std::iota(by_size.begin(), by_size.end(), 0);
      std::stable_sort(by_size.begin(), by_size.end(),
                       [&](int a, int b) { return costs[a] > costs[b]; });
      explore::parallel_for(static_cast<int>(batch.size()), options.jobs, [&](int k) {
        const int i = batch[by_size[k]];
        if (explore::finish_row_if_fits(rows[i], wb, i, result.cap, options))
          ticker.tick();
        else
          over[i] = 1;  // ticks when simulated
      });
    } else {
      simulate(batch, costs);
    }
    for (std::size_t k = next; k < end; ++k) {
      const int i = open[k];
      listed[i] = true;
      if (over[i]) {
        deferred.push_back(i);
        continue;
      }
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
  // Nothing fits: the layouts over the cap are the answer after all (the fastest of them and what
  // it needs), as if they had been simulated in their batches (no batch ends the loop early
  // without something that fits).
  std::vector<char> is_deferred(n, 0);  // finished whole by simulate()
  if (fit.empty() && !deferred.empty()) {
    simulate(deferred, std::vector<double>(deferred.size(), 1));
    simulated.insert(simulated.end(), deferred.begin(), deferred.end());
    result.simulated = static_cast<int>(simulated.size());
    for (int i : deferred) is_deferred[i] = 1;
  }
  result.pruned_bound = static_cast<int>(open.size() - next);
  std::sort(fit.begin(), fit.end(), faster);
  const int shown = std::min(top, static_cast<int>(fit.size()));
  for (int k = 0; k < shown; ++k) {
    whole(fit[k]);
    result.best.push_back(rows[fit[k]]);
  }
  // The fastest simulated candidate, if it does not fit: what the cap costs.
  std::sort(simulated.begin(), simulated.end(), faster);
  if (!simulated.empty() && rows[simulated.front()].status == RowStatus::Oom &&
      (fit.empty() || faster(simulated.front(), fit.front()))) {
    if (!is_deferred[simulated.front()]) whole(simulated.front());
    result.fastest_oom = rows[simulated.front()];
    result.has_fastest_oom = true;
  }
  if (result.best.size() >= 2) result.why_runner_up = why_runner_up(result.best);
  // A lever's rows (left as the figures that rank them, but for those above) are never shown.
  for (int i = 0; i < n; ++i)
    if (listed[i]) result.rows.push_back(std::move(rows[i]));
  return result;
}

// The best layout with one lever, or why there is none.
Lever lever_result(std::string name, const Study& study, const Profile& profile,
                   const SearchSpace& space, const ExploreOptions& options) {
  Lever lever;
  lever.name = std::move(name);
  try {
    SearchResult r = search_once(study, profile, space, options, /*lever=*/true);
    lever.fits = !r.best.empty();
    lever.best = r.best;
    if (!lever.fits)
      lever.detail = r.has_fastest_oom
                         ? "still over the cap: the fastest layout " +
                               explore::describe(r.fastest_oom.config) + ": " + r.fastest_oom.reason
                         : "still over the cap: every layout's memory (static, or static + the "
                           "activations held at once) exceeds it before simulation";
  } catch (const InputError& e) {
    lever.detail = "does not apply: " + explore::reason_of(e);
  }
  return lever;
}

// More context parallelism: the cp sizes not yet tried (powers of two up to the GPUs, each where
// the sequence splits into 2 x cp chunks), smallest first, each alone; the first that fits is
// the lever ("--cp 4"), else it names every size tried. Empty when none is left to try.
std::optional<Lever> cp_lever(const Study& base, const Profile& profile, const SearchSpace& space,
                              const ExploreOptions& options) {
  const std::vector<int> tried = space.cp.empty() ? default_cp_values(base) : space.cp;
  const int seq = base.training.seq;
  std::vector<int> more;
  for (int cp = 2; cp <= space.gpus; cp *= 2)
    if (seq % (2 * cp) == 0 && std::find(tried.begin(), tried.end(), cp) == tried.end())
      more.push_back(cp);
  if (more.empty()) return std::nullopt;
  if (!model_runs_cp(base.model)) {
    Lever no;
    no.name = "--cp";
    no.detail = "does not apply: " + cp_rule_text(base);
    return no;
  }
  Lever last;
  std::string sizes;
  for (int cp : more) {
    SearchSpace s = space;
    s.cp = {cp};
    last = lever_result("--cp " + std::to_string(cp), base, profile, s, options);
    if (last.fits) return last;
    sizes += (sizes.empty() ? "" : ",") + std::to_string(cp);
  }
  last.name = "--cp " + sizes;
  last.detail = "each size alone: " + last.detail + " (at cp " + std::to_string(more.back()) + ")";
  return last;
}

// The levers, each alone, then all together if none is enough. A lever already in effect is
// left out.
std::vector<Lever> try_levers(const Study& base, const Profile& profile, const SearchSpace& space,
                              const ExploreOptions& options) {
  struct Try {
    std::string name;
    SearchSpace space;
    Study study;
  };
  SearchSpace quiet = space;
  quiet.try_levers = false;
  quiet.top = 1;
  std::vector<Try> tries;
  auto has = [](const auto& list, auto value) {
    return std::find(list.begin(), list.end(), value) != list.end();
  };
  const bool sp_on = space.sp.empty() ? base.parallel.sequence_parallel : has(space.sp, true);
  const std::vector<Recompute> rc =
      space.recompute.empty() ? std::vector<Recompute>{base.training.recompute} : space.recompute;
  Try all{"all of them together", quiet, base};
  if (!sp_on) {
    Try t{"--sp on", quiet, base};
    t.space.sp = {true};
    all.space.sp = {true};
    tries.push_back(t);
  }
  for (Recompute r : {Recompute::Selective, Recompute::Full}) {
    if (has(rc, r)) continue;
    Try t{std::string("--recompute ") + name(r), quiet, base};
    t.space.recompute = {r};
    tries.push_back(t);
  }
  if (!has(rc, Recompute::Full)) all.space.recompute = {Recompute::Full};
  if (base.training.offload < 1) {
    Try t{"--offload 1", quiet, base};
    t.study.training.offload = 1;
    all.study.training.offload = 1;
    tries.push_back(t);
  }
  if (!base.training.distributed_optimizer) {
    Try t{"distributed optimizer (training.distributed_optimizer: true)", quiet, base};
    t.study.training.distributed_optimizer = true;
    all.study.training.distributed_optimizer = true;
    tries.push_back(t);
  }
  std::vector<Lever> out;
  for (const Try& t : tries)
    out.push_back(lever_result(t.name, t.study, profile, t.space, options));
  if (std::optional<Lever> cp = cp_lever(base, profile, quiet, options)) out.push_back(*cp);
  bool any = false;
  for (const Lever& l : out) any = any || l.fits;
  // Together only when no lever alone is enough (and there are two to put together).
  if (!any && tries.size() > 1)
    out.push_back(lever_result(all.name, all.study, profile, all.space, options));
  return out;
}

}  // namespace

SearchResult search(const Study& base, const Profile& profile, const SearchSpace& space,
                    const ExploreOptions& options) {
  SearchResult result = search_once(base, profile, space, options);
  if (result.best.empty() && space.try_levers)
    result.levers = try_levers(base, profile, space, options);
  return result;
}

std::string differences(const Evaluation& a, const Evaluation& b) {
  std::vector<std::string> d;
  auto differ = [&d](const char* label, const std::string& u, const std::string& v) {
    if (u != v) d.push_back(std::string(label) + " " + u + " vs " + v);
  };
  // Field by field, b's fields in step with a's; dp (derived) beside the tp and pp it comes from.
  std::vector<std::string> theirs;
  visit_config_fields(
      b.config, [&theirs](const ConfigField&, const auto& v) { theirs.push_back(field_text(v)); });
  std::size_t k = 0;
  visit_config_fields(a.config, [&](const ConfigField& f, const auto& v) {
    differ(f.label, field_text(v), theirs[k++]);
    if (std::string_view(f.key) == "pp") differ("dp", field_text(a.dp), field_text(b.dp));
  });
  if (d.empty()) return "";
  std::string s = "differs in ";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + d[i];
  return s;
}

namespace {

std::string margin_gib(const Evaluation& e) { return util::format("%.2f", e.report.margin_gib); }

std::string levers_text(const SearchResult& r) {
  std::string out = "\nwhat would make it fit (each lever alone; the fastest layout with it):\n";
  const double ref = r.has_fastest_oom ? r.fastest_oom.report.iteration_time_s : 0;
  for (const Lever& l : r.levers) {
    out += "  " + l.name + ": ";
    if (l.fits) {
      const Evaluation& e = l.best.front();
      out += "fits: " + explore::describe(e.config) + ", dp " + std::to_string(e.dp) + ", " +
             util::format("%.3f s", e.report.iteration_time_s) + " per step, peak " +
             util::format("%.2f GiB", e.report.max_peak_memory_gib) + " (margin " + margin_gib(e) +
             " GiB" + (e.report.thin_margin ? ", thin" : "") + ")";
      if (ref > 0)
        out += "; cost: " + util::format("%+.1f%%", (e.report.iteration_time_s / ref - 1) * 100) +
               " step time against the fastest layout over the cap (" +
               util::format("%.3f s", ref) + ")";
    } else {
      out += l.detail;
    }
    out += "\n";
  }
  out += "  (more PP: every pp that divides the GPUs is already among the candidates)\n";
  return out;
}

}  // namespace

std::string search_text(const SearchResult& r, bool show_invalid) {
  std::string out = "search: " + r.setting + "\n" + memory_cap_text(r.cap) + "\n";
  out += std::to_string(r.candidates) + " candidate layouts, " + std::to_string(r.invalid) +
         " invalid, " + std::to_string(r.pruned_memory) +
         " ruled out by memory (static, or static + the activations held at once; "
         "no simulation), " +
         (r.exhaustive
              ? std::string("exhaustive: every other one simulated (") +
                    std::to_string(r.simulated) + ")"
              : std::string("pruned: ") + std::to_string(r.simulated) +
                    " simulated in order of a throughput upper bound, " +
                    std::to_string(r.pruned_bound) + " skipped (bound below the top results)") +
         "; ranked by step time (every row runs the same global batch)\n\n";
  if (r.best.empty()) {
    out += "no layout fits in the memory cap\n";
  } else {
    std::vector<std::vector<std::string>> t;
    t.push_back({"#"});
    for (const std::string& h : explore::layout_header(r.best.front())) t.back().push_back(h);
    for (std::size_t k = 0; k < r.best.size(); ++k) {
      t.push_back({std::to_string(k + 1)});
      for (std::string& cell : explore::layout_cells(r.best[k])) t.back().push_back(cell);
    }
    out += explore::text_table(t);
    out += "\nbest: " + explore::describe(r.best[0].config) + " with dp " +
           std::to_string(r.best[0].dp) + "\n";
    if (!r.why_runner_up.empty()) out += r.why_runner_up + "\n";
  }
  if (r.has_fastest_oom)
    out += "faster but over the cap: " + explore::describe(r.fastest_oom.config) + " (" +
           util::format("%.3f s", r.fastest_oom.report.iteration_time_s) + " per step; " +
           r.fastest_oom.reason + ")\n";
  if (!r.levers.empty()) out += levers_text(r);
  std::vector<const Evaluation*> invalid;
  for (const Evaluation& e : r.rows)
    if (e.status == RowStatus::Invalid) invalid.push_back(&e);
  return out + explore::invalid_text(invalid, "invalid or ruled out", show_invalid);
}

namespace {

nlohmann::ordered_json row_json(const Evaluation& e) {
  nlohmann::ordered_json b;
  // The configuration's fields less seq (the search's setting names it: every row has the
  // study's), dp beside the tp and pp it comes from, the global batch after the microbatches.
  visit_config_fields(e.config, [&](const ConfigField& f, const auto& v) {
    const std::string_view key = f.key;
    if (key == "seq") return;
    if (key == "vpp") b["dp"] = e.dp;
    b[f.key] = field_json(v);
    if (key == "microbatches") b["global_batch"] = e.dp * e.config.mbs * e.config.microbatches;
  });
  if (e.status == RowStatus::Invalid) {
    b["reason"] = e.reason;
    return b;
  }
  b["margin_gib"] = e.report.margin_gib;
  b["thin_margin"] = e.report.thin_margin;
  b["report"] = nlohmann::ordered_json::parse(report_json(e.report));
  return b;
}

}  // namespace

std::string search_json(const SearchResult& r) {
  nlohmann::ordered_json j;
  j["setting"] = r.setting;
  j["gpus"] = r.gpus;
  j["global_batch"] = r.global_batch;
  j["mode"] = r.exhaustive ? "exhaustive" : "pruned";
  j["candidates"] = r.candidates;
  j["invalid"] = r.invalid;
  j["pruned_memory"] = r.pruned_memory;
  j["pruned_bound"] = r.pruned_bound;
  j["simulated"] = r.simulated;
  j["cap_gib"] = r.mem_cap_gib;
  j["thin_under_gib"] = r.cap.thin_bytes() / kGiB;
  j["hbm_gib"] = r.cap.hbm_bytes / kGiB;
  j["fixed_overhead_gib"] = r.cap.fixed_overhead_bytes / kGiB;
  j["allocator_margin_gib"] = r.cap.given
                                  ? nlohmann::ordered_json(nullptr)
                                  : nlohmann::ordered_json(r.cap.allocator_margin_bytes / kGiB);
  auto& best = j["best"] = nlohmann::ordered_json::array();
  for (const Evaluation& e : r.best) best.push_back(row_json(e));
  j["why_runner_up"] = r.why_runner_up;
  auto& levers = j["levers"] = nlohmann::ordered_json::array();
  for (const Lever& l : r.levers) {
    nlohmann::ordered_json x;
    x["lever"] = l.name;
    x["fits"] = l.fits;
    x["detail"] = l.detail;
    x["best"] = l.best.empty() ? nlohmann::ordered_json(nullptr) : row_json(l.best.front());
    levers.push_back(std::move(x));
  }
  auto& invalid = j["invalid_rows"] = nlohmann::ordered_json::array();
  for (const Evaluation& e : r.rows)
    if (e.status == RowStatus::Invalid) invalid.push_back(row_json(e));
  return j.dump(2) + "\n";
}

std::string search_csv(const SearchResult& r) {
  SweepResult s;
  s.rows = r.rows;
  s.cap = r.cap;
  s.mem_cap_gib = r.mem_cap_gib;
  s.fixed_overhead_gib = r.cap.fixed_overhead_bytes / kGiB;
  std::vector<int> ok, oom;
  for (int i = 0; i < static_cast<int>(s.rows.size()); ++i) {
    if (s.rows[i].status == RowStatus::Ok) ok.push_back(i);
    if (s.rows[i].status == RowStatus::Oom) oom.push_back(i);
  }
  auto faster = [&](int a, int b) {
    if (s.rows[a].report.tokens_per_s != s.rows[b].report.tokens_per_s)
      return s.rows[a].report.tokens_per_s > s.rows[b].report.tokens_per_s;
    return a < b;
  };
  std::sort(ok.begin(), ok.end(), faster);
  std::sort(oom.begin(), oom.end(), faster);
  s.ranking = ok;
  s.ranking.insert(s.ranking.end(), oom.begin(), oom.end());
  return sweep_csv(s);
}

}  // namespace braid
