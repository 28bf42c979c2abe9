// Progress of an exploration on stderr: on a terminal a bar redrawn in place with the count, an ETA
// (from the mean time per finished candidate of this session) and the best time so far; otherwise one
// plain line per finished candidate, for logs.
#pragma once

#include <chrono>
#include <string>

namespace hfuse::explore {

class Progress {
public:
    Progress(bool bar, int total, int already_done);
    // A candidate finished: `line` describes it (printed as is without a bar).
    void done(const std::string &line, double best_ms);
    void tick();                           // redraws the bar (elapsed time moves)
    void say(const std::string &message);  // a line of its own (the bar is redrawn after it)
    void set_total(int total) { total_ = total; }
    void finish();  // ends the bar's line

private:
    void draw();
    bool bar_;
    int total_, done_, session_done_ = 0;
    double best_ms_ = 0;
    std::chrono::steady_clock::time_point start_;
    bool drawn_ = false;
};

}  // namespace hfuse::explore
