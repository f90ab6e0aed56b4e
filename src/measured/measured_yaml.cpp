// YAML text form of MeasuredTables (the `measured:` section of a profile). Rows are flow maps so
// a table stays one line per measurement; numbers use %.9g so the text is deterministic.
#include <cmath>
#include <cstdio>

#include <yaml-cpp/yaml.h>

#include "braid/error.hpp"
#include "braid/measured.hpp"

namespace braid {

namespace {

// Integers (bytes, FLOPs) exactly, everything else to 9 significant digits.
std::string num(double x) {
  char buf[40];
  if (x == std::floor(x) && std::fabs(x) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", x);
  else
    std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

void meta_field(YAML::Emitter& e, const char* key, const std::string& v) {
  e << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << v;
}

// Reads a required scalar `key` of mapping `n` (YAML path `path`), naming both on failure.
template <typename T>
T field(const YAML::Node& n, const char* key, const std::string& where, const std::string& path) {
  const YAML::Node v = n[key];
  if (!v) throw InputError(where, path + "." + key, "missing");
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    throw InputError(where, path + "." + key, "not a valid value: '" + YAML::Dump(v) + "'");
  }
}

template <typename T>
T field_or(const YAML::Node& n, const char* key, T fallback, const std::string& where,
           const std::string& path) {
  return n[key] ? field<T>(n, key, where, path) : fallback;
}

void check_positive(double x, const std::string& where, const std::string& path) {
  if (!(x > 0)) throw InputError(where, path, "must be > 0, got " + num(x));
}

YAML::Node sequence(const YAML::Node& root, const char* key, const std::string& where) {
  const YAML::Node n = root[key];
  if (n && !n.IsSequence()) throw InputError(where, std::string("measured.") + key, "not a list");
  return n;
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

MeasuredTables parse_measured(const std::string& yaml_text, const std::string& where) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& ex) {
    throw InputError(where, "measured", std::string("malformed YAML: ") + ex.what());
  }
  if (!root.IsMap()) throw InputError(where, "measured", "not a mapping");
  MeasuredTables t;
  const std::string m = "measured";

  if (const YAML::Node meta = root["meta"]) {
    const std::string p = m + ".meta";
    t.meta.gpu = field_or<std::string>(meta, "gpu", "", where, p);
    t.meta.gpus = field_or<int>(meta, "gpus", 0, where, p);
    t.meta.driver = field_or<std::string>(meta, "driver", "", where, p);
    t.meta.cuda = field_or<std::string>(meta, "cuda", "", where, p);
    t.meta.cublas = field_or<std::string>(meta, "cublas", "", where, p);
    t.meta.cudnn = field_or<std::string>(meta, "cudnn", "", where, p);
    t.meta.nccl = field_or<std::string>(meta, "nccl", "", where, p);
    t.meta.date = field_or<std::string>(meta, "date", "", where, p);
    t.meta.host = field_or<std::string>(meta, "host", "", where, p);
    t.meta.command = field_or<std::string>(meta, "command", "", where, p);
    t.meta.attention_impl = field_or<std::string>(meta, "attention_impl", "", where, p);
    t.meta.quick = field_or<bool>(meta, "quick", false, where, p);
  }
  t.peak_flops = field_or<double>(root, "peak_flops", 0, where, m);
  t.hbm_bytes = field_or<double>(root, "hbm_bytes", 0, where, m);
  t.hbm_bandwidth_Bps = field_or<double>(root, "hbm_bandwidth_Bps", 0, where, m);
  t.fixed_overhead_bytes = field_or<double>(root, "fixed_overhead_bytes", 0, where, m);

  if (const YAML::Node rows = sequence(root, "gemm", where)) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::string p = m + ".gemm[" + std::to_string(i) + "]";
      GemmPoint g;
      g.m = field<std::int64_t>(rows[i], "m", where, p);
      g.n = field<std::int64_t>(rows[i], "n", where, p);
      g.k = field<std::int64_t>(rows[i], "k", where, p);
      g.time_s = field<double>(rows[i], "time_s", where, p);
      g.label = field_or<std::string>(rows[i], "label", "", where, p);
      if (g.m <= 0 || g.n <= 0 || g.k <= 0) throw InputError(where, p, "m, n, k must be > 0");
      check_positive(g.time_s, where, p + ".time_s");
      t.gemm.push_back(g);
    }
  }
  if (const YAML::Node rows = sequence(root, "attention", where)) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::string p = m + ".attention[" + std::to_string(i) + "]";
      AttentionPoint a;
      a.batch = field<int>(rows[i], "batch", where, p);
      a.seq = field<int>(rows[i], "seq", where, p);
      a.heads = field<int>(rows[i], "heads", where, p);
      a.kv_heads = field_or<int>(rows[i], "kv_heads", a.heads, where, p);
      a.head_dim = field<int>(rows[i], "head_dim", where, p);
      a.causal = field<bool>(rows[i], "causal", where, p);
      a.fwd_s = field<double>(rows[i], "fwd_s", where, p);
      a.bwd_s = field<double>(rows[i], "bwd_s", where, p);
      if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.head_dim <= 0)
        throw InputError(where, p, "batch, seq, heads, kv_heads, head_dim must be > 0");
      check_positive(a.fwd_s, where, p + ".fwd_s");
      check_positive(a.bwd_s, where, p + ".bwd_s");
      t.attention.push_back(a);
    }
  }
  if (const YAML::Node rows = sequence(root, "elementwise", where)) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::string p = m + ".elementwise[" + std::to_string(i) + "]";
      ElementwisePoint e;
      const std::string k = field<std::string>(rows[i], "kernel", where, p);
      const auto kernel = parse_elementwise_kernel(k);
      if (!kernel)
        throw InputError(where, p + ".kernel",
                         "unknown '" + k + "'; allowed: rmsnorm, rope, swiglu");
      e.kernel = *kernel;
      e.bytes = field<double>(rows[i], "bytes", where, p);
      e.time_s = field<double>(rows[i], "time_s", where, p);
      check_positive(e.bytes, where, p + ".bytes");
      check_positive(e.time_s, where, p + ".time_s");
      t.elementwise.push_back(e);
    }
  }
  if (const YAML::Node comm = root["comm"]) {
    if (!comm.IsMap()) throw InputError(where, m + ".comm", "not a mapping of link classes");
    for (const auto& link : comm) {
      const std::string lname = link.first.as<std::string>();
      if (!link.second.IsMap())
        throw InputError(where, m + ".comm." + lname, "not a mapping of collectives");
      for (const auto& opn : link.second) {
        const std::string oname = opn.first.as<std::string>();
        const std::string p = m + ".comm." + lname + "." + oname;
        const auto op = parse_collective_kind(oname);
        if (!op)
          throw InputError(where, p, "unknown collective; allowed: " + collective_kind_names());
        if (!opn.second.IsSequence()) throw InputError(where, p, "not a list");
        auto& points = t.comm[lname][*op];
        for (std::size_t i = 0; i < opn.second.size(); ++i) {
          const std::string pi = p + "[" + std::to_string(i) + "]";
          MeasuredComm c;
          c.ranks = field<int>(opn.second[i], "ranks", where, pi);
          c.bytes = field<double>(opn.second[i], "bytes", where, pi);
          c.time_s = field<double>(opn.second[i], "time_s", where, pi);
          if (c.ranks < 2) throw InputError(where, pi + ".ranks", "must be >= 2");
          check_positive(c.bytes, where, pi + ".bytes");
          check_positive(c.time_s, where, pi + ".time_s");
          points.push_back(c);
        }
      }
    }
  }
  if (const YAML::Node copies = root["copies"]) {
    for (const auto& [key, out] : {std::pair{"d2h", &t.d2h}, std::pair{"h2d", &t.h2d}}) {
      const YAML::Node rows = copies[key];
      if (!rows) continue;
      if (!rows.IsSequence()) throw InputError(where, m + ".copies." + key, "not a list");
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::string p = m + ".copies." + key + "[" + std::to_string(i) + "]";
        CopyPoint c;
        c.bytes = field<double>(rows[i], "bytes", where, p);
        c.time_s = field<double>(rows[i], "time_s", where, p);
        check_positive(c.bytes, where, p + ".bytes");
        check_positive(c.time_s, where, p + ".time_s");
        out->push_back(c);
      }
    }
  }
  if (const YAML::Node c = root["contention"]) {
    const std::string p = m + ".contention";
    MeasuredContention mc;
    mc.partner = field_or<std::string>(c, "partner", "", where, p);
    mc.compute_alone_s = field<double>(c, "compute_alone_s", where, p);
    mc.compute_together_s = field<double>(c, "compute_together_s", where, p);
    mc.comm_alone_s = field<double>(c, "comm_alone_s", where, p);
    mc.comm_together_s = field<double>(c, "comm_together_s", where, p);
    t.contention = mc;
  }
  return t;
}

std::optional<MeasuredTables> load_measured_section(const std::filesystem::path& profile_file) {
  const std::string where = profile_file.string();
  YAML::Node root;
  try {
    root = YAML::LoadFile(where);
  } catch (const YAML::BadFile&) {
    throw InputError(where, "profile", "cannot read the file");
  } catch (const YAML::Exception& ex) {
    throw InputError(where, "profile", std::string("malformed YAML: ") + ex.what());
  }
  if (!root.IsMap()) throw InputError(where, "profile", "not a mapping");
  const YAML::Node m = root["measured"];
  if (!m) return std::nullopt;
  MeasuredTables t = parse_measured(YAML::Dump(m), where);
  if (!(t.peak_flops > 0) && root["peak_tflops"])
    t.peak_flops = field<double>(root, "peak_tflops", where, "profile") * 1e12;
  return t;
}

}  // namespace braid
