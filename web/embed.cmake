# Writes OUT, a C++ source that returns web/report.js and web/report.css as string literals
# (src/output/html_assets.hpp declares them); run by the build whenever either file changes.
file(READ "${JS}" js)
file(READ "${CSS}" css)
string(FIND "${js}${css}" ")braid\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "web/: the text )braid\" would end the raw string literal")
endif()
file(WRITE "${OUT}.tmp" "// Generated from web/report.js and web/report.css by web/embed.cmake; do not edit.
namespace braid {
const char* html_report_js();
const char* html_report_css();
const char* html_report_js() {
  return R\"braid(${js})braid\";
}
const char* html_report_css() {
  return R\"braid(${css})braid\";
}
}  // namespace braid
")
file(RENAME "${OUT}.tmp" "${OUT}")
