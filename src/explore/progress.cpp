#include "explore/progress.h"

#include <algorithm>
#include <cstdio>

namespace hfuse::explore {
namespace {

std::string duration(double s) {
    char buf[32];
    int t = static_cast<int>(s + 0.5);
    if (t >= 3600) {
        std::snprintf(buf, sizeof buf, "%dh%02dm", t / 3600, t / 60 % 60);
    } else {
        std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
    }
    return buf;
}

}  // namespace

Progress::Progress(bool bar, int total, int already_done)
    : bar_(bar), total_(total), done_(already_done), start_(std::chrono::steady_clock::now()) {}

void Progress::draw() {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int width = 30, filled = total_ > 0 ? std::min(width, width * done_ / total_) : 0;
    std::string bar(filled, '#');
    bar += std::string(width - filled, '.');
    std::string eta = "?";
    if (session_done_ > 0) eta = duration(elapsed / session_done_ * std::max(0, total_ - done_));
    char best[48] = "";
    if (best_ms_ > 0) std::snprintf(best, sizeof best, "  best %.4g ms", best_ms_);
    std::fprintf(stderr, "\r\033[K[%s] %d/%d  elapsed %s  ETA %s%s", bar.c_str(), done_, total_,
                 duration(elapsed).c_str(), eta.c_str(), best);
    std::fflush(stderr);
    drawn_ = true;
}

void Progress::done(const std::string &line, double best_ms) {
    done_++;
    session_done_++;
    best_ms_ = best_ms;
    if (bar_) {
        draw();
    } else {
        std::fprintf(stderr, "explore [%d/%d] %s\n", done_, total_, line.c_str());
        std::fflush(stderr);
    }
}

void Progress::tick() {
    if (bar_) draw();
}

void Progress::say(const std::string &message) {
    if (bar_ && drawn_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "explore: %s\n", message.c_str());
    if (bar_ && drawn_) draw();
    std::fflush(stderr);
}

void Progress::finish() {
    if (bar_ && drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
}

}  // namespace hfuse::explore
