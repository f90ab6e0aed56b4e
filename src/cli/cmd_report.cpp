// `braid report`: the HTML report over saved data (braid simulate --report-data), one file or
// several side by side on one time axis, written as one self-contained page.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../util/input_file.hpp"
#include "braid/error.hpp"
#include "braid/html_report.hpp"
#include "commands.hpp"
#include "option_values.hpp"
#include "output.hpp"

namespace braid::cli {

namespace {

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string html;
  std::string title;
};

std::string read_all(const std::string& path) {
  return util::read_input_file(path, util::kReportDataFile);
}

}  // namespace

void register_report(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "write the interactive HTML report of saved runs (braid simulate --report-data FILE); "
      "several files are drawn side by side on one time axis");
  cmd->footer(
      "Examples:\n"
      "  braid report stp.json --html stp.html\n"
      "  braid report stp.json zbv.json --html side-by-side.html\n"
      "See docs/outputs.md.");
  cmd->add_option("data", args->inputs, "report data files (JSON)")->required();
  cmd->add_option("--html", args->html, "the HTML file to write")->required()->check(file_name());
  cmd->add_option("--title", args->title, "page title (default: from the data)");
  cmd->callback([args] {
    check_writable("--html", args->html);
    std::vector<std::string> docs;
    for (const std::string& path : args->inputs) docs.push_back(read_all(path));
    std::string title = args->title;
    if (title.empty() && docs.size() > 1)
      title = "braid report: " + std::to_string(docs.size()) + " runs";
    const std::string data = merge_report_data(docs, args->inputs, title);
    write_file("--html", args->html, html_report(data));
  });
}

}  // namespace braid::cli
