// drop_padding_taps(): a Conv whose dilation reaches past its input (DeepLab's atrous pyramid: rates
// 12, 24 and 36 on a 14x14 feature map) has kernel taps that read only the zero padding. They add
// nothing. Taps dead for every output position go: the conv becomes a smaller kernel over the part
// of the input it reads (a 3x3 of rate 24 on 14x14 is a 1x1). Where the live taps differ between
// bands of output rows or columns (rate 12 on 14x14: rows 0-1 read kernel rows 1-2, rows 2-11 row 1
// alone, rows 12-13 rows 0-1) and the bands' work is at most half the conv's, the conv is split into
// one conv per pair of bands, each over a Slice of its input, joined by Concats: 5.4x fewer
// multiply-adds for rate 12 on 14x14. Exact up to the order of the sums.
#include "hfuse/attributes.h"
#include "hfuse/passes.h"
#include "rewrite_util.h"

#include <map>

namespace hfuse {
namespace {

constexpr int64_t kMaxPieces = 16;  // band pairs a conv may be split into
// Each piece past the first must save this many multiply-adds (a few microseconds of a core): below,
// a piece's own overhead (a group, its loops) eats what it saves.
constexpr int64_t kMinSavedPerPiece = 1 << 20;

// Output positions [begin, end) of one spatial axis that read kernel taps [first, last].
struct Band {
    int64_t begin = 0, end = 0, first = 0, last = -1;
    int64_t taps() const { return last - first + 1; }
    bool operator==(const Band &o) const {
        return begin == o.begin && end == o.end && first == o.first && last == o.last;
    }
};

struct Axis {
    int64_t in = 0, out = 0, k = 0, stride = 1, dilation = 1, pad_begin = 0;
};

// The bands of equal live taps along an axis, in order; empty if some output reads padding alone.
std::vector<Band> bands_of(const Axis &a) {
    std::vector<Band> bands;
    for (int64_t y = 0; y < a.out; y++) {
        Band b{y, y + 1, a.k, -1};
        for (int64_t j = 0; j < a.k; j++) {
            const int64_t at = y * a.stride + j * a.dilation - a.pad_begin;
            if (at < 0 || at >= a.in) continue;
            b.first = std::min(b.first, j);
            b.last = j;  // taps reading inside are consecutive: positions grow with j
        }
        if (b.last < b.first) return {};
        if (!bands.empty() && bands.back().first == b.first && bands.back().last == b.last) {
            bands.back().end = b.end;
        } else {
            bands.push_back(b);
        }
    }
    return bands;
}

// What a conv computing `b` reads of the input: [start, end) and the zero padding before and after.
struct Window {
    int64_t start, end, pad_begin, pad_end;
};

Window window_of(const Axis &a, const Band &b) {
    const int64_t lo = b.begin * a.stride + b.first * a.dilation - a.pad_begin;
    const int64_t hi = (b.end - 1) * a.stride + b.last * a.dilation - a.pad_begin;  // inclusive
    return {std::max<int64_t>(lo, 0), std::min(hi + 1, a.in), std::max<int64_t>(-lo, 0),
            std::max<int64_t>(hi - (a.in - 1), 0)};
}

int64_t work(const std::vector<Band> &bands) {
    int64_t w = 0;
    for (const Band &b : bands) w += (b.end - b.begin) * b.taps();
    return w;
}

class TapDropper {
public:
    explicit TapDropper(Graph &g) : g_(g) {}

    // Rewrites the conv at g.nodes[i]; returns whether it did.
    bool run(size_t i) {
        const Node n = g_.nodes[i];
        if (n.op != "Conv") return false;
        const Constant *w = passes::float_weight(g_, n.inputs[1]);
        Attributes at(n.attrs);
        if (!w || at.get_string("auto_pad", "NOTSET") != "NOTSET" || w->type.shape.size() != 4) return false;
        const Shape &in = g_.type_of(n.inputs[0]).shape, &out = g_.type_of(n.outputs[0]).shape;
        const std::vector<int64_t> strides = at.get_ints("strides", {1, 1}),
                                   dilations = at.get_ints("dilations", {1, 1});
        const std::vector<int64_t> pads = at.get_ints("pads", {0, 0, 0, 0});
        std::vector<Axis> axes;
        std::vector<std::vector<Band>> bands, merged_bands;  // per axis: its bands; one band of their taps
        bool dead_taps = false;
        for (int d = 0; d < 2; d++) {
            axes.push_back({in[2 + d], out[2 + d], w->type.shape[2 + d], strides[d], dilations[d], pads[d]});
            bands.push_back(bands_of(axes[d]));
            if (bands[d].empty()) return false;
            Band all = {0, axes[d].out, bands[d].front().first, bands[d].front().last};
            for (const Band &b : bands[d]) {
                all.first = std::min(all.first, b.first);
                all.last = std::max(all.last, b.last);
            }
            dead_taps = dead_taps || all.taps() < axes[d].k;
            merged_bands.push_back({all});
        }
        // An axis is split where its bands do at most half the work of its live taps over every
        // output; the split must save enough for each piece past the first.
        int64_t banded = 1, merged = 1, pieces = 1;
        for (int d = 0; d < 2; d++) {
            const int64_t whole = work(merged_bands[d]);
            if (bands[d].size() == 1 || work(bands[d]) * 2 > whole) bands[d] = merged_bands[d];
            banded *= work(bands[d]);
            merged *= whole;
            pieces *= static_cast<int64_t>(bands[d].size());
        }
        const int64_t per_tap = in[0] * w->type.shape[0] * w->type.shape[1];  // multiply-adds a tap-position
        if (pieces > kMaxPieces || (merged - banded) * per_tap < (pieces - 1) * kMinSavedPerPiece) {
            bands = merged_bands;
            pieces = 1;
        }
        if (pieces == 1 && !dead_taps) return false;
        std::vector<std::string> rows;
        for (size_t r = 0; r < bands[0].size(); r++) {
            std::vector<std::string> row;
            for (size_t c = 0; c < bands[1].size(); c++) {
                const bool whole = pieces == 1;
                const std::string band = "/band" + std::to_string(r) + "_" + std::to_string(c);
                const std::string value = whole ? n.outputs[0] : passes::fresh_value_name(g_, n.outputs[0] + band);
                emit_piece(n, *w, axes, {bands[0][r], bands[1][c]}, whole ? n.name : n.name + band, value);
                row.push_back(value);
            }
            // A row of several pieces: their Concat along the width (the conv's output if one row).
            const std::string row_value = bands[0].size() == 1 ? n.outputs[0] : "";
            rows.push_back(row.size() == 1 ? row[0] : concat(n, row, 3, "/row" + std::to_string(r), row_value));
        }
        if (rows.size() > 1) concat(n, rows, 2, "/bands", n.outputs[0]);
        g_.nodes.erase(g_.nodes.begin() + static_cast<std::ptrdiff_t>(i));
        passes::drop_if_unused(g_, {n.inputs[1]});
        return true;
    }

private:
    // A conv computing output bands `b` (rows, columns) as `value`, over a Slice of the input where
    // it reads only part of it.
    void emit_piece(const Node &n, const Constant &w, const std::vector<Axis> &axes, const std::vector<Band> &b,
                    const std::string &name, const std::string &value) {
        std::string x = n.inputs[0];
        const Window wr = window_of(axes[0], b[0]), wc = window_of(axes[1], b[1]);
        if (wr.start > 0 || wr.end < axes[0].in || wc.start > 0 || wc.end < axes[1].in) {
            Node s;
            s.name = name + "/input";
            s.op = "Slice";
            s.inputs = {x, ints(name + "/starts", {wr.start, wc.start}), ints(name + "/ends", {wr.end, wc.end}),
                        ints(name + "/axes", {2, 3})};
            x = passes::fresh_value_name(g_, name + "/input");
            s.outputs = {x};
            g_.nodes.push_back(std::move(s));
        }
        Node c = n;
        c.name = name;
        c.inputs[0] = x;
        c.inputs[1] = weight(n.inputs[1], w, b[0], b[1]);
        c.outputs = {value};
        c.attrs["pads"] = std::vector<int64_t>{wr.pad_begin, wc.pad_begin, wr.pad_end, wc.pad_end};
        c.attrs["dilations"] =
            std::vector<int64_t>{b[0].taps() == 1 ? 1 : axes[0].dilation, b[1].taps() == 1 ? 1 : axes[1].dilation};
        if (c.attrs.contains("kernel_shape")) c.attrs["kernel_shape"] = std::vector<int64_t>{b[0].taps(), b[1].taps()};
        if (name != n.name) c.absorbed.clear();
        g_.nodes.push_back(std::move(c));
    }

    // The kernel's taps [rows.first, rows.last] x [cols.first, cols.last], one weight per tap range.
    std::string weight(const std::string &of, const Constant &w, const Band &rows, const Band &cols) {
        const std::vector<int64_t> key = {rows.first, rows.last, cols.first, cols.last};
        if (auto it = weights_.find(key); it != weights_.end()) return it->second;
        const Shape &s = w.type.shape;
        Constant k;
        k.type = {DType::Float32, {s[0], s[1], rows.taps(), cols.taps()}};
        for (int64_t o = 0; o < s[0] * s[1]; o++) {
            for (int64_t y = rows.first; y <= rows.last; y++) {
                for (int64_t x = cols.first; x <= cols.last; x++) k.f32.push_back(w.f32[(o * s[2] + y) * s[3] + x]);
            }
        }
        const std::string name = passes::fresh_value_name(g_, of + "/taps");
        g_.weights[name] = std::move(k);
        return weights_[key] = name;
    }

    std::string ints(const std::string &base, std::vector<int64_t> values) {
        Constant k;
        k.type = {DType::Int64, {static_cast<int64_t>(values.size())}};
        k.i64 = std::move(values);
        const std::string name = passes::fresh_value_name(g_, base);
        g_.weights[name] = std::move(k);
        return name;
    }

    // A Concat of `parts` along `axis` named after `n`, into `value` (fresh if empty); returns it.
    std::string concat(const Node &n, const std::vector<std::string> &parts, int64_t axis, const std::string &suffix,
                       std::string value) {
        Node c;
        c.name = n.name + suffix;
        c.op = "Concat";
        c.inputs = parts;
        c.attrs["axis"] = axis;
        if (value.empty()) value = passes::fresh_value_name(g_, n.outputs[0] + suffix);
        c.outputs = {value};
        if (value == n.outputs[0]) c.absorbed = n.absorbed;
        g_.nodes.push_back(std::move(c));
        return value;
    }

    Graph &g_;
    std::map<std::vector<int64_t>, std::string> weights_;
};

}  // namespace

Graph drop_padding_taps(Graph graph) {
    bool changed = false;
    for (size_t i = graph.nodes.size(); i-- > 0;) changed = TapDropper(graph).run(i) || changed;
    return changed ? prepare(std::move(graph)) : graph;
}

}  // namespace hfuse
