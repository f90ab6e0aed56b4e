// Fixtures several test files share: the default study (qwen2-12.1b on 2 x 8 A800) with a short
// sequence so that explorer tests stay fast, with its profile; and writing a small file into a
// scratch tree. Test-only; each test file keeps its own scenario-specific set-up.
#pragma once

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"

namespace braid::test {

// The study's cost model on its cluster's profile, one virtual stage per pp x vpp.
inline CostModel cost_of(const Study& s) {
  return build_cost_model(s, load_profile(s.cluster.profile), s.parallel.pp * s.parallel.vpp);
}

// The first LM layer's unit of `kind` in `cm` (a test failure when there is none).
inline UnitCost first_unit(const CostModel& cm, UnitKind kind) {
  for (const ChunkCost& ch : cm.chunks)
    for (int l = 0; l < ch.layer_count(); ++l)
      for (const UnitCost& u : ch.layer(l))
        if (u.kind == kind && !u.vision) return u;
  FAIL("no " << name(kind) << " unit");
  return {};
}

// A model's sizes as one value, so a test compares them with a published table in one line (and
// a failure prints all seven): layers, hidden, heads, KV heads, head size, FFN, vocabulary.
struct ModelSizes {
  int layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
  bool operator==(const ModelSizes&) const = default;
};
inline ModelSizes sizes_of(const ModelConfig& m) {
  return {m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab};
}
inline std::ostream& operator<<(std::ostream& os, const ModelSizes& s) {
  return os << "{layers " << s.layers << ", hidden " << s.hidden << ", heads " << s.heads
            << ", kv_heads " << s.kv_heads << ", head_dim " << s.head_dim << ", ffn " << s.ffn
            << ", vocab " << s.vocab << "}";
}

struct StudyFixture {
  Study study;
  Profile profile;
};

// The default study's settings with `model` on `cluster`, tp and pp given, one chunk per rank,
// sequence `seq`, SP on or off: the layout most scenario tests start from.
inline StudyOverrides layout_overrides(const std::string& model, const std::string& cluster, int tp,
                                       int pp, int seq = 2048, bool sp = false) {
  return StudyOverrides{.model = model,
                        .cluster = cluster,
                        .tp = tp,
                        .pp = pp,
                        .vpp = 1,
                        .seq = seq,
                        .sequence_parallel = sp};
}

// Sweep axes over the given tp and pp values, everything else one value: vpp 2, sequence 2048,
// micro-batch 1, 8 microbatches, no SP, no recomputation, the schedules 1f1b-i, zb-v and stp.
inline SweepAxes small_sweep_axes(std::vector<int> tp, std::vector<int> pp) {
  SweepAxes a;
  a.tp = std::move(tp);
  a.pp = std::move(pp);
  a.vpp = {2};
  a.seq = {2048};
  a.mbs = {1};
  a.microbatches = {8};
  a.sp = {false};
  a.recompute = {Recompute::None};
  a.schedules = {"1f1b-i", "zb-v", "stp"};
  return a;
}

// The one-line InputError text `read` throws, "" when it throws none.
template <typename Read>
std::string input_error_of(Read&& read) {
  try {
    read();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Loaded once per test binary.
inline const StudyFixture& short_default_study() {
  static const StudyFixture f = [] {
    StudyFixture x;
    x.study = load_study(resolve_config("studies", "default"));
    x.study.training.seq = 2048;
    x.profile = load_profile(x.study.cluster.profile);
    return x;
  }();
  return f;
}

// A schedule lowered on `cost`, simulated (with the memory track unless told not to) and reported
// as study "hand": what the output and HTML tests draw.
struct Simulated {
  Dag dag;
  Timeline timeline;
  Report report;
};

inline Simulated simulated(const Schedule& s, const CostModel& cost, bool record_memory = true) {
  Simulated r;
  r.dag = lower(s, cost);
  SimOptions o;
  o.record_memory = record_memory;
  r.timeline = simulate(r.dag, o);
  r.report = make_report("hand", s, cost, r.dag, r.timeline);
  return r;
}

// A folder of this test process's own under the temp folder, removed when the process exits.
// ctest runs every test case as its own process, so the pid keeps parallel cases apart.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("braid-test-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    Dir(const Dir&) = delete;
    Dir& operator=(const Dir&) = delete;
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// The sum identity (docs/simulator.md, the idle attribution): on every rank busy + tp_exposed +
// cp_exposed + ep_exposed + dp_exposed + optimizer + pp_idle + offload_stall = iteration time,
// and no attributed part is negative. pp_idle is the remainder, so this catches time attributed
// twice; check_pp_idle below, given the run's Dag, catches time not attributed at all.
inline void check_sum_identity(const Report& r) {
  REQUIRE(r.iteration_time_s > 0);
  REQUIRE(!r.ranks.empty());
  for (const RankReport& rr : r.ranks) {
    INFO("rank " << rr.rank);
    const double attributed = rr.busy_s + rr.tp_exposed_s + rr.cp_exposed_s + rr.ep_exposed_s +
                              rr.dp_exposed_s + rr.optimizer_s + rr.offload_stall_s;
    CHECK(attributed <= r.iteration_time_s * (1 + 1e-12));
    CHECK(attributed + rr.pp_idle_s == Approx(r.iteration_time_s).epsilon(1e-12));
    CHECK(rr.tp_exposed_s >= 0);
    CHECK(rr.cp_exposed_s >= 0);
    CHECK(rr.ep_exposed_s >= 0);
    CHECK(rr.offload_stall_s >= 0);
    CHECK(rr.dp_exposed_s >= 0);
    CHECK(rr.optimizer_s >= 0);
  }
}

// pp_idle measured from the timeline's idle gaps (measured_pp_idle_s), independently of the
// report's remainder, equals it on every rank, and the sum identity holds.
inline void check_pp_idle(const Report& r, const Dag& dag, const Timeline& t) {
  check_sum_identity(r);
  const std::vector<double> measured = measured_pp_idle_s(dag, t);
  REQUIRE(measured.size() == r.ranks.size());
  for (const RankReport& rr : r.ranks) {
    INFO("rank " << rr.rank);
    CHECK(measured[static_cast<std::size_t>(rr.rank)] ==
          Approx(rr.pp_idle_s).margin(1e-12 * r.iteration_time_s));
  }
}

// The one collective of a phase of the dense layer (whose phases hold at most one, but for a
// column unit's B under SP: its reduce-scatter and its re-gather), or a Collective of kind None
// when it has none.
inline Collective collective_of(const PhaseCost& p) {
  REQUIRE(p.collectives.size() <= 1);
  if (!p.collectives.empty()) return p.collectives.front();
  Collective none;
  none.kind = CollectiveKind::None;
  return none;
}

// Writes `text` to `file`, creating its folders.
inline void write_file(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// The number of members of an aggregate: the most initializers T{...} accepts, each one a value
// that converts to any member type (so no brace elision into a nested aggregate can absorb one).
// The field visitors' tests compare it with the number of members a visitor lists.
struct AnyMember {
  template <typename T>
  operator T() const;  // NOLINT(google-explicit-constructor): only used unevaluated
};
template <typename T, std::size_t... I>
constexpr bool initializable(std::index_sequence<I...>) {
  return requires { T{(void(I), AnyMember{})...}; };
}
template <typename T, std::size_t N = 0>
constexpr std::size_t member_count() {
  if constexpr (initializable<T>(std::make_index_sequence<N + 1>{}))
    return member_count<T, N + 1>();
  else
    return N;
}

}  // namespace braid::test
