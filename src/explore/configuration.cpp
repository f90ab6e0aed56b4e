// Configurations of the explorer: the cross product of the sweep axes, and a study with one
// configuration's sizes applied and validated.
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/schedule.hpp"

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

std::vector<Configuration> cross_product(const SweepAxes& axes) {
  std::vector<Configuration> out;
  for (int tp : axes.tp)
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
                    const int fixed = fixed_vpp(s);
                    if (fixed != 0 && vi != 0) continue;
                    Configuration c;
                    c.schedule = s;
                    c.tp = tp;
                    c.pp = pp;
                    c.vpp = fixed != 0 ? fixed : axes.vpp[vi];
                    c.seq = seq;
                    c.mbs = mbs;
                    c.microbatches = m;
                    c.sp = sp;
                    c.recompute = rc;
                    out.push_back(c);
                  }
  return out;
}

Study configure(const Study& base, const Configuration& c) {
  Study s = base;
  s.parallel.tp = c.tp;
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
