#include "hfuse/fusion_cost.h"

#include "hfuse/error.h"
#include "hfuse/fused_graph.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/op_registry.h"
#include "planner/graph_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace hfuse {
namespace {

const std::set<std::string> kTranscendental = {"Sigmoid", "Tanh", "Exp", "Erf",     "Log",
                                               "Pow",     "Sqrt", "Div", "Softmax", "HardSwish"};

int64_t value_bytes(const Graph &g, const std::string &v) {
    return 4 * num_elements(g.type_of(v).shape);
}

// FLOPs of a node as recomputation prices them.
double work(const Graph &g, const Node &n) {
    if (!kTranscendental.count(n.op)) return node_flops(g, n);
    double elements = 0;
    for (const std::string &v : n.outputs) elements += num_elements(g.type_of(v).shape);
    return elements * kTranscendentalFlops;
}

// Writing or reading `bytes` once, at the level a value of that size lives in (half a level's
// capacity: the value shares it with the group's inputs and outputs).
double transfer_ns(int64_t bytes, const MachineModel &m) {
    const double rate = bytes * 2 <= m.cache_bytes          ? m.cache_bytes_per_ns
                        : bytes * 2 <= m.shared_cache_bytes ? m.shared_cache_bytes_per_ns
                                                            : m.memory_bytes_per_ns;
    return bytes / rate;
}

int64_t window_extent(const Node &w, int64_t *stride) {
    const Attributes a(w.attrs);
    const std::vector<int64_t> kernel = a.get_ints("kernel_shape", {});
    const std::vector<int64_t> strides = a.get_ints("strides", {});
    const std::vector<int64_t> dilations = a.get_ints("dilations", {});
    *stride = strides.empty() ? 1 : strides[0];
    if (kernel.empty()) return 1;
    return (kernel[0] - 1) * (dilations.empty() ? 1 : dilations[0]) + 1;
}

// Input rows a tile of kTileRows output rows of window op `w` reads, over the rows it would read were
// the tiles not to overlap (>= 1; 1 when windows do not overlap).
double halo_factor(const Graph &g, const Node &w) {
    int64_t s = 1;
    const int64_t extent = window_extent(w, &s);
    if (extent <= s) return 1;
    const int64_t rows = std::min<int64_t>(
        kTileRows, g.type_of(w.outputs[0]).shape.size() >= 3 ? g.type_of(w.outputs[0]).shape[2] : kTileRows);
    return static_cast<double>((rows - 1) * s + extent) / static_cast<double>(rows * s);
}

std::string human_flops(double f) {
    char buf[32];
    if (f >= 1e9) {
        std::snprintf(buf, sizeof buf, "%.1f GFLOP", f / 1e9);
    } else if (f >= 1e6) {
        std::snprintf(buf, sizeof buf, "%.1f MFLOP", f / 1e6);
    } else {
        std::snprintf(buf, sizeof buf, "%.1f KFLOP", f / 1e3);
    }
    return buf;
}

std::string human_ns(double ns) {
    char buf[32];
    if (ns >= 1e6) {
        std::snprintf(buf, sizeof buf, "~%.1f ms", ns / 1e6);
    } else {
        std::snprintf(buf, sizeof buf, "~%.0f us", ns / 1e3);
    }
    return buf;
}

// Lanes of `lanes`-wide vectors a loop over `n` elements fills, in vectors of `v` lanes, `per_tile` of
// them a tile (the last tile computed whole).
double lanes_used(int64_t n, int64_t v, int64_t per_tile, int64_t lanes) {
    const int64_t tile = v * per_tile;
    return static_cast<double>(n) / static_cast<double>((n + tile - 1) / tile * tile) * static_cast<double>(v) /
           static_cast<double>(lanes);
}

// The work a depthwise conv in `nodes` computed with its pointwise producer (also in `nodes`,
// reached through elementwise ops) does with lanes idle (see MergePrice::idle_ns), at the FMA peak:
// - the plane's work (the depthwise conv's FLOPs and the work of the group's other non-conv ops),
//   times 1 / lanes used - 1 / lanes used apart; sets `fraction` to the idle share of its lanes;
// - the producer's FLOPs, computed flat over the plane's positions in tiles of 2 vectors (conv_dw's
//   defaults), times the same against whole vectors of its output channels apart (conv_cv); sets
//   `producer_fraction` likewise.
double depthwise_idle_ns(const Graph &g, const std::set<std::string> &nodes, const MachineModel &m, double *fraction,
                         double *producer_fraction) {
    double idle = 0;
    const int64_t lanes = m.vector_lanes > 0 ? m.vector_lanes : 16;
    // Apart, conv_cv puts whole vectors of channels in the lanes.
    auto channels_used = [&](int64_t channels) {
        return channels % lanes == 0 ? 1.0 : lanes_used(channels, lanes, 1, lanes);
    };
    for (const std::string &name : nodes) {
        const Node &dw = *g.find_node(name);
        if (!planner::is_padded_depthwise_conv(g, dw)) continue;  // the depthwise convs conv_dw computes a feed for
        // Its producer, through elementwise ops in the group: a pointwise conv in the group?
        const Node *p = g.producer(dw.inputs[0]);
        while (p && nodes.count(p->name) && find_op(p->op)->kind != PatternKind::ComplexOutFusable)
            p = p->inputs.empty() ? nullptr : g.producer(p->inputs[0]);
        if (!p || !nodes.count(p->name) || !planner::is_pointwise_conv(g, *p)) continue;
        // The producer: the target's lanes narrowed (down to 4) to the plane, 2 vectors a tile where
        // the plane takes two.
        const Shape &in = g.type_of(p->outputs[0]).shape;
        const int64_t positions = in[2] * in[3];
        int64_t pv = lanes;
        while (pv > 4 && positions < pv) pv /= 2;
        const double producer_used = lanes_used(positions, pv, positions >= 2 * pv ? 2 : 1, lanes);
        const double producer_used_apart = channels_used(in[1]);
        if (producer_used_apart > producer_used) {
            idle += node_flops(g, *p) / m.flops_per_ns * (1 / producer_used - 1 / producer_used_apart);
            *producer_fraction = std::max(*producer_fraction, 1 - producer_used);
        }
        const Shape &out = g.type_of(dw.outputs[0]).shape;
        const int64_t width = out[3], channels = out[1];
        // conv_dw's vectors: narrowed (down to 4 lanes) to the row, then with 16 lanes or more
        // halved (down to 8) until they divide it.
        int64_t v = lanes;
        while (v > 4 && width < v) v /= 2;
        while (lanes >= 16 && v > 8 && width % v != 0) v /= 2;
        const double used = lanes_used(width, v, 1, lanes);
        const double used_apart = channels % lanes == 0 ? 1.0 : used;
        if (used_apart <= used) continue;
        double plane = node_flops(g, dw);
        for (const std::string &other : nodes) {
            const Node &o = *g.find_node(other);
            if (find_op(o.op)->kind != PatternKind::ComplexOutFusable) plane += work(g, o);
        }
        // The depthwise conv's elementwise epilogue, in its group or not yet: the rules put it there
        // (a conv and the elementwise ops after it), and which merge comes first must not change the
        // price (a SiLU or HardSwish after it costs as much as the taps).
        std::set<std::string> epilogue, frontier = {dw.outputs[0]};
        while (!frontier.empty()) {
            std::set<std::string> next;
            for (const Node &c : g.nodes) {
                // (The cheap test first: this scans the graph for each depthwise conv priced.)
                if (std::none_of(c.inputs.begin(), c.inputs.end(),
                                 [&](const std::string &v) { return frontier.count(v); }))
                    continue;
                if (nodes.count(c.name) || epilogue.count(c.name) || effective_kind(g, c) != PatternKind::Elementwise)
                    continue;
                epilogue.insert(c.name);
                plane += work(g, c);
                next.insert(c.outputs.begin(), c.outputs.end());
            }
            frontier = std::move(next);
        }
        idle += plane / m.flops_per_ns * (1 / used - 1 / used_apart);
        *fraction = std::max(*fraction, 1 - used);
    }
    return idle;
}

}  // namespace

std::string human_bytes(int64_t b) {
    char buf[32];
    if (b >= (1 << 20)) {
        std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
    } else if (b >= 1024) {
        std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
    } else {
        std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
    }
    return buf;
}

bool MergePrice::close() const {
    const double cost = cost_ns(), hi = std::max(saved_ns, cost), lo = std::min(saved_ns, cost);
    return (cost > 0 && hi < kCloseFactor * lo) || hi - lo < kCloseShare * work_ns;
}

std::string MergePrice::why() const {
    std::string s = kept_bytes > 0 ? "keeps " + human_bytes(kept_bytes) + " out of memory (" + human_ns(saved_ns) + ")"
                                   : "keeps nothing out of memory";
    s += recompute_flops > 0 ? "; recomputes " + human_flops(recompute_flops) + " (" + human_ns(recompute_ns) + ")"
                             : "; recomputes nothing";
    if (idle_ns > 0) {
        auto percent = [](double fraction) {
            char buf[16];
            std::snprintf(buf, sizeof buf, "%.0f%%", 100 * fraction);
            return std::string(buf);
        };
        const std::string producer = percent(producer_idle_lane_fraction);
        s += "; leaves ";
        if (idle_lane_fraction > 0) {
            s += percent(idle_lane_fraction) + " of the depthwise conv's vector lanes idle";
            if (producer_idle_lane_fraction > 0) s += " and " + producer + " of its producer's";
        } else {
            s += producer + " of the depthwise conv's producer's vector lanes idle";
        }
        s += " (" + human_ns(idle_ns) + ")";
    }
    return s;
}

MergePrice &MergePrice::operator+=(const MergePrice &part) {
    kept_bytes += part.kept_bytes;
    saved_ns += part.saved_ns;
    recompute_flops += part.recompute_flops;
    recompute_ns += part.recompute_ns;
    idle_ns += part.idle_ns;
    idle_lane_fraction = std::max(idle_lane_fraction, part.idle_lane_fraction);
    producer_idle_lane_fraction = std::max(producer_idle_lane_fraction, part.producer_idle_lane_fraction);
    return *this;
}

MergePrice MergePrice::operator-(const MergePrice &parts) const {
    MergePrice d;
    d.kept_bytes = kept_bytes - parts.kept_bytes;
    d.saved_ns = saved_ns - parts.saved_ns;
    d.recompute_flops = recompute_flops - parts.recompute_flops;
    d.recompute_ns = recompute_ns - parts.recompute_ns;
    d.idle_ns = idle_ns - parts.idle_ns;
    d.idle_lane_fraction = idle_lane_fraction;
    d.producer_idle_lane_fraction = producer_idle_lane_fraction;
    d.work_ns = work_ns;
    return d;
}

MergePrice price_nodes(const Graph &g, const std::set<std::string> &nodes,
                       const std::map<std::string, Placement> &placement, const MachineModel &m) {
    MergePrice p;
    const std::set<std::string> returned(g.outputs.begin(), g.outputs.end());
    auto placed = [&](const std::string &n, Placement what) {
        auto it = placement.find(n);
        return it != placement.end() && it->second == what;
    };
    // The values the set writes, those read at all and those read outside it (one pass over the
    // graph's nodes: Graph::producer is a linear search, and the planner prices every merge it tries).
    std::set<std::string> written, read, read_outside;
    for (const std::string &name : nodes) {
        for (const std::string &v : g.find_node(name)->outputs) written.insert(v);
    }
    for (const Node &c : g.nodes) {
        for (const std::string &v : c.inputs) {
            if (!written.count(v)) continue;
            read.insert(v);
            if (!nodes.count(c.name)) read_outside.insert(v);
        }
    }
    // A conv (or gemm) read by a pool whose windows overlap is computed at root by the composer (a
    // tile would read the overlap through gathers), the pool after it: its value goes through memory
    // inside the group, and nothing runs twice.
    std::set<std::string> at_root;
    for (const std::string &name : nodes) {
        const Node &w = *g.find_node(name);
        if (find_op(w.op)->kind != PatternKind::Window || w.inputs.empty()) continue;
        int64_t s = 1;
        const int64_t extent = window_extent(w, &s);
        for (const Node *p = g.producer(w.inputs[0]); p && nodes.count(p->name);) {
            const PatternKind k = find_op(p->op)->kind;
            if (k == PatternKind::ComplexOutFusable) {
                if (extent > s) at_root.insert(p->name);
                break;
            }
            if (k != PatternKind::Elementwise && k != PatternKind::Broadcast) break;
            p = p->inputs.empty() ? nullptr : g.producer(p->inputs[0]);
        }
    }
    auto is_root = [&](const std::string &n) { return placed(n, Placement::Root) || at_root.count(n); };
    for (const std::string &name : nodes) {
        if (is_root(name) || placed(name, Placement::Output)) continue;
        for (const std::string &v : g.find_node(name)->outputs) {
            if (returned.count(v) || !read.count(v) || read_outside.count(v)) continue;
            p.kept_bytes += value_bytes(g, v);
            p.saved_ns += 2 * transfer_ns(value_bytes(g, v), m);
        }
    }
    // Window ops reading a value computed in the group: everything upstream of it in the group, up to
    // what is at root, runs again on each tile's halo.
    for (const std::string &name : nodes) {
        const Node &w = *g.find_node(name);
        if (find_op(w.op)->kind != PatternKind::Window || w.inputs.empty()) continue;
        const Node *p0 = g.producer(w.inputs[0]);
        if (!p0 || !nodes.count(p0->name) || is_root(p0->name)) continue;
        const double extra = halo_factor(g, w) - 1;
        if (extra <= 0) continue;
        std::set<std::string> upstream;
        std::vector<const Node *> stack = {p0};
        while (!stack.empty()) {
            const Node *u = stack.back();
            stack.pop_back();
            if (!upstream.insert(u->name).second) continue;
            for (const std::string &v : u->inputs) {
                const Node *q = v.empty() ? nullptr : g.producer(v);
                if (q && nodes.count(q->name) && !is_root(q->name)) stack.push_back(q);
            }
        }
        for (const std::string &u : upstream) p.recompute_flops += extra * work(g, *g.find_node(u));
    }
    p.recompute_ns = p.recompute_flops / (m.flops_per_ns * kRecomputeEfficiency);
    for (const std::string &name : nodes) p.work_ns += node_flops(g, *g.find_node(name)) / (m.flops_per_ns / 2);
    p.idle_ns = depthwise_idle_ns(g, nodes, m, &p.idle_lane_fraction, &p.producer_idle_lane_fraction);
    return p;
}

MergePrice price_recompute(const Graph &g, const std::set<std::string> &copied, const std::set<std::string> &handed_out,
                           int readers, const MachineModel &m) {
    MergePrice p;
    for (const std::string &v : handed_out) {
        p.kept_bytes += value_bytes(g, v);
        p.saved_ns += (1 + readers) * transfer_ns(value_bytes(g, v), m);
    }
    for (const std::string &n : copied) p.recompute_flops += (readers - 1) * work(g, *g.find_node(n));
    p.recompute_ns = p.recompute_flops / (m.flops_per_ns * kRecomputeEfficiency);
    return p;
}

OperandCopyPrice price_operand_copy(const Graph &g, const Node &product, const MachineModel &m) {
    OperandCopyPrice p;
    const Shape &b = g.type_of(product.inputs[1]).shape, &out = g.type_of(product.outputs[0]).shape;
    const int64_t lanes = m.vector_lanes > 0 ? m.vector_lanes : 16;
    if (b.size() < 2 || out.empty() || out.back() < lanes) return p;  // narrower than a vector: dot products anyway
    p.bytes = value_bytes(g, product.inputs[1]);
    p.copy_ns = 2 * transfer_ns(p.bytes, m);
    const double flops = node_flops(g, product);
    p.saved_ns = flops / m.flops_per_ns * (1 / kDotEfficiency - 1 / kGemmEfficiency);
    return p;
}

std::string OperandCopyPrice::why(const std::string &transpose, const std::string &product) const {
    return "materialises '" + transpose + "' (" + human_bytes(bytes) + ", " + human_ns(copy_ns) + "): '" + product +
           "' reads it along N, " + human_ns(saved_ns) + " less than dot products";
}

MachineModel parse_machine_model(const nlohmann::json &j, const std::string &field) {
    if (!j.is_object()) {
        throw Error(
            "expected an object {\"flops_per_ns\", \"cache_bytes\", \"cache_bytes_per_ns\", "
            "\"shared_cache_bytes\", \"shared_cache_bytes_per_ns\", \"memory_bytes_per_ns\"}, got " +
            j.dump())
            .at_field(field);
    }
    MachineModel m;
    auto number = [&](const char *key, double &out) {
        if (!j.contains(key)) throw Error("missing").at_field(field + "." + key);
        const nlohmann::json &x = j[key];
        if (!x.is_number() || x.get<double>() <= 0 || !std::isfinite(x.get<double>()))
            throw Error("expected a positive number, got " + x.dump()).at_field(field + "." + key);
        out = x.get<double>();
    };
    for (const auto &kv : j.items()) {
        static const std::set<std::string> known = {"flops_per_ns",
                                                    "cache_bytes",
                                                    "cache_bytes_per_ns",
                                                    "shared_cache_bytes",
                                                    "shared_cache_bytes_per_ns",
                                                    "memory_bytes_per_ns",
                                                    "vector_lanes"};
        if (!known.count(kv.key())) throw Error("unknown key in a machine model").at_field(field + "." + kv.key());
    }
    double cache = 0, shared = 0;
    number("flops_per_ns", m.flops_per_ns);
    number("cache_bytes", cache);
    number("cache_bytes_per_ns", m.cache_bytes_per_ns);
    number("shared_cache_bytes", shared);
    number("shared_cache_bytes_per_ns", m.shared_cache_bytes_per_ns);
    number("memory_bytes_per_ns", m.memory_bytes_per_ns);
    if (j.contains("vector_lanes")) {
        const nlohmann::json &x = j["vector_lanes"];
        if (!x.is_number_integer() || x.get<int64_t>() < 1 || x.get<int64_t>() > 64 ||
            (x.get<int64_t>() & (x.get<int64_t>() - 1)) != 0)
            throw Error("expected a power of two from 1 to 64, got " + x.dump()).at_field(field + ".vector_lanes");
        m.vector_lanes = x.get<int>();
    }
    m.cache_bytes = static_cast<int64_t>(cache);
    m.shared_cache_bytes = static_cast<int64_t>(shared);
    if (m.shared_cache_bytes < m.cache_bytes)
        throw Error("smaller than cache_bytes").at_field(field + ".shared_cache_bytes");
    return m;
}

nlohmann::json to_json(const MachineModel &m) {
    nlohmann::json j = {{"flops_per_ns", m.flops_per_ns},
                        {"cache_bytes", m.cache_bytes},
                        {"cache_bytes_per_ns", m.cache_bytes_per_ns},
                        {"shared_cache_bytes", m.shared_cache_bytes},
                        {"shared_cache_bytes_per_ns", m.shared_cache_bytes_per_ns},
                        {"memory_bytes_per_ns", m.memory_bytes_per_ns}};
    if (m.vector_lanes > 0) j["vector_lanes"] = m.vector_lanes;
    return j;
}

void set_target_lanes(std::vector<RuleSet> &rounds, int natural_vector_lanes) {
    for (RuleSet &r : rounds) {
        if (r.machine.vector_lanes == 0) r.machine.vector_lanes = natural_vector_lanes;
    }
}

}  // namespace hfuse
