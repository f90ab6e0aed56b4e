// Sharing a sweep or search among processes (ProcessGroup), without MPI: the "processes" are
// threads exchanging bytes through an in-memory all_gather, the way braid's MPI layer exchanges
// them over MPI_COMM_WORLD. Every process returns the single-process result, byte for byte; the
// split follows the greedy longest-processing-time rule; rows survive the bytes exactly.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "fixtures.hpp"

namespace {

using namespace braid;

const braid::test::StudyFixture& base() { return braid::test::short_default_study(); }

// tp 16 is over the 8 GPUs of a node: 6 invalid rows among 18.
SweepAxes axes() { return braid::test::small_sweep_axes({4, 8, 16}, {2, 4}); }

// all_gather between threads: each call waits until every thread of the group has called it.
struct ThreadExchange {
  explicit ThreadExchange(int size) : slots(size) {}
  std::vector<std::string> all_gather(int rank, const std::string& bytes) {
    std::unique_lock<std::mutex> lock(mutex);
    const int generation = done;
    slots[rank] = bytes;
    if (++arrived == static_cast<int>(slots.size())) {
      result = slots;
      arrived = 0;
      ++done;
      ready.notify_all();
    } else {
      ready.wait(lock, [&] { return done != generation; });
    }
    return result;
  }
  std::mutex mutex;
  std::condition_variable ready;
  std::vector<std::string> slots, result;
  int arrived = 0, done = 0;
};

// Runs f(options) on `size` threads, each with its ProcessGroup; returns each one's value.
template <typename T>
std::vector<T> on_processes(int size, const std::function<T(const ExploreOptions&)>& f) {
  ThreadExchange exchange(size);
  std::vector<T> out(size);
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank)
    threads.emplace_back([&, rank] {
      ExploreOptions options;
      options.jobs = 1;
      options.group.rank = rank;
      options.group.size = size;
      options.group.all_gather = [&exchange, rank](const std::string& bytes) {
        return exchange.all_gather(rank, bytes);
      };
      try {
        out[rank] = f(options);
      } catch (const InputError& e) {
        errors[rank] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < size; ++rank) INFO("rank " << rank << ": " << errors[rank]);
  for (const std::string& e : errors)
    if (!e.empty()) throw InputError("test", "process", e);
  return out;
}

std::string sweep_outputs(const SweepResult& r) {
  return sweep_table(r) + sweep_csv(r) + sweep_json(r) + sweep_svg(r, "t");
}

}  // namespace

TEST_CASE("assign_by_cost: largest first, each to the least loaded part", "[distribute]") {
  // 5 -> p0; 4 -> p1; 3 (#2) -> p1 (4 < 5); 3 (#3) -> p0 (5 < 7); 3 (#4) -> p1 (7 < 8).
  CHECK(assign_by_cost({5, 4, 3, 3, 3}, 2) == std::vector<int>{0, 1, 1, 0, 1});
  // Equal costs and equal loads: lowest index first, to the lowest part.
  CHECK(assign_by_cost({1, 1, 1, 1, 1}, 2) == std::vector<int>{0, 1, 0, 1, 0});
  CHECK(assign_by_cost({1, 7, 2}, 1) == std::vector<int>{0, 0, 0});
  // Balanced by cost, not by count: one big configuration weighs as much as four small ones.
  CHECK(assign_by_cost({4, 1, 1, 1, 1}, 2) == std::vector<int>{0, 1, 1, 1, 1});
  CHECK(assign_by_cost({}, 3).empty());
}

TEST_CASE("estimated_cost grows with layers x microbatches, and invalid configurations cost 1",
          "[distribute]") {
  Configuration c;
  c.schedule = "1f1b-i";
  c.tp = 4;
  c.pp = 2;
  c.vpp = 2;
  c.seq = 2048;
  c.microbatches = 8;
  const ExploreOptions options;
  const double eight = estimated_cost(base().study, c, options);
  c.microbatches = 16;
  CHECK(estimated_cost(base().study, c, options) == Approx(2 * eight));
  c.tp = 16;  // over the node
  CHECK(estimated_cost(base().study, c, options) == 1);
}

TEST_CASE("decode_rows refuses a bool or enum byte out of range", "[distribute]") {
  Evaluation e;
  e.config.schedule = "stp";
  e.config.sp = true;
  e.status = RowStatus::Oom;
  const std::string bytes = encode_rows({e});
  CHECK(decode_rows(bytes).at(0).config.sp);
  // The row count (8 bytes), whether the row names a cp comm type (1) and its expert sizes (1),
  // the name (8 + 3), tp, cp, pp .. microbatches (7 ints), then sp, recompute, dp, gpus, status.
  const std::size_t sp_at = 8 + 1 + 1 + 8 + 3 + 7 * sizeof(int);
  const std::size_t status_at = sp_at + 1 + sizeof(Recompute) + 2 * sizeof(int);
  REQUIRE(bytes.at(sp_at) == 1);
  REQUIRE(bytes.at(status_at) == static_cast<char>(RowStatus::Oom));
  std::string bad_bool = bytes;
  bad_bool[sp_at] = 2;
  CHECK_THROWS_WITH(decode_rows(bad_bool), "decode_rows: a bool byte is 2");
  std::string bad_status = bytes;
  bad_status[status_at] = 7;
  CHECK_THROWS_WITH(decode_rows(bad_status), "decode_rows: an enum value is 7");
  std::string bad_recompute = bytes;
  bad_recompute[sp_at + 1] = 3;
  CHECK_THROWS_WITH(decode_rows(bad_recompute), "decode_rows: an enum value is 3");
}

TEST_CASE("rows survive encode_rows and decode_rows bit for bit", "[distribute]") {
  ExploreOptions options;
  options.jobs = 1;
  const SweepResult r = sweep(base().study, base().profile, cross_product(axes()), options);
  const std::string bytes = encode_rows(r.rows);
  const std::vector<Evaluation> back = decode_rows(bytes);
  REQUIRE(back.size() == r.rows.size());
  CHECK(encode_rows(back) == bytes);
  SweepResult copy = r;
  copy.rows = back;
  // The cap's fields of a report are not in the rows (a shard carries its cap once): set again
  // from the cap, as merge and the exchange among processes do.
  for (Evaluation& e : copy.rows)
    if (e.status != RowStatus::Invalid) apply_memory_cap(e.report, copy.cap);
  CHECK(sweep_outputs(copy) == sweep_outputs(r));
  CHECK(back[0].report.critical_path.text == r.rows[0].report.critical_path.text);
  CHECK_THROWS(decode_rows(bytes.substr(0, bytes.size() - 1)));
}

TEST_CASE("a sweep shared by 2 and 3 processes gives every one the single-process result",
          "[distribute]") {
  const std::vector<Configuration> configs = cross_product(axes());
  ExploreOptions one;
  one.jobs = 1;
  const std::string expected = sweep_outputs(sweep(base().study, base().profile, configs, one));
  for (bool cache : {true, false})
    for (int size : {2, 3}) {
      INFO(size << " processes, cache " << cache);
      const std::vector<std::string> got =
          on_processes<std::string>(size, [&](const ExploreOptions& o) {
            ExploreOptions options = o;
            options.cache = cache;
            return sweep_outputs(sweep(base().study, base().profile, configs, options));
          });
      for (const std::string& g : got) CHECK(g == expected);
    }
  // One valid configuration and the six invalid ones (tp 16): the valid one costs most and goes
  // to process 0, the invalid ones (cost 1 each) to process 1; their rows, reasons included,
  // reach process 0's result.
  std::vector<Configuration> mixed;
  for (const Configuration& c : configs)
    if (c.tp == 16 || (c.tp == 4 && c.pp == 2 && c.schedule == "stp")) mixed.push_back(c);
  REQUIRE(mixed.size() == 7);
  std::vector<double> costs;
  for (const Configuration& c : mixed) costs.push_back(estimated_cost(base().study, c, one));
  const std::vector<int> part = assign_by_cost(costs, 2);
  for (std::size_t i = 0; i < mixed.size(); ++i) CHECK(part[i] == (mixed[i].tp == 16 ? 1 : 0));
  const SweepResult alone = sweep(base().study, base().profile, mixed, one);
  CHECK(alone.invalid == 6);
  const std::vector<std::string> got = on_processes<std::string>(2, [&](const ExploreOptions& o) {
    return sweep_outputs(sweep(base().study, base().profile, mixed, o));
  });
  CHECK(got[0] == sweep_outputs(alone));
  CHECK_THAT(got[0], Catch::Contains("tp 16 > 8 GPUs per node"));
}

TEST_CASE("bad input found during a shared sweep is raised by every process", "[distribute]") {
  const std::vector<Configuration> configs = cross_product(axes());
  for (const double cap_gib : {1.0, -1.0}) {
    std::vector<Configuration> list = configs;
    if (cap_gib < 0) {  // nothing valid: every row is tp 16
      list.clear();
      for (const Configuration& c : configs)
        if (c.tp == 16) list.push_back(c);
    }
    ExploreOptions one;
    one.jobs = 1;
    if (cap_gib > 0) one.mem_cap_bytes = cap_gib * 1024 * 1024 * 1024;
    std::string expected;
    try {
      sweep(base().study, base().profile, list, one);
    } catch (const InputError& e) {
      expected = e.what();
    }
    REQUIRE(!expected.empty());
    ThreadExchange exchange(2);
    std::vector<std::string> got(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank)
      threads.emplace_back([&, rank] {
        ExploreOptions o = one;
        o.group = {rank, 2, [&exchange, rank](const std::string& b) {
                     return exchange.all_gather(rank, b);
                   }};
        try {
          sweep(base().study, base().profile, list, o);
        } catch (const InputError& e) {
          got[rank] = e.what();
        }
      });
    for (std::thread& t : threads) t.join();
    CHECK(got[0] == expected);
    CHECK(got[1] == expected);
  }
}

TEST_CASE("a search shared by 2 processes gives the single-process result", "[distribute]") {
  SearchSpace space;
  space.gpus = 16;
  space.global_batch = 32;
  space.schedules = {"1f1b-i", "stp"};
  space.mbs = {1, 2};
  for (int limit : {64, 4}) {  // exhaustive, then pruned in batches
    space.exhaustive_limit = limit;
    space.top = limit == 64 ? 5 : 2;
    ExploreOptions one;
    one.jobs = 1;
    const SearchResult r = search(base().study, base().profile, space, one);
    const std::string expected = search_text(r) + search_json(r);
    const std::vector<std::string> got = on_processes<std::string>(2, [&](const ExploreOptions& o) {
      const SearchResult s = search(base().study, base().profile, space, o);
      return search_text(s) + search_json(s);
    });
    INFO("exhaustive limit " << limit);
    CHECK(got[0] == expected);
    CHECK(got[1] == expected);
  }
}

namespace {

using braid::test::member_count;

template <typename T>
std::size_t visited_count() {
  T value{};
  std::size_t n = 0;
  visit_fields(value, [&](const FieldInfo&, auto&) { ++n; });
  return n;
}

// Every field a distinct value (bools true), lists two elements long, nested structs too.
struct Filler {
  int next = 0;
  template <typename T>
  void fill(T& v) {
    if constexpr (HasFields<T>)
      visit_fields(v, [&](const FieldInfo&, auto& m) { fill(m); });
    else if constexpr (ListOfFields<T>) {
      v.resize(2);
      for (auto& x : v) fill(x);
    } else if constexpr (std::is_same_v<T, std::string>)
      v = "s" + std::to_string(++next);
    else if constexpr (std::is_same_v<T, bool>)
      v = true;
    else if constexpr (std::is_enum_v<T>)
      v = static_cast<T>(1);
    else if constexpr (std::is_arithmetic_v<T>)
      v = static_cast<T>(++next) + static_cast<T>(0.25);
    else
      v = {static_cast<typename T::value_type>(++next),
           static_cast<typename T::value_type>(++next)};
  }
};

// "ranks[1].busy_s=12.25" for every field the rows carry (or every field).
template <typename T>
void flatten(const T& v, const std::string& path, bool rows_only, std::vector<std::string>& out) {
  visit_fields(v, [&](const FieldInfo& f, const auto& m) {
    using M = std::remove_cvref_t<decltype(m)>;
    if (rows_only && !f.in_rows) return;
    const std::string at = path + f.name;
    if constexpr (HasFields<const M>)
      flatten(m, at + ".", rows_only, out);
    else if constexpr (ListOfFields<M>) {
      for (std::size_t i = 0; i < m.size(); ++i)
        flatten(m[i], at + "[" + std::to_string(i) + "].", rows_only, out);
      if (m.empty()) out.push_back(at + "=[]");
    } else if constexpr (std::is_same_v<M, std::string>)
      out.push_back(at + "=" + m);
    else if constexpr (std::is_arithmetic_v<M>)
      out.push_back(at + "=" + std::to_string(m));
    else if constexpr (std::is_enum_v<M>)
      out.push_back(at + "=" + std::to_string(static_cast<int>(m)));
    else
      for (const auto& x : m) out.push_back(at + "[]=" + std::to_string(x));
  });
}

}  // namespace

TEST_CASE("the report field visitors list every member of the report structs", "[distribute]") {
  CHECK(visited_count<Report>() == member_count<Report>());
  CHECK(visited_count<RankReport>() == member_count<RankReport>());
  CHECK(visited_count<CriticalPathSummary>() == member_count<CriticalPathSummary>());
  CHECK(visited_count<ExposedPiece>() == member_count<ExposedPiece>());
  CHECK(member_count<Report>() == 38);  // the count itself works: Report has 38 members
  CHECK(member_count<ExposedPiece>() == 4);
}

TEST_CASE("every report field the visitor lists survives the row codec and reaches the JSON",
          "[distribute]") {
  Evaluation e;
  e.config.schedule = "stp";
  Filler{}.fill(e.report);
  std::vector<std::string> sent, got, all;
  flatten(e.report, "", true, sent);
  flatten(e.report, "", false, all);
  REQUIRE(sent.size() > 70);
  const Report back = decode_rows(encode_rows({e})).at(0).report;
  flatten(back, "", true, got);
  CHECK(got == sent);
  // What the rows leave out (the exposed pieces: op indices of one run's Dag) comes back empty.
  CHECK(back.ranks.at(1).exposed_pieces.empty());
  CHECK(all.size() > sent.size());
  // Every field with a JSON key is written under that key.
  const auto json = nlohmann::json::parse(report_json(e.report));
  visit_fields(e.report, [&](const FieldInfo& f, const auto&) {
    const std::string key = f.json;
    if (key.empty()) return;
    CHECK(json.contains(key));
  });
  visit_fields(e.report.ranks[0], [&](const FieldInfo& f, const auto&) {
    const std::string key = f.json;
    if (key.empty()) return;
    const std::size_t slash = key.find('/');
    const auto& rank = json.at("ranks").at(0);
    if (slash == std::string::npos)
      CHECK(rank.contains(key));
    else
      CHECK(rank.at(key.substr(0, slash)).contains(key.substr(slash + 1)));
  });
  CHECK(json.at("ranks").at(0).at("static_gib") ==
        Approx(e.report.ranks[0].static_bytes / 1073741824.0));
}
