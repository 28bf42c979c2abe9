#include "explore/svg_plot.h"
#include "explore/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace hfuse::explore {
namespace {

constexpr double kWidth = 800, kHeight = 500;
constexpr double kLeft = 70, kRight = 190, kTop = 60, kBottom = 60;  // the legend sits on the right

std::string esc(const std::string &s) {
    std::string o;
    for (char c : s) {
        switch (c) {
        case '&': o += "&amp;"; break;
        case '<': o += "&lt;"; break;
        case '>': o += "&gt;"; break;
        case '"': o += "&quot;"; break;
        default: o += c;
        }
    }
    return o;
}

const char *colour(const std::string &source) {
    if (source == "templates") return "#1f77b4";
    if (source == "mullapudi2016") return "#ff7f0e";
    if (source == "adams2019") return "#2ca02c";
    if (source == "li2018") return "#9467bd";
    return "#7f7f7f";
}

std::string marker(const Candidate &c, double x, double y, double r, const std::string &fill,
                   const std::string &extra = "") {
    if (c.whole) {  // diamond
        return "<path d=\"M" + fmt("%.1f", x) + "," + fmt("%.1f", y - r * 1.3) + " L" + fmt("%.1f", x + r * 1.3) + "," +
               fmt("%.1f", y) + " L" + fmt("%.1f", x) + "," + fmt("%.1f", y + r * 1.3) + " L" +
               fmt("%.1f", x - r * 1.3) + "," + fmt("%.1f", y) + " Z\" fill=\"" + fill + "\"" + extra + "/>";
    }
    if (c.schedule != "templates") {  // square
        return "<rect x=\"" + fmt("%.1f", x - r) + "\" y=\"" + fmt("%.1f", y - r) + "\" width=\"" + fmt("%.1f", 2 * r) +
               "\" height=\"" + fmt("%.1f", 2 * r) + "\" fill=\"" + fill + "\"" + extra + "/>";
    }
    return "<circle cx=\"" + fmt("%.1f", x) + "\" cy=\"" + fmt("%.1f", y) + "\" r=\"" + fmt("%.1f", r) + "\" fill=\"" +
           fill + "\"" + extra + "/>";
}

std::string star(double x, double y, double r) {
    std::string d;
    for (int i = 0; i < 10; i++) {
        double a = -M_PI / 2 + i * M_PI / 5, rr = i % 2 ? r * 0.45 : r;
        d += (i ? " L" : "M") + fmt("%.1f", x + rr * std::cos(a)) + "," + fmt("%.1f", y + rr * std::sin(a));
    }
    return "<path d=\"" + d + " Z\" fill=\"#d62728\" stroke=\"#000\" stroke-width=\"0.8\"/>";
}

}  // namespace

std::string svg_plot(const std::vector<Evaluation> &rows, const std::string &best_key, const std::string &title) {
    int gmin = 1, gmax = 1;
    double ymin = INFINITY, ymax = 0;
    for (const Evaluation &e : rows) {
        gmax = std::max(gmax, e.candidate.groups);
        if (e.status == "ok") {
            ymin = std::min(ymin, e.ranked_ms());
            ymax = std::max(ymax, e.ranked_ms());
        }
    }
    if (!(ymax > 0)) ymin = 0.1, ymax = 1;
    // A log axis when times spread over more than 8x (one slow plan would squash the rest).
    const bool log_axis = ymax / ymin > 8;
    double lo = log_axis ? ymin / 1.25 : 0;
    double hi = ymax * (log_axis ? 1.25 : 1.1);
    const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
    const double strip = 22;  // failed candidates, above the plot area
    auto px = [&](double groups) {
        return kLeft + (gmax == gmin ? plot_w / 2 : (groups - gmin + 0.5) / (gmax - gmin + 1) * plot_w);
    };
    auto py = [&](double ms) {
        double t =
            log_axis ? (std::log10(ms) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (ms - lo) / (hi - lo);
        return kTop + strip + (1 - t) * (plot_h - strip);
    };

    std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", kWidth) + "\" height=\"" +
                    fmt("%.0f", kHeight) + "\" viewBox=\"0 0 " + fmt("%.0f", kWidth) + " " + fmt("%.0f", kHeight) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
    s += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
    s += "<text x=\"" + fmt("%.0f", kLeft) + "\" y=\"24\" font-size=\"14\" font-weight=\"bold\">" + esc(title) +
         "</text>\n";
    // Axes, grid and ticks.
    const double y0 = kTop + strip, y1 = kTop + plot_h, x0 = kLeft, x1 = kLeft + plot_w;
    s += "<rect x=\"" + fmt("%.1f", x0) + "\" y=\"" + fmt("%.1f", kTop) + "\" width=\"" + fmt("%.1f", plot_w) +
         "\" height=\"" + fmt("%.1f", strip) + "\" fill=\"#f6f6f6\"/>\n";
    s += "<text x=\"" + fmt("%.1f", x0 - 6) + "\" y=\"" + fmt("%.1f", kTop + 15) +
         "\" text-anchor=\"end\" fill=\"#555\">failed</text>\n";
    std::vector<double> ticks;
    if (log_axis) {
        for (double decade = std::pow(10, std::floor(std::log10(lo))); decade <= hi; decade *= 10) {
            for (double m : {1.0, 2.0, 5.0}) {
                if (decade * m >= lo && decade * m <= hi) ticks.push_back(decade * m);
            }
        }
    } else {
        double step = std::pow(10, std::floor(std::log10(hi / 5)));
        if (hi / step > 10) step *= 2;
        if (hi / step > 10) step *= 2.5;
        for (double t = 0; t <= hi; t += step) ticks.push_back(t);
    }
    for (double t : ticks) {
        double y = py(t);
        s += "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", x1) + "\" y2=\"" +
             fmt("%.1f", y) + "\" stroke=\"#e5e5e5\"/>\n";
        s += "<text x=\"" + fmt("%.1f", x0 - 6) + "\" y=\"" + fmt("%.1f", y + 4) + "\" text-anchor=\"end\">" +
             fmt("%g", t) + "</text>\n";
    }
    for (int gcount = gmin; gcount <= gmax; gcount++) {
        s += "<text x=\"" + fmt("%.1f", px(gcount)) + "\" y=\"" + fmt("%.1f", y1 + 18) + "\" text-anchor=\"middle\">" +
             std::to_string(gcount) + "</text>\n";
    }
    s += "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", y1) + "\" x2=\"" + fmt("%.1f", x1) + "\" y2=\"" +
         fmt("%.1f", y1) + "\" stroke=\"#000\"/>\n";
    s += "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", y0) + "\" x2=\"" + fmt("%.1f", x0) + "\" y2=\"" +
         fmt("%.1f", y1) + "\" stroke=\"#000\"/>\n";
    s += "<text x=\"" + fmt("%.1f", (x0 + x1) / 2) + "\" y=\"" + fmt("%.1f", kHeight - 18) +
         "\" text-anchor=\"middle\">groups (fused kernels)</text>\n";
    s += "<text transform=\"translate(18," + fmt("%.1f", (y0 + y1) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">median time, ms" + std::string(log_axis ? " (log)" : "") + "</text>\n";

    // Points: spread those sharing a group count across the column, in evaluation order.
    std::map<int, int> in_column, seen_in_column;
    for (const Evaluation &e : rows) in_column[e.candidate.groups]++;
    const double column = gmax == gmin ? plot_w / 3 : plot_w / (gmax - gmin + 1);
    std::string labels, best_mark;
    for (const Evaluation &e : rows) {
        const Candidate &c = e.candidate;
        int k = seen_in_column[c.groups]++, n = in_column[c.groups];
        double x = px(c.groups) + (n > 1 ? (k / double(n - 1) - 0.5) * column * 0.6 : 0);
        std::string tip = "<title>" +
                          esc(plan_summary(c.plan) + " | " + c.schedule + (c.whole ? " (whole)" : "") +
                              (c.variant.empty() ? "" : " | " + c.variant) + " | " + e.status +
                              (e.status == "ok" ? " " + fmt("%.4g ms", e.ranked_ms()) : "")) +
                          "</title>";
        if (e.status != "ok") {
            double y = kTop + strip / 2;
            s += "<g><path d=\"M" + fmt("%.1f", x - 4) + "," + fmt("%.1f", y - 4) + " L" + fmt("%.1f", x + 4) + "," +
                 fmt("%.1f", y + 4) + " M" + fmt("%.1f", x - 4) + "," + fmt("%.1f", y + 4) + " L" + fmt("%.1f", x + 4) +
                 "," + fmt("%.1f", y - 4) + "\" stroke=\"" + colour(c.schedule) + "\" stroke-width=\"2\"/>" + tip +
                 "</g>\n";
            continue;
        }
        double y = py(e.ranked_ms());
        s += "<g>" + marker(c, x, y, 5, colour(c.schedule), " fill-opacity=\"0.85\"") + tip + "</g>\n";
        if (!c.baselines.empty()) {
            std::string name;
            for (const std::string &b : c.baselines) name += (name.empty() ? "" : "/") + b;
            if (c.whole) name += " " + c.schedule;
            labels += "<circle cx=\"" + fmt("%.1f", x) + "\" cy=\"" + fmt("%.1f", y) +
                      "\" r=\"9\" fill=\"none\" stroke=\"#000\" stroke-width=\"1.2\"/>\n";
            labels += "<text x=\"" + fmt("%.1f", x + 11) + "\" y=\"" + fmt("%.1f", y - 6) + "\" fill=\"#333\">" +
                      esc(name) + "</text>\n";
        }
        if (c.key == best_key) {
            best_mark = star(x, y, 11) + "<text x=\"" + fmt("%.1f", x + 12) + "\" y=\"" + fmt("%.1f", y + 14) +
                        "\" fill=\"#d62728\" font-weight=\"bold\">best " + fmt("%.4g ms", e.ranked_ms()) + "</text>\n";
        }
    }
    s += labels + best_mark;

    // Legend.
    double lx = x1 + 20, ly = kTop + 10;
    auto legend = [&](const std::string &shape_svg, const std::string &text) {
        s += shape_svg + "<text x=\"" + fmt("%.1f", lx + 14) + "\" y=\"" + fmt("%.1f", ly + 4) + "\">" + esc(text) +
             "</text>\n";
        ly += 18;
    };
    Candidate circle, square, diamond;
    square.schedule = "x";
    diamond.whole = true;
    for (const char *src : {"templates", "mullapudi2016", "adams2019", "li2018"}) {
        legend(marker(circle, lx, ly, 5, colour(src)), src);
    }
    ly += 6;
    legend(marker(circle, lx, ly, 5, "#999"), "templates");
    legend(marker(square, lx, ly, 5, "#999"), "autoscheduler per group");
    legend(marker(diamond, lx, ly, 5, "#999"), "whole model (--whole)");
    legend("<circle cx=\"" + fmt("%.1f", lx) + "\" cy=\"" + fmt("%.1f", ly) +
               "\" r=\"7\" fill=\"none\" stroke=\"#000\" stroke-width=\"1.2\"/>",
           "baseline");
    legend(star(lx, ly, 8), "best");
    legend("<path d=\"M" + fmt("%.1f", lx - 4) + "," + fmt("%.1f", ly - 4) + " L" + fmt("%.1f", lx + 4) + "," +
               fmt("%.1f", ly + 4) + " M" + fmt("%.1f", lx - 4) + "," + fmt("%.1f", ly + 4) + " L" +
               fmt("%.1f", lx + 4) + "," + fmt("%.1f", ly - 4) + "\" stroke=\"#555\" stroke-width=\"2\"/>",
           "error / timeout");
    s += "</svg>\n";
    return s;
}

}  // namespace hfuse::explore
