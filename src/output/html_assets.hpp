// The HTML report's script and style sheet, web/report.js and web/report.css, embedded by the build
// (web/embed.cmake) and inlined into every page. Plain SVG drawn by a short script rather than a
// charting library: docs/outputs.md says why.
#pragma once

namespace braid {

const char* html_report_js();
const char* html_report_css();

}  // namespace braid
