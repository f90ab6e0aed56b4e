// Context parallelism (docs/cost-model.md "Context parallelism"): each sequence split over cp GPUs
// that run attention as a ring of KV exchanges inside its compute (Transformer Engine's p2p
// context parallelism under Megatron-Core), after an exposed all-gather of KV (allgather) or
// between exposed all-to-alls that split the heads instead of the sequence (a2a, Ulysses), the
// rest of the layer on their share of the tokens, gradients reduced over dp x cp.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "../src/cost/units.hpp"
#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/profile.hpp"
#include "braid/rank_layout.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/size_limit.hpp"
#include "fixtures.hpp"

using namespace braid;
using test::cost_of;
using test::first_unit;

namespace {

// qwen2-7b (4 KV heads of 128) on 8 nodes of 8 H100, tp 4, pp 2, one chunk per rank, seq 4096,
// micro-batch 1, 4 microbatches, with the given context-parallel size.
Study qwen_cp(int cp, int tp = 4, CpCommType comm = CpCommType::P2P) {
  StudyOverrides o = test::layout_overrides("qwen2-7b", "h100x64", tp, 2, 4096);
  o.cp = cp;
  o.cp_comm_type = comm;
  o.microbatches = 4;
  return load_study(resolve_config("studies", "default"), o);
}

// llama3.1-8b (32 heads, 8 KV heads of 128) on 8 nodes of 8 H100, tp 2, pp 2, one chunk per rank,
// seq 4096, micro-batch 1, 4 microbatches, cp 2 with `comm`: a layout every communication type
// admits (a2a needs the 16 heads and 4 KV heads of a TP rank divisible by cp).
Study llama_cp(CpCommType comm, int cp = 2) {
  StudyOverrides o = test::layout_overrides("llama3.1-8b", "h100x64", 2, 2, 4096);
  o.cp = cp;
  o.cp_comm_type = comm;
  o.microbatches = 4;
  return load_study(resolve_config("studies", "default"), o);
}

// llama3.1-8b (8 heads, 2 KV heads of 128 per TP rank) on 8 nodes of 8 H100, tp 4, pp 2, one
// chunk per rank, seq 4096, micro-batch 1, 4 microbatches, cp 4 as a2a+p2p 2 x 2. Rank 0's cp
// group is ranks 0, 4, 8, 12: its a2a group {0, 4} inside node 0, its ring {0, 8} across nodes.
Study llama_hcp() {
  StudyOverrides o = test::layout_overrides("llama3.1-8b", "h100x64", 4, 2, 4096);
  o.cp = 4;
  o.cp_comm_type = CpCommType::A2AP2P;
  o.hierarchical_cp = std::vector<int>{2, 2};
  o.microbatches = 4;
  return load_study(resolve_config("studies", "default"), o);
}

// The h100 profile with hand links: NVLink 10 us and 100 GB/s, InfiniBand 5 us and 200 GB/s, no
// measured rows (time = latency + bus factor x bytes / bandwidth).
Profile hand_links_h100() {
  Profile p = load_profile("h100");
  auto hand = [](LinkProfile& l, double latency_s, double Bps) {
    l.latency_s = latency_s;
    l.bus_bandwidth_Bps = Bps;
    l.measured = nullptr;
    l.published = false;
    l.row_sources.clear();
  };
  hand(p.links.at("nvlink"), 10e-6, 100e9);
  hand(p.links.at("ib"), 5e-6, 200e9);
  return p;
}

// Rank 0's ops on the CP stream: how many, and their time in the forward and in the backward.
struct CpTally {
  int ops = 0;
  double forward_s = 0, backward_s = 0;
};
CpTally rank0_cp(const test::Simulated& r) {
  CpTally t;
  for (std::size_t i = 0; i < r.dag.ops.size(); ++i) {
    const DagOp& op = r.dag.ops[i];
    if (op.rank != 0 || op.stream != StreamKind::Cp) continue;
    ++t.ops;
    (op.phase == Phase::F ? t.forward_s : t.backward_s) +=
        r.timeline.end_s[i] - r.timeline.start_s[i];
  }
  return t;
}

// Every schedule at cp 2 with `comm` (a2a+p2p: cp 4 = 2 x 2): the sum identity holds and the CP
// group communicates.
void check_every_schedule(CpCommType comm) {
  for (const std::string& name : schedule_names()) {
    INFO(name);
    Study s = comm == CpCommType::A2AP2P ? llama_hcp() : llama_cp(comm);
    // 1 chunk where chosen, but 2 for combined-1f1b (it refuses 1 at p > 1, as Megatron does)
    s.parallel.vpp = chunks_per_rank(name, name == "combined-1f1b" ? 2 : 1);
    validate_study(s);
    const Schedule sched = make_schedule(name, ScheduleOptions{2, s.parallel.vpp, 8});
    const test::Simulated r = test::simulated(sched, cost_of(s), false);
    test::check_sum_identity(r.report);
    CHECK(r.report.cp_comm_rate > 0);
  }
}

}  // namespace

TEST_CASE("cp divides the data-parallel size and its groups sit inside a node first",
          "[cp][config]") {
  const Study s = qwen_cp(2);
  CHECK(s.parallel.cp == 2);
  CHECK(s.parallel.dp == 4);  // 64 GPUs / (tp 4 x cp 2 x pp 2)
  const RankLayout l = rank_layout(s);
  CHECK(l.size(Group::DpCp) == 8);
  // Megatron-Core's order tp-cp-dp-pp: rank 0's CP group is ranks 0 and 4, on one node.
  CHECK(l.ranks(Group::Cp, 0) == std::vector<int>{0, 4});
  CHECK_FALSE(l.spans_nodes(Group::Cp));
  // tp x cp = 16 is two nodes: a CP group of 4 crosses the NICs.
  CHECK(rank_layout(qwen_cp(4)).ranks(Group::Cp, 0) == std::vector<int>{0, 4, 8, 12});
  CHECK(rank_layout(qwen_cp(4)).spans_nodes(Group::Cp));
}

TEST_CASE("cp 2 halves a layer's tokens and runs a ring of KV exchanges inside attention",
          "[cp][cost]") {
  const CostModel one = cost_of(qwen_cp(1));
  const CostModel two = cost_of(qwen_cp(2));
  // Every unit's work and saved activations halve (no s x s term with fused attention): the MLP
  // exactly, the attention unit's FLOPs exactly (its queries halve, each still meets all keys).
  for (UnitKind kind : {UnitKind::PreAttn, UnitKind::Attn, UnitKind::PreMLP, UnitKind::MLP}) {
    INFO(name(kind));
    const UnitCost a = first_unit(one, kind), b = first_unit(two, kind);
    CHECK(b[Phase::F].flops == a[Phase::F].flops / 2);
    CHECK(b[Phase::B].flops == a[Phase::B].flops / 2);
    CHECK(b[Phase::F].alloc_bytes == a[Phase::F].alloc_bytes / 2);
  }
  // The ring: one KV chunk to pass (cp - 1 = 1) in the forward; KV and dKV in the backward. KV of
  // 2048 tokens, 4 / tp 4 = 1 KV head of 128, K and V, 2 bytes: 2 x 2048 x 128 x 2 = 1 MiB.
  const Profile h100 = load_profile("h100");
  const LinkProfile& nvlink = h100.link("nvlink");
  for (Phase p : {Phase::F, Phase::B}) {
    INFO(name(p));
    const UnitCost unit = first_unit(two, UnitKind::Attn);
    const PhaseCost& attn = unit[p];
    const double bytes = (p == Phase::F ? 1 : 2) * 1048576.0;
    int rings = 0;
    for (const Collective& c : attn.collectives) {
      if (c.group != Group::Cp) continue;
      ++rings;
      CHECK(c.kind == CollectiveKind::P2P);
      CHECK(c.position == CollectivePosition::Inside);
      CHECK(c.steps == 2);
      CHECK(c.bytes == bytes);
      CHECK(c.time_s == collective_time_s(nvlink, CollectiveKind::P2P, 2, bytes));
    }
    CHECK(rings == 1);
    CHECK(attn.compute_steps() == 2);
  }
  const UnitCost attn_one = first_unit(one, UnitKind::Attn);
  for (const Collective& c : attn_one[Phase::F].collectives) CHECK(c.group != Group::Cp);
  // Half the data-parallel replicas, each sample split over two GPUs: half the tokens per
  // iteration at the same model FLOPs per token.
  CHECK(two.tokens_per_iteration == one.tokens_per_iteration / 2);
  CHECK(two.model_flops / two.tokens_per_iteration ==
        Approx(one.model_flops / one.tokens_per_iteration).epsilon(1e-12));
}

TEST_CASE("a cp run lowers each ring step beside a piece of attention and reports its comm",
          "[cp][sim]") {
  const CostModel cost = cost_of(qwen_cp(4));  // the ring crosses nodes
  const Schedule sched = make_schedule("1f1b", ScheduleOptions{2, 1, 4});
  const test::Simulated r = test::simulated(sched, cost, false);
  // Rank 0 holds 14 layers; per microbatch and layer cp - 1 = 3 KV transfers in F and 3 in B.
  int ring_ops = 0;
  for (const DagOp& op : r.dag.ops)
    if (op.rank == 0 && op.stream == StreamKind::Cp) ++ring_ops;
  CHECK(ring_ops == 14 * 4 * 2 * 3);
  CHECK(r.report.cp_comm_rate > 0);
  test::check_sum_identity(r.report);
  // The size guard counts the ring's pieces and transfers: an upper bound, within 2x; the
  // explorer's estimate from the study's shape bounds it again.
  const SizeEstimate e = estimate_size(cost, 1, 2, 4);
  CHECK(e.ops >= r.dag.size());
  CHECK(e.ops <= 2 * r.dag.size());
  CHECK(estimate_study_size(qwen_cp(4), 2, 4).ops >= e.ops);
}

TEST_CASE("every schedule keeps the sum identity with every CP communication type", "[cp][sim]") {
  // Every type the names table lists, so that a new one is covered or refused here on purpose.
  int checked = 0;
  for (const std::string& type : cp_comm_type_names()) {
    INFO(type);
    check_every_schedule(parse_cp_comm_type(type).value());
    ++checked;
  }
  CHECK(checked == 4);  // p2p, a2a, allgather, a2a+p2p
}

TEST_CASE("cp allgather gathers KV before attention and reduce-scatters dKV after, exposed",
          "[cp][cost]") {
  const CostModel ring = cost_of(qwen_cp(2));
  const CostModel gather = cost_of(qwen_cp(2, 4, CpCommType::AllGather));
  // The gathered buffer: KV of the whole sequence, cp 2 x 1 MiB (the ring's chunk above).
  const double bytes = 2 * 1048576.0;
  const Profile h100 = load_profile("h100");  // the link is a reference into it
  const LinkProfile& nvlink = h100.link("nvlink");
  const UnitCost attn = first_unit(gather, UnitKind::Attn);
  struct Expect {
    Phase phase;
    CollectiveKind kind;
    CollectivePosition position;
  };
  const std::vector<Expect> expected = {
      {Phase::F, CollectiveKind::AllGather, CollectivePosition::Before},
      {Phase::B, CollectiveKind::AllGather, CollectivePosition::Before},
      {Phase::B, CollectiveKind::ReduceScatter, CollectivePosition::After}};
  std::vector<Expect> found;
  for (Phase p : {Phase::F, Phase::B}) {
    for (const Collective& c : attn[p].collectives) {
      if (c.group != Group::Cp) continue;
      found.push_back({p, c.kind, c.position});
      CHECK(c.bytes == bytes);
      CHECK(c.time_s == collective_time_s(nvlink, c.kind, 2, bytes));
    }
    CHECK(attn[p].compute_steps() == 1);  // nothing runs inside the compute
  }
  REQUIRE(found.size() == expected.size());
  for (std::size_t i = 0; i < found.size(); ++i) {
    CHECK(found[i].phase == expected[i].phase);
    CHECK(found[i].kind == expected[i].kind);
    CHECK(found[i].position == expected[i].position);
  }
  // The same model FLOPs as the ring: only the communication and the kernels' split differ.
  const UnitCost attn_ring = first_unit(ring, UnitKind::Attn);
  CHECK(attn[Phase::F].flops == attn_ring[Phase::F].flops);
  CHECK(attn[Phase::B].flops == attn_ring[Phase::B].flops);
}

TEST_CASE("cp allgather's forward gathers are exposed under 1F1B, and every schedule sums up",
          "[cp][sim]") {
  const CostModel cost = cost_of(qwen_cp(2, 4, CpCommType::AllGather));
  const test::Simulated r =
      test::simulated(make_schedule("1f1b", ScheduleOptions{2, 1, 4}), cost, false);
  // Rank 0: 14 layers x 4 microbatches x (F gather, B gather, B reduce-scatter).
  const CpTally cp = rank0_cp(r);
  CHECK(cp.ops == 14 * 4 * 3);
  // Not overlapped with the attention (TE: "KV all-gather between CP ranks is exposed"): in the
  // forward nothing else is ready; in the backward TE's gather and reduce-scatter are synchronous
  // (the compute stream waits for them) and the weight gradients before them already ran, so no
  // W runs beside them either: rank 0's cp_exposed is exactly the CP stream's time, F and B.
  CHECK(cp.backward_s > 0);
  CHECK(r.report.ranks[0].cp_exposed_s == Approx(cp.forward_s + cp.backward_s).epsilon(1e-9));
}

TEST_CASE("an all-to-all is timed as nccl-tests counts it, as the all-gather without rows",
          "[cp][cost]") {
  CHECK(std::string(name(CollectiveKind::AllToAll)) == "all_to_all");
  CHECK(parse_collective_kind("all_to_all") == CollectiveKind::AllToAll);
  CHECK(bus_factor(CollectiveKind::AllToAll, 4) == 0.75);  // each rank keeps 1/4 of its buffer
  // A hand link: 10 us, 100 GB/s bus bandwidth. 8 MiB per rank over 4 GPUs:
  // 10 us + 3/4 x 8388608 B / 1e11 B/s = 10 + 62.91456 us.
  LinkProfile link;
  link.latency_s = 10e-6;
  link.bus_bandwidth_Bps = 100e9;
  const double mib8 = 8388608;
  CHECK(collective_time_s(link, CollectiveKind::AllToAll, 4, mib8) ==
        Approx(72.91456e-6).epsilon(1e-12));
  // Published all-gather rows and none for the all-to-all: it takes the all-gather's time
  // (equal bus bandwidth assumed, docs/cost-model.md); its own rows replace that.
  auto rows = std::make_shared<CollectiveRows>();
  (*rows)[CollectiveKind::AllGather] = {{4, 1048576, 20e-6}, {4, mib8, 100e-6}};
  link.measured = rows;
  link.published = true;
  CHECK(collective_time_s(link, CollectiveKind::AllToAll, 4, mib8) == Approx(100e-6));
  CHECK(has_measured_rows(link, CollectiveKind::AllToAll, 4));
  (*rows)[CollectiveKind::AllToAll] = {{4, 1048576, 50e-6}, {4, mib8, 300e-6}};
  CHECK(collective_time_s(link, CollectiveKind::AllToAll, 4, mib8) == Approx(300e-6));
  CHECK(collective_time_s(link, CollectiveKind::AllGather, 4, mib8) == Approx(100e-6));
}

TEST_CASE("cp a2a swaps the sequence split for a head split with exposed all-to-alls",
          "[cp][cost]") {
  const CostModel ring = cost_of(llama_cp(CpCommType::P2P));
  const CostModel a2a = cost_of(llama_cp(CpCommType::A2A));
  // Per GPU: 2048 tokens, tp 2: Q of 16 heads x 128 = 2048 x 2048 x 2 B = 8 MiB, K and V of
  // 4 KV heads x 128 = 2 MiB each, the output 8 MiB. Forward: Q, K, V before (three calls, 12
  // MiB), the output after; backward: dO before, dQ, dK, dV after. The CP group (ranks 0 and 2)
  // is inside a node: NVLink.
  const double mib = 1048576;
  const Profile h100 = load_profile("h100");
  const LinkProfile& nvlink = h100.link("nvlink");
  auto a2a_s = [&](double bytes) {
    return collective_time_s(nvlink, CollectiveKind::AllToAll, 2, bytes);
  };
  const double qkv_s = a2a_s(8 * mib) + a2a_s(2 * mib) + a2a_s(2 * mib), out_s = a2a_s(8 * mib);
  struct Expect {
    Phase phase;
    CollectivePosition position;
    double bytes, time_s;
  };
  const std::vector<Expect> expected = {{Phase::F, CollectivePosition::Before, 12 * mib, qkv_s},
                                        {Phase::F, CollectivePosition::After, 8 * mib, out_s},
                                        {Phase::B, CollectivePosition::Before, 8 * mib, out_s},
                                        {Phase::B, CollectivePosition::After, 12 * mib, qkv_s}};
  const UnitCost attn = first_unit(a2a, UnitKind::Attn);
  std::vector<Expect> found;
  for (Phase p : {Phase::F, Phase::B}) {
    for (const Collective& c : attn[p].collectives) {
      if (c.group != Group::Cp) continue;
      CHECK(c.kind == CollectiveKind::AllToAll);
      found.push_back({p, c.position, c.bytes, c.time_s});
    }
    CHECK(attn[p].compute_steps() == 1);  // nothing runs inside the compute
  }
  REQUIRE(found.size() == expected.size());
  for (std::size_t i = 0; i < found.size(); ++i) {
    INFO(i);
    CHECK(found[i].phase == expected[i].phase);
    CHECK(found[i].position == expected[i].position);
    CHECK(found[i].bytes == expected[i].bytes);
    CHECK(found[i].time_s == expected[i].time_s);
  }
  // Under SP the output gradient's TP all-gather comes first: it produces what dO's all-to-all
  // sends (after the out-projection's dgrad in TE).
  Study with_sp = llama_cp(CpCommType::A2A);
  with_sp.parallel.sequence_parallel = true;
  const UnitCost attn_sp = first_unit(cost_of(with_sp), UnitKind::Attn);
  REQUIRE(attn_sp[Phase::B].collectives.size() == 3);
  CHECK(attn_sp[Phase::B].collectives[0].group == Group::Tp);
  CHECK(attn_sp[Phase::B].collectives[0].kind == CollectiveKind::AllGather);
  CHECK(attn_sp[Phase::B].collectives[1].kind == CollectiveKind::AllToAll);
  CHECK(attn_sp[Phase::B].collectives[1].position == CollectivePosition::Before);
  // The doubt written down: without all_to_all rows the time is the all-gather's.
  CHECK(a2a_s(8 * mib) == collective_time_s(nvlink, CollectiveKind::AllGather, 2, 8 * mib));
  // Same model FLOPs and saved activations (memory / cp) as the ring: Q, K, V head-split over the
  // whole sequence are as large as sequence-split over all heads.
  const UnitCost attn_ring = first_unit(ring, UnitKind::Attn);
  for (Phase p : {Phase::F, Phase::B}) CHECK(attn[p].flops == attn_ring[p].flops);
  CHECK(attn[Phase::F].alloc_bytes == attn_ring[Phase::F].alloc_bytes);
  CHECK(a2a.tokens_per_iteration == ring.tokens_per_iteration);
  // The attention kernel: one over the whole sequence (4096) with 16 / cp 2 = 8 heads, not the
  // ring's load-balanced steps at 2048 with 16 heads (one kernel timed, run cp = 2 times); causal
  // forward FLOPs 2 x 2048 tokens x 4096 x 2048 (q / tp) = 2^35 either way.
  auto attention_calls = [](const Study& s) {
    std::vector<detail::KernelCall> out;
    for (const detail::LayerKernel& k : detail::lm_layer_kernels(s, load_profile("h100")))
      if (k.call.kind == detail::KernelKind::Attention && k.phase == Phase::F)
        out.push_back(k.call);
    return out;
  };
  const auto heads_split = attention_calls(llama_cp(CpCommType::A2A));
  REQUIRE(heads_split.size() == 1);
  CHECK(heads_split[0].seq == 4096);
  CHECK(heads_split[0].batch == 8);
  CHECK(heads_split[0].flops == 34359738368.0);
  const auto steps = attention_calls(llama_cp(CpCommType::P2P));
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].seq == 2048);
  CHECK(steps[0].batch == 16);
  CHECK(steps[0].flops == 34359738368.0 / 2);
}

TEST_CASE("cp a2a's forward all-to-alls are exposed under 1F1B", "[cp][sim]") {
  const CostModel cost = cost_of(llama_cp(CpCommType::A2A));
  const test::Simulated r =
      test::simulated(make_schedule("1f1b", ScheduleOptions{2, 1, 4}), cost, false);
  // Rank 0: 16 layers x 4 microbatches x (two in F, two in B).
  const CpTally cp = rank0_cp(r);
  CHECK(cp.ops == 16 * 4 * 4);
  // As the all-gather type's: the attention waits for them, and so does the compute after them
  // (flash_attn_a2a_communicate ends with the compute stream waiting for the CP stream); in the
  // forward nothing else is ready, in the backward no W runs beside them (the out-projection's
  // wgrad ran before the attention's backward in TE). All of their time is exposed.
  CHECK(cp.backward_s > 0);
  CHECK(r.report.ranks[0].cp_exposed_s == Approx(cp.forward_s + cp.backward_s).epsilon(1e-9));
}

TEST_CASE("cp a2a+p2p runs all-to-alls in its A-groups around a ring between them", "[cp][cost]") {
  // cp 4 = 2 x 2 (llama_hcp). Per GPU: 4096 / 4 = 1024 tokens; tp 4: Q of 8 heads x 128 = 1024
  // x 1024 x 2 B = 2 MiB, K and V of 2 KV heads x 128 = 0.5 MiB each, the output 2 MiB. The
  // all-to-alls over the A-group of 2 (ranks 0 and 4, NVLink), bus factor 1/2: 10 us + 1/2 x
  // bytes / 100 GB/s, so 2 MiB takes 10 + 10.48576 us and 0.5 MiB 10 + 2.62144 us.
  const double mib = 1048576, us = 1e-6;
  const double q_s = 20.48576 * us, kv_s = 12.62144 * us;
  // After the all-to-all a GPU holds 2048 tokens at 4 / 2 = 1 KV head: the ring step moves
  // K and V of 2048 x 128 x 2 B = 1 MiB (as p2p's at cp 4 with 2 KV heads: 1024 tokens), over
  // the ring of P = 2 (ranks 0 and 8, InfiniBand): one transfer, 5 us + 1 MiB / 200 GB/s =
  // 5 + 5.24288 us; the backward's carries KV and dKV, 2 MiB: 5 + 10.48576 us.
  const double ring_f_s = 10.24288 * us, ring_b_s = 15.48576 * us;
  struct Expect {
    Phase phase;
    CollectiveKind kind;
    CollectivePosition position;
    double bytes, time_s;
    int steps;
  };
  using K = CollectiveKind;
  using P = CollectivePosition;
  const std::vector<Expect> expected = {
      {Phase::F, K::AllToAll, P::Before, 3 * mib, q_s + 2 * kv_s, 1},
      {Phase::F, K::P2P, P::Inside, mib, ring_f_s, 2},
      {Phase::F, K::AllToAll, P::After, 2 * mib, q_s, 1},
      {Phase::B, K::AllToAll, P::Before, 2 * mib, q_s, 1},
      {Phase::B, K::P2P, P::Inside, 2 * mib, ring_b_s, 2},
      {Phase::B, K::AllToAll, P::After, 3 * mib, q_s + 2 * kv_s, 1}};
  const Study study = llama_hcp();
  const CostModel hcp = build_cost_model(study, hand_links_h100(), 2);
  const UnitCost attn = first_unit(hcp, UnitKind::Attn);
  std::vector<Expect> found;
  for (Phase p : {Phase::F, Phase::B}) {
    for (const Collective& c : attn[p].collectives)
      if (c.group == Group::Cp)
        found.push_back({p, c.kind, c.position, c.bytes, c.time_s, c.steps});
    CHECK(attn[p].compute_steps() == 2);  // the attention runs in P = 2 ring steps
  }
  REQUIRE(found.size() == expected.size());
  for (std::size_t i = 0; i < found.size(); ++i) {
    INFO(i);
    CHECK(found[i].phase == expected[i].phase);
    CHECK(found[i].kind == expected[i].kind);
    CHECK(found[i].position == expected[i].position);
    CHECK(found[i].bytes == expected[i].bytes);
    CHECK(found[i].time_s == Approx(expected[i].time_s).epsilon(1e-12));
    CHECK(found[i].steps == expected[i].steps);
  }
  // Placement: with tp 2 the whole cp group (ranks 0, 2, 4, 6) is in node 0, so the ring's step
  // is NVLink's: K and V of 2048 tokens at 4 / 2 = 2 KV heads, 2 MiB: 10 us + 2 MiB / 100 GB/s.
  StudyOverrides o = test::layout_overrides("llama3.1-8b", "h100x64", 2, 2, 4096);
  o.cp = 4;
  o.cp_comm_type = CpCommType::A2AP2P;
  o.hierarchical_cp = std::vector<int>{2, 2};
  const Study inside = load_study(resolve_config("studies", "default"), o);
  const UnitCost attn_inside =
      first_unit(build_cost_model(inside, hand_links_h100(), 2), UnitKind::Attn);
  int rings = 0;
  for (const Collective& c : attn_inside[Phase::F].collectives) {
    if (c.position != CollectivePosition::Inside) continue;
    ++rings;
    CHECK(c.time_s == Approx(10 * us + 2 * mib / 100e9).epsilon(1e-12));
  }
  CHECK(rings == 1);
  // The same model FLOPs and saved activations as p2p's and a2a's at cp 4; the attention kernel
  // of a ring step: seq 4096 / P 2 = 2048 tokens at 8 heads / A 2 = 4 heads, 2 kernels.
  Study ring = study, ulysses = study;
  ring.parallel.cp_comm_type = CpCommType::P2P;
  ulysses.parallel.cp_comm_type = CpCommType::A2A;
  ring.parallel.hierarchical_cp.clear();
  ulysses.parallel.hierarchical_cp.clear();
  for (const Study* other : {&ring, &ulysses}) {
    const UnitCost a = first_unit(cost_of(*other), UnitKind::Attn);
    for (Phase p : {Phase::F, Phase::B}) CHECK(attn[p].flops == a[p].flops);
    CHECK(attn[Phase::F].alloc_bytes == a[Phase::F].alloc_bytes);
  }
  std::vector<detail::KernelCall> calls;
  for (const detail::LayerKernel& k : detail::lm_layer_kernels(study, load_profile("h100")))
    if (k.call.kind == detail::KernelKind::Attention && k.phase == Phase::F)
      calls.push_back(k.call);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].seq == 2048);
  CHECK(calls[0].batch == 4);
}

TEST_CASE("cp a2a+p2p's all-to-alls are exposed under 1F1B and its ring is hidden", "[cp][sim]") {
  const CostModel cost = build_cost_model(llama_hcp(), hand_links_h100(), 2);
  const test::Simulated r =
      test::simulated(make_schedule("1f1b", ScheduleOptions{2, 1, 4}), cost, false);
  // Rank 0: 16 layers x 4 microbatches x (two all-to-alls and one ring transfer, in F and in B).
  double all_to_all_s[2] = {0, 0}, ring_s[2] = {0, 0};
  int ops = 0;
  for (std::size_t i = 0; i < r.dag.ops.size(); ++i) {
    const DagOp& op = r.dag.ops[i];
    if (op.rank != 0 || op.stream != StreamKind::Cp) continue;
    ++ops;
    const int b = op.phase == Phase::F ? 0 : 1;
    (op.collective == CollectiveKind::AllToAll ? all_to_all_s : ring_s)[b] +=
        r.timeline.end_s[i] - r.timeline.start_s[i];
  }
  CHECK(ops == 16 * 4 * 6);
  // The hand links of the cost test above, each op alone on its link (no contention slows a
  // transfer): per layer and microbatch the forward's Q, K, V all-to-alls 20.48576 + 2 x 12.62144
  // = 45.72864 us before the attention and the output's 20.48576 us after it; the backward's
  // dO 20.48576 us before, dQ, dK, dV 45.72864 us after: 66.2144 us each way. The ring's one
  // transfer: 10.24288 us forward, 15.48576 us backward.
  const double us = 1e-6, per_phase_s = 66.2144 * us;
  CHECK(all_to_all_s[0] == Approx(16 * 4 * per_phase_s).epsilon(1e-9));
  CHECK(all_to_all_s[1] == Approx(16 * 4 * per_phase_s).epsilon(1e-9));
  CHECK(ring_s[0] == Approx(16 * 4 * 10.24288 * us).epsilon(1e-9));
  CHECK(ring_s[1] == Approx(16 * 4 * 15.48576 * us).epsilon(1e-9));
  // Exposed, as Transformer Engine runs them (AttnFuncWithCPAndKVP2P with cp_group [a2a, p2p]):
  // - every all-to-all. flash_attn_a2a_communicate makes the compute stream wait for the A-group's
  //   NCCL stream (through cp_stream), so the attention waits for Q, K, V (F) and dO (B), and
  //   what follows waits for the output (F: the Attn unit's TP all-reduce, then PreMLP) and for
  //   dQ, dK, dV (B). In the backward nothing runs beside them: the weight gradients braid puts
  //   after them (the out-projection's, Attn W) ran in TE's Linear backward before the
  //   attention's backward began. 2 x 66.2144 = 132.4288 us per layer and microbatch.
  // - none of the ring. Its transfer runs on the P-group's own NCCL stream beside the first of
  //   the P = 2 attention steps, which is longer (F and B below), and the second step waits for
  //   it: it is hidden. (Were dQ, dK, dV to run beside Attn W, as a TP collective of a full
  //   backward does, they would outlast its 36.4 us by 9.3 us per layer and microbatch: exposed
  //   time that no schedule of TE's shows, and not the ring's.)
  // Rank 0: 16 x 4 x 132.4288 us = 8475.4432 us.
  const UnitCost attn = first_unit(cost, UnitKind::Attn);
  CHECK(attn[Phase::F].time_s / 2 > 10.24288 * us);
  CHECK(attn[Phase::B].time_s / 2 > 15.48576 * us);
  CHECK(r.report.ranks[0].cp_exposed_s == Approx(8475.4432 * us).epsilon(1e-9));
  test::check_sum_identity(r.report);
}

TEST_CASE("context parallelism the model cannot run is one line naming the fix", "[cp][errors]") {
  auto problem = [](const StudyOverrides& o) {
    return test::input_error_of([&] { load_study(resolve_config("studies", "default"), o); });
  };
  StudyOverrides o = test::layout_overrides("qwen2-7b", "h100x64", 4, 2, 4096);
  o.cp = 3;
  o.seq = 6144;  // a multiple of 2 x 3, but tp 4 x cp 3 x pp 2 = 24 GPUs do not divide 64
  CHECK_THAT(problem(o), Catch::Contains("--tp") && Catch::Contains("tp x cp x pp = 4 x 3 x 2") &&
                             Catch::Contains("does not divide the 64 GPUs"));
  const StudyOverrides cp_only{.cp = 3};  // the default study, 16 GPUs: 8 x 3 x 2 = 48
  CHECK_THAT(problem(cp_only), Catch::StartsWith("--cp: parallel: tp x cp x pp = 8 x 3 x 2"));
  o.cp = 2;
  o.seq = 4098;
  CHECK_THAT(problem(o), Catch::StartsWith("--cp: training.seq") &&
                             Catch::Contains("choose seq a multiple of 4"));
  o.seq = 4096;
  o.cp = 0;
  CHECK_THAT(problem(o), Catch::Contains("--cp") && Catch::Contains("positive integer"));
  StudyOverrides vl = test::layout_overrides("qwen2-vl-14.9b", "h100x64", 4, 2, 4096);
  vl.cp = 2;
  CHECK_THAT(problem(vl), Catch::Contains("vision-language") && Catch::Contains("--cp 1"));
  // The 2021 Megatron runs used unfused attention (configs/models/gpt3-175b.yaml).
  // a2a splits a TP rank's heads over cp (TE's AttnFuncWithCPAndQKVOA2A asserts it): qwen2-7b
  // at tp 4 has 7 heads and 1 KV head per rank. At cp 1 the type has nothing to exchange.
  StudyOverrides a2a = test::layout_overrides("qwen2-7b", "h100x64", 4, 2, 4096);
  a2a.cp = 2;
  a2a.cp_comm_type = CpCommType::A2A;
  CHECK(problem(a2a) ==
        "--cp: parallel.cp_comm_type: a2a splits each TP rank's heads over cp (Transformer Engine "
        "requires heads and kv heads divisible by cp): model qwen2-7b at tp 4 has 7 heads and 1 "
        "kv heads per rank; allowed cp: 1, or use p2p");
  // llama3.1-8b at tp 2: 16 heads, 4 KV heads; cp 8 divides the heads but not the KV heads.
  StudyOverrides kv = test::layout_overrides("llama3.1-8b", "h100x64", 2, 2, 4096);
  kv.cp = 8;
  kv.cp_comm_type = CpCommType::A2A;
  CHECK_THAT(problem(kv),
             Catch::Contains("16 heads and 4 kv heads") && Catch::Contains("allowed cp: 1, 2, 4"));
  kv.cp = 4;
  CHECK(problem(kv).empty());
  a2a.cp = 1;
  CHECK(problem(a2a).empty());
  // a2a+p2p: its two sizes are needed, multiply to cp, are both above 1, and the a2a one divides
  // a TP rank's heads and kv heads; sizes with another type are refused.
  kv.cp_comm_type = CpCommType::A2AP2P;
  CHECK(problem(kv) ==
        "--cp-comm-type: parallel.hierarchical_cp: a2a+p2p needs the sizes of its a2a and p2p "
        "levels (Megatron asserts --hierarchical-context-parallel-sizes is set): give "
        "--hierarchical-cp-sizes A P with A x P = cp 4");
  kv.hierarchical_cp = std::vector<int>{2, 4};
  CHECK(problem(kv) ==
        "--hierarchical-cp-sizes: parallel.hierarchical_cp: 2 x 4 = 8 is not cp 4 (Megatron "
        "asserts cp = the product of the sizes)");
  kv.hierarchical_cp = std::vector<int>{1, 4};
  CHECK(problem(kv) ==
        "--hierarchical-cp-sizes: parallel.hierarchical_cp: both sizes must be above 1 (Megatron "
        "asserts only their product; Transformer Engine runs a level of 1 as the other type "
        "alone): use --cp-comm-type p2p");
  kv.hierarchical_cp = std::vector<int>{4, 1};
  CHECK_THAT(problem(kv), Catch::EndsWith("use --cp-comm-type a2a"));
  kv.hierarchical_cp = std::vector<int>{2, 2};
  CHECK(problem(kv).empty());
  kv.hierarchical_cp = std::vector<int>{2, 2, 1};
  CHECK_THAT(problem(kv), Catch::Contains("takes two sizes") && Catch::EndsWith("got 3"));
  // llama3.1-8b at tp 2, cp 8 = 8 x 1 is refused above; 8 = 8 x ... needs a2a 8 dividing 4 KV
  // heads: at cp 16 = 8 x 2 (tp 2 x 16 x pp 2 = 64 GPUs).
  kv.cp = 16;
  kv.seq = 8192;
  kv.hierarchical_cp = std::vector<int>{8, 2};
  CHECK(problem(kv) ==
        "--hierarchical-cp-sizes: parallel.hierarchical_cp: the a2a level splits each TP rank's "
        "heads over 8 (Transformer Engine requires heads and kv heads divisible by it): model "
        "llama3.1-8b at tp 2 has 16 heads and 4 kv heads per rank; allowed a2a sizes: 1, 2, 4");
  kv.cp = 4;
  kv.seq = 4096;
  kv.hierarchical_cp = std::vector<int>{2, 2};
  kv.cp_comm_type = CpCommType::P2P;
  CHECK(problem(kv) ==
        "--hierarchical-cp-sizes: parallel.hierarchical_cp: the sizes of a2a+p2p's two levels, "
        "but cp_comm_type is p2p; drop them or use --cp-comm-type a2a+p2p");
  const std::string gpt3 = "configs/studies/megatron/gpt3-175b-full.yaml";
  REQUIRE_FALSE(load_study(resolve_config("studies", gpt3)).model.flash_attention);
  StudyOverrides g;
  g.cp = 2;
  CHECK_THAT(test::input_error_of([&] { load_study(resolve_config("studies", gpt3), g); }),
             Catch::Contains("fused attention kernel"));
}

TEST_CASE("the setting line names the CP size with its communication type", "[cp][format]") {
  StudyOverrides o = test::layout_overrides("qwen2-7b", "h100x64", 4, 2, 4096);
  CHECK_THAT(study_setting(load_study(resolve_config("studies", "default"), o)),
             Catch::Contains("tp 4, pp 2, dp 8, seq 4096"));  // cp 1: nothing to name
  o.cp = 2;
  CHECK_THAT(study_setting(load_study(resolve_config("studies", "default"), o)),
             Catch::Contains("tp 4, pp 2, cp 2 (p2p), dp 4, seq 4096"));
  o.cp_comm_type = CpCommType::AllGather;
  CHECK_THAT(study_setting(load_study(resolve_config("studies", "default"), o)),
             Catch::Contains("tp 4, pp 2, cp 2 (allgather), dp 4, seq 4096"));
}
