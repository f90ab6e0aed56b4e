// The two printed forms of a schedule: DESIGN §3's text notation and DESIGN §8's JSON.
#include <algorithm>
#include <deque>
#include <string>

#include <nlohmann/json.hpp>

#include "braid/schedule.hpp"

namespace braid {

namespace {

std::string pass_text(const char* letter, const Pass& p) {
  return letter + std::to_string(p.chunk) + "." + std::to_string(p.mb);
}

}  // namespace

std::string format_program(const RankProgram& program) {
  std::deque<Pass> deferred;  // B* seen whose W has not run, oldest first
  auto b = [&](const Pass& p) {
    if (p.defer_w) deferred.push_back(Pass{p.chunk, p.mb, false});
    return pass_text("B", p) + (p.defer_w ? "*" : "");
  };
  // "W" when it runs the oldest deferred weight gradient (as the papers write it), else named.
  auto w = [&](const Pass& p) {
    Pass key{p.chunk, p.mb, false};
    if (!deferred.empty() && deferred.front() == key) {
      deferred.pop_front();
      return std::string("W");
    }
    auto it = std::find(deferred.begin(), deferred.end(), key);
    if (it != deferred.end()) deferred.erase(it);
    return pass_text("W", p);
  };
  std::string out;
  for (const Instruction& in : program.instructions) {
    if (!out.empty()) out += ' ';
    switch (in.op) {
      case InstructionKind::F:
        out += pass_text("F", in.a);
        break;
      case InstructionKind::B:
        out += b(in.a);
        break;
      case InstructionKind::W:
        out += w(in.a);
        break;
      case InstructionKind::FB:
        out += pass_text("F", in.a) + "&" + b(in.b);
        break;
      case InstructionKind::FW:
        out += pass_text("F", in.a) + "&" + w(in.b);
        break;
      case InstructionKind::FF:
        out += pass_text("F", in.a) + "+" + pass_text("F", in.b);
        break;
      case InstructionKind::Offload:
        out += pass_text("OFF", in.a);
        break;
      case InstructionKind::Reload:
        out += pass_text("REL", in.a);
        break;
    }
  }
  return out;
}

std::string to_json(const Schedule& schedule) {
  using json = nlohmann::ordered_json;
  auto pass = [](const Pass& p) { return json{{"chunk", p.chunk}, {"mb", p.mb}}; };
  auto backward = [](const Pass& p) {
    return json{{"chunk", p.chunk}, {"mb", p.mb}, {"defer_w", p.defer_w}};
  };
  json ranks = json::array();
  for (const RankProgram& rank : schedule.ranks) {
    json list = json::array();
    for (const Instruction& in : rank.instructions) {
      json j;
      j["op"] = name(in.op);
      switch (in.op) {
        case InstructionKind::F:
        case InstructionKind::W:
        case InstructionKind::Offload:
        case InstructionKind::Reload:
          j["chunk"] = in.a.chunk;
          j["mb"] = in.a.mb;
          break;
        case InstructionKind::B:
          j["chunk"] = in.a.chunk;
          j["mb"] = in.a.mb;
          j["defer_w"] = in.a.defer_w;
          break;
        case InstructionKind::FB:
          j["f"] = pass(in.a);
          j["b"] = backward(in.b);
          break;
        case InstructionKind::FW:
          j["f"] = pass(in.a);
          j["w"] = pass(in.b);
          break;
        case InstructionKind::FF:
          j["f"] = json::array({pass(in.a), pass(in.b)});
          break;
      }
      list.push_back(std::move(j));
    }
    ranks.push_back(json{{"rank", rank.rank}, {"instructions", std::move(list)}});
  }
  json out{{"schedule", schedule.name},
           {"pp", schedule.pp},
           {"vpp", schedule.vpp},
           {"microbatches", schedule.microbatches},
           {"ranks", std::move(ranks)},
           {"placement", name(schedule.placement)},
           {"p2p_runtime", name(schedule.p2p_runtime)}};
  return out.dump();
}

}  // namespace braid
