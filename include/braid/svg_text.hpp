// Small text helpers shared by every SVG braid draws (timelines, sweep charts, theory scans):
// XML escaping and the 1-2-5 axis step. Not a drawing library: each picture lays itself out.
#pragma once

#include <string>

namespace braid {

// Escapes &, <, > and " for use in SVG text and attribute values.
std::string xml_escape(const std::string& text);

// A 1, 2 or 5 x 10^k step giving about `target` intervals over `span` (1 when span <= 0).
double nice_step(double span, int target);

}  // namespace braid
