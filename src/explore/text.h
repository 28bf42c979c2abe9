// Formatting shared by explore's report, its notes and its progress lines.
#pragma once

#include <string>

namespace hfuse::explore {

// One number through a printf format: fmt("%.2f ms", 1.5) is "1.50 ms".
std::string fmt(const char *format, double value);

// `text` as a Markdown table cell: '|' escaped, line breaks made spaces.
std::string table_cell(std::string text);

}  // namespace hfuse::explore
