// libFuzzer target: the schedule JSON reader (read_schedule_json, what --schedule-file reads),
// then for a small schedule the lowering onto uniform costs and the simulation. Bad input may
// only surface as InputError; any other exception, a crash or a sanitizer report is a bug.
// Seeds: tools/fuzz writes `braid schedule --json` of each schedule kind.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <typeinfo>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const braid::Schedule schedule = braid::read_schedule_json(in, "fuzz.json");
    // Keep each run short: the simulation of a big schedule is not what is fuzzed here.
    if (schedule.pp > 16 || schedule.vpp > 8 || schedule.microbatches > 64) return 0;
    const braid::CostModel cost =
        braid::uniform_cost_model({1, 2, 1, 0.5, 1}, schedule.virtual_stages());
    braid::simulate(braid::lower(schedule, cost));
  } catch (const braid::InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_schedule_json: %s escaped: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
  return 0;
}
