// One rule for a model's attention heads, whichever file describes the model (a study's model
// block, a Hugging Face config.json): kv heads default to the heads and must divide them, and the
// head size defaults to hidden / heads, which must then divide. Each reader passes its own field
// names; the fields type is a reader with has, positive_int, positive_int_or and fail (the YAML
// map, the config.json object). Private to src/config.
#pragma once

#include <string>
#include <vector>

#include "../util/yaml_reader.hpp"
#include "braid/config.hpp"

namespace braid::detail {

// "1, 2, 4, 8": the values a divisor of n may take, for an error's "allowed:".
inline std::string divisors_of(int n) {
  std::vector<std::string> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(std::to_string(d));
  }
  return join(out);
}

// The names one file gives the four fields.
struct HeadFieldNames {
  const char* hidden;
  const char* heads;
  const char* kv_heads;
  const char* head_dim;
};

// Reads heads, kv_heads and head_dim into `model`, whose hidden size is already read.
template <class Fields>
void read_heads(Fields& fields, const HeadFieldNames& name, ModelConfig& model) {
  model.heads = fields.positive_int(name.heads);
  model.kv_heads = fields.positive_int_or(name.kv_heads, model.heads);
  if (model.heads % model.kv_heads != 0) {
    fields.fail(name.kv_heads, std::to_string(model.kv_heads) + " does not divide " + name.heads +
                                   " " + std::to_string(model.heads) +
                                   "; allowed: " + divisors_of(model.heads));
  }
  if (fields.has(name.head_dim)) {
    model.head_dim = fields.positive_int(name.head_dim);
  } else if (model.hidden % model.heads == 0) {
    model.head_dim = model.hidden / model.heads;
  } else {
    fields.fail(name.head_dim, std::string("missing, and ") + name.hidden +
                                   " is not divisible by " + name.heads + " (required then)");
  }
}

}  // namespace braid::detail
