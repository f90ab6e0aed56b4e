// braid._braid, the compiled half of `import braid` (python/braid/__init__.py is the other): runs
// one braid command line in this process through the CLI's own driver (src/cli/driver.hpp), with
// std::cout and std::cerr captured, so that Python reads options, errors and outputs exactly as
// the command line does. The GIL stays held for the whole command: the streams are swapped for
// the process, and only one command may write to them at a time.
#include <Python.h>

#include <ios>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <CLI/CLI.hpp>

#include "driver.hpp"

namespace py = pybind11;

namespace {

// One of std::cout / std::cerr writing into a string for the length of one command. The stream
// starts the command with a fresh process's buffer state and format (a command that sets
// std::fixed must not change the next one), and gets its own buffer, format and state back on
// every path out, an exception included.
class CapturedStream {
 public:
  explicit CapturedStream(std::ostream& stream)
      : stream_(stream), saved_buffer_(stream.rdbuf(text_.rdbuf())), saved_format_(nullptr) {
    saved_format_.copyfmt(stream);
    saved_state_ = stream.rdstate();
    const std::ios fresh(nullptr);
    stream.flags(fresh.flags());
    stream.precision(fresh.precision());
    stream.width(0);
    stream.fill(' ');
    stream.clear();
  }
  ~CapturedStream() {
    stream_.rdbuf(saved_buffer_);
    stream_.copyfmt(saved_format_);
    stream_.clear(saved_state_);
  }
  CapturedStream(const CapturedStream&) = delete;
  CapturedStream& operator=(const CapturedStream&) = delete;

  std::string text() const { return text_.str(); }

 private:
  std::ostream& stream_;
  std::ostringstream text_;
  std::streambuf* saved_buffer_;
  std::ios saved_format_;
  std::ios::iostate saved_state_ = std::ios::goodbit;
};

// Output text as a Python str; bytes that are not UTF-8 (none of braid's outputs has any) become
// U+FFFD instead of failing the whole call.
py::str text(const std::string& bytes) {
  PyObject* decoded =
      PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (decoded == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(decoded);
}

// `braid ARGS...` in this process: (exit code, stdout, stderr), as the executable would give.
py::tuple run_command(const std::vector<std::string>& args) {
  std::vector<std::string> words{"braid"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int code = 0;
  std::string out, err;
  {
    CapturedStream captured_out(std::cout), captured_err(std::cerr);
    code = braid::cli::run(static_cast<int>(words.size()), argv.data());
    out = captured_out.text();
    err = captured_err.text();
  }
  return py::make_tuple(code, text(out), text(err));
}

// The long option names of `command` (without "--") and what each takes: "flag" (nothing),
// "value" (one word) or "values" (several words), read from the command's own CLI11 definition,
// so that the Python keywords follow the options without a second list of them.
py::dict command_options(const std::string& command) {
  CLI::App app;
  braid::cli::add_commands(app, command);
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  for (const CLI::App* sub : commands) {
    if (sub->get_name() != command) continue;
    py::dict kinds;
    for (const CLI::Option* option : sub->get_options()) {
      const char* kind = option->get_expected_max() == 0        ? "flag"
                         : option->get_items_expected_max() > 1 ? "values"
                                                                : "value";
      for (const std::string& name : option->get_lnames()) kinds[py::str(name)] = kind;
    }
    return kinds;
  }
  throw py::value_error("braid has no command '" + command + "'");
}

}  // namespace

PYBIND11_MODULE(_braid, module) {
  module.doc() = "braid's command line, run in-process (the braid package wraps it)";
  module.def("run", &run_command, py::arg("args"),
             "Runs `braid ARGS...` in this process; returns (exit code, stdout, stderr).");
  module.def("options", &command_options, py::arg("command"),
             "The long options of a braid command: {name: 'flag' | 'value' | 'values'}.");
}
