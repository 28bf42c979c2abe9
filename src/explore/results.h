// results.json and results.csv: every evaluated candidate, rewritten (atomically: a temporary file
// renamed over the old one) after each, so an interrupted run loses nothing that finished.
#pragma once

#include "explore/candidate.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hfuse::explore {

// `header` holds "model", "machine", "options", ...; the rows go to "candidates".
void write_results(const std::string &dir, const nlohmann::json &header, const std::vector<Evaluation> &rows);

// The rows of DIR/results.json (and its header in `header`); throws an Error naming the file if it
// cannot be read.
std::vector<Evaluation> read_results(const std::string &path, nlohmann::json *header);

// The same rows as CSV: one line per candidate, RFC 4180 quoting.
std::string results_csv(const std::vector<Evaluation> &rows);

// Writes `text` to `path` through a temporary file and a rename.
void write_file_atomically(const std::string &path, const std::string &text);

}  // namespace hfuse::explore
