// design(): a steady-state beam search over rank programs with the simulator as the oracle.
// The beam starts from the hand-designed schedules (and their offload variants); each step
// mutates one beam member (moves.cpp), validates the child, simulates it, and keeps it if it
// ranks above the worst member. Ranking: under the cap before over it; under the cap by iteration
// time, over it by how far over. The best child under the cap is the result, so the result is
// never slower than the best seed that fits.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../util/format.hpp"
#include "blocks.hpp"
#include "braid/design.hpp"
#include "braid/error.hpp"
#include "greedy.hpp"
#include "moves.hpp"

namespace braid {

namespace {

using designer::Gap;

constexpr int kGapsKept = 16;

struct Candidate {
  Schedule schedule;
  double time_s = 0;
  double peak_bytes = 0;  // largest rank: the report's peak (the fixed overhead included)
  double peak_ma = 0;     // largest rank: activation peak / M_a
  double over = 0;        // relative excess over the cap(s); 0 when it fits
  std::vector<Gap> gaps;
  std::string origin;  // the seed it descends from
  bool fits() const { return over <= 0; }
};

bool ranks_above(const Candidate& a, const Candidate& b) {
  if (a.fits() != b.fits()) return a.fits();
  if (!a.fits() && a.over != b.over) return a.over < b.over;
  return a.time_s < b.time_s;
}

// The largest compute-stream idle times before an instruction, largest first.
std::vector<Gap> find_gaps(const Dag& dag, const Timeline& t, int ranks) {
  std::vector<Gap> gaps;
  for (int r = 0; r < ranks; ++r) {
    const int stream = r * kStreamsPerRank + static_cast<int>(StreamKind::Compute);
    double prev_end = 0;
    int instruction = -1;
    for (int k = dag.stream_begin[stream]; k < dag.stream_begin[stream + 1]; ++k) {
      const int op = dag.stream_ops[k];
      const int in = dag.ops[op].instruction;
      if (in != instruction && in >= 0) {
        const double idle = t.start_s[op] - prev_end;
        if (idle > 1e-9 * t.iteration_time_s) gaps.push_back({idle, r, in});
        instruction = in;
      }
      prev_end = std::max(prev_end, t.end_s[op]);
    }
  }
  std::stable_sort(gaps.begin(), gaps.end(),
                   [](const Gap& a, const Gap& b) { return a.idle_s > b.idle_s; });
  if (gaps.size() > kGapsKept) gaps.resize(kGapsKept);
  return gaps;
}

// Peak per rank, in chunk-microbatches, of passes whose forward has run and whose weight gradient
// has not (a full backward runs both). Inside a block releases count before allocations, as in
// validate().
double peak_until_w(const Schedule& s) {
  int worst = 0;
  for (const RankProgram& rank : s.ranks) {
    int live = 0;
    for (const Instruction& in : rank.instructions) {
      PassPart parts[2];
      const int n = parts_of(in, parts);
      for (int i = 0; i < n; ++i)
        if (parts[i].kind == PassKind::W ||
            (parts[i].kind == PassKind::B && !parts[i].pass.defer_w))
          --live;
      for (int i = 0; i < n; ++i)
        if (parts[i].kind == PassKind::F) ++live;
      worst = std::max(worst, live);
    }
  }
  return worst;
}

class Oracle {
 public:
  Oracle(const DesignProblem& problem, const DesignOptions& options)
      : problem_(problem), options_(options) {}

  const CostModel& cost(int virtual_stages) {
    auto it = costs_.find(virtual_stages);
    if (it == costs_.end())
      it = costs_.emplace(virtual_stages, problem_.cost(virtual_stages)).first;
    return it->second;
  }

  // Time and memory as `braid simulate` reports them: each rank's peak is the report's peak (what
  // the memory cap of sweep and simulate caps too), its M_a peak the report's.
  Candidate evaluate(Schedule s, const std::string& origin) {
    Candidate c;
    const CostModel& model = cost(s.virtual_stages());
    const Dag dag = lower(s, model, problem_.lower);
    const Timeline t = simulate(dag, problem_.sim);
    const Report report = make_report(problem_.study, s, model, dag, t);
    c.time_s = report.iteration_time_s;
    for (const RankReport& rank : report.ranks) {
      c.peak_bytes = std::max(c.peak_bytes, rank.peak_memory_bytes);
      c.peak_ma = std::max(c.peak_ma, rank.activation_peak_ma);
    }
    if (options_.hold_until_w) c.peak_ma = std::max(c.peak_ma, peak_until_w(s));
    if (options_.mem_cap_bytes >= 0 && c.peak_bytes > options_.mem_cap_bytes)
      c.over += (c.peak_bytes - options_.mem_cap_bytes) / std::max(options_.mem_cap_bytes, 1.0);
    // A hair of tolerance: the M_a count is a ratio of byte sums.
    if (options_.mem_cap_ma >= 0 && c.peak_ma > options_.mem_cap_ma + 1e-9)
      c.over += (c.peak_ma - options_.mem_cap_ma) / std::max(options_.mem_cap_ma, 1.0);
    c.gaps = find_gaps(dag, t, s.pp);
    c.origin = origin;
    c.schedule = std::move(s);
    return c;
  }

  Report report(const Schedule& s) {
    const CostModel& model = cost(s.virtual_stages());
    const Dag dag = lower(s, model, problem_.lower);
    const Timeline t = simulate(dag, problem_.sim);
    return make_report(problem_.study, s, model, dag, t);
  }

 private:
  const DesignProblem& problem_;
  const DesignOptions& options_;
  std::map<int, CostModel> costs_;
};

std::string share(double x) { return util::format("%g", x); }

struct Seed {
  std::string label;
  Schedule schedule;
  bool hand = false;  // a plain hand-designed schedule (the baseline the result must match)
  std::optional<designer::GreedyPolicy> greedy;  // built when its turn comes (it costs time)
};

// The hand-designed schedules as `compare` runs them (with and without the study's offload),
// then their offload variants: stp-offload with a smaller share, the others with the post-pass.
std::vector<Seed> make_seeds(const DesignProblem& problem, const std::vector<std::string>& names) {
  std::vector<Seed> seeds;
  auto add = [&](const std::string& name, double offload, double fraction, bool hand) {
    ScheduleOptions o;
    o.pp = problem.pp;
    o.vpp = chunks_per_rank(name, problem.vpp);
    o.microbatches = problem.microbatches;
    o.offload = name == "stp-offload" ? 0.0 : offload;
    o.offload_fraction = fraction;
    try {
      Schedule s = make_schedule(name, o);
      std::string label = s.name;
      if (name == "stp-offload" && fraction != 1.0) label += "@" + share(fraction);
      if (name != "stp-offload" && offload > 0 && offload != 1.0) label += "@" + share(offload);
      seeds.push_back({label, std::move(s), hand, std::nullopt});
    } catch (const InputError&) {
      // Too few microbatches for this schedule at this pp: it is not a seed.
    }
  };
  for (const std::string& name : names) {
    add(name, 0.0, 1.0, true);
    if (problem.offload > 0 && name != "stp-offload") add(name, problem.offload, 1.0, true);
  }
  for (const std::string& name : names) {
    if (name == "stp-offload") {
      for (double f : {0.25, 0.5, 0.75}) add(name, 0.0, f, false);
    } else {
      for (double f : {0.25, 0.5, 1.0})
        if (f != problem.offload) add(name, f, 1.0, false);
    }
  }
  return seeds;
}

// The greedy list scheduler's family (greedy.hpp) for V placement: memory limits around the
// cap (in chunk-microbatches), split or full backward, either chunk's forward first, a reserved
// slot or none, W first at the limit or not, a capped warm-up depth or not.
struct GreedySeed {
  std::string label;
  designer::GreedyPolicy policy;
};

// The list scheduler's memory limits, largest first: the M_a cap and two below it, or p, 1.5p,
// 2p, 2.5p and 3p chunk-microbatches.
std::vector<int> greedy_limits(const DesignProblem& problem, const DesignOptions& options) {
  const int p = problem.pp;
  std::set<int> limits;
  if (options.mem_cap_ma >= 0) {
    const int cap = static_cast<int>(std::floor(options.mem_cap_ma + 1e-9));
    for (int l = cap; l >= std::max(1, cap - 2); --l) limits.insert(l);
  } else {
    for (int l : {p, (3 * p + 1) / 2, 2 * p, (5 * p + 1) / 2, 3 * p}) limits.insert(l);
  }
  return {limits.rbegin(), limits.rend()};
}

std::vector<GreedySeed> greedy_family(const DesignProblem& problem, const DesignOptions& options) {
  std::vector<GreedySeed> family;
  for (int limit : greedy_limits(problem, options))
    for (int variant = 0; variant < 32; ++variant) {
      designer::GreedyPolicy g;
      g.mem_limit = limit;
      g.hold_until_w = options.hold_until_w;
      g.split = (variant & 1) == 0;
      g.later_chunk_first = (variant & 2) == 0;
      g.w_when_full = (variant & 4) != 0;
      g.reserve = (variant & 8) == 0 ? 1 : 0;
      g.warmup_cap = (variant & 16) != 0;
      if (!g.split && variant > 3) continue;  // the W options need a split backward
      family.push_back({"greedy(L" + std::to_string(g.mem_limit) + (g.split ? ",split" : ",full") +
                            (g.later_chunk_first ? ",c1" : ",c0") + ",r" +
                            std::to_string(g.reserve) + (g.w_when_full ? ",w" : "") +
                            (g.warmup_cap ? ",d" : "") + ")",
                        g});
    }
  return family;
}

// The building-block family (blocks.hpp) through the list scheduler at each memory limit, both
// with and without the warm-up cap. The scheduler's own clock screens them (thousands of blocks,
// no simulation); the kBlockSeeds best per limit become seeds.
constexpr int kBlockSeeds = 4;

std::vector<Seed> block_seeds(const DesignProblem& problem, const DesignOptions& options,
                              const CostModel& v_cost, const std::function<bool()>& out_of_time) {
  const std::vector<designer::Block> blocks = designer::block_family(problem.pp);
  std::vector<Seed> seeds;
  for (int limit : greedy_limits(problem, options)) {
    struct Screened {
      double makespan;
      std::string label;
      Schedule schedule;
    };
    std::vector<Screened> kept;
    for (const designer::Block& b : blocks) {
      if (b.steady_peak > limit) continue;
      if (out_of_time()) break;
      // Chosen among the ready passes with and without the warm-up cap, or in the block's order
      // after a filled warm-up (block_program), with or without a backward-first drain.
      for (int variant = 0; variant < 4; ++variant) {
        designer::GreedyPolicy g;
        g.mem_limit = limit;
        g.hold_until_w = options.hold_until_w;
        g.warmup_cap = variant == 0;
        g.strict_order = variant >= 2;
        g.drain_w_last = variant == 2;
        g.target = b.target;
        g.target_period = b.period;
        if (g.strict_order)
          g.pass_target = designer::block_program(b, problem.pp, problem.microbatches, limit);
        std::optional<designer::GreedyResult> r =
            designer::greedy_v_schedule(problem.pp, problem.microbatches, v_cost, g);
        if (!r || r->peak_live > limit) continue;
        auto pos = std::find_if(kept.begin(), kept.end(),
                                [&](const Screened& k) { return r->makespan < k.makespan; });
        if (pos == kept.end() && static_cast<int>(kept.size()) >= kBlockSeeds) continue;
        kept.insert(pos, {r->makespan,
                          "block(L" + std::to_string(limit) + "," + b.label +
                              (variant == 0   ? ",d)"
                               : variant == 2 ? ",warm,drain)"
                               : variant == 3 ? ",warm)"
                                              : ")"),
                          std::move(r->schedule)});
        if (static_cast<int>(kept.size()) > kBlockSeeds) kept.pop_back();
      }
    }
    for (Screened& k : kept) seeds.push_back({k.label, std::move(k.schedule), false, std::nullopt});
  }
  return seeds;
}

class Beam {
 public:
  explicit Beam(int width) : width_(std::max(1, width)) {}
  void offer(const Candidate& c) {
    auto pos = std::find_if(members_.begin(), members_.end(),
                            [&](const Candidate& m) { return ranks_above(c, m); });
    if (pos == members_.end() && static_cast<int>(members_.size()) >= width_) return;
    members_.insert(pos, c);
    if (static_cast<int>(members_.size()) > width_) members_.pop_back();
  }
  // Half the time the best member, else any.
  const Candidate& pick(designer::Rng& rng) const {
    return rng.below(2) == 0 ? members_.front()
                             : members_[rng.below(static_cast<int>(members_.size()))];
  }
  bool empty() const { return members_.empty(); }

 private:
  int width_;
  std::vector<Candidate> members_;
};

// One run: the oracle, the beam, the schedules seen and the best under the cap so far.
class Search {
 public:
  Search(const DesignProblem& problem, const DesignOptions& options)
      : problem_(problem), options_(options), oracle_(problem, options), beam_(options.beam) {}

  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  bool out_of_time() const { return options_.budget_s > 0 && elapsed_s() > options_.budget_s; }
  bool out_of_candidates() const { return result_.candidates >= options_.max_candidates; }
  const CostModel& v_cost() { return oracle_.cost(2 * problem_.pp); }

  // Every seed in order: the plain hand-designed ones always (they are the baseline), the rest
  // while the budget lasts.
  void run_seeds(const std::vector<Seed>& seeds) {
    for (const Seed& seed : seeds) {
      if (!seed.hand && (out_of_candidates() || out_of_time())) break;
      if (seed.greedy)
        run_greedy_seed(seed);
      else
        run_seed(seed);
    }
    if (beam_.empty()) throw InputError("--seeds", "none", "no hand-designed schedule applies");
  }

  // Mutates beam members until a budget runs out.
  void run_beam() {
    designer::Rng rng{options_.seed};
    const long max_attempts = 50L * std::max(options_.max_candidates, 1);
    for (long attempt = 0; attempt < max_attempts && !out_of_candidates(); ++attempt) {
      if (out_of_time()) {
        result_.budget_exhausted_by_time = true;
        break;
      }
      try_child(beam_.pick(rng), rng);
    }
  }

  DesignResult finish() {
    if (!best_) {
      throw InputError("--mem-cap",
                       options_.mem_cap_ma >= 0
                           ? share(options_.mem_cap_ma) + " M_a"
                           : share(options_.mem_cap_bytes / (1024.0 * 1024.0 * 1024.0)) + " GiB",
                       "no schedule found under the cap after " +
                           std::to_string(result_.candidates) +
                           " candidates; raise the cap or allow more candidates");
    }
    result_.schedule = best_->schedule;
    result_.schedule.name = kDesignedName;
    result_.schedule.p2p_runtime = P2pRuntime::PostedAhead;  // braid's rules, as its children
    result_.report = oracle_.report(result_.schedule);
    result_.peak_bytes = best_->peak_bytes;
    result_.peak_ma = best_->peak_ma;
    result_.seed = best_->origin;
    return std::move(result_);
  }

 private:
  using Clock = std::chrono::steady_clock;

  void consider(Candidate&& c, const std::string& move) {
    ++result_.candidates;
    if (!c.fits()) ++result_.over_cap;
    if (c.fits() && (!best_ || c.time_s < best_->time_s)) {
      best_ = c;
      result_.trace.push_back({result_.candidates, c.time_s, move});
    }
    beam_.offer(c);
    if (options_.progress)
      options_.progress({result_.candidates, options_.max_candidates, best_ ? best_->time_s : 0.0,
                         best_.has_value()});
  }

  // A seed built now by the list scheduler, plain and with its adjacent passes braided (which
  // pays only where there are collectives to hide).
  void run_greedy_seed(const Seed& seed) {
    std::optional<designer::GreedyResult> r =
        designer::greedy_v_schedule(problem_.pp, problem_.microbatches, v_cost(), *seed.greedy);
    if (!r || !validate(r->schedule).ok()) return;
    for (int braided = 0; braided < 2; ++braided) {
      if (braided == 1) designer::braid_adjacent(r->schedule);
      if (!seen_.insert(designer::schedule_hash(r->schedule)).second) continue;
      if (out_of_candidates()) break;
      const std::string label = seed.label + (braided ? "+braid" : "");
      consider(oracle_.evaluate(r->schedule, label), "seed " + label);
    }
  }

  // A ready schedule; a hand-designed one is also recorded as the baseline.
  void run_seed(const Seed& seed) {
    const bool fresh = seen_.insert(designer::schedule_hash(seed.schedule)).second;
    if (!seed.hand && (!fresh || !validate(seed.schedule).ok())) return;
    Candidate c = oracle_.evaluate(seed.schedule, seed.label);
    if (seed.hand) {
      Report r = oracle_.report(seed.schedule);
      r.schedule = seed.label;
      result_.hand.push_back(r);
      result_.hand_fits.push_back(c.fits());
      result_.hand_peak_bytes.push_back(c.peak_bytes);
      result_.hand_peak_ma.push_back(c.peak_ma);
      if (c.fits() && (result_.best_hand.empty() || c.time_s < result_.best_hand_time_s)) {
        result_.best_hand = seed.label;
        result_.best_hand_time_s = c.time_s;
      }
    }
    consider(std::move(c), "seed " + seed.label);
  }

  // One, two or three moves on a copy of `parent`; simulated if new and valid.
  void try_child(const Candidate& parent, designer::Rng& rng) {
    Schedule child = parent.schedule;
    // A moved order is not the one its seed's runtime runs. Under the seed's runtime (say
    // 1f1b-i's, Megatron's rendezvous) a moved order can deadlock; a designed schedule runs under
    // braid's own, receives posted ahead (docs/design-search.md).
    child.name = kDesignedName;
    child.p2p_runtime = P2pRuntime::PostedAhead;
    const std::string origin = parent.origin;
    const bool tight = !parent.fits();
    const std::vector<Gap> gaps = parent.gaps;
    std::string move, what;
    const int moves = rng.below(4) == 0 ? 2 + rng.below(2) : 1;
    bool changed = false;
    for (int i = 0; i < moves; ++i)
      if (designer::mutate(child, gaps, tight, options_.allow_offload, rng, what)) {
        changed = true;
        move += (move.empty() ? "" : ", ") + what;
      }
    if (!changed) return;
    if (!seen_.insert(designer::schedule_hash(child)).second) {
      ++result_.duplicates;
      return;
    }
    if (!validate(child).ok()) {
      ++result_.invalid;
      return;
    }
    const std::string label = move + " (from " + origin + ")";
    Candidate c;
    try {
      c = oracle_.evaluate(std::move(child), origin);
    } catch (const InputError& e) {
      // The parent ran on the same problem and the child validated: its failure is ours.
      throw InternalError("design: the valid candidate " + label + " does not run: " + e.what());
    }
    consider(std::move(c), label);
  }

  const DesignProblem& problem_;
  const DesignOptions& options_;
  const Clock::time_point start_ = Clock::now();
  Oracle oracle_;
  Beam beam_;
  std::set<std::uint64_t> seen_;
  std::optional<Candidate> best_;
  DesignResult result_;
};

// The seeds in the order they run: the hand-designed schedules and their offload variants, the
// screened building blocks, then the list scheduler's family.
std::vector<Seed> all_seeds(const DesignProblem& problem, const DesignOptions& options,
                            Search& search) {
  std::vector<Seed> seeds =
      make_seeds(problem, options.seeds.empty() ? default_design_seeds() : options.seeds);
  if (!options.allow_offload)
    std::erase_if(seeds,
                  [](const Seed& s) { return s.label.find("offload") != std::string::npos; });
  for (Seed& b :
       block_seeds(problem, options, search.v_cost(), [&] { return search.out_of_time(); }))
    seeds.push_back(std::move(b));
  for (const GreedySeed& g : greedy_family(problem, options))
    seeds.push_back({g.label, Schedule{}, false, g.policy});
  return seeds;
}

}  // namespace

const std::vector<std::string>& default_design_seeds() {
  static const std::vector<std::string> names = {"1f1b-i", "zb-v", "stp", "stp-offload",
                                                 "dualpipe-v"};
  return names;
}

std::vector<DesignLayout> design_layouts(const std::vector<std::string>& seeds, int vpp) {
  std::vector<DesignLayout> layouts = {DesignLayout{}};
  for (const std::string& name : seeds.empty() ? default_design_seeds() : seeds) {
    const DesignLayout layout{traits(parse_schedule_kind(name)).placement,
                              chunks_per_rank(name, vpp)};
    if (std::find(layouts.begin(), layouts.end(), layout) == layouts.end())
      layouts.push_back(layout);
  }
  return layouts;
}

DesignResult design(const DesignProblem& problem, const DesignOptions& options) {
  Search search(problem, options);
  search.run_seeds(all_seeds(problem, options, search));
  search.run_beam();
  return search.finish();
}

}  // namespace braid
