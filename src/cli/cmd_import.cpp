// `braid import hf PATH [-o model.yaml]`: translates a Hugging Face config.json into a braid
// model YAML file (written whole or not at all), or prints it. The translation is the one
// `--model hf:PATH` uses (docs/configuration.md, "Hugging Face configs").
#include <iostream>
#include <memory>
#include <string>

#include "braid/config.hpp"
#include "commands.hpp"
#include "option_values.hpp"
#include "output.hpp"

namespace braid::cli {

void register_import(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "import", "translate a model's config from another format into a braid model YAML file");
  cmd->footer(
      "Examples:\n"
      "  braid import hf path/to/Llama-3.1-8B -o configs/models/llama-3.1-8b.yaml\n"
      "  braid import hf path/to/config.json\n"
      "Formats: hf (a Hugging Face config.json, or a folder holding one). The same translation\n"
      "serves --model hf:PATH. See docs/configuration.md.");
  auto format = std::make_shared<std::string>();
  auto path = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  cmd->add_option("format", *format, "the input format: hf (Hugging Face config.json)")
      ->required()
      ->check(CLI::IsMember({"hf"}));
  cmd->add_option("path", *path, "a config.json, or a folder holding one")->required();
  cmd->add_option("-o,--output", *output,
                  "write the model YAML here (default: print it); loads with --model FILE")
      ->check(file_name());
  cmd->callback([format, path, output] {
    if (!output->empty()) check_writable("--output", *output);
    const std::string yaml = model_yaml(import_hf_model(*path));
    if (output->empty()) {
      std::cout << yaml;
    } else {
      write_file("--output", *output, yaml);
    }
  });
}

}  // namespace braid::cli
