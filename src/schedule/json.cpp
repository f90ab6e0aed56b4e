// The `braid schedule --json` file (DESIGN §8) read back into a Schedule, so that a schedule
// written by `braid design` (or by hand) runs wherever a generated one does. Every malformed
// field is an InputError naming the file, the JSON path of the field and what is allowed; the
// result is validated (complete, deadlock-free) before it is returned.
#include <istream>
#include <iterator>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "braid/error.hpp"
#include "braid/schedule.hpp"

namespace braid {

namespace {

using json = nlohmann::json;

struct Reader {
  const std::string& file;

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw InputError(file, field, problem);
  }
  const json& member(const json& object, const std::string& path, const char* key) const {
    if (!object.is_object()) fail(path, "expected a JSON object");
    auto it = object.find(key);
    if (it == object.end()) fail(path + "." + key, "missing");
    return *it;
  }
  int integer(const json& object, const std::string& path, const char* key, int minimum) const {
    const json& v = member(object, path, key);
    if (!v.is_number_integer() || v.get<long long>() < minimum || v.get<long long>() > 1 << 24)
      fail(path + "." + key, "expected an integer >= " + std::to_string(minimum));
    return v.get<int>();
  }
  Pass pass(const json& object, const std::string& path, bool backward) const {
    Pass p;
    p.chunk = integer(object, path, "chunk", 0);
    p.mb = integer(object, path, "mb", 0);
    if (backward) {
      const json& d = member(object, path, "defer_w");
      if (!d.is_boolean()) fail(path + ".defer_w", "expected true or false");
      p.defer_w = d.get<bool>();
    }
    return p;
  }
  Instruction instruction(const json& j, const std::string& path) const {
    const json& op = member(j, path, "op");
    const std::string text = op.is_string() ? op.get<std::string>() : "";
    const std::optional<InstructionKind> code = parse_instruction_kind(text);
    if (!code)
      fail(path + ".op",
           "'" + (op.is_string() ? text : op.dump()) +
               "' is not an instruction; known: F, B, W, FB, FW, FF, OFFLOAD, RELOAD");
    Instruction in;
    in.op = *code;
    switch (in.op) {
      case InstructionKind::F:
      case InstructionKind::W:
      case InstructionKind::Offload:
      case InstructionKind::Reload:
        in.a = pass(j, path, false);
        break;
      case InstructionKind::B:
        in.a = pass(j, path, true);
        break;
      case InstructionKind::FB:
        in.a = pass(member(j, path, "f"), path + ".f", false);
        in.b = pass(member(j, path, "b"), path + ".b", true);
        break;
      case InstructionKind::FW:
        in.a = pass(member(j, path, "f"), path + ".f", false);
        in.b = pass(member(j, path, "w"), path + ".w", false);
        break;
      case InstructionKind::FF: {
        const json& f = member(j, path, "f");
        if (!f.is_array() || f.size() != 2) fail(path + ".f", "expected an array of two passes");
        in.a = pass(f[0], path + ".f[0]", false);
        in.b = pass(f[1], path + ".f[1]", false);
        break;
      }
    }
    return in;
  }
};

}  // namespace

Schedule read_schedule_json(std::istream& in, const std::string& file) {
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const Reader reader{file};
  if (doc.is_discarded())
    reader.fail("document", "not valid JSON (expected braid schedule --json)");
  Schedule s;
  const json& name = reader.member(doc, "document", "schedule");
  if (!name.is_string()) reader.fail("schedule", "expected the schedule's name as a string");
  s.name = name.get<std::string>();
  s.pp = reader.integer(doc, "document", "pp", 1);
  s.vpp = reader.integer(doc, "document", "vpp", 1);
  s.microbatches = reader.integer(doc, "document", "microbatches", 1);
  // "placement" is written since braid design; older files are V exactly when they hold two
  // chunks per rank and validate that way (a loop schedule with two chunks per rank does not).
  auto placement = doc.find("placement");
  bool infer = placement == doc.end();
  if (!infer) {
    const std::optional<Placement> given =
        placement->is_string() ? parse_placement(placement->get<std::string>()) : std::nullopt;
    if (!given) reader.fail("placement", "expected \"loop\" or \"v\"");
    s.placement = *given;
  }
  // "p2p_runtime" is written since the runtime became a field of the schedule; a file without it
  // runs under braid's own rules (receives posted ahead), whatever its name says.
  if (auto runtime = doc.find("p2p_runtime"); runtime != doc.end()) {
    const std::optional<P2pRuntime> given =
        runtime->is_string() ? parse_p2p_runtime(runtime->get<std::string>()) : std::nullopt;
    if (!given) reader.fail("p2p_runtime", "expected \"megatron\" or \"posted-ahead\"");
    s.p2p_runtime = *given;
  }
  const json& ranks = reader.member(doc, "document", "ranks");
  if (!ranks.is_array() || static_cast<int>(ranks.size()) != s.pp)
    reader.fail("ranks", "expected an array of pp = " + std::to_string(s.pp) + " rank programs");
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string path = "ranks[" + std::to_string(r) + "]";
    RankProgram prog;
    prog.rank = reader.integer(ranks[r], path, "rank", 0);
    const json& list = reader.member(ranks[r], path, "instructions");
    if (!list.is_array()) reader.fail(path + ".instructions", "expected an array");
    for (std::size_t k = 0; k < list.size(); ++k)
      prog.instructions.push_back(
          reader.instruction(list[k], path + ".instructions[" + std::to_string(k) + "]"));
    s.ranks.push_back(std::move(prog));
  }
  if (infer) {
    s.placement = Placement::Loop;
    if (s.vpp == 2) {
      Schedule vee = s;
      vee.placement = Placement::V;
      if (validate(vee).ok()) s.placement = Placement::V;
    }
  }
  const ValidationResult check = validate(s);
  if (!check.ok()) reader.fail("schedule", check.error);
  return s;
}

}  // namespace braid
