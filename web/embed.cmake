# Writes OUT, a C++ source that returns web/report.js and web/report.css as strings
# (src/output/html_assets.hpp declares them); run by the build whenever either file changes. Each
# file becomes raw string literals of at most 30000 characters, joined at run time, because C++
# compilers need only support literals up to 65536 characters (-Woverlength-strings).
function(literals text out_var)
  string(LENGTH "${text}" n)
  set(parts "")
  set(at 0)
  while(at LESS n)
    string(SUBSTRING "${text}" ${at} 30000 piece)
    string(APPEND parts "    R\"braid(${piece})braid\",\n")
    math(EXPR at "${at} + 30000")
  endwhile()
  set(${out_var} "${parts}" PARENT_SCOPE)
endfunction()

file(READ "${JS}" js)
file(READ "${CSS}" css)
string(FIND "${js}${css}" ")braid\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "web/: the text )braid\" would end the raw string literal")
endif()
literals("${js}" js_parts)
literals("${css}" css_parts)
file(WRITE "${OUT}.tmp" "// Generated from web/report.js and web/report.css by web/embed.cmake; do not edit.
#include <string>

namespace braid {

namespace {

std::string join(std::initializer_list<const char*> parts) {
  std::string s;
  for (const char* p : parts) s += p;
  return s;
}

}  // namespace

const char* html_report_js();
const char* html_report_css();

const char* html_report_js() {
  static const std::string text = join({
${js_parts}  });
  return text.c_str();
}

const char* html_report_css() {
  static const std::string text = join({
${css_parts}  });
  return text.c_str();
}

}  // namespace braid
")
file(RENAME "${OUT}.tmp" "${OUT}")
