// Multimodal models (Qwen2-VL) and the layer layout (docs/multimodal.md): the ViT's units and
// parameters, where the ViT sits (separate virtual stage(s) or folded into the first), the
// explicit split's rules, balancing by cost never worse than uniform, heterogeneous chunks in
// braided blocks, and the per-virtual-stage times `info` and `simulate` print.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "fixtures.hpp"
#include "hand_schedules.hpp"

using namespace braid;
using test::collective_of;
using test::generated;

namespace {

Study vl_study(const std::string& model, int tp, int pp, int seq = 4096) {
  StudyOverrides o;
  o.model = model;
  o.cluster = "a800x32";
  o.tp = tp;
  o.pp = pp;
  o.vpp = 2;
  o.seq = seq;
  o.microbatches = 16;
  return load_study(resolve_config("studies", "default"), o);
}

Profile profile_of(const Study& s) { return load_profile(s.cluster.profile); }

double slowest(const CostModel& cm) {
  double t = 0;
  for (const StageTime& s : stage_times(cm)) t = std::max(t, s.total_s());
  return t;
}

std::vector<int> layers_of(const CostModel& cm) {
  std::vector<int> out;
  for (const StageTime& s : stage_times(cm)) out.push_back(s.vision_layers + s.layers);
  return out;
}

}  // namespace

TEST_CASE("the Qwen2-VL ViT has about 675 M parameters, counted apart from the LM",
          "[multimodal][params]") {
  // Reference §C.2: ~675 M; derived 675.8 M with the 7B merger (3584 wide), 699.4 M with 8192.
  ModelConfig m = load_model(resolve_config("models", "qwen2-vl-14.9b"));
  ParameterCount pc = count_parameters(m);
  CHECK(pc.vision == Approx(699.4e6).epsilon(0.001));
  m.hidden = 3584;  // the Qwen2-VL-7B merger output
  CHECK(count_parameters(m).vision == Approx(675.8e6).epsilon(0.001));
  // Non-embedding = LM layers + ViT (the paper's naming convention).
  CHECK(pc.non_embedding == Approx(pc.layers + pc.vision));
}

TEST_CASE("ViT layer units: full attention, plain GELU MLP, own width and TP collectives",
          "[multimodal][cost]") {
  const Study s = vl_study("qwen2-vl-14.9b", 8, 2);
  const CostModel cm = build_cost_model(s, profile_of(s), 4);
  // Separate placement (default): virtual stage 0 is the ViT alone.
  const ChunkCost& vit = cm.chunks[0];
  REQUIRE(vit.layers.size() == 32);
  REQUIRE(vit.prologue.size() == 1);
  CHECK(vit.prologue[0].kind == UnitKind::VisionPatch);
  REQUIRE(vit.epilogue.size() == 1);
  CHECK(vit.epilogue[0].kind == UnitKind::VisionMerger);
  const auto l = vit.layer(0);
  for (const UnitCost& u : l) CHECK(u.vision);
  const double t = 8, P = 4096, h = 1280, f = 5120, e = 2;  // 1024 tokens x 2x2 patches
  // QKV (MHA, no GQA): 2 P h 3h / t; attention not halved (bidirectional): 4 P s q / t + proj.
  CHECK(l[0][Phase::F].flops == Approx(2 * P * h * 3 * h / t));
  CHECK(l[1][Phase::F].flops == Approx(4 * P * P * h / t + 2 * P * h * h / t));
  // GELU MLP, not gated: FC1 is f wide, not 2f.
  CHECK(l[2][Phase::F].flops == Approx(2 * P * h * f / t));
  CHECK(l[3][Phase::F].flops == Approx(2 * P * f * h / t));
  // Its own TP collectives, at the ViT width: forward All-Reduce after Attn and MLP, backward
  // after PreAttn and PreMLP, each P x 1280 x 2 bytes.
  CHECK(collective_of(l[1][Phase::F]).kind == CollectiveKind::AllReduce);
  CHECK(collective_of(l[3][Phase::F]).kind == CollectiveKind::AllReduce);
  CHECK(collective_of(l[0][Phase::B]).kind == CollectiveKind::AllReduce);
  CHECK(collective_of(l[2][Phase::B]).kind == CollectiveKind::AllReduce);
  CHECK(collective_of(l[1][Phase::F]).bytes == Approx(P * h * e));
  // The LM stage after it embeds the text and starts with LM layer 0; the output of the ViT stage
  // is the merged image tokens at the LM width.
  CHECK(cm.chunks[1].prologue.at(0).kind == UnitKind::Embedding);
  CHECK_FALSE(cm.chunks[1].layer(0)[0].vision);
  CHECK(cm.chunks[1].layer(0)[0].layer == 0);
  CHECK(vit.output_bytes == Approx(1024.0 * 8192 * e));
  // The LM sequence includes the image tokens: its layers see seq (4096) tokens.
  CHECK(cm.chunks[1].layer(0)[0][Phase::F].flops ==
        Approx(2.0 * 4096 * 8192 * (8192 + 2 * 1024) / t));
  // Parameters: all of the ViT on stage 0's GPU (sharded by tp, norms and patch replicated).
  CHECK(vit.params * 8 == Approx(count_parameters(s.model).vision).epsilon(0.02));
}

TEST_CASE("first-stage placement folds the ViT into virtual stage 0", "[multimodal][layout]") {
  Study s = vl_study("qwen2-vl-14.9b", 8, 2);
  s.layout.vision_placement = VisionPlacement::FirstStage;
  const CostModel cm = build_cost_model(s, profile_of(s), 4);
  CHECK(layers_of(cm) == std::vector<int>{32 + 4, 4, 4, 4});
  CHECK(cm.chunks[0].layers.size() == 4);  // LM layers; the ViT runs in the prologue
  CHECK(cm.chunks[0].prologue.size() == 1 + 32 * 4 + 1 + 1);  // patch, ViT, merger, embedding
  CHECK(stage_times(cm)[0].vision_layers == 32);
  s.layout.vision_placement = VisionPlacement::Separate;
  CHECK(layers_of(build_cost_model(s, profile_of(s), 4)) == std::vector<int>{32, 6, 5, 5});
}

TEST_CASE("layers per stage by hand: one entry per virtual stage, each >= 1, summing to ViT + LM",
          "[multimodal][layout]") {
  Study s = vl_study("qwen2-vl-14.9b", 8, 2);
  const Profile p = profile_of(s);
  s.layout.layers_per_stage = {16, 16, 8, 8};  // two ViT stages, then the LM
  const CostModel cm = build_cost_model(s, p, 4);
  CHECK(stage_times(cm)[1].vision_layers == 16);
  CHECK(cm.chunks[1].epilogue.at(0).kind == UnitKind::VisionMerger);
  CHECK(cm.chunks[0].output_bytes == Approx(4096.0 * 1280 * 2));  // patches at the ViT width
  auto fails = [&](std::vector<int> list, const std::string& why) {
    s.layout.layers_per_stage = std::move(list);
    CHECK_THROWS_WITH(build_cost_model(s, p, 4), Catch::Contains(why));
  };
  fails({32, 16}, "one per virtual stage (4)");
  fails({32, 16, 0, 0}, "1 or more layers");
  fails({32, 6, 5, 4}, "sums to 47");
  fails({30, 8, 5, 5}, "may mix ViT and LM");
  s.layout.vision_placement = VisionPlacement::FirstStage;
  fails({16, 16, 8, 8}, "must hold all 32 ViT layers");
  s.layout.layers_per_stage = {33, 5, 5, 5};
  CHECK(build_cost_model(s, p, 4).chunks[0].layers.size() == 1);
  // A text model: plain LM layer counts.
  Study t = vl_study("qwen2-26.3b", 8, 2);
  t.layout.layers_per_stage = {9, 7, 7, 7};
  CHECK(layers_of(build_cost_model(t, profile_of(t), 4)) == std::vector<int>{9, 7, 7, 7});
}

TEST_CASE("separate placement needs a virtual stage for the ViT", "[multimodal][layout]") {
  Study s = vl_study("qwen2-vl-14.9b", 8, 1);
  CHECK_THROWS_WITH(build_cost_model(s, profile_of(s), 1), Catch::Contains("first-stage"));
  s.layout.vision_placement = VisionPlacement::FirstStage;
  CHECK(build_cost_model(s, profile_of(s), 1).chunks.size() == 1);
}

TEST_CASE("balancing by cost never makes the slowest virtual stage slower than uniform",
          "[multimodal][balance]") {
  const auto [model, tp] = GENERATE(table<const char*, int>({{"qwen2-vl-14.9b", 8},
                                                             {"qwen2-vl-28.8b", 8},
                                                             {"qwen2-26.3b", 8},
                                                             {"qwen2-12.1b", 8},
                                                             {"qwen2-7b", 4}}));
  for (int stages : {2, 3, 4, 8}) {
    for (VisionPlacement place : {VisionPlacement::Separate, VisionPlacement::FirstStage}) {
      Study s = vl_study(model, tp, 1);
      s.layout.vision_placement = place;
      const Profile p = profile_of(s);
      const int lm_stages =
          s.model.vision && place == VisionPlacement::Separate ? stages - 1 : stages;
      if (s.model.layers < lm_stages || lm_stages < 1) continue;
      INFO(model << " on " << stages << " virtual stages, placement "
                 << (place == VisionPlacement::Separate ? "separate" : "first-stage"));
      s.layout.balance = StageBalance::Uniform;
      const CostModel uniform = build_cost_model(s, p, stages);
      s.layout.balance = StageBalance::Cost;
      const CostModel balanced = build_cost_model(s, p, stages);
      CHECK(slowest(balanced) <= slowest(uniform));
      int sum = 0;
      for (int n : layers_of(balanced)) {
        CHECK(n >= 1);
        sum += n;
      }
      CHECK(sum == s.model.layers + (s.model.vision ? s.model.vision->depth : 0));
    }
  }
}

TEST_CASE("balancing by cost is exact: no contiguous split has a faster slowest stage",
          "[multimodal][balance]") {
  // Brute force over every split of qwen2-26.3b's 30 layers on 3 virtual stages.
  Study s = vl_study("qwen2-26.3b", 8, 1);
  const Profile p = profile_of(s);
  s.layout.balance = StageBalance::Cost;
  const double best = slowest(build_cost_model(s, p, 3));
  double brute = 1e30;
  for (int a = 1; a <= 28; ++a)
    for (int b = 1; a + b <= 29; ++b) {
      s.layout.layers_per_stage = {a, b, 30 - a - b};
      brute = std::min(brute, slowest(build_cost_model(s, p, 3)));
    }
  CHECK(best == Approx(brute).epsilon(1e-12));
  // The head makes the last stage heavy: balancing never gives it more layers than uniform's 10.
  s.layout.layers_per_stage.clear();
  CHECK(layers_of(build_cost_model(s, p, 3)).back() <= 10);
}

TEST_CASE("braided blocks pair ViT and LM layers by index, the surplus unbraided",
          "[multimodal][dag]") {
  // STP on qwen2-vl-14.9b, pp 2: rank 0 holds the ViT stage (32 layers) and the last LM stage
  // (5 layers) — FB blocks there pair units of different widths.
  Study s = vl_study("qwen2-vl-14.9b", 8, 2);
  const CostModel cm = build_cost_model(s, profile_of(s), 4);
  const Schedule sched = generated("stp", 2, 8);
  const Dag dag = lower(sched, cm);
  // Find an FB on rank 0 whose F is chunk 0 (the ViT) and whose B is chunk 0 too: both 32
  // layers; and one F of chunk 1 (5 LM layers) with B of chunk 1.
  bool checked = false;
  for (int i = 0; i < dag.size() && !checked; ++i) {
    const DagOp& op = dag.ops[i];
    if (op.rank != 0 || op.instruction_op != InstructionKind::FB || op.kind != OpKind::Compute)
      continue;
    const Instruction& in = sched.ranks[0].instructions[op.instruction];
    if (in.a.chunk != 1 || in.b.chunk != 1) continue;
    // Collect the instruction's compute ops in stream order.
    std::vector<const DagOp*> ops;
    for (int j = i; j < dag.size(); ++j)
      if (dag.ops[j].rank == 0 && dag.ops[j].instruction == op.instruction &&
          dag.ops[j].kind == OpKind::Compute)
        ops.push_back(&dag.ops[j]);
    // The F side and the B side alternate (braided) for 5 layer pairs, then nothing is left.
    int switches = 0;
    for (std::size_t k = 1; k < ops.size(); ++k)
      if (ops[k]->side != ops[k - 1]->side) ++switches;
    CHECK(switches >= 2 * 5);
    checked = true;
  }
  CHECK(checked);
  const Timeline tl = simulate(dag);
  CHECK(tl.iteration_time_s > 0);
}

TEST_CASE("an FB of a 16-layer LM chunk with the 32-layer ViT chunk braids 16 pairs",
          "[multimodal][dag]") {
  // A hand-made schedule on one rank holding both chunks (V placement, p = 1): FB(F1.1, B0.0)
  // pairs the forward of LM layer k with the backward of ViT layer 31 - k for k < 16, then runs
  // the backward of ViT layers 15..0 unbraided.
  Study s = vl_study("qwen2-vl-14.9b", 8, 1);
  s.layout.layers_per_stage = {32, 16};
  const CostModel cm = build_cost_model(s, profile_of(s), 2);
  Schedule sched;
  sched.name = "hand";
  sched.pp = 1;
  sched.vpp = 2;
  sched.microbatches = 2;
  sched.placement = Placement::V;
  RankProgram r;
  r.rank = 0;
  auto F = [](int c, int m) { return Instruction{InstructionKind::F, Pass{c, m, false}, {}}; };
  auto B = [](int c, int m) { return Instruction{InstructionKind::B, Pass{c, m, false}, {}}; };
  r.instructions = {F(0, 0),
                    F(1, 0),
                    F(0, 1),
                    B(1, 0),
                    Instruction{InstructionKind::FB, Pass{1, 1, false}, Pass{0, 0, false}},
                    B(1, 1),
                    B(0, 1)};
  sched.ranks = {r};
  REQUIRE(validate(sched).ok());
  const Dag dag = lower(sched, cm);
  // In the FB: 16 braided pairs (F LM layer k with B ViT layer 31-k), then 16 ViT B layers alone.
  std::vector<const DagOp*> ops;
  for (const DagOp& op : dag.ops)
    if (op.instruction == 4 && op.kind == OpKind::Compute) ops.push_back(&op);
  int f_lm = 0, b_vit = 0;
  for (const DagOp* op : ops) {
    if (op->side == BlockSide::First && op->layer >= 0) ++f_lm;
    if (op->side == BlockSide::Second && op->vision && op->layer >= 0 && op->phase == Phase::B)
      ++b_vit;
  }
  CHECK(f_lm == 16 * 4);
  CHECK(b_vit == 32 * 4);
  // The last F unit comes before the last 16 ViT layers' backward: surplus unbraided at the end.
  int last_f = -1;
  for (std::size_t k = 0; k < ops.size(); ++k)
    if (ops[k]->side == BlockSide::First) last_f = static_cast<int>(k);
  int b_after = 0;
  for (std::size_t k = last_f + 1; k < ops.size(); ++k)
    if (ops[k]->phase == Phase::B) ++b_after;
  CHECK(b_after >= 16 * 4);
  CHECK(simulate(dag).iteration_time_s > 0);
}

TEST_CASE("stage_times_table shows every virtual stage and the imbalance", "[multimodal][report]") {
  const Study s = vl_study("qwen2-vl-14.9b", 8, 2);
  const std::string t = stage_times_table(stage_times(build_cost_model(s, profile_of(s), 4)));
  CHECK_THAT(t, Catch::Contains("vit_layers") && Catch::Contains("imbalance"));
  CHECK(std::count(t.begin(), t.end(), '\n') == 2 + 4 + 1);
}
