// The training step beyond the layers (docs/cost-model.md, "The step after the backward"):
// data-parallel gradient sync on the links its group spans, with the node's NICs shared; buckets
// as Megatron-Core sizes and orders them; overlap with the backward; the optimizer step; the
// tied-embedding all-reduce; static memory by part; no RoPE for learned positions. Hand-computed
// values on small cases.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"
#include "hand_schedules.hpp"

using namespace braid;
using test::check_sum_identity;

namespace {

namespace fs = std::filesystem;

// A cluster file of `nodes` H100 nodes with `nics` NICs of `gbps` each (0 nics: no network key).
fs::path cluster_file(const std::string& name, int nodes, int nics, double gbps) {
  const fs::path& dir = test::scratch_dir();
  fs::path file = dir / (name + ".yaml");
  std::ofstream out(file);
  out << "name: " << name << "\nnodes: " << nodes << "\ngpus_per_node: 8\nprofile: h100\n";
  if (nics > 0)
    out << "network:\n  nics_per_node: " << nics << "\n  nic_gbps: " << gbps
        << "\n  nic_efficiency: 0.9\n";
  return file;
}

// qwen2-7b (28 heads: tp 1, 2, 4) on `cluster`, pp and tp given, dp from the node count.
Study study_on(const fs::path& cluster, int tp, int pp, bool overlap = false, bool dist = false) {
  StudyOverrides o = test::layout_overrides("qwen2-7b", cluster.string(), tp, pp);
  o.microbatches = 8;
  o.overlap_grad_reduce = overlap;
  o.distributed_optimizer = dist;
  return load_study(resolve_config("studies", "default"), o);
}

// megatron-22b (GPT: learned positions, tied embeddings, dropout) on one a100-selene node,
// sequence 2048, micro-batch 1, no SP.
StudyOverrides gpt22b(int tp, int pp) {
  StudyOverrides o = test::layout_overrides("megatron-22b", "a100-selene", tp, pp);
  o.nodes = 1;
  o.mbs = 1;
  return o;
}

Report run(const Study& s, const Profile& p, const std::string& schedule, Dag* dag_out = nullptr) {
  ScheduleOptions so;
  so.pp = s.parallel.pp;
  // combined-1f1b refuses one chunk per rank at p > 1 (as Megatron does): 2 there.
  const bool two = schedule == "combined-1f1b" && s.parallel.pp > 1 && s.parallel.vpp == 1;
  so.vpp = chunks_per_rank(schedule, two ? 2 : s.parallel.vpp);
  so.microbatches = s.training.microbatches;
  const Schedule sched = make_schedule(schedule, so);
  const CostModel cm = build_cost_model(s, p, sched.virtual_stages());
  Dag dag = lower(sched, cm);
  Report r = make_report(s.name, sched, cm, dag, simulate(dag));
  if (dag_out != nullptr) *dag_out = dag;
  return r;
}

}  // namespace

TEST_CASE("a DP collective is bytes over NVLink inside a node and over the shared NICs across",
          "[step][dp]") {
  const Profile p = load_profile("h100");
  const LinkProfile& nv = p.link("nvlink");
  const LinkProfile& ib = p.link("ib");
  const double bytes = 1e9;
  // 2 nodes x 8 NICs x 400 Gb/s x 0.9 = 360 GB/s per node.
  {
    const Study s = study_on(cluster_file("dp-a", 2, 8, 400), 4, 1);
    REQUIRE(s.parallel.dp == 4);
    // tp 4 x dp 4 = 16 > 8: the group spans both nodes with 2 members on each, and all 8 GPUs of
    // a node sync at once: 2 x 360 / 8 = 90 GB/s.
    CHECK(dp_collective_time_s(s, p, CollectiveKind::AllReduce, 4, 2, 8, bytes) ==
          Approx(ib.latency_s + 2.0 * 3 / 4 * bytes / 90e9));
    CHECK(dp_collective_time_s(s, p, CollectiveKind::ReduceScatter, 4, 2, 8, bytes) ==
          Approx(ib.latency_s + 3.0 / 4 * bytes / 90e9));
    // One member per node: one GPU's share, 45 GB/s.
    CHECK(dp_collective_time_s(s, p, CollectiveKind::AllReduce, 2, 1, 8, bytes) ==
          Approx(ib.latency_s + bytes / 45e9));
    // All members on one node: NVLink's own collective model (here the profile's published
    // 8-GPU rows at 4 ranks' bus factor: 1 GB lies between the 512 MiB and 1 GiB rows).
    CHECK(dp_collective_time_s(s, p, CollectiveKind::AllReduce, 4, 4, 8, bytes) ==
          Approx(collective_time_s(nv, CollectiveKind::AllReduce, 4, bytes)));
    CHECK(dp_collective_time_s(s, p, CollectiveKind::AllReduce, 1, 1, 8, bytes) == 0);
  }
  // Without a network key the profile's inter-node bus bandwidth stands for the whole node.
  {
    const Study s = study_on(cluster_file("dp-b", 2, 0, 0), 4, 1);
    CHECK(dp_collective_time_s(s, p, CollectiveKind::AllReduce, 4, 2, 8, bytes) ==
          Approx(ib.latency_s + 2.0 * 3 / 4 * bytes / (ib.bus_bandwidth_Bps * 2 / 8)));
  }
}

TEST_CASE(
    "gradient buckets follow Megatron-Core: 40M parameters on the first stage when overlapped",
    "[step][dp]") {
  const Profile p = load_profile("h100");
  const fs::path c = cluster_file("dp-c", 4, 8, 400);
  // pp 2, tp 4: dp 4, the group spans nodes (tp x dp = 16).
  const Study on = study_on(c, 4, 2, true);
  const CostModel cm = build_cost_model(on, p, 2);
  const std::vector<GradBucket>& b0 = cm.chunks[0].grad_buckets;
  REQUIRE(b0.size() > 1);
  double total = 0;
  for (std::size_t i = 0; i < b0.size(); ++i) {
    total += b0[i].params;
    if (i + 1 < b0.size()) CHECK(b0[i].params >= 40e6);
    // Each later bucket completes at an earlier unit (the backward runs the units in reverse).
    if (i > 0) CHECK(b0[i].ready_unit < b0[i - 1].ready_unit);
    CHECK(b0[i].reduce == CollectiveKind::AllReduce);
    CHECK(b0[i].reduce_bytes == b0[i].params * 4);
    CHECK(b0[i].reduce_s == Approx(dp_collective_time_s(on, p, CollectiveKind::AllReduce, 4, 2, 8,
                                                        b0[i].params * 4)));
  }
  CHECK(total == Approx(cm.chunks[0].params));
  CHECK(b0.back().ready_unit == 0);  // the embedding, last in the backward
  // Past the first stage Megatron does not bucket: one bucket of the whole chunk.
  REQUIRE(cm.chunks[1].grad_buckets.size() == 1);
  CHECK(cm.chunks[1].grad_buckets[0].params == Approx(cm.chunks[1].params));
  // Without overlap one bucket per chunk; with the distributed optimizer reduce-scatter of the
  // fp32 gradients and all-gather of the bf16 weights.
  const CostModel off = build_cost_model(study_on(c, 4, 2, false, true), p, 2);
  REQUIRE(off.chunks[0].grad_buckets.size() == 1);
  const GradBucket& g = off.chunks[0].grad_buckets[0];
  CHECK(g.reduce == CollectiveKind::ReduceScatter);
  CHECK(g.gather_bytes == Approx(off.chunks[0].params * 2));
  CHECK(g.gather_s ==
        Approx(dp_collective_time_s(study_on(c, 4, 2, false, true), p, CollectiveKind::AllGather, 4,
                                    2, 8, g.gather_bytes)));
}

TEST_CASE("the optimizer step moves Adam's, the norm's and the zeroing's bytes at HBM speed",
          "[step][optimizer]") {
  const Profile p = load_profile("h100");
  const fs::path c = cluster_file("opt", 2, 8, 400);
  const double Bps = p.hbm_bandwidth_Bps * p.memory_bound_efficiency;
  // Plain optimizer: Adam reads g (4), reads + writes the 12 B state; the copy to the bf16 weights
  // reads the fp32 master (4) and writes 2; the norm reads g; zeroing writes g:
  // 4 + 24 + 4 + 2 + 4 + 4 = 42 B per parameter, as one memory-bound term (one kernel's fixed
  // time).
  const CostModel plain = build_cost_model(study_on(c, 4, 1), p, 1);
  const double n = plain.chunks[0].params;
  CHECK(plain.chunks[0].optimizer_s == Approx(42 * n / Bps + p.memory_kernel_s));
  // Distributed optimizer over dp 4: Adam and the norm on a quarter, zeroing of the whole buffer.
  const CostModel dist = build_cost_model(study_on(c, 4, 1, false, true), p, 1);
  CHECK(dist.chunks[0].optimizer_s == Approx((38 * n / 4 + 4 * n) / Bps + p.memory_kernel_s));
}

TEST_CASE("on slow NICs the iteration grows with DP by the exposed sync, less with overlap",
          "[step][dp][sim]") {
  const Profile p = load_profile("h100");
  // One 100 Gb/s NIC per node: 11.25 GB/s per node, 1.4 GB/s per GPU when all 8 sync.
  const Study one = study_on(cluster_file("slow-1", 1, 1, 100), 8 / 2, 1);  // tp 4, dp 2 in-node
  const Report r1 = run(one, p, "1f1b");
  std::vector<double> times;
  for (int nodes : {2, 4}) {
    const Study s = study_on(cluster_file("slow-" + std::to_string(nodes), nodes, 1, 100), 4, 1);
    const CostModel cm = build_cost_model(s, p, 1);
    REQUIRE(cm.chunks[0].grad_buckets.size() == 1);
    const double sync = cm.chunks[0].grad_buckets[0].reduce_s;
    // By hand: 2 members per node, 2 x 11.25 / 8 GB/s, ring factor 2(d-1)/d.
    const double d = s.parallel.dp;
    const double bytes = cm.chunks[0].params * 4;
    CHECK(sync == Approx(p.link("ib").latency_s + 2 * (d - 1) / d * bytes / (2 * 11.25e9 / 8)));
    const Report off = run(s, p, "1f1b");
    check_sum_identity(off);
    // PP 1 without overlap: the sync runs alone after the last backward, wholly exposed.
    CHECK(off.ranks[0].dp_exposed_s == Approx(sync));
    CHECK(off.iteration_time_s - r1.iteration_time_s ==
          Approx(sync - r1.ranks[0].dp_exposed_s).epsilon(1e-9));
    times.push_back(off.iteration_time_s);
    const Report on =
        run(study_on(cluster_file("slow-o" + std::to_string(nodes), nodes, 1, 100), 4, 1, true), p,
            "1f1b");
    check_sum_identity(on);
    CHECK(on.iteration_time_s < off.iteration_time_s);
    CHECK(on.iteration_time_s > r1.iteration_time_s);
    CHECK(on.ranks[0].dp_exposed_s < off.ranks[0].dp_exposed_s);
  }
  CHECK(times[1] > times[0]);
}

TEST_CASE("braid search on a slow-NIC cluster keeps the DP group inside a node",
          "[step][dp][cli]") {
  const fs::path slow = cluster_file("search-slow", 4, 1, 100);
  const fs::path fast = cluster_file("search-fast", 4, 8, 400);
  auto best = [](const fs::path& cluster) {
    const test::CliRun r =
        test::run_braid("search --study qwen2-7b-h20x16 --cluster " + cluster.string() +
                        " --gpus 32 --global-batch 64 --seq 4096 --top 1 --json");
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["best"][0];
  };
  const nlohmann::json s = best(slow), f = best(fast);
  INFO("slow " << s.dump() << "\nfast " << f.dump());
  // Fast NICs: DP across nodes costs little, so the best layout uses it.
  CHECK(f["tp"].get<int>() * f["dp"].get<int>() > 8);
  // Slow NICs: large cross-node DP is no longer free; the best layout syncs over NVLink.
  CHECK(s["tp"].get<int>() * s["dp"].get<int>() <= 8);
}

TEST_CASE("the tied embedding is held once per rank and all-reduced between first and last stage",
          "[step][memory]") {
  const Profile p = load_profile("a100");
  StudyOverrides o = gpt22b(4, 1);
  o.microbatches = 4;
  const Study s1 = load_study(resolve_config("studies", "default"), o);
  REQUIRE(s1.model.tied_embeddings);
  const CostModel c1 = build_cost_model(s1, p, 1);
  const double per_param = 2 + 4 + 12.0 / s1.parallel.dp;
  const double vocab = std::ceil(s1.model.vocab / 512.0) * 512 / 4;  // padded to 128 x tp, per GPU
  const double emb = (vocab + s1.model.max_positions) * s1.model.hidden;
  // PP 1: the head uses the embedding weight: one copy.
  CHECK(c1.chunks[0].parts.embeddings_bytes == Approx(emb * per_param));
  CHECK(c1.embedding_sync_s == 0);
  const Report r1 = run(s1, p, "1f1b");
  const RankReport& rr = r1.ranks[0];
  CHECK(rr.static_layers_bytes + rr.static_embeddings_bytes + rr.static_other_bytes +
            rr.static_fixed_bytes ==
        Approx(rr.static_bytes));
  CHECK(rr.static_fixed_bytes == p.fixed_overhead_bytes);
  // PP 2, 1F1B: the last stage keeps a copy and both ranks all-reduce its fp32 gradient.
  o.pp = 2;
  o.nodes = 1;
  const Study s2 = load_study(resolve_config("studies", "default"), o);
  const CostModel c2 = build_cost_model(s2, p, 2);
  REQUIRE(s2.parallel.dp == 1);
  CHECK(c2.chunks[1].tied_copy_bytes == Approx(vocab * s2.model.hidden * (2 + 4 + 12)));
  CHECK(c2.embedding_sync_bytes == Approx(vocab * s2.model.hidden * 4));
  // Both stages on one node: a 2-GPU NVLink all-reduce.
  CHECK(c2.embedding_sync_s == Approx(collective_time_s(p.link("nvlink"), CollectiveKind::AllReduce,
                                                        2, c2.embedding_sync_bytes)));
  Dag dag;
  const Report r2 = run(s2, p, "1f1b", &dag);
  check_sum_identity(r2);
  int embedding_ops = 0;
  for (const DagOp& op : dag.ops)
    if (op.kind == OpKind::DpSync && op.collective == CollectiveKind::AllReduce) ++embedding_ops;
  CHECK(embedding_ops == 2);  // one on each of ranks 0 and 1 (dp 1: no gradient buckets)
  // ZB-V puts the first and last virtual stage on rank 0: one copy there, no all-reduce.
  Dag vdag;
  const Report rv = run(s2, p, "zb-v", &vdag);
  check_sum_identity(rv);
  for (const DagOp& op : vdag.ops) CHECK(op.kind != OpKind::DpSync);
  const CostModel cv = build_cost_model(s2, p, 4);
  CHECK(rv.ranks[0].static_embeddings_bytes ==
        Approx(cv.chunks[0].parts.embeddings_bytes + cv.chunks[3].parts.embeddings_bytes -
               cv.chunks[3].tied_copy_bytes));
}

TEST_CASE("learned-position (GPT) models pay no RoPE", "[step][cost]") {
  const Profile p = load_profile("a100");
  Study learned = load_study(resolve_config("studies", "default"), gpt22b(8, 1));
  REQUIRE(learned.model.position == PositionEmbedding::Learned);
  Study rotary = learned;
  rotary.model.position = PositionEmbedding::Rotary;
  const UnitCost a = build_cost_model(learned, p, 1).chunks[0].layer(0)[0];
  const UnitCost b = build_cost_model(rotary, p, 1).chunks[0].layer(0)[0];
  // RoPE reads and writes q and k: 2 x T x (q + k) / t x 2 bytes, forward and backward, one
  // kernel each.
  const double h = learned.model.hidden;
  const double rope =
      2 * 2048 * (h + h) / 8 * 2 / (p.hbm_bandwidth_Bps * p.memory_bound_efficiency) +
      p.memory_kernel_s;
  CHECK(b[Phase::F].time_s - a[Phase::F].time_s == Approx(rope));
  CHECK(b[Phase::B].time_s - a[Phase::B].time_s == Approx(rope));
}

TEST_CASE("the sum identity holds with DP sync and the optimizer on every schedule",
          "[step][sim]") {
  const Profile p = load_profile("h100");
  const fs::path c = cluster_file("every", 2, 2, 200);
  for (bool overlap : {false, true})
    for (bool dist : {false, true}) {
      Study s = study_on(c, 4, 2, overlap, dist);
      s.training.overlap_param_gather = overlap && dist;
      for (const std::string& name : schedule_names()) {
        INFO(name << " overlap " << overlap << " dist " << dist);
        const Report r = run(s, p, name);
        check_sum_identity(r);
        double dp = 0, opt = 0;
        for (const RankReport& rr : r.ranks) {
          dp += rr.dp_exposed_s;
          opt += rr.optimizer_s;
        }
        CHECK(opt > 0);
        if (!overlap) CHECK(dp > 0);
      }
    }
}

TEST_CASE("a GPT layer's backward pays the residual adds, norm and bias gradients, main gradients",
          "[step][cost]") {
  const Profile p = load_profile("a100");
  const Study s = load_study(resolve_config("studies", "default"), gpt22b(8, 1));
  const CostModel cm = build_cost_model(s, p, 1);
  const auto l = cm.chunks[0].layer(0);
  const double T = 2048, h = 6144, t = 8, e = 2;
  const double Bps = p.hbm_bandwidth_Bps * p.memory_bound_efficiency;
  const double kernel = p.memory_kernel_s;  // each memory-bound kernel's fixed time
  // The tile model (a100: 256x128 tiles in either orientation on 108 SMs): `waves` waves of tiles
  // K + k_overhead steps long, plus the GEMM's fixed time.
  const GemmTileModel& g = p.gemm.tiles;
  REQUIRE(g.tile_m == 256);
  REQUIRE(p.sms == 108);
  auto gemm_s = [&](double waves, double k) {
    return g.fixed_s +
           waves * 2.0 * 256 * 128 * (k + g.k_overhead) / (p.peak_flops / 108 * g.wave_efficiency);
  };
  const double qkv = 3 * h / t;  // QKV output width per GPU
  // PreAttn B: input-gradient GEMM (T x h x qkv = 2048 x 6144 x 2304: 8 x 48 = 384 tiles, 4
  // waves), LayerNorm backward (3 T h e) and the residual-gradient add (3 T h e), two kernels; no
  // RoPE (learned positions).
  CHECK(l[0][Phase::B].time_s ==
        Approx(gemm_s(4, qkv) + 3 * T * h * e / Bps + 3 * T * h * e / Bps + 2 * kernel));
  // PreAttn W: weight GEMM (qkv x h x T = 2304 x 6144 x 2048: 9 x 48 = 432 tiles, 4 waves),
  // LayerNorm weight + bias gradient (2 T h e), fp32 main gradient read + write (8 B per weight,
  // in the GEMM's epilogue), QKV bias gradient (T x qkv x e): two kernels.
  CHECK(l[0][Phase::W].time_s == Approx(gemm_s(4, T) + 2 * T * h * e / Bps + 8 * h * qkv / Bps +
                                        T * qkv * e / Bps + 2 * kernel));
  // MLP W: FC2 weight GEMM (h x 4h/t x T = 6144 x 3072 x 2048: 24 x 24 = 576 tiles, 6 waves), its
  // main gradient (epilogue), the FC2 bias gradient (read T h e, one kernel).
  CHECK(l[3][Phase::W].time_s ==
        Approx(gemm_s(6, T) + 8 * 4 * h / t * h / Bps + T * h * e / Bps + kernel));
  // Dropout backward (read the gradient and the 1-byte mask, write the gradient: 5 B per
  // element, one kernel) on the MLP's hidden output; a model without dropout has none of it.
  Study plain = s;
  plain.model.dropout = false;
  const CostModel plain_cm = build_cost_model(plain, p, 1);
  const auto n = plain_cm.chunks[0].layer(0);
  CHECK(l[3][Phase::B].time_s - n[3][Phase::B].time_s == Approx(T * h * 5 / Bps + kernel));
  // Without gradient-accumulation fusion the W GEMM also writes and re-reads a bf16 gradient,
  // the accumulation an add kernel of its own.
  Study unfused = s;
  unfused.training.gradient_accumulation_fusion = false;
  const CostModel unfused_cm = build_cost_model(unfused, p, 1);
  const auto u = unfused_cm.chunks[0].layer(0);
  CHECK(u[3][Phase::W].time_s - l[3][Phase::W].time_s == Approx(4 * 4 * h / t * h / Bps + kernel));
}

TEST_CASE("the parameter gather overlap without the distributed optimizer is refused in one line",
          "[step][cli]") {
  const test::CliRun r = test::run_braid(
      "simulate --study default --schedule 1f1b-i --overlap-grad-reduce on --overlap-param-gather "
      "on --distributed-optimizer off");
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(test::count_lines(r.err) == 1);
  CHECK(r.err.find("--overlap-param-gather") != std::string::npos);
  CHECK(r.err.find("distributed_optimizer") != std::string::npos);
  // A network block with a NIC count of zero names the field.
  const fs::path bad = cluster_file("bad-net", 2, 8, 400);
  {
    std::ofstream out(bad);
    out << "name: bad\nnodes: 2\ngpus_per_node: 8\nprofile: h100\nnetwork:\n  nics_per_node: 0\n"
           "  nic_gbps: 400\n";
  }
  const test::CliRun b =
      test::run_braid("simulate --study default --schedule 1f1b-i --cluster " + bad.string());
  CHECK(b.exit_code == 2);
  CHECK(test::count_lines(b.err) == 1);
  CHECK(b.err.find("nics_per_node") != std::string::npos);
}

TEST_CASE("under SP a row-parallel layer's backward all-gather waits for the compute before it",
          "[step][dag]") {
  const Profile p = load_profile("a100");
  StudyOverrides o = gpt22b(8, 1);
  o.sequence_parallel = true;
  o.microbatches = 2;
  const Study s = load_study(resolve_config("studies", "default"), o);
  Dag dag;
  const Report r = run(s, p, "1f1b", &dag);
  check_sum_identity(r);
  // Recompute the timeline of the same DAG for the op times.
  const Timeline t = simulate(dag);
  int checked = 0;
  for (int i = 0; i < dag.size(); ++i) {
    const DagOp& op = dag.ops[i];
    // (The column units' re-gather of their saved input runs inside their dgrad instead.)
    if (op.kind != OpKind::Collective || op.collective != CollectiveKind::AllGather ||
        op.phase != Phase::B || op.unit == UnitKind::PreAttn || op.unit == UnitKind::PreMLP ||
        op.unit == UnitKind::Head)
      continue;
    // The compute op emitted just before it on the rank (mappings.py: the all-gather is issued
    // synchronously after the norm and residual backward, which follow the previous W).
    int before = -1;
    for (int j = i - 1; j >= 0 && before < 0; --j)
      if (dag.ops[j].stream == StreamKind::Compute && dag.ops[j].rank == op.rank) before = j;
    REQUIRE(before >= 0);
    CHECK(t.start_s[i] >= t.end_s[before]);
    ++checked;
  }
  CHECK(checked == 2 * (2 * 48 + 1));  // Attn and MLP of 48 layers and the embedding, 2 mbs
}

TEST_CASE("a GPT embedding adds its learned positions and dropout", "[step][cost]") {
  const Profile p = load_profile("a100");
  const Study s = load_study(resolve_config("studies", "default"), gpt22b(8, 1));
  const UnitCost emb = build_cost_model(s, p, 1).chunks[0].prologue.back();
  REQUIRE(emb.kind == UnitKind::Embedding);
  const double b = 2048.0 * 6144 * 2, Bps = p.hbm_bandwidth_Bps * p.memory_bound_efficiency;
  // Word lookup 2b, position lookup 2b, add 3b, dropout 2.5b (read, write, 1-byte mask): four
  // kernels.
  CHECK(emb[Phase::F].time_s == Approx((2 + 2 + 3 + 2.5) * b / Bps + 4 * p.memory_kernel_s));
  // Dropout backward 2.5b, scatter-adds into the word and position gradients 3b each: three.
  CHECK(emb[Phase::W].time_s == Approx((2.5 + 3 + 3) * b / Bps + 3 * p.memory_kernel_s));
  CHECK(emb[Phase::F].alloc_bytes == Approx(b / 2));  // the mask, freed by W
  CHECK(emb[Phase::W].free_bytes == Approx(b / 2));
}

namespace {

// 1F1B, p = 2, m = 2, blocking sends of no time: a forward takes 4 (1 per unit), a full backward
// 16 (B 8 + W 8); the last stage adds an LM head (F 1, B 2, W 3, its W freeing 10 bytes) whose
// W waits for the flush when `flush` is on. Ops are named by chunk.microbatch: W0.1 is rank 1's
// (one chunk) W of microbatch 1.
struct FlushCase {
  Schedule schedule = test::generated("1f1b", 2, 2);
  CostModel cost;
  Dag dag;
  Timeline t;
};
FlushCase flush_case(bool flush, int limit) {
  FlushCase c;
  c.cost = uniform_cost_model(UniformCosts{4, 8, 8, 0, 4}, 2);
  c.cost.uniform = false;
  c.cost.node_of_rank.assign(2, 0);
  c.cost.intra_p2p_Bps = 1;
  c.cost.wgrad_deferral_limit = limit;
  UnitCost head;
  head.kind = UnitKind::Head;
  head[Phase::F].time_s = 1;
  head[Phase::F].alloc_bytes = 10;
  head[Phase::B].time_s = 2;
  head[Phase::W].time_s = 3;
  head[Phase::W].free_bytes = 10;
  head.w_in_flush = flush;
  c.cost.chunks[1].epilogue.push_back(head);
  c.dag = lower(c.schedule, c.cost, LowerOptions{P2pMode::Blocking});
  c.t = simulate(c.dag);
  return c;
}

// The start of rank 1's op named `name`.
double start_of(const FlushCase& c, const std::string& name) {
  for (int i = 0; i < c.dag.size(); ++i)
    if (c.dag.ops[i].rank == 1 && op_name(c.dag, i) == name) return c.t.start_s[i];
  FAIL("no op " << name << " on rank 1");
  return -1;
}

}  // namespace

TEST_CASE("deferred LM-head weight gradients run in the pipeline flush of the last stage",
          "[step][sim]") {
  // Without deferral: rank 0 F0 [0,4] F1 [4,8]; rank 1 F0 [4,9], B0 [9,30] (head B 2, head W 3,
  // layers 16); rank 0 B0 [30,46]; rank 1 F1 [30,35], B1 [35,56]; rank 0 B1 [56,72].
  const FlushCase inline_w = flush_case(false, 0);
  CHECK(inline_w.t.iteration_time_s == 72.0);
  CHECK(start_of(inline_w, "W0.0 Head") == 11.0);
  // Deferred (limit 0: every microbatch): rank 1's backwards take 18: B0 [9,27], rank 0 B0
  // [27,43]; rank 1 F1 [27,32], B1 [32,50], then the flush W0 [50,53], W1 [53,56]; rank 0 B1
  // [50,66]. The head's W leaves the path to rank 0's backwards.
  const FlushCase all = flush_case(true, 0);
  CHECK(all.t.iteration_time_s == 66.0);
  CHECK(start_of(all, "W0.0 Head") == 50.0);
  CHECK(start_of(all, "W0.1 Head") == 53.0);
  // Limit 1: microbatch 0's waits, microbatch 1's runs with its B: B1 [32,53] (W1 [34,37]),
  // the flush W0 [53,56]; rank 0 B1 [53,69].
  const FlushCase one = flush_case(true, 1);
  CHECK(one.t.iteration_time_s == 69.0);
  CHECK(start_of(one, "W0.1 Head") == 34.0);
  CHECK(start_of(one, "W0.0 Head") == 53.0);
}

TEST_CASE("the sum identity holds with deferred LM-head weight gradients on every schedule",
          "[step][sim]") {
  const Profile p = load_profile("h100");
  const fs::path c = cluster_file("flush", 1, 0, 0);
  for (int limit : {0, 3}) {
    Study s = study_on(c, 2, 4, true, true);
    s.training.defer_embedding_wgrad_compute = true;
    s.training.wgrad_deferral_limit = limit;
    for (const std::string& name : schedule_names()) {
      INFO(name << " limit " << limit);
      Dag dag;
      const Report r = run(s, p, name, &dag);
      check_sum_identity(r);
      // Every deferred head W runs after the head's rank has run its last B.
      int head_rank = -1;
      for (const DagOp& op : dag.ops)
        if (op.kind == OpKind::Compute && op.unit == UnitKind::Head) head_rank = op.rank;
      REQUIRE(head_rank >= 0);
      int last_b = -1, first_head_w = -1, head_ws = 0;
      for (int i = 0; i < dag.size(); ++i) {
        const DagOp& op = dag.ops[i];
        if (op.rank != head_rank || op.kind != OpKind::Compute) continue;
        if (op.phase == Phase::B) last_b = std::max(last_b, i);
        if (op.phase == Phase::W && op.unit == UnitKind::Head && (limit == 0 || op.mb < limit)) {
          ++head_ws;
          if (first_head_w < 0) first_head_w = i;
        }
      }
      CHECK(head_ws == (limit == 0 ? s.training.microbatches : limit));
      CHECK(first_head_w > last_b);
    }
  }
}

TEST_CASE("deferring the LM-head weight gradients without a pipeline is refused in one line",
          "[step][cli]") {
  const test::CliRun r = test::run_braid(
      "simulate --study default --schedule 1f1b --pp 1 --defer-embedding-wgrad-compute on");
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(test::count_lines(r.err) == 1);
  CHECK(r.err.find("--defer-embedding-wgrad-compute") != std::string::npos);
  CHECK(r.err.find("pp") != std::string::npos);
}
