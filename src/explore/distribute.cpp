// Sharing a sweep or search among processes: the cost estimate and the longest-processing-time
// split, the rows as bytes, and the exchanges over ProcessGroup::all_gather. Every process runs
// the same deterministic code on the same input, so all agree on the split without talking.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "pipeline.hpp"

namespace braid {

namespace {

// Fixed-width values copied byte for byte: a double comes back with the same bits.
struct Writer {
  std::string out;
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out.append(buf, sizeof(T));
  }
  void put(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    out += s;
  }
  template <typename T>
  void put(const std::vector<T>& v) {
    put(static_cast<std::uint64_t>(v.size()));
    for (const T& x : v) put(x);
  }
};

// The last enumerator of each enum in a row (the decoder's range check); a new enum in a row
// does not compile until it has one.
constexpr RowStatus last_of(RowStatus) { return RowStatus::Invalid; }
constexpr Recompute last_of(Recompute) { return Recompute::Full; }
constexpr CpCommType last_of(CpCommType) { return CpCommType::A2AP2P; }
constexpr StreamKind last_of(StreamKind) { return StreamKind::TpRing; }

struct Reader {
  const std::string& in;
  std::size_t at = 0;
  void need(std::size_t n) const {
    if (in.size() - at < n) throw std::runtime_error("decode_rows: truncated rows");
  }
  template <typename T>
  void get(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    std::memcpy(&v, in.data() + at, sizeof(T));
    at += sizeof(T);
  }
  // Bytes that must be one of a few values are checked, not copied into a bool or an enum whose
  // other bit patterns are undefined behaviour.
  void get(bool& v) {
    std::uint8_t b = 0;
    get(b);
    if (b > 1) throw std::runtime_error("decode_rows: a bool byte is " + std::to_string(b));
    v = b == 1;
  }
  template <typename E>
  requires std::is_enum_v<E>
  void get(E& v) {
    std::underlying_type_t<E> raw{};
    get(raw);
    if (raw < 0 || raw > static_cast<std::underlying_type_t<E>>(last_of(E{})))
      throw std::runtime_error("decode_rows: an enum value is " + std::to_string(+raw));
    v = static_cast<E>(raw);
  }
  void get(std::string& s) {
    std::uint64_t n = 0;
    get(n);
    need(n);
    s.assign(in, at, n);
    at += n;
  }
  template <typename T>
  void get(std::vector<T>& v) {
    std::uint64_t n = 0;
    get(n);
    need(n);  // at least one byte per element: a corrupt size cannot allocate wildly
    v.resize(n);
    for (T& x : v) get(x);
  }
};

template <typename Base>
struct IO : Base {
  template <typename... T>
  void put_or_get(T&... v) {
    if constexpr (std::is_same_v<Base, Writer>)
      (Base::put(v), ...);
    else
      (Base::get(v), ...);
  }
  // A report, field by field as visit_fields() lists them (both directions use the one list).
  template <typename T>
  void report(T& value) {
    visit_fields(value, [&](const FieldInfo& f, auto& v) {
      if (f.in_rows) member(v);
    });
  }
  template <typename T>
  void member(T& v) {
    if constexpr (HasFields<T>) {
      report(v);
    } else if constexpr (ListOfFields<T>) {
      std::uint64_t n = v.size();
      put_or_get(n);
      if constexpr (!std::is_same_v<Base, Writer>) {
        Base::need(n);
        v.resize(n);
      }
      for (auto& x : v) report(x);
    } else {
      put_or_get(v);
    }
  }
  void evaluation(Evaluation& e) {
    // The optional field first: the visitor lists it only when set, so the reader sets it before.
    bool has_comm = e.config.cp_comm_type.has_value();
    put_or_get(has_comm);
    if (has_comm && !e.config.cp_comm_type) e.config.cp_comm_type = CpCommType::P2P;
    bool has_ep = e.config.ep > 0;  // likewise the expert sizes (ep 0: none)
    put_or_get(has_ep);
    if (has_ep && e.config.ep == 0) e.config.ep = 1;
    visit_config_fields(e.config, [&](const ConfigField&, auto& v) { put_or_get(v); });
    put_or_get(e.dp, e.gpus, e.status, e.reason, e.static_gib, e.model_peak_gib, e.speedup,
               e.group_best);
    report(e.report);
  }
};

}  // namespace

std::string encode_rows(const std::vector<Evaluation>& rows) {
  IO<Writer> w;
  w.put(static_cast<std::uint64_t>(rows.size()));
  for (Evaluation e : rows) w.evaluation(e);  // a copy: the field list takes references
  return std::move(w.out);
}

std::vector<Evaluation> decode_rows(const std::string& bytes) {
  IO<Reader> r{{bytes}};
  std::uint64_t n = 0;
  r.get(n);
  r.need(n);
  std::vector<Evaluation> rows(n);
  for (Evaluation& e : rows) r.evaluation(e);
  if (r.at != bytes.size()) throw std::runtime_error("decode_rows: trailing bytes");
  return rows;
}

double estimated_cost(const Study& base, const Configuration& c, const ExploreOptions& options) {
  std::string reason;
  if (!explore::prepare(base, c, options, reason)) return 1;  // no schedule, no simulation
  return explore::estimated_ops(base, c);
}

std::vector<int> assign_by_cost(const std::vector<double>& costs, int parts) {
  const int n = static_cast<int>(costs.size());
  std::vector<int> part(n, 0);
  if (parts <= 1) return part;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return costs[a] > costs[b]; });
  // Least loaded part first; equal loads: the lowest part.
  using Load = std::pair<double, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<>> loads;
  for (int p = 0; p < parts; ++p) loads.emplace(0.0, p);
  for (int i : order) {
    auto [load, p] = loads.top();
    loads.pop();
    part[i] = p;
    loads.emplace(load + costs[i], p);
  }
  return part;
}

namespace explore {

double estimated_ops(const Study& base, const Configuration& c) {
  // The size guard's estimate (size_limit.hpp): the same ops the guard bounds balance the work.
  Study s = base;
  s.parallel.tp = c.tp;
  s.parallel.cp = c.cp;  // the ring steps of each attention unit
  s.parallel.sequence_parallel = c.sp;
  s.training.recompute = c.recompute;
  return configuration_size(s, c).ops;
}

std::vector<int> share(const ProcessGroup& group, const std::vector<double>& costs) {
  const std::vector<int> part = assign_by_cost(costs, group.size);
  std::vector<int> mine;
  for (int i = 0; i < static_cast<int>(part.size()); ++i)
    if (part[i] == group.rank) mine.push_back(i);
  return mine;
}

double min_all(const ProcessGroup& group, double value) {
  if (group.size <= 1) return value;
  std::string bytes(sizeof value, '\0');
  std::memcpy(bytes.data(), &value, sizeof value);
  double least = value;
  for (const std::string& b : group.all_gather(bytes)) {
    if (b.size() != sizeof value) throw std::runtime_error("min_all: bad message size");
    double v = 0;
    std::memcpy(&v, b.data(), sizeof v);
    least = std::min(least, v);
  }
  return least;
}

void exchange_rows(const ProcessGroup& group, const std::vector<double>& costs,
                   const std::vector<int>& indices, std::vector<Evaluation>& rows) {
  if (group.size <= 1) return;
  const std::vector<int> part = assign_by_cost(costs, group.size);
  std::vector<Evaluation> mine;
  for (std::size_t k = 0; k < indices.size(); ++k)
    if (part[k] == group.rank) mine.push_back(rows[indices[k]]);
  const std::vector<std::string> all = group.all_gather(encode_rows(mine));
  if (static_cast<int>(all.size()) != group.size)
    throw std::runtime_error("exchange_rows: all_gather returned the wrong number of parts");
  for (int p = 0; p < group.size; ++p) {
    if (p == group.rank) continue;
    std::vector<Evaluation> theirs = decode_rows(all[p]);
    std::size_t next = 0;
    for (std::size_t k = 0; k < indices.size(); ++k) {
      if (part[k] != p) continue;
      if (next == theirs.size()) throw std::runtime_error("exchange_rows: too few rows");
      rows[indices[k]] = std::move(theirs[next++]);
    }
    if (next != theirs.size()) throw std::runtime_error("exchange_rows: too many rows");
  }
}

}  // namespace explore

}  // namespace braid
