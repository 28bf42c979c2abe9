#include "explore/text.h"

#include <cstdio>

namespace hfuse::explore {

std::string fmt(const char *format, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, value);
    return buf;
}

std::string table_cell(std::string text) {
    std::string out;
    for (char c : text) {
        if (c == '\n' || c == '\r') {
            out += ' ';
        } else if (c == '|') {
            out += "\\|";
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace hfuse::explore
