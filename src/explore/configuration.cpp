// Configurations of the explorer: the cross product of the sweep axes, and a study with one
// configuration's sizes applied and validated.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../util/format.hpp"
#include "../util/units.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/schedule.hpp"
#include "designed.hpp"

namespace braid {

const char* name(RowStatus s) {
  switch (s) {
    case RowStatus::Ok:
      return "ok";
    case RowStatus::Oom:
      return "oom";
    case RowStatus::Invalid:
      return "invalid";
  }
  return "?";
}

namespace {

// The rows of one (tp, cp, cp comm type, ep, etp), the rest of the axes in cross_product()'s
// order; etp 0 is the row's tp.
void for_sizes(const SweepAxes& axes, int tp, int cp, std::optional<CpCommType> comm, int ep,
               int etp, std::vector<Configuration>& out) {
  for (int pp : axes.pp)
    for (std::size_t vi = 0; vi < axes.vpp.size(); ++vi)
      for (int seq : axes.seq)
        for (int mbs : axes.mbs)
          for (int m : axes.microbatches)
            for (bool sp : axes.sp)
              for (Recompute rc : axes.recompute)
                for (const std::string& s : axes.schedules) {
                  // A schedule whose chunks per rank are fixed ignores the vpp axis: it is
                  // listed once, with the first vpp value's position in the order.
                  const int fixed = explore::is_designed(s) ? explore::kDesignedVpp : fixed_vpp(s);
                  if (fixed != 0 && vi != 0) continue;
                  Configuration c;
                  c.schedule = s;
                  c.tp = tp;
                  c.cp = cp;
                  c.cp_comm_type = comm;
                  c.ep = ep;
                  c.etp = ep > 0 && etp == 0 ? tp : etp;
                  c.pp = pp;
                  c.vpp = fixed != 0 ? fixed : axes.vpp[vi];
                  c.seq = seq;
                  c.mbs = mbs;
                  c.microbatches = m;
                  c.sp = sp;
                  c.recompute = rc;
                  out.push_back(c);
                }
}

}  // namespace

std::vector<Configuration> cross_product(const SweepAxes& axes) {
  std::vector<Configuration> out;
  const std::vector<int> cps = axes.cp.empty() ? std::vector<int>{1} : axes.cp;
  std::vector<std::optional<CpCommType>> comms{std::nullopt};
  if (axes.cp_comm_types.size() > 1)
    comms.assign(axes.cp_comm_types.begin(), axes.cp_comm_types.end());
  // No ep list: one pass, the rows name no expert sizes (a dense model, or sizes not explored).
  const std::vector<int> eps = axes.ep.empty() ? std::vector<int>{0} : axes.ep;
  const std::vector<int> etps = axes.etp.empty() ? std::vector<int>{0} : axes.etp;
  for (int tp : axes.tp)
    for (int cp : cps)
      // At cp 1 there is no context-parallel communication, so every type gives the same row: the
      // first stands for them all (the axis multiplies only cp > 1).
      for (std::size_t ci = 0; ci < (cp == 1 ? 1 : comms.size()); ++ci)
        for (int ep : eps)
          for (std::size_t ei = 0; ei < (ep == 0 ? 1 : etps.size()); ++ei)
            for_sizes(axes, tp, cp, comms[ci], ep, ep == 0 ? 0 : etps[ei], out);
  return out;
}

std::vector<Configuration> at_global_batch(std::vector<Configuration> configs, const Study& base,
                                           int global_batch) {
  const int gpus = base.cluster.gpus();
  for (Configuration& c : configs) {
    // In 64 bits: the sizes come from the command line, their products need not fit an int.
    const std::int64_t model_parallel = std::int64_t{c.tp} * c.cp * c.pp;
    const std::int64_t per_microbatch =
        model_parallel > 0 && gpus % model_parallel == 0 ? c.mbs * (gpus / model_parallel) : 0;
    c.microbatches = per_microbatch > 0 && global_batch % per_microbatch == 0
                         ? static_cast<int>(global_batch / per_microbatch)
                         : 0;
  }
  return configs;
}

MemoryCap memory_cap(const Profile& profile, const ExploreOptions& options) {
  MemoryCap cap;
  cap.hbm_bytes = profile.hbm_bytes;
  cap.fixed_overhead_bytes = profile.fixed_overhead_bytes;
  cap.given = options.mem_cap_bytes >= 0;
  if (!cap.given)
    cap.allocator_margin_bytes = options.mem_margin_bytes >= 0
                                     ? options.mem_margin_bytes
                                     : kDefaultMarginShare * profile.hbm_bytes;
  cap.cap_bytes = cap.given ? options.mem_cap_bytes : cap.hbm_bytes - cap.allocator_margin_bytes;
  return cap;
}

double MemoryCap::thin_bytes() const { return kThinMarginShare * hbm_bytes; }

std::string memory_cap_text(const MemoryCap& cap) {
  const std::string peak = util::format(
      "compared to the peak (fixed overhead %.2f GiB included); a margin under %.2f GiB is "
      "thin",
      cap.fixed_overhead_bytes / kGiB, cap.thin_bytes() / kGiB);
  if (cap.given)
    return util::format("memory cap %.2f GiB (--mem-cap), ", cap.cap_bytes / kGiB) + peak;
  return util::format("memory cap %.2f GiB = HBM %.2f - allocator margin %.2f GiB, ",
                      cap.cap_bytes / kGiB, cap.hbm_bytes / kGiB,
                      cap.allocator_margin_bytes / kGiB) +
         peak;
}

void apply_memory_cap(Report& report, const MemoryCap& cap) {
  report.oom = false;
  report.oom_rank = -1;
  report.oom_over_gib = 0;
  double peak = 0;
  for (RankReport& r : report.ranks) {
    peak = std::max(peak, r.peak_memory_bytes);
    const double over = -cap.margin_bytes(r.peak_memory_bytes);
    r.oom = over > 0;
    r.over_bytes = r.oom ? over : 0;
    if (r.oom && (!report.oom || over > report.oom_over_gib * kGiB)) {
      report.oom = true;
      report.oom_rank = r.rank;
      report.oom_over_gib = over / kGiB;
    }
  }
  report.cap_gib = cap.cap_bytes / kGiB;
  report.margin_gib = cap.margin_bytes(peak) / kGiB;
  report.thin_under_gib = cap.thin_bytes() / kGiB;
  report.thin_margin = cap.thin(peak);
}

Study configure(const Study& base, const Configuration& c) {
  Study s = base;
  s.parallel.tp = c.tp;
  s.parallel.cp = c.cp;
  if (c.cp_comm_type) {
    s.parallel.cp_comm_type = *c.cp_comm_type;
    // The study's hierarchical sizes are a2a+p2p's: the rows of the other types run without.
    if (*c.cp_comm_type != CpCommType::A2AP2P) s.parallel.hierarchical_cp.clear();
  }
  if (c.ep > 0) {
    s.parallel.ep = c.ep;
    s.parallel.etp = c.etp;
  }
  s.parallel.pp = c.pp;
  s.parallel.vpp = c.vpp;
  s.parallel.sequence_parallel = c.sp;
  s.training.seq = c.seq;
  s.training.micro_batch_size = c.mbs;
  s.training.microbatches = c.microbatches;
  s.training.recompute = c.recompute;
  validate_study(s);
  return s;
}

}  // namespace braid
