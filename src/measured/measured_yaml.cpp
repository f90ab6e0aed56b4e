// YAML text form of MeasuredTables (the `measured:` section of a profile). Rows are flow maps so
// a table stays one line per measurement; numbers use %.9g so the text is deterministic.
#include <cmath>

#include <yaml-cpp/yaml.h>

#include "../util/format.hpp"
#include "../util/yaml_reader.hpp"
#include "braid/error.hpp"
#include "braid/measured.hpp"

namespace braid {

namespace {

// Integers (bytes, FLOPs) exactly, everything else to 9 significant digits.
std::string num(double x) {
  return util::format(x == std::floor(x) && std::fabs(x) < 1e15 ? "%.0f" : "%.9g", x);
}

void meta_field(YAML::Emitter& e, const char* key, const std::string& v) {
  e << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << v;
}

void check_positive(double x, const std::string& where, const std::string& path) {
  if (!(x > 0)) throw InputError(where, path, "must be > 0, got " + num(x));
}

// A list under `key` of `m` (absent: empty), each row a strict mapping read by `read`.
template <typename Read>
void rows(detail::YamlMap& m, const std::string& key, Read read) {
  if (!m.has(key)) return;
  const YAML::Node list = m.node(key);
  if (!list.IsSequence()) m.fail(key, "not a list");
  for (std::size_t i = 0; i < list.size(); ++i) {
    detail::YamlMap row(list[i], m.file(), m.path(key) + "[" + std::to_string(i) + "]");
    read(row);
    row.finish();
  }
}

double positive(detail::YamlMap& m, const std::string& key) {
  const double x = m.number(key);
  check_positive(x, m.file(), m.path(key));
  return x;
}

MeasuredMeta read_meta(detail::YamlMap& meta) {
  MeasuredMeta t;
  t.gpu = meta.string_or("gpu", "");
  t.gpus = meta.integer_or("gpus", 0);
  t.driver = meta.string_or("driver", "");
  t.cuda = meta.string_or("cuda", "");
  t.cublas = meta.string_or("cublas", "");
  t.cudnn = meta.string_or("cudnn", "");
  t.nccl = meta.string_or("nccl", "");
  t.date = meta.string_or("date", "");
  t.host = meta.string_or("host", "");
  t.command = meta.string_or("command", "");
  t.attention_impl = meta.string_or("attention_impl", "");
  t.quick = meta.boolean_or("quick", false);
  meta.finish();
  return t;
}

GemmPoint read_gemm(detail::YamlMap& r) {
  GemmPoint g;
  g.m = r.integer("m");
  g.n = r.integer("n");
  g.k = r.integer("k");
  g.time_s = r.number("time_s");
  g.label = r.string_or("label", "");
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) r.fail("", "m, n, k must be > 0");
  check_positive(g.time_s, r.file(), r.path("time_s"));
  return g;
}

AttentionPoint read_attention(detail::YamlMap& r) {
  AttentionPoint a;
  a.batch = static_cast<int>(r.integer("batch"));
  a.seq = static_cast<int>(r.integer("seq"));
  a.heads = static_cast<int>(r.integer("heads"));
  a.kv_heads = static_cast<int>(r.integer_or("kv_heads", a.heads));
  a.head_dim = static_cast<int>(r.integer("head_dim"));
  a.causal = r.boolean("causal");
  a.fwd_s = r.number("fwd_s");
  a.bwd_s = r.number("bwd_s");
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.head_dim <= 0)
    r.fail("", "batch, seq, heads, kv_heads, head_dim must be > 0");
  check_positive(a.fwd_s, r.file(), r.path("fwd_s"));
  check_positive(a.bwd_s, r.file(), r.path("bwd_s"));
  return a;
}

ElementwisePoint read_elementwise(detail::YamlMap& r) {
  ElementwisePoint e;
  const std::string k = r.string("kernel");
  const auto kernel = parse_elementwise_kernel(k);
  if (!kernel) r.fail("kernel", "unknown '" + k + "'; allowed: rmsnorm, rope, swiglu");
  e.kernel = *kernel;
  e.bytes = positive(r, "bytes");
  e.time_s = positive(r, "time_s");
  return e;
}

MeasuredComm read_comm(detail::YamlMap& r) {
  MeasuredComm c;
  c.ranks = static_cast<int>(r.integer("ranks"));
  c.bytes = r.number("bytes");
  c.time_s = r.number("time_s");
  if (c.ranks < 2) r.fail("ranks", "must be >= 2");
  check_positive(c.bytes, r.file(), r.path("bytes"));
  check_positive(c.time_s, r.file(), r.path("time_s"));
  return c;
}

// comm: {link: {collective: [rows]}}; `node` is the mapping `comm` reads.
std::map<std::string, CollectiveRows> read_comm_tables(detail::YamlMap& comm,
                                                       const YAML::Node& node) {
  std::map<std::string, CollectiveRows> out;
  for (const auto& link : node) {
    const std::string lname = comm.key_name(link.first);
    if (!link.second.IsMap()) comm.fail(lname, "not a mapping of collectives");
    detail::YamlMap ops = comm.map(lname);
    for (const auto& op : link.second) {
      const std::string oname = ops.key_name(op.first);
      const auto kind = parse_collective_kind(oname);
      if (!kind) ops.fail(oname, "unknown collective; allowed: " + collective_kind_names());
      auto& points = out[lname][*kind];
      rows(ops, oname, [&](detail::YamlMap& r) { points.push_back(read_comm(r)); });
    }
    ops.finish();
  }
  return out;
}

MeasuredContention read_contention(detail::YamlMap& c) {
  MeasuredContention mc;
  mc.partner = c.string_or("partner", "");
  mc.compute_alone_s = c.number("compute_alone_s");
  mc.compute_together_s = c.number("compute_together_s");
  mc.comm_alone_s = c.number("comm_alone_s");
  mc.comm_together_s = c.number("comm_together_s");
  // Written for the reader's benefit; factors() derives them from the four times.
  c.number_or("compute_slowdown", 0);
  c.number_or("comm_slowdown", 0);
  c.finish();
  return mc;
}

MeasuredTables read_measured(detail::YamlMap& m) {
  MeasuredTables t;
  if (auto meta = m.map_if_present("meta")) t.meta = read_meta(*meta);
  t.peak_flops = m.number_or("peak_flops", 0);
  t.hbm_bytes = m.number_or("hbm_bytes", 0);
  t.hbm_bandwidth_Bps = m.number_or("hbm_bandwidth_Bps", 0);
  t.fixed_overhead_bytes = m.number_or("fixed_overhead_bytes", 0);
  rows(m, "gemm", [&](detail::YamlMap& r) { t.gemm.push_back(read_gemm(r)); });
  rows(m, "attention", [&](detail::YamlMap& r) { t.attention.push_back(read_attention(r)); });
  rows(m, "elementwise", [&](detail::YamlMap& r) { t.elementwise.push_back(read_elementwise(r)); });
  if (m.has("comm")) {
    if (!m.node("comm").IsMap()) m.fail("comm", "not a mapping of link classes");
    detail::YamlMap comm = m.map("comm");
    t.comm = read_comm_tables(comm, m.node("comm"));
  }
  if (auto copies = m.map_if_present("copies")) {
    for (const auto& [key, out] : {std::pair{"d2h", &t.d2h}, std::pair{"h2d", &t.h2d}})
      rows(*copies, key, [&, out = out](detail::YamlMap& r) {
        out->push_back({positive(r, "bytes"), positive(r, "time_s")});
      });
    copies->finish();
  }
  if (auto c = m.map_if_present("contention")) t.contention = read_contention(*c);
  m.finish();
  return t;
}

}  // namespace

std::string emit_measured(const MeasuredTables& t) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "meta" << YAML::Value << YAML::BeginMap;
  meta_field(e, "gpu", t.meta.gpu);
  e << YAML::Key << "gpus" << YAML::Value << t.meta.gpus;
  meta_field(e, "driver", t.meta.driver);
  meta_field(e, "cuda", t.meta.cuda);
  meta_field(e, "cublas", t.meta.cublas);
  meta_field(e, "cudnn", t.meta.cudnn);
  meta_field(e, "nccl", t.meta.nccl);
  meta_field(e, "date", t.meta.date);
  meta_field(e, "host", t.meta.host);
  meta_field(e, "command", t.meta.command);
  meta_field(e, "attention_impl", t.meta.attention_impl);
  e << YAML::Key << "quick" << YAML::Value << t.meta.quick;
  e << YAML::EndMap;
  e << YAML::Key << "peak_flops" << YAML::Value << num(t.peak_flops);
  e << YAML::Key << "hbm_bytes" << YAML::Value << num(t.hbm_bytes);
  e << YAML::Key << "hbm_bandwidth_Bps" << YAML::Value << num(t.hbm_bandwidth_Bps);
  e << YAML::Key << "fixed_overhead_bytes" << YAML::Value << num(t.fixed_overhead_bytes);

  e << YAML::Key << "gemm" << YAML::Value << YAML::BeginSeq;
  for (const GemmPoint& g : t.gemm) {
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "m" << YAML::Value << g.m << YAML::Key << "n"
      << YAML::Value << g.n << YAML::Key << "k" << YAML::Value << g.k << YAML::Key << "time_s"
      << YAML::Value << num(g.time_s) << YAML::Key << "label" << YAML::Value << g.label
      << YAML::EndMap;
  }
  e << YAML::EndSeq;

  e << YAML::Key << "attention" << YAML::Value << YAML::BeginSeq;
  for (const AttentionPoint& a : t.attention) {
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "batch" << YAML::Value << a.batch << YAML::Key
      << "seq" << YAML::Value << a.seq << YAML::Key << "heads" << YAML::Value << a.heads
      << YAML::Key << "kv_heads" << YAML::Value << a.kv_heads << YAML::Key << "head_dim"
      << YAML::Value << a.head_dim << YAML::Key << "causal" << YAML::Value << a.causal << YAML::Key
      << "fwd_s" << YAML::Value << num(a.fwd_s) << YAML::Key << "bwd_s" << YAML::Value
      << num(a.bwd_s) << YAML::EndMap;
  }
  e << YAML::EndSeq;

  e << YAML::Key << "elementwise" << YAML::Value << YAML::BeginSeq;
  for (const ElementwisePoint& p : t.elementwise) {
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "kernel" << YAML::Value << name(p.kernel)
      << YAML::Key << "bytes" << YAML::Value << num(p.bytes) << YAML::Key << "time_s" << YAML::Value
      << num(p.time_s) << YAML::EndMap;
  }
  e << YAML::EndSeq;

  e << YAML::Key << "comm" << YAML::Value << YAML::BeginMap;
  for (const auto& [link, ops] : t.comm) {
    e << YAML::Key << link << YAML::Value << YAML::BeginMap;
    for (const auto& [op, points] : ops) {
      e << YAML::Key << name(op) << YAML::Value << YAML::BeginSeq;
      for (const MeasuredComm& c : points) {
        e << YAML::Flow << YAML::BeginMap << YAML::Key << "ranks" << YAML::Value << c.ranks
          << YAML::Key << "bytes" << YAML::Value << num(c.bytes) << YAML::Key << "time_s"
          << YAML::Value << num(c.time_s) << YAML::EndMap;
      }
      e << YAML::EndSeq;
    }
    e << YAML::EndMap;
  }
  e << YAML::EndMap;

  e << YAML::Key << "copies" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, points] : {std::pair{"d2h", &t.d2h}, std::pair{"h2d", &t.h2d}}) {
    e << YAML::Key << key << YAML::Value << YAML::BeginSeq;
    for (const CopyPoint& c : *points) {
      e << YAML::Flow << YAML::BeginMap << YAML::Key << "bytes" << YAML::Value << num(c.bytes)
        << YAML::Key << "time_s" << YAML::Value << num(c.time_s) << YAML::EndMap;
    }
    e << YAML::EndSeq;
  }
  e << YAML::EndMap;

  if (t.contention) {
    const MeasuredContention& c = *t.contention;
    const Contention f = c.factors();
    e << YAML::Key << "contention" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "partner" << YAML::Value << c.partner;
    e << YAML::Key << "compute_alone_s" << YAML::Value << num(c.compute_alone_s);
    e << YAML::Key << "compute_together_s" << YAML::Value << num(c.compute_together_s);
    e << YAML::Key << "comm_alone_s" << YAML::Value << num(c.comm_alone_s);
    e << YAML::Key << "comm_together_s" << YAML::Value << num(c.comm_together_s);
    e << YAML::Key << "compute_slowdown" << YAML::Value << num(f.compute_slowdown);
    e << YAML::Key << "comm_slowdown" << YAML::Value << num(f.comm_slowdown);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

MeasuredTables parse_measured(const YAML::Node& section, const std::string& where) {
  detail::YamlMap m(section, where, "measured");
  return read_measured(m);
}

MeasuredTables parse_measured(const std::string& yaml_text, const std::string& where) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& ex) {
    throw InputError(where, "measured", std::string("malformed YAML: ") + ex.what());
  }
  if (!root.IsMap()) throw InputError(where, "measured", "not a mapping");
  return parse_measured(root, where);
}

std::optional<MeasuredTables> load_measured_section(const std::filesystem::path& profile_file) {
  const std::string where = profile_file.string();
  detail::YamlMap root(detail::load_yaml_file(profile_file), where, "");
  if (!root.has("measured")) return std::nullopt;
  MeasuredTables t = parse_measured(root.node("measured"), where);
  if (!(t.peak_flops > 0) && root.has("peak_tflops"))
    t.peak_flops = root.positive_number("peak_tflops") * 1e12;
  return t;
}

}  // namespace braid
