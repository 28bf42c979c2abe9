// Property test (issue 4): random small models x random legal plans x random schedule parameters,
// each case's outputs compared with the unfused run of the model as written (Executor over
// singleton_groups) and with the independent reference evaluator, at 1e-4 of each output's scale.
//
// What is generated
//  - Models, as JSON in the model format (so a failing one is written out as a model file): small
//    (2-10 nodes, tensors <= 4096 elements) so that each JIT compile is quick. Three flavours:
//      conv:  NCHW input (N 1-2, C 1..8, H 3..9, W 3..9 or 8..13 — conv templates need an output at
//             least one vector wide); Conv with kernels 1/3/5 (sometimes rectangular), strides 1/2,
//             asymmetric pads, dilation 2, auto_pad, groups and depthwise, with or without bias;
//             Conv -> [BatchNormalization, folded by simplify()] -> activation -> MaxPool/AveragePool
//             (overlapping windows, stride 2, pads, ceil_mode, count_include_pad, dilations);
//             residual blocks; GlobalAverage/MaxPool; Flatten -> Gemm heads;
//      gemm:  [M, K] input; Gemm (transA/transB, alpha, beta, bias C of every broadcastable shape) and
//             MatMul chains with activations, Softmax;
//      ew:    rank 1-4 inputs with size-1 dims; elementwise/broadcast chains.
//    In every flavour: diamonds (two branches of one value merged by Add/Sub/Mul), residual adds,
//    broadcasting binary ops with weights of every broadcastable shape, Softmax on any axis,
//    Concat/Split/Slice (negative steps, axes)/Transpose/Reshape/Flatten/Pad where shapes allow,
//    Identity/Dropout and constant subgraphs (removed or folded by simplify()). Every value nobody
//    reads is a model output, and some intermediates are too. Weights are "uniform" + "seed".
//  - Legal plans over simplify(model) ("rewritten": true), from one of: the planner under a built-in
//    or a random rule set (random fuse rules, limits, flags, recompute, opaque ops/nodes,
//    stop_after; one or two rounds); that plan mutated by merging adjacent groups, copying cheap
//    nodes into reader groups ("recompute"), dissolving cheap groups into all their readers, and
//    random placements (inline/compute_at/root) — every step kept only if check_plan accepts it;
//    a random partition. Some plans are random partitions of the model as written
//    ("rewritten": false: BatchNormalization, Identity and constant subgraphs are executed).
//  - Schedules: each group's default_schedule_params(), perturbed: conv_xv/conv_dw/conv_flat/conv_cv parameters within
//    the ranges schedules/conv_*_template.cpp accept (mostly ones that fit the shapes, some that do
//    not); other templates (gemm, pool, reduction, simple, and any added later) get their integer
//    parameters scaled by 0.5..1.5 (at least 1) and vector_width halved, kept or doubled. A group
//    whose perturbed parameters the composer rejects with an hfuse::Error naming a "schedule." field
//    falls back to its defaults and is counted as rejected (a shard fails if more than a third are).
//
// Cases, seeds and shards: case i belongs to model i / kPlansPerModel (4 cases share a model and its
// unfused baseline, whose one-pipeline-per-op compile is the costly part); the model's seed comes
// from the master seed, the plan's and schedules' from the case. The master seed is fixed
// (kDefaultSeed) unless HFUSE_PROPERTY_SEED is set; HFUSE_PROPERTY_CASES sets the number of cases
// (default 240). Models are dealt to kShards parameterized tests (Property/PropertyShard.Cases/K),
// which ctest runs in parallel (gtest_discover_tests): model m in shard m % kShards. Each shard prints
// a summary line: cases, groups, schedules perturbed and rejected, templates run, plan sources.
// JIT compilation dominates: 240 cases take about 150 s of CPU (x86-64, AVX2), so ~80 s with ctest -j2.
//
// Bugs found by this test are kept, reduced, in tests/data/property_failures/; they fail the test
// until fixed. HFUSE_PROPERTY_TOLERATE_KNOWN=1 only counts those (see known_bug()), to look past them.
//
// Reproducing a failure: a failing case writes
//   <tmpdir>/hfuse_property_<seed>_<case>/model.json   the generated model
//   <tmpdir>/hfuse_property_<seed>_<case>/plan.json    the plan, with every group's schedule
// and prints them with the command that reproduces it (the CLI generates the same inputs, uniform
// [-1, 1] with seed 1000 + i, and compares with the reference evaluator):
//   build/bin/hfuse run <dir>/model.json --plan <dir>/plan.json --check
// To rerun exactly that case in the test (all its checks, plus a trace of what was generated):
//   HFUSE_PROPERTY_SEED=<seed> HFUSE_PROPERTY_CASE=<case> build/bin/hfuse_tests --gtest_filter='Property*'
// PropertyMeta checks that the comparison catches a wrong result and that the written files reproduce.
#include "compose/position_view.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/op_registry.h"
#include "hfuse/passes.h"
#include "hfuse/plan_report.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace hfuse {
namespace {

using nlohmann::json;

// --- Configuration ----------------------------------------------------------------------------------

constexpr uint64_t kDefaultSeed = 20240917;
constexpr int kDefaultCases = 240;
constexpr int kShards = 8;
constexpr int kPlansPerModel = 4;  // cases share a model (and its unfused baseline, the costly part)
constexpr double kTolerance = 1e-4;

uint64_t master_seed() {
    const char *s = std::getenv("HFUSE_PROPERTY_SEED");
    return s && *s ? std::strtoull(s, nullptr, 0) : kDefaultSeed;
}

int num_cases() {
    const char *s = std::getenv("HFUSE_PROPERTY_CASES");
    return s && *s ? std::max(0, std::atoi(s)) : kDefaultCases;
}

// HFUSE_PROPERTY_CASE=i runs only case i (in whichever shard holds it); -1 runs all.
int only_case() {
    const char *s = std::getenv("HFUSE_PROPERTY_CASE");
    return s && *s ? std::atoi(s) : -1;
}

// --- Deterministic randomness: SplitMix64, the same everywhere (unlike std:: distributions) ---------

class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        state_ += 0x9E3779B97F4A7C15ull;
        uint64_t z = state_;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [lo, hi].
    int64_t uniform(int64_t lo, int64_t hi) {
        return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
    }
    int pick_index(size_t n) { return static_cast<int>(uniform(0, static_cast<int64_t>(n) - 1)); }
    double real() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    bool chance(double p) { return real() < p; }
    template <class T>
    T pick(const std::vector<T> &v) {
        return v[pick_index(v.size())];
    }
    // An index drawn with the given weights.
    int weighted(const std::vector<double> &w) {
        double total = std::accumulate(w.begin(), w.end(), 0.0), r = real() * total;
        for (size_t i = 0; i < w.size(); i++) {
            if (r < w[i]) return static_cast<int>(i);
            r -= w[i];
        }
        return static_cast<int>(w.size()) - 1;
    }

private:
    uint64_t state_;
};

uint64_t derive_seed(uint64_t seed, uint64_t index) {
    Rng r(seed ^ (0xD1B54A32D192ED03ull * (index + 1)));
    r.next();
    return r.next();
}

// --- Random models, built as JSON -----------------------------------------------------------------

struct Value {
    std::string name;
    Shape shape;
    int uses = 0;
    bool is_input = false;
};

bool broadcastable(const Shape &a, const Shape &b) {  // numpy: b broadcasts with a
    for (size_t i = 0; i < std::min(a.size(), b.size()); i++) {
        int64_t x = a[a.size() - 1 - i], y = b[b.size() - 1 - i];
        if (x != y && x != 1 && y != 1) return false;
    }
    return true;
}

Shape broadcast_shape(const Shape &a, const Shape &b) {
    Shape out(std::max(a.size(), b.size()));
    for (size_t i = 0; i < out.size(); i++) {
        int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1, y = i < b.size() ? b[b.size() - 1 - i] : 1;
        out[out.size() - 1 - i] = std::max(x, y);
    }
    return out;
}

// Builds a random model node by node. Each node is kept only if hfuse's own validation and shape
// inference accept it (so the generator may propose freely, and learns output shapes from hfuse);
// a generator that proposes mostly invalid nodes shows in the statistics.
class ModelGen {
public:
    ModelGen(const std::string &name, uint64_t seed) : rng_(seed), weight_seed_((seed % 100000) * 1000) {
        model_ = {{"format", "hfuse-model"},
                  {"version", 1},
                  {"name", name},
                  {"inputs", json::array()},
                  {"weights", json::object()},
                  {"nodes", json::array()},
                  {"outputs", json::array()}};
    }

    int proposed = 0, refused = 0;

    json generate() {
        flavour_ = rng_.weighted({0.45, 0.3, 0.25});  // conv, gemm, ew
        model_["doc"] = std::string("flavour ") + (flavour_ == 0 ? "conv" : flavour_ == 1 ? "gemm" : "ew");
        Shape in;
        if (flavour_ == 0) {
            in = {rng_.chance(0.1) ? 2 : 1, rng_.uniform(1, 8), rng_.uniform(3, 9),
                  rng_.chance(0.25) ? rng_.uniform(3, 9) : rng_.uniform(8, 13)};
        } else if (flavour_ == 1) {
            in = {rng_.uniform(1, 5), rng_.uniform(2, 12)};
        } else {
            const int rank = static_cast<int>(rng_.uniform(1, 4));
            for (int i = 0; i < rank; i++) in.push_back(rng_.chance(0.2) ? 1 : rng_.uniform(2, 7));
        }
        add_input("x", in);
        if (rng_.chance(0.25)) {
            Shape second = in;
            if (rng_.chance(0.4)) {
                for (auto &d : second) d = rng_.chance(0.5) ? 1 : d;
                if (!second.empty() && rng_.chance(0.3)) second.erase(second.begin());
            }
            add_input("y", second);
        }
        const int target = static_cast<int>(rng_.uniform(2, 7));
        for (int attempt = 0; attempt < 80 && nodes_ < target; attempt++) step();
        finish();
        return model_;
    }

private:
    Rng rng_;
    json model_, pending_ = json::object();
    std::vector<Value> values_;
    int flavour_ = 0, nodes_ = 0, counter_ = 0;
    uint64_t weight_seed_;
    static constexpr int kMaxNodes = 10;
    static constexpr int64_t kMaxElements = 4096;

    void add_input(const std::string &name, const Shape &shape) {
        model_["inputs"].push_back({{"name", name}, {"shape", shape}});
        values_.push_back({name, shape, 0, true});
    }

    std::string fresh(const std::string &op) { return "n" + std::to_string(counter_++) + "_" + op; }

    std::string weight(const std::string &name, const Shape &shape, double lo = -0.5, double hi = 0.5) {
        pending_[name] = {{"shape", shape}, {"uniform", {lo, hi}}, {"seed", ++weight_seed_}};
        return name;
    }
    std::string ints(const std::string &name, const std::vector<int64_t> &values) {
        pending_[name] = {{"shape", {values.size()}}, {"dtype", "int64"}, {"values", values}};
        return name;
    }
    std::string scalar(const std::string &name, double v) {
        pending_[name] = {{"shape", json::array()}, {"values", {v}}};
        return name;
    }

    // Adds a node if hfuse accepts it; returns whether it did (pending weights are dropped otherwise).
    bool add(const std::string &name, const std::string &op, const std::vector<std::string> &inputs,
             const json &attrs = json::object(), const std::vector<std::string> &outputs = {}) {
        proposed++;
        json weights = pending_;
        pending_ = json::object();
        if (nodes_ >= kMaxNodes) return false;
        json candidate = model_;
        for (auto &kv : weights.items()) candidate["weights"][kv.key()] = kv.value();
        json node = {{"name", name}, {"op", op}, {"inputs", inputs}};
        if (!attrs.empty()) node["attrs"] = attrs;
        if (!outputs.empty()) node["outputs"] = outputs;
        candidate["nodes"].push_back(node);
        json all_outputs = json::array();
        for (const json &n : candidate["nodes"]) {
            if (n.contains("outputs")) {
                for (const json &o : n["outputs"]) all_outputs.push_back(o);
            } else {
                all_outputs.push_back(n["name"]);
            }
        }
        candidate["outputs"] = all_outputs;
        Graph g;
        try {
            g = prepare(parse_model(candidate, "", "generator"));
        } catch (const Error &) {
            refused++;
            return false;
        }
        const std::vector<std::string> outs = outputs.empty() ? std::vector<std::string>{name} : outputs;
        for (const std::string &o : outs) {
            const Shape &s = g.type_of(o).shape;
            if (num_elements(s) > kMaxElements) {
                refused++;
                return false;
            }
        }
        candidate["outputs"] = json::array();
        model_ = candidate;
        nodes_++;
        for (const std::string &in : inputs) {
            for (Value &v : values_) {
                if (v.name == in) v.uses++;
            }
        }
        for (const std::string &o : outs) values_.push_back({o, g.type_of(o).shape, 0, false});
        return true;
    }

    const Value *last() const { return values_.empty() ? nullptr : &values_.back(); }

    // A value satisfying `pred`: usually the most recent (chains), otherwise any (branches).
    template <class Pred>
    const Value *pick(Pred pred) {
        std::vector<const Value *> c;
        for (const Value &v : values_) {
            if (pred(v)) c.push_back(&v);
        }
        if (c.empty()) return nullptr;
        return rng_.chance(0.65) ? c.back() : c[rng_.pick_index(c.size())];
    }
    const Value *pick_any() {
        return pick([](const Value &) { return true; });
    }
    const Value *pick_rank(int r) {
        return pick([r](const Value &v) { return v.shape.size() == static_cast<size_t>(r); });
    }

    // --- ops on one value (`v` forced, or picked)

    bool unary(const Value *v = nullptr) {
        if (!(v = v ? v : pick_any())) return false;
        const std::string x = v->name;
        switch (rng_.uniform(0, 7)) {
        case 0:
        case 1: return add(fresh("relu"), "Relu", {x});
        case 2: return add(fresh("leaky"), "LeakyRelu", {x}, {{"alpha", rng_.pick<double>({0.01, 0.2, 1.5})}});
        case 3: return add(fresh("sigmoid"), "Sigmoid", {x});
        case 4: return add(fresh("tanh"), "Tanh", {x});
        case 5: {
            const std::string n = fresh("clip");
            const int which = static_cast<int>(rng_.uniform(0, 2));  // min, max or both
            std::vector<std::string> in = {x, which == 1 ? "" : scalar(n + ".min", -0.25)};
            if (which != 0) in.push_back(scalar(n + ".max", 0.3));
            return add(n, "Clip", in);
        }
        case 6: return add(fresh("hsig"), "HardSigmoid", {x}, {{"alpha", 0.3}, {"beta", 0.45}});
        default: return add(fresh("hswish"), "HardSwish", {x});
        }
    }

    // A broadcasting binary op with a weight operand of a random broadcastable shape.
    bool binary_weight(const Value *v = nullptr) {
        if (!(v = v ? v : pick_any())) return false;
        const Shape &s = v->shape;
        std::vector<Shape> shapes = {s, Shape{}};
        if (!s.empty()) shapes.push_back({s.back()});
        if (s.size() == 4) shapes.push_back({s[1], 1, 1}), shapes.push_back({1, s[1], 1, 1});
        Shape r = s;  // some dims 1, some leading dims dropped
        for (auto &d : r) d = rng_.chance(0.5) ? 1 : d;
        while (!r.empty() && rng_.chance(0.3)) r.erase(r.begin());
        shapes.push_back(r);
        const Shape ws = rng_.pick(shapes);
        const std::string op = rng_.pick<std::string>({"Add", "Sub", "Mul", "Div"});
        const std::string n = fresh(op == "Add" ? "add" : op == "Sub" ? "sub" : op == "Mul" ? "mul" : "div");
        if (op == "Div") return add(n, op, {v->name, weight(n + ".w", ws, 0.5, 1.5)});
        const std::string w = weight(n + ".w", ws);
        return rng_.chance(0.7) ? add(n, op, {v->name, w}) : add(n, op, {w, v->name});
    }

    // A binary op of two values (a diamond's or residual's join; with size-1 dims, a broadcast).
    bool merge(const Value *a = nullptr, const Value *b = nullptr) {
        if (!(a = a ? a : pick_any())) return false;
        if (!b) {
            const std::string an = a->name;
            const Shape as = a->shape;
            std::vector<const Value *> c;
            for (const Value &v : values_) {
                if (v.name != an && broadcastable(as, v.shape) && v.shape.size() <= as.size() + 1) c.push_back(&v);
            }
            if (c.empty()) return false;
            b = c[rng_.pick_index(c.size())];
            a = nullptr;
            for (const Value &v : values_) {
                if (v.name == an) a = &v;
            }
        }
        if (!broadcastable(a->shape, b->shape)) return false;
        const std::string op = rng_.pick<std::string>({"Add", "Add", "Mul", "Sub"});
        std::vector<std::string> in = {a->name, b->name};
        if (rng_.chance(0.5)) std::swap(in[0], in[1]);
        return add(fresh(op == "Add" ? "add" : op == "Mul" ? "mul" : "sub"), op, in);
    }

    bool conv(const Value *v = nullptr, bool same = false) {
        if (!(v = v ? v : pick_rank(4))) return false;
        const int64_t cin = v->shape[1];
        int64_t group = 1, cout = rng_.uniform(1, 8);
        const int kind = static_cast<int>(rng_.weighted({0.6, 0.25, 0.15}));  // plain, depthwise, grouped
        if (kind == 1 && cin > 1) {
            group = cin;
            cout = cin * (rng_.chance(0.8) ? 1 : 2);
        } else if (kind == 2) {
            std::vector<int64_t> divisors;
            for (int64_t d = 2; d <= cin; d++) {
                if (cin % d == 0) divisors.push_back(d);
            }
            if (!divisors.empty()) {
                group = rng_.pick(divisors);
                cout = group * rng_.uniform(1, 2);
            }
        }
        int64_t kh = rng_.pick<int64_t>({1, 3, 3, 5}), kw = rng_.chance(0.8) ? kh : rng_.pick<int64_t>({1, 3, 5});
        json attrs = {{"kernel_shape", {kh, kw}}};
        if (same) {
            group = kind == 1 && cin > 1 ? cin : 1;
            cout = cin;
            attrs["pads"] = {(kh - 1) / 2, (kw - 1) / 2, (kh - 1) / 2, (kw - 1) / 2};
        } else {
            if (rng_.chance(0.4)) attrs["strides"] = {rng_.uniform(1, 2), rng_.uniform(1, 2)};
            if (rng_.chance(0.15)) attrs["dilations"] = {rng_.uniform(1, 2), rng_.uniform(1, 2)};
            if (rng_.chance(0.1)) {
                attrs["auto_pad"] = rng_.pick<std::string>({"SAME_UPPER", "SAME_LOWER", "VALID"});
            } else if (rng_.chance(0.8)) {
                attrs["pads"] = {
                    rng_.uniform(0, std::min<int64_t>(kh - 1, 2)), rng_.uniform(0, std::min<int64_t>(kw - 1, 2)),
                    rng_.uniform(0, std::min<int64_t>(kh - 1, 2)), rng_.uniform(0, std::min<int64_t>(kw - 1, 2))};
            }
        }
        if (group > 1) attrs["group"] = group;
        const std::string n = fresh("conv");
        std::vector<std::string> in = {v->name, weight(n + ".w", {cout, cin / group, kh, kw})};
        if (rng_.chance(0.75)) in.push_back(weight(n + ".b", {cout}));
        return add(n, "Conv", in, attrs);
    }

    bool bn(const Value *v = nullptr) {
        if (!(v = v ? v : pick([](const Value &v) { return v.shape.size() >= 2 && v.shape.size() <= 4; })))
            return false;
        const int64_t c = v->shape[1];
        const std::string n = fresh("bn");
        std::vector<std::string> in = {v->name, weight(n + ".scale", {c}, 0.5, 1.5), weight(n + ".bias", {c}),
                                       weight(n + ".mean", {c}), weight(n + ".var", {c}, 0.5, 1.5)};
        return add(n, "BatchNormalization", in, {{"epsilon", rng_.pick<double>({1e-5, 1e-3})}});
    }

    bool pool(const Value *v = nullptr, bool same = false) {
        if (!(v = v ? v : pick_rank(4))) return false;
        const bool max = rng_.chance(0.55);
        json attrs;
        if (same) {
            attrs = {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}};
        } else {
            const int64_t kh = rng_.uniform(1, 3), kw = rng_.chance(0.8) ? kh : rng_.uniform(1, 3);
            attrs["kernel_shape"] = {kh, kw};
            if (rng_.chance(0.7)) attrs["strides"] = {rng_.uniform(1, 2), rng_.uniform(1, 2)};
            if (rng_.chance(0.08)) {
                attrs["auto_pad"] = rng_.pick<std::string>({"SAME_UPPER", "SAME_LOWER", "VALID"});
            } else if (rng_.chance(0.6)) {
                attrs["pads"] = {rng_.uniform(0, kh - 1), rng_.uniform(0, kw - 1), rng_.uniform(0, kh - 1),
                                 rng_.uniform(0, kw - 1)};
            }
            if (rng_.chance(0.25)) attrs["ceil_mode"] = 1;
            if (max && rng_.chance(0.15)) attrs["dilations"] = {rng_.uniform(1, 2), rng_.uniform(1, 2)};
            if (!max && rng_.chance(0.4)) attrs["count_include_pad"] = 1;
        }
        return add(fresh(max ? "maxpool" : "avgpool"), max ? "MaxPool" : "AveragePool", {v->name}, attrs);
    }

    bool global_pool(const Value *v = nullptr) {
        if (!(v = v ? v : pick_rank(4))) return false;
        const bool max = rng_.chance(0.4);
        return add(fresh(max ? "gmaxpool" : "gavgpool"), max ? "GlobalMaxPool" : "GlobalAveragePool", {v->name});
    }

    bool softmax(const Value *v = nullptr) {
        if (!(v = v ? v : pick([](const Value &v) { return !v.shape.empty(); }))) return false;
        const int64_t r = static_cast<int64_t>(v->shape.size());
        return add(fresh("softmax"), "Softmax", {v->name}, {{"axis", rng_.uniform(-r, r - 1)}});
    }

    bool gemm(const Value *v = nullptr) {
        if (!(v = v ? v : pick_rank(2))) return false;
        const bool ta = rng_.chance(0.25), tb = rng_.chance(0.5);
        const int64_t m = ta ? v->shape[1] : v->shape[0], k = ta ? v->shape[0] : v->shape[1], nn = rng_.uniform(1, 12);
        const std::string n = fresh("gemm");
        std::vector<std::string> in = {v->name, weight(n + ".b", tb ? Shape{nn, k} : Shape{k, nn})};
        const int c = static_cast<int>(rng_.uniform(0, 5));
        if (c > 0) {
            const std::vector<Shape> cs = {{nn}, {1, nn}, {m, nn}, {m, 1}, {}};
            in.push_back(weight(n + ".c", cs[c - 1]));
        }
        json attrs = json::object();
        if (ta) attrs["transA"] = 1;
        if (tb) attrs["transB"] = 1;
        if (rng_.chance(0.3)) attrs["alpha"] = rng_.pick<double>({0.5, -1.5, 2.0});
        if (c > 0 && rng_.chance(0.3)) attrs["beta"] = rng_.pick<double>({0.5, 2.0, 0.0});
        return add(n, "Gemm", in, attrs);
    }

    bool matmul(const Value *v = nullptr) {
        if (!(v = v ? v : pick([](const Value &v) { return v.shape.size() >= 2 && v.shape.size() <= 3; })))
            return false;
        const int64_t k = v->shape.back();
        const std::string a = v->name, n = fresh("matmul");
        // Sometimes a product of two activations.
        const Value *other =
            pick([&](const Value &u) { return u.shape.size() == 2 && u.shape[0] == k && u.name != a; });
        if (other && rng_.chance(0.4)) return add(n, "MatMul", {a, other->name});
        return add(n, "MatMul", {a, weight(n + ".w", {k, rng_.uniform(1, 10)})});
    }

    bool transpose(const Value *v = nullptr) {
        if (!(v = v ? v : pick([](const Value &v) { return v.shape.size() >= 2; }))) return false;
        std::vector<int64_t> perm(v->shape.size());
        std::iota(perm.begin(), perm.end(), 0);
        for (size_t i = perm.size() - 1; i > 0; i--) std::swap(perm[i], perm[rng_.uniform(0, i)]);
        if (rng_.chance(0.2)) return add(fresh("transpose"), "Transpose", {v->name});  // reverses
        return add(fresh("transpose"), "Transpose", {v->name}, {{"perm", perm}});
    }

    bool reshape(const Value *v = nullptr) {
        if (!(v = v ? v : pick_any())) return false;
        const int64_t total = num_elements(v->shape);
        const int64_t r = static_cast<int64_t>(v->shape.size());
        if (rng_.chance(0.4) && r >= 1) {
            return add(fresh("flatten"), "Flatten", {v->name}, {{"axis", rng_.uniform(-r, r)}});
        }
        // A random factorisation of the element count into 1-3 dims, maybe with a -1 or a 0.
        std::vector<int64_t> dims;
        int64_t rest = total;
        const int parts = static_cast<int>(rng_.uniform(1, 3));
        for (int i = 0; i + 1 < parts; i++) {
            std::vector<int64_t> divisors;
            for (int64_t d = 1; d <= rest; d++) {
                if (rest % d == 0) divisors.push_back(d);
            }
            int64_t d = rng_.pick(divisors);
            dims.push_back(d);
            rest /= d;
        }
        dims.push_back(rest);
        if (rng_.chance(0.3)) dims[rng_.pick_index(dims.size())] = -1;
        if (!dims.empty() && r > 0 && dims[0] == v->shape[0] && rng_.chance(0.3)) dims[0] = 0;
        const std::string n = fresh("reshape");
        return add(n, "Reshape", {v->name, ints(n + ".shape", dims)});
    }

    bool slice(const Value *v = nullptr) {
        if (!(v = v ? v : pick([](const Value &v) { return !v.shape.empty(); }))) return false;
        const int r = static_cast<int>(v->shape.size());
        std::vector<int64_t> axes, starts, ends, steps;
        const int count = static_cast<int>(rng_.uniform(1, std::min(2, r)));
        std::vector<int> order(r);
        std::iota(order.begin(), order.end(), 0);
        for (int i = r - 1; i > 0; i--) std::swap(order[i], order[rng_.uniform(0, i)]);
        bool explicit_axes = rng_.chance(0.7), any_step = false;
        for (int i = 0; i < count; i++) {
            const int a = explicit_axes ? order[i] : i;
            const int64_t d = v->shape[a];
            const int64_t step = rng_.pick<int64_t>({1, 1, 1, 2, -1, -2});
            any_step = any_step || step != 1;
            int64_t s = rng_.uniform(-d, d - 1), e = rng_.uniform(-d - 1, d + 1);
            if (step > 0 && rng_.chance(0.2)) e = INT64_MAX;
            if (step > 0 && e >= 0 && e <= s && e < d) std::swap(s, e);
            if (step < 0 && rng_.chance(0.3)) e = -d - 2;  // clamped to "before the first element"
            axes.push_back(rng_.chance(0.3) ? a - r : a);
            starts.push_back(s);
            ends.push_back(e);
            steps.push_back(step);
        }
        const std::string n = fresh("slice");
        std::vector<std::string> in = {v->name, ints(n + ".starts", starts), ints(n + ".ends", ends)};
        if (explicit_axes || any_step || rng_.chance(0.3)) {
            if (explicit_axes) {
                in.push_back(ints(n + ".axes", axes));
            } else {
                in.push_back("");
            }
            if (any_step || rng_.chance(0.3)) in.push_back(ints(n + ".steps", steps));
        }
        return add(n, "Slice", in);
    }

    bool split(const Value *v = nullptr) {
        if (!(v = v ? v : pick([](const Value &v) {
                  return std::any_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d >= 2; });
              })))
            return false;
        const int64_t r = static_cast<int64_t>(v->shape.size());
        std::vector<int64_t> axes;
        for (int64_t a = 0; a < r; a++) {
            if (v->shape[a] >= 2) axes.push_back(a);
        }
        if (axes.empty()) return false;
        const int64_t axis = rng_.pick(axes), d = v->shape[axis];
        const int64_t parts = std::min<int64_t>(d, rng_.uniform(2, 3));
        const std::string n = fresh("split"), x = v->name;
        std::vector<std::string> outs;
        for (int64_t i = 0; i < parts; i++) outs.push_back(n + "_" + std::to_string(i));
        json attrs = {{"axis", rng_.chance(0.3) ? axis - r : axis}};
        if (d % parts == 0 && rng_.chance(0.5)) return add(n, "Split", {x}, attrs, outs);
        std::vector<int64_t> sizes(parts, 1);
        for (int64_t left = d - parts; left > 0; left--) sizes[rng_.uniform(0, parts - 1)]++;
        return add(n, "Split", {x, ints(n + ".split", sizes)}, attrs, outs);
    }

    // Concat of values equal in shape but for (at most) one axis; a value may be concatenated with itself.
    bool concat() {
        const Value *a = pick([](const Value &v) { return !v.shape.empty(); });
        if (!a) return false;
        const Shape as = a->shape;
        const std::string an = a->name;
        std::vector<std::pair<std::string, int>> cands;  // value, axis (-1: any)
        for (const Value &v : values_) {
            if (v.shape.size() != as.size()) continue;
            int diff = -1, ndiff = 0;
            for (size_t i = 0; i < as.size(); i++) {
                if (v.shape[i] != as[i]) diff = static_cast<int>(i), ndiff++;
            }
            if (ndiff <= 1 && (v.name != an || rng_.chance(0.3))) cands.push_back({v.name, ndiff ? diff : -1});
        }
        if (cands.empty()) return false;
        auto [b, axis] = cands[rng_.pick_index(cands.size())];
        const int64_t r = static_cast<int64_t>(as.size());
        int64_t ax = axis >= 0 ? axis : rng_.uniform(0, r - 1);
        std::vector<std::string> in = {an, b};
        if (rng_.chance(0.5)) std::swap(in[0], in[1]);
        if (axis < 0 && rng_.chance(0.2)) in.push_back(an);
        return add(fresh("concat"), "Concat", in, {{"axis", rng_.chance(0.3) ? ax - r : ax}});
    }

    bool pad(const Value *v = nullptr) {
        if (!(v = v ? v : pick([](const Value &v) { return !v.shape.empty(); }))) return false;
        const int r = static_cast<int>(v->shape.size());
        const std::string mode = rng_.pick<std::string>({"constant", "constant", "reflect", "edge"});
        std::vector<int64_t> pads(2 * r, 0);
        for (int i = 0; i < 2 * r; i++) {
            const int64_t d = v->shape[i % r];
            if (rng_.chance(0.4)) pads[i] = rng_.uniform(mode == "reflect" ? 0 : -1, std::min<int64_t>(2, d - 1));
            if (pads[i] < 0 && d < 3) pads[i] = 0;
        }
        const std::string n = fresh("pad");
        std::vector<std::string> in = {v->name, ints(n + ".pads", pads)};
        if (mode == "constant" && rng_.chance(0.5)) in.push_back(scalar(n + ".value", 0.75));
        return add(n, "Pad", in, {{"mode", mode}});
    }

    bool identity(const Value *v = nullptr) {
        if (!(v = v ? v : pick_any())) return false;
        const bool dropout = rng_.chance(0.4);
        return add(fresh(dropout ? "dropout" : "identity"), dropout ? "Dropout" : "Identity", {v->name});
    }

    // A node on weights only (folded by simplify) used as the operand of a broadcasting op.
    bool constant_operand() {
        const Value *v = pick_any();
        if (!v) return false;
        const std::string x = v->name;
        Shape s = v->shape;
        if (!s.empty() && rng_.chance(0.5)) s.erase(s.begin());
        const std::string c = fresh("const");
        const std::string w1 = weight(c + ".a", s), w2 = weight(c + ".b", s);
        if (!add(c, rng_.chance(0.5) ? "Mul" : "Add", {w1, w2})) return false;
        values_.pop_back();  // not a value other ops should pick (nor a model output)
        return add(fresh("add"), "Add", {x, c});
    }

    // --- Macros: the structures the issue names

    // conv -> [bn] -> [activation] -> [pool]
    bool conv_block() {
        if (!conv()) return false;
        if (rng_.chance(0.3)) bn(last());
        if (rng_.chance(0.7)) {
            if (rng_.chance(0.6)) {
                add(fresh("relu"), "Relu", {last()->name});
            } else {
                unary(last());
            }
        }
        if (rng_.chance(0.6)) pool(last());
        return true;
    }

    // v -> conv(same) -> [bn] -> relu -> [conv(same)] -> add(v) -> [relu]
    bool residual() {
        const Value *v = pick_rank(4);
        if (!v) return false;
        const std::string x = v->name;
        if (!conv(v, true)) return false;
        if (rng_.chance(0.5)) bn(last());
        add(fresh("relu"), "Relu", {last()->name});
        if (rng_.chance(0.5)) conv(last(), true);
        const std::string y = last()->name;
        const Value *xv = nullptr, *yv = nullptr;
        for (const Value &u : values_) {
            if (u.name == x) xv = &u;
            if (u.name == y) yv = &u;
        }
        if (!merge(xv, yv)) return false;
        if (rng_.chance(0.5)) add(fresh("relu"), "Relu", {last()->name});
        return true;
    }

    // Two shape-preserving branches of one value, joined.
    bool diamond() {
        const Value *v = pick_any();
        if (!v) return false;
        const std::string x = v->name;
        std::string branch[2];
        for (int b = 0; b < 2; b++) {
            const Value *xv = nullptr;
            for (const Value &u : values_) {
                if (u.name == x) xv = &u;
            }
            bool ok = false;
            const int choice = static_cast<int>(rng_.uniform(0, 5));
            if (xv->shape.size() == 4 && choice == 0) ok = conv(xv, true);
            if (xv->shape.size() == 4 && choice == 1) ok = pool(xv, true);
            if (choice == 2) ok = softmax(xv);
            if (choice == 3) ok = binary_weight(xv);
            if (!ok) ok = unary(xv);
            if (!ok) return false;
            branch[b] = last()->name;
        }
        const Value *a = nullptr, *b = nullptr;
        for (const Value &u : values_) {
            if (u.name == branch[0]) a = &u;
            if (u.name == branch[1]) b = &u;
        }
        return merge(a, b);
    }

    // conv features -> Flatten / global pool -> Gemm
    bool head() {
        const Value *v = pick_rank(4);
        if (!v) return false;
        if (rng_.chance(0.5)) {
            if (!global_pool(v)) return false;
            v = last();
        }
        if (!add(fresh("flatten"), "Flatten", {v->name})) return false;
        return gemm(last());
    }

    void step() {
        // conv, bn, unary, binary_weight, merge, pool, global_pool, softmax, gemm, matmul, transpose,
        // reshape, slice, split, concat, pad, identity, constant, conv_block, residual, diamond, head
        static const std::vector<std::vector<double>> weights = {
            {2, 0.5, 1.5, 1, 1, 1.5, 0.4, 0.4, 0, 0, 0.3, 0.3, 0.4, 0.4, 0.5, 0.3, 0.2, 0.2, 2, 0.8, 0.8, 0.5},
            {0, 0.2, 1.5, 1, 1, 0, 0, 0.8, 2.5, 1.2, 0.4, 0.3, 0.4, 0.4, 0.5, 0.2, 0.2, 0.2, 0, 0, 0.6, 0},
            {0, 0.2, 2, 1.5, 1.5, 0, 0, 0.5, 0, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.3, 0.2, 0.3, 0, 0, 1, 0}};
        switch (rng_.weighted(weights[flavour_])) {
        case 0: conv(); break;
        case 1: bn(); break;
        case 2: unary(); break;
        case 3: binary_weight(); break;
        case 4: merge(); break;
        case 5: pool(); break;
        case 6: global_pool(); break;
        case 7: softmax(); break;
        case 8: gemm(); break;
        case 9: matmul(); break;
        case 10: transpose(); break;
        case 11: reshape(); break;
        case 12: slice(); break;
        case 13: split(); break;
        case 14: concat(); break;
        case 15: pad(); break;
        case 16: identity(); break;
        case 17: constant_operand(); break;
        case 18: conv_block(); break;
        case 19: residual(); break;
        case 20: diamond(); break;
        default: head(); break;
        }
    }

    // Outputs: every value nobody reads, and some that are read; inputs nobody reads are dropped.
    void finish() {
        if (nodes_ == 0) unary(&values_.front());
        json outputs = json::array(), inputs = json::array();
        for (const Value &v : values_) {
            if (v.is_input) continue;
            if (v.uses == 0 || rng_.chance(0.15)) outputs.push_back(v.name);
        }
        for (const json &in : model_["inputs"]) {
            for (const Value &v : values_) {
                if (v.is_input && v.name == in["name"] && v.uses > 0) inputs.push_back(in);
            }
        }
        model_["outputs"] = outputs;
        model_["inputs"] = inputs;
    }
};

Graph load_generated(const json &model, const std::string &source) {
    return prepare(parse_model(model, "", source));
}

// --- Random legal plans ---------------------------------------------------------------------------

// A plan under construction: per group the nodes it owns and the cheap nodes it recomputes.
struct Draft {
    std::vector<std::set<std::string>> owned, copies;
};

Draft draft_of(const FusedGraph &f) {
    Draft d;
    for (const FusedGroup &grp : f.groups) {
        std::set<std::string> own, copy;
        for (const std::string &n : grp.nodes) {
            auto it = grp.placement.find(n);
            (it != grp.placement.end() && it->second == Placement::Recompute ? copy : own).insert(n);
        }
        d.owned.push_back(own);
        d.copies.push_back(copy);
    }
    return d;
}

// check_plan of a draft with derived placements (throws an Error if the draft is illegal).
FusedGraph plan_of(const Draft &d, const Graph &g, bool rewritten, const std::vector<std::string> &rules) {
    FusedGraph f;
    f.graph = g;
    f.rewritten = rewritten;
    f.rules = rules;
    for (size_t i = 0; i < d.owned.size(); i++) {
        FusedGroup grp;
        grp.nodes.assign(d.owned[i].begin(), d.owned[i].end());
        for (const std::string &c : d.copies[i]) {
            grp.nodes.push_back(c);
            grp.placement[c] = Placement::Recompute;
        }
        f.groups.push_back(grp);
    }
    return check_plan(std::move(f));
}

bool is_cheap(const Graph &g, const std::string &node) {
    PatternKind k = find_op(g.find_node(node)->op)->kind;
    return k == PatternKind::Elementwise || k == PatternKind::Broadcast || k == PatternKind::Injective;
}

bool reads(const Graph &g, const std::string &consumer, const std::string &producer) {
    const Node *c = g.find_node(consumer);
    for (const std::string &v : g.find_node(producer)->outputs) {
        if (std::count(c->inputs.begin(), c->inputs.end(), v)) return true;
    }
    return false;
}

bool is_model_output(const Graph &g, const std::string &node) {
    for (const std::string &v : g.find_node(node)->outputs) {
        if (std::count(g.outputs.begin(), g.outputs.end(), v)) return true;
    }
    return false;
}

// Tries one random structural change; keeps it if check_plan accepts it.
bool mutate(Draft &d, const Graph &g, Rng &rng, std::string &log) {
    const size_t num = d.owned.size();
    auto holds = [&](size_t i, const std::string &n) { return d.owned[i].count(n) || d.copies[i].count(n); };
    auto group_reads = [&](size_t j, const std::string &n) {  // some member of group j reads node n
        for (const auto *s : {&d.owned[j], &d.copies[j]}) {
            for (const std::string &c : *s) {
                if (reads(g, c, n)) return true;
            }
        }
        return false;
    };
    Draft before = d;
    const int kind = rng.weighted({0.45, 0.35, 0.2});
    std::string what;
    if (kind == 0) {  // merge two adjacent groups
        std::vector<std::pair<size_t, size_t>> pairs;
        for (size_t i = 0; i < num; i++) {
            for (size_t j = 0; j < num; j++) {
                if (i == j) continue;
                bool adjacent = false;
                for (const std::string &n : d.owned[i]) adjacent = adjacent || group_reads(j, n);
                if (adjacent) pairs.push_back({i, j});
            }
        }
        if (pairs.empty()) return false;
        auto [i, j] = pairs[rng.pick_index(pairs.size())];
        d.owned[i].insert(d.owned[j].begin(), d.owned[j].end());
        d.copies[i].insert(d.copies[j].begin(), d.copies[j].end());
        for (const std::string &n : d.owned[i]) d.copies[i].erase(n);
        d.owned.erase(d.owned.begin() + j);
        d.copies.erase(d.copies.begin() + j);
        what = "merge";
    } else if (kind == 1) {  // recompute a cheap node in a group that reads it
        std::vector<std::pair<std::string, size_t>> cands;
        for (size_t i = 0; i < num; i++) {
            for (const std::string &n : d.owned[i]) {
                if (!is_cheap(g, n)) continue;
                for (size_t j = 0; j < num; j++) {
                    if (j != i && !holds(j, n) && group_reads(j, n)) cands.push_back({n, j});
                }
            }
        }
        if (cands.empty()) return false;
        auto [n, j] = cands[rng.pick_index(cands.size())];
        d.copies[j].insert(n);
        // Sometimes its cheap producers too, so the copy reads further upstream.
        if (rng.chance(0.4)) {
            for (const Node &p : g.nodes) {
                if (reads(g, n, p.name) && is_cheap(g, p.name) && !holds(j, p.name)) d.copies[j].insert(p.name);
            }
        }
        what = "recompute " + n;
    } else {  // a cheap group all of whose readers recompute it: dissolve it into them
        std::vector<size_t> cands;
        for (size_t i = 0; i < num; i++) {
            bool ok = d.copies[i].empty();
            for (const std::string &n : d.owned[i]) ok = ok && is_cheap(g, n) && !is_model_output(g, n);
            if (ok) cands.push_back(i);
        }
        if (cands.empty()) return false;
        const size_t i = rng.pick(cands);
        for (size_t j = 0; j < num; j++) {
            if (j == i) continue;
            bool reader = false;
            for (const std::string &n : d.owned[i]) reader = reader || group_reads(j, n);
            if (!reader) continue;
            for (const std::string &n : d.owned[i]) {
                if (!d.owned[j].count(n)) d.copies[j].insert(n);
            }
        }
        d.owned.erase(d.owned.begin() + i);
        d.copies.erase(d.copies.begin() + i);
        what = "dissolve";
    }
    try {
        plan_of(d, g, true, {});
        log += " " + what;
        return true;
    } catch (const Error &) {
        d = before;
        return false;
    }
}

// Random placements for members whose placement is free (not output, recompute or folded).
FusedGraph random_placements(const FusedGraph &f, Rng &rng) {
    FusedGraph out = f;
    for (FusedGroup &grp : out.groups) {
        for (const std::string &n : grp.nodes) {
            Placement &p = grp.placement.at(n);
            if (p != Placement::Inline && p != Placement::ComputeAt && p != Placement::Root) continue;
            if (!rng.chance(0.4)) continue;
            const bool complex = find_op(f.graph.find_node(n)->op)->kind == PatternKind::ComplexOutFusable;
            p = complex ? rng.pick<Placement>({Placement::ComputeAt, Placement::Root})
                        : rng.pick<Placement>({Placement::Inline, Placement::ComputeAt, Placement::Root});
        }
    }
    try {
        return check_plan(out);
    } catch (const Error &) {
        return f;
    }
}

// A random partition: each node joins the group of one of its producers, some earlier group, or a new one.
Draft random_partition(const Graph &g, Rng &rng) {
    std::map<std::string, int> group_of;
    Draft d;
    for (const Node &n : g.nodes) {
        std::vector<int> choices;
        for (const std::string &v : n.inputs) {
            if (const Node *p = v.empty() ? nullptr : g.producer(v)) choices.push_back(group_of.at(p->name));
        }
        const int r = static_cast<int>(rng.uniform(0, 9));
        int k;
        if (r < 6 && !choices.empty()) {
            k = rng.pick(choices);
        } else if (r < 7 && !d.owned.empty()) {
            k = rng.pick_index(d.owned.size());
        } else {
            k = static_cast<int>(d.owned.size());
            d.owned.emplace_back();
            d.copies.emplace_back();
        }
        d.owned[k].insert(n.name);
        group_of[n.name] = k;
    }
    return d;
}

const std::vector<std::string> kKinds = {"elementwise", "broadcast",           "injective",
                                         "reduction",   "complex-out-fusable", "window"};

json random_rules(const Graph &g, Rng &rng, int index) {
    json fuse = json::array();
    for (const std::string &producer : kKinds) {
        if (!rng.chance(0.65)) continue;
        json consumers = json::array();
        for (const std::string &c : kKinds) {
            if (rng.chance(0.5)) consumers.push_back(c);
        }
        if (consumers.empty()) consumers.push_back(rng.pick(kKinds));
        std::vector<std::string> placements = {"compute_at", "root"};
        if (producer != "complex-out-fusable") placements.push_back("inline");
        fuse.push_back({{"producer", producer}, {"consumers", consumers}, {"placement", rng.pick(placements)}});
    }
    json j = {{"format", "hfuse-rules"},
              {"version", 1},
              {"name", "random" + std::to_string(index)},
              {"fuse", fuse},
              {"max_group_ops", rng.chance(0.6) ? 64 : rng.uniform(1, 6)},
              {"max_group_inputs", rng.chance(0.7) ? 16 : rng.uniform(1, 3)},
              {"window_fusion", rng.chance(0.7)},
              {"multi_output", rng.chance(0.7)},
              {"defer_injective", rng.chance(0.7)},
              {"recompute", rng.chance(0.5)}};
    if (rng.chance(0.15)) j["opaque_ops"] = {g.nodes[rng.pick_index(g.nodes.size())].op};
    if (rng.chance(0.1)) j["opaque_nodes"] = {g.nodes[rng.pick_index(g.nodes.size())].name};
    if (rng.chance(0.1)) j["stop_after"] = {g.nodes[rng.pick_index(g.nodes.size())].name};
    return j;
}

// --- Random schedule parameters -------------------------------------------------------------------

struct ScheduleStats {
    int perturbed = 0, rejected = 0;
    std::map<std::string, int> templates;
};

std::vector<int> range_where(int lo, int hi, const std::function<bool(int)> &ok) {
    std::vector<int> v;
    for (int i = lo; i <= hi; i++) {
        if (ok(i)) v.push_back(i);
    }
    return v;
}

// Perturbs the defaults of one group. conv_xv/conv_dw/conv_flat/conv_cv: within the ranges the template accepts, mostly
// values that fit the shapes (so most cases run); other templates: integers scaled by 0.5..1.5.
json perturb_schedule(const FusedGraph &f, const FusedGroup &grp, const json &defaults, Rng &rng) {
    json p = defaults;
    const std::string tmpl = p.value("template", "");
    // A group on its position view: its parameters tile the view's shapes, or, now and then, with the
    // view turned off, the model's.
    bool row = p.value("flatten_positions", false);
    if (row && rng.chance(0.15)) {
        p.erase("flatten_positions");
        row = false;
    }
    Graph view;
    if (row) view = compose::position_view(f.graph, grp);
    const Graph &g = row ? view : f.graph;
    std::set<std::string> out = handed_out_values(f, grp);
    // conv_xv's and conv_flat's input-channel loop unrolled now and then: by up to 5 (past the
    // channels rarely), a count that does not divide them guarding its last step.
    auto perturb_unroll = [&] {
        if (!rng.chance(0.4)) return;
        const Node *conv = g.find_node(grp.master);
        const int cin = static_cast<int>(g.type_of(conv->inputs[1]).shape[1]);
        p["reduction_unroll"] = static_cast<int>(rng.uniform(1, rng.chance(0.93) ? std::min(cin, 5) : 64));
    };
    if (tmpl == "conv_flat" && out.size() == 1 && p.contains("vector_width")) {
        // Register tiles of flattened pixels within blocks of whole rows: mostly tiles that fit a block.
        const Shape t = g.type_of(*out.begin()).shape;
        const int tw = static_cast<int>(t[3]), th = static_cast<int>(t[2]), tc = static_cast<int>(t[1]);
        const bool fit = rng.chance(0.93);
        int vw = p["vector_width"].get<int>();
        if (rng.chance(0.3)) vw = rng.chance(0.8) ? rng.pick<int>({4, 16, 2}) : rng.pick<int>({1, 3, 6, 9});
        if (fit && vw > th * tw) vw = p["vector_width"].get<int>();
        const int rows = fit ? static_cast<int>(rng.uniform(1, th)) : static_cast<int>(rng.uniform(1, 64));
        auto nxs = range_where(1, 4, [&](int nx) { return vw * nx <= rows * tw; });
        const int nc = fit ? static_cast<int>(rng.uniform(1, std::min(12, tc))) : static_cast<int>(rng.uniform(1, 64));
        p["vector_width"] = vw;
        p["block_rows"] = rows;
        p["tile_x_vectors"] = fit && !nxs.empty() ? rng.pick(nxs) : static_cast<int>(rng.uniform(1, 16));
        p["tile_c"] = nc;
        p["channel_block"] =
            fit && nc <= tc ? static_cast<int>(rng.uniform(nc, tc)) : static_cast<int>(rng.uniform(1, 64));
        perturb_unroll();
        return p;
    }
    if (tmpl == "conv_cv" && p.contains("vector_width")) {
        // Register tiles of positions x channel vectors within blocks of rows x channels, the reduction
        // in passes: mostly values that fit (a pass dividing the input channels), else any accepted.
        const Node *conv = g.find_node(grp.master);
        const Shape t = g.type_of(conv->outputs[0]).shape;
        const int th = static_cast<int>(t[2]), tw = static_cast<int>(t[3]), tc = static_cast<int>(t[1]);
        const int cin = static_cast<int>(g.type_of(conv->inputs[0]).shape[1]);
        const bool fit = rng.chance(0.93);
        const int vw = rng.chance(0.3) ? rng.pick<int>({4, 16, 2}) : p["vector_width"].get<int>();
        const int rows = fit ? static_cast<int>(rng.uniform(1, th)) : static_cast<int>(rng.uniform(1, 64));
        const int cb = fit ? static_cast<int>(rng.uniform(1, tc)) : static_cast<int>(rng.uniform(1, 64));
        auto nps = range_where(1, 6, [&](int np) { return np <= rows * tw; });
        auto ncs = range_where(1, 6, [&](int nc) { return nc * vw < cb + vw; });
        auto cibs = range_where(1, cin, [&](int d) { return cin % d == 0; });
        p["vector_width"] = vw;
        p["block_rows"] = rows;
        p["channel_block"] = cb;
        p["tile_positions"] = fit && !nps.empty() ? rng.pick(nps) : static_cast<int>(rng.uniform(1, 16));
        p["tile_c_vectors"] = fit && !ncs.empty() ? rng.pick(ncs) : static_cast<int>(rng.uniform(1, 16));
        p["ci_block"] = fit ? rng.pick(cibs) : static_cast<int>(rng.uniform(1, cin));
        if (rng.chance(0.5)) p["input_at"] = rng.pick<std::string>({"root", "task"});
        // Winograd F(2x2, 3x3) or F(4x4, 3x3) where it fits (3x3, stride and dilation 1), or direct;
        // fitting, in one pass over the input channels and register tiles of at most a row's tiles.
        const Shape &w = g.type_of(conv->inputs[1]).shape;
        const Attributes attrs(conv->attrs);
        const bool unit = attrs.get_ints("strides", {1, 1}) == std::vector<int64_t>{1, 1} &&
                          attrs.get_ints("dilations", {1, 1}) == std::vector<int64_t>{1, 1};
        if (w.size() == 4 && w[2] == 3 && w[3] == 3 && unit && rng.chance(0.5)) {
            p["algorithm"] = rng.pick<std::string>({"winograd", "direct"});
            p.erase("winograd_tile");
            if (p["algorithm"] == "winograd") p["winograd_tile"] = rng.pick<int>({2, 4});
        }
        if (p.value("algorithm", "") == "winograd" && fit) {
            const int m = p.value("winograd_tile", 2);
            p["ci_block"] = cin;
            p["tile_positions"] = static_cast<int>(rng.uniform(1, std::min(6, (tw + m - 1) / m)));
        }
        return p;
    }
    if ((tmpl == "conv_xv" || tmpl == "conv_dw") && out.size() == 1 && p.contains("vector_width")) {
        const Shape t = g.type_of(*out.begin()).shape;  // the tile: the group's output
        int sx = 1, sy = 1;
        bool pooled = false;
        for (const std::string &n : grp.nodes) {
            const Node *node = g.find_node(n);
            pooled = pooled || node->op == "MaxPool" || node->op == "AveragePool";
            if ((node->op == "MaxPool" || node->op == "AveragePool") && node->attrs.contains("strides")) {
                sy = node->attrs["strides"][0].get<int>();
                sx = node->attrs["strides"][1].get<int>();
            }
        }
        const int tw = static_cast<int>(t[3]), th = static_cast<int>(t[2]), tc = static_cast<int>(t[1]);
        const bool fit = rng.chance(0.93);  // otherwise anything within the accepted ranges
        int vw = p["vector_width"].get<int>();
        if (rng.chance(0.3)) vw = rng.chance(0.8) ? rng.pick<int>({4, 16, 2}) : rng.pick<int>({1, 3, 6, 9});
        if (tmpl == "conv_xv") {
            auto nxs = range_where(1, 16, [&](int nx) { return vw * nx % sx == 0 && vw * nx / sx <= tw; });
            if (nxs.empty() && fit) {
                vw = p["vector_width"].get<int>();
                nxs = range_where(1, 16, [&](int nx) { return vw * nx % sx == 0 && vw * nx / sx <= tw; });
            }
            auto nys = range_where(1, 64, [&](int ny) { return ny % sy == 0 && ny / sy <= th; });
            auto ncs = range_where(1, std::min(64, tc), [](int) { return true; });
            p["vector_width"] = vw;
            p["tile_x_vectors"] = fit && !nxs.empty() ? rng.pick(nxs) : static_cast<int>(rng.uniform(1, 16));
            p["tile_y"] = fit && !nys.empty() ? rng.pick(nys) : static_cast<int>(rng.uniform(1, 64));
            p["tile_c"] = fit ? rng.pick(ncs) : static_cast<int>(rng.uniform(1, 64));
            p["reduction_order"] = rng.pick<std::string>({"kx,ci,ky", "ci,kx,ky", "kx,ky,ci"});
            p["channel_loop"] = rng.pick<std::string>({"inner", "outer"});
            perturb_unroll();
            p.erase("input_at");
            if (rng.chance(0.3)) p["input_at"] = rng.pick<std::string>({"task", "root"});  // its input copied per task
            p.erase("row_tasks");
            if (rng.chance(0.3)) {  // a row's tiles in parallel tasks: mostly at most its tiles
                const int tile = vw * p["tile_x_vectors"].get<int>() / sx;
                const int tiles = tile > 0 ? (tw + tile - 1) / tile : 1;
                p["row_tasks"] =
                    fit ? static_cast<int>(rng.uniform(1, std::max(1, tiles))) : static_cast<int>(rng.uniform(1, 64));
            }
            if (pooled && rng.chance(0.3)) {
                p.erase("row_tasks");  // strips split no rows, and read the input as stored
                p.erase("input_at");
                // Strips of the pool's output (all rows, strip_c channels), the register tile within
                // a strip's conv region: any tile up to that region, rows not tied to the pool stride.
                const int strip_c = fit ? static_cast<int>(rng.uniform(1, tc)) : static_cast<int>(rng.uniform(1, 64));
                p["strip_c"] = strip_c;
                if (fit) {
                    auto sxs = range_where(1, 16, [&](int nx) { return vw * nx <= (tw - 1) * sx + 1; });
                    p["tile_x_vectors"] = sxs.empty() ? 1 : rng.pick(sxs);
                    p["tile_y"] = static_cast<int>(rng.uniform(1, std::min(8, (th - 1) * sy + 1)));
                    p["tile_c"] = static_cast<int>(rng.uniform(1, std::min(strip_c, 8)));
                }
            }
        } else {
            if (vw > tw && fit) vw = p["vector_width"].get<int>();
            p["vector_width"] = vw;
            p["tile_y"] =
                fit ? static_cast<int>(rng.uniform(1, std::min(64, th))) : static_cast<int>(rng.uniform(1, 64));
            p["channel_block"] = fit ? static_cast<int>(rng.uniform(1, tc)) : static_cast<int>(rng.uniform(1, 64));
            p.erase("tile_x_vectors");
            if (rng.chance(0.4)) {  // vectors across a tile: mostly as many as the row holds
                const int most = std::max(1, tw / std::max(1, vw));
                p["tile_x_vectors"] =
                    fit ? static_cast<int>(rng.uniform(1, std::min(4, most))) : static_cast<int>(rng.uniform(1, 16));
            }
            // The plane by phase: the lowering refuses it unless the conv is strided across and its
            // plane filled, and the group then runs its defaults.
            bool strided_padded_x = false;  // a conv strided across with a leading pad there
            for (const std::string &n : grp.nodes) {
                const Node *node = g.find_node(n);
                if (node->op != "Conv") continue;
                const json &a = node->attrs;
                strided_padded_x = strided_padded_x || (a.contains("strides") && a["strides"].size() == 2 &&
                                                        a["strides"][1].get<int>() > 1 && a.contains("pads") &&
                                                        a["pads"].size() == 4 && a["pads"][1].get<int>() > 0);
            }
            p.erase("deinterleave_x");
            if (rng.chance(fit && !strided_padded_x ? 0.05 : 0.5)) p["deinterleave_x"] = rng.chance(0.7);
            if (rng.chance(0.5)) {
                // Bands of rows as parallel tasks: up to one a row tile (the last shifting inwards).
                const int row_tiles = (th + p["tile_y"].get<int>() - 1) / p["tile_y"].get<int>();
                p["row_bands"] =
                    fit ? static_cast<int>(rng.uniform(1, row_tiles)) : static_cast<int>(rng.uniform(1, 64));
            }
        }
        return p;
    }
    // A template this test does not know: every integer within +-50%, at least 1; the vector width
    // (which templates take as a power of two) halved, kept or doubled.
    for (auto &kv : p.items()) {
        if (!kv.value().is_number_integer()) continue;
        const int64_t v = kv.value().get<int64_t>();
        if (kv.key() == "vector_width") {
            kv.value() = std::clamp<int64_t>(rng.pick<int64_t>({v / 2, v, v, v * 2}), 1, 64);
        } else {
            kv.value() = std::max<int64_t>(1, std::llround(static_cast<double>(v) * (0.5 + rng.real())));
        }
    }
    return p;
}

// --- Running and comparing ------------------------------------------------------------------------

using Outputs = std::map<std::string, TensorBuffer>;

// Differences between `actual` and `expected` on every model output beyond kTolerance (relative to
// the output's scale); empty when they agree.
std::vector<std::string> compare_outputs(const Graph &model, const Outputs &actual,
                                         const std::map<std::string, reference::RefTensor> &expected,
                                         const std::string &against) {
    std::vector<std::string> problems;
    for (const std::string &out : model.outputs) {
        auto a = actual.find(out);
        auto e = expected.find(out);
        if (a == actual.end() || e == expected.end()) {
            problems.push_back("output '" + out + "' missing");
            continue;
        }
        if (shape_of(a->second) != e->second.shape) {
            problems.push_back("output '" + out + "' has shape [" + to_string(shape_of(a->second)) + "], " + against +
                               " [" + to_string(e->second.shape) + "]");
            continue;
        }
        reference::Comparison cmp = reference::compare(a->second.data(), e->second.data.data(), e->second.data.size());
        if (!(cmp.relative() <= kTolerance)) {  // NaN fails too
            std::ostringstream s;
            s << "output '" << out << "' differs from " << against << ": max abs error " << cmp.max_abs_error
              << " at scale " << cmp.scale << " (relative " << cmp.relative() << ")";
            problems.push_back(s.str());
        }
    }
    return problems;
}

std::map<std::string, reference::RefTensor> as_ref(const Outputs &o) {
    std::map<std::string, reference::RefTensor> r;
    for (const auto &kv : o) {
        r[kv.first] = {shape_of(kv.second),
                       std::vector<float>(kv.second.data(), kv.second.data() + kv.second.number_of_elements())};
    }
    return r;
}

// A generated model with its inputs (as the CLI generates them), unfused and reference results.
struct Model {
    int index = 0;
    uint64_t seed = 0;
    json text;
    Graph graph;       // as written
    Graph simplified;  // what planner plans partition
    test::ModelInputs inputs;
    Outputs unfused;
    std::map<std::string, reference::RefTensor> reference;
    int proposed = 0, refused = 0;
};

Model make_model(int index) {
    Model m;
    m.index = index;
    m.seed = derive_seed(master_seed(), index);
    ModelGen gen("prop_" + std::to_string(index), m.seed);
    m.text = gen.generate();
    m.proposed = gen.proposed;
    m.refused = gen.refused;
    m.graph = load_generated(m.text, "property model " + std::to_string(index));
    m.simplified = simplify(m.graph);
    m.inputs = test::make_inputs(m.graph, 1000);  // the CLI's default inputs: seed 1000 + i
    return m;
}

struct Case {
    int index = 0;
    std::string kind;    // planner, planner2 (two rounds), mutated, partition, as-written
    std::string source;  // how the plan was made, in detail
    FusedGraph plan;
};

Case make_case(const Model &m, int index, ScheduleStats &stats) {
    Case c;
    c.index = index;
    Rng rng(derive_seed(m.seed, index + 1));
    const Graph &g = m.simplified;
    const int source = rng.weighted({0.35, 0.1, 0.3, 0.15, 0.1});
    c.kind = std::vector<std::string>{"planner", "planner2", "mutated", "partition", "as-written"}[source];
    FusedGraph f;
    if (source <= 2) {
        std::vector<RuleSet> rounds;
        const int n = source == 1 ? 2 : 1;
        for (int r = 0; r < n; r++) {
            if (rng.chance(0.5)) {
                const std::string name = rng.pick(builtin_rule_names());
                rounds.push_back(load_rules(name));
                c.source += (r ? "+" : "planner ") + name;
            } else {
                json j = random_rules(g, rng, r);
                rounds.push_back(parse_rules(j, "random rules"));
                c.source += (r ? "+" : "planner ") + j.dump();
            }
        }
        f = plan_fusion(m.graph, rounds);
        if (source == 2) {
            Draft d = draft_of(f);
            c.source += "; mutated:";
            const int steps = static_cast<int>(rng.uniform(1, 4));
            for (int s = 0; s < steps; s++) mutate(d, g, rng, c.source);
            FusedGraph mutated = plan_of(d, g, true, f.rules);
            f = mutated;
        }
    } else {
        const bool written = source == 4;  // a plan over the model as written
        const Graph &over = written ? m.graph : g;
        c.source = written ? "random partition of the model as written" : "random partition";
        f = singleton_groups(over);
        for (int attempt = 0; attempt < 30; attempt++) {
            try {
                f = plan_of(random_partition(over, rng), over, !written, {});
                break;
            } catch (const Error &) {
            }
        }
        f.rewritten = !written;
        if (!written && rng.chance(0.5)) {
            Draft d = draft_of(f);
            c.source += "; mutated:";
            for (int s = 0; s < 2; s++) mutate(d, g, rng, c.source);
            f = plan_of(d, g, true, {});
        }
    }
    f = random_placements(f, rng);
    // Schedules: defaults (sometimes left out: the executor computes them), perturbed per group.
    const Halide::Target target = Halide::get_jit_target_from_environment();
    const int mode = rng.weighted({0.1, 0.1, 0.8});  // none, defaults, perturbed
    for (FusedGroup &grp : f.groups) {
        if (mode == 0) continue;
        json d = default_schedule_params(f.graph, grp, target);
        grp.schedule = d;
        if (mode == 2 && rng.chance(0.9)) grp.schedule = perturb_schedule(f, grp, d, rng);
    }
    c.plan = f;
    return c;
}

std::string shell_quote(const std::string &s) {
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}

// Writes the case's model and plan; returns the directory and the command reproducing it.
std::pair<std::string, std::string> save_case(const Model &m, const FusedGraph &plan, int case_index) {
    std::string dir = testing::TempDir();
    if (!dir.empty() && dir.back() != '/') dir += '/';
    dir += "hfuse_property_" + std::to_string(master_seed()) + "_" + std::to_string(case_index);
    mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/model.json") << m.text.dump(1) << "\n";
    std::ofstream(dir + "/plan.json") << plan_to_json(plan).dump(2) << "\n";
    const std::string cmd = std::string(HFUSE_CLI) + " run " + shell_quote(dir + "/model.json") + " --plan " +
                            shell_quote(dir + "/plan.json") + " --check";
    return {dir, cmd};
}

// Bugs found by this test and reported (tests/data/property_failures/README.md), recognised by their
// symptoms. They fail the test like any other; with HFUSE_PROPERTY_TOLERATE_KNOWN=1 they are only
// counted, so that a run can look past them for new ones. Remove an entry once its bug is fixed.
std::string known_bug(const std::vector<std::string> &problems, const FusedGraph &plan) {
    if (!std::getenv("HFUSE_PROPERTY_TOLERATE_KNOWN") || problems.size() != 1) return "";
    const std::string &p = problems[0];
    bool conv_xv = false, gemm = false, vw_mod8_1 = false;
    for (const FusedGroup &grp : plan.groups) {
        const json sch = grp.schedule.empty()
                             ? default_schedule_params(plan.graph, grp, Halide::get_jit_target_from_environment())
                             : grp.schedule;
        conv_xv = conv_xv || sch.value("template", "") == "conv_xv";
        gemm = gemm || sch.value("template", "").rfind("gemm", 0) == 0;
        const int vw = sch.contains("vector_width") && sch["vector_width"].is_number_integer()
                           ? sch["vector_width"].get<int>()
                           : 0;
        vw_mod8_1 = vw_mod8_1 || (vw > 1 && vw % 8 == 1);
    }
    if (p.find("conv_dw takes no window consumer") != std::string::npos) return "dwconv_maxpool";
    if (conv_xv && p.find("Halide runtime error") != std::string::npos && p.find("is accessed at") != std::string::npos)
        return "conv_nopad_maxpool";
    if (vw_mod8_1 && p.find("verifyFunction") != std::string::npos) return "vector_width_9";
    if (p.find("reorder_storage must have at least two dimensions") != std::string::npos) return "softmax_rank1";
    if (gemm && p.find("Halide runtime error") != std::string::npos && p.find("is accessed at") != std::string::npos)
        return "matmul_slice_rows";
    return "";
}

struct CaseResult {
    std::vector<std::string> problems;
    int rejected = 0;                     // groups whose perturbed schedule the composer rejected
    std::vector<std::string> rejections;  // the composer's messages
    std::string dir, command;
};

// Runs one case (falling back to default schedules for groups whose parameters are rejected) and
// compares it with the unfused run and the reference. `corrupt` damages the result (meta-test).
CaseResult run_case(const Model &m, Case &c, bool corrupt = false) {
    CaseResult r;
    const Halide::Target target = Halide::get_jit_target_from_environment();
    Outputs actual;
    for (int attempt = 0;; attempt++) {
        try {
            Executor ex(c.plan);
            actual = ex.run(m.inputs.buffers);
            break;
        } catch (const Error &e) {
            // A parameter the template rejects: that group goes back to its defaults.
            bool reset = false;
            if (e.field().rfind("schedule.", 0) == 0 && attempt < 32) {
                for (FusedGroup &grp : c.plan.groups) {
                    json d = default_schedule_params(c.plan.graph, grp, target);
                    const bool holds = std::count(grp.nodes.begin(), grp.nodes.end(), e.node()) > 0;
                    if (grp.schedule.empty() || grp.schedule == d || (!holds && !e.node().empty())) continue;
                    grp.schedule = d;
                    reset = true;
                }
            }
            if (reset) {
                r.rejected++;
                r.rejections.push_back(e.what());
                continue;
            }
            r.problems.push_back(std::string("the executor failed: ") + e.what());
            break;
        } catch (const std::exception &e) {
            r.problems.push_back(std::string("the executor threw ") + e.what());
            break;
        }
    }
    if (r.problems.empty()) {
        if (corrupt) {  // one element off by 1% of the output's scale
            TensorBuffer &b = actual.begin()->second;
            float scale = 1e-3f;
            for (int64_t i = 0; i < b.number_of_elements(); i++) scale = std::max(scale, std::fabs(b.data()[i]));
            b.data()[b.number_of_elements() / 2] += 1e-2f * scale;
        }
        for (auto &p : compare_outputs(m.graph, actual, as_ref(m.unfused), "the unfused run")) r.problems.push_back(p);
        for (auto &p : compare_outputs(m.graph, actual, m.reference, "the reference")) r.problems.push_back(p);
    }
    // Every fourth case also as one pipeline (the form `hfuse compile` writes), run by JIT.
    if (r.problems.empty() && !corrupt && c.index % 4 == 0) {
        try {
            Outputs one = ModelPipeline(c.plan).run(m.inputs.buffers);
            for (auto &p : compare_outputs(m.graph, one, m.reference, "the reference (one pipeline)"))
                r.problems.push_back(p);
        } catch (const std::exception &e) {
            r.problems.push_back(std::string("the one-pipeline form failed: ") + e.what());
        }
    }
    if (!r.problems.empty()) std::tie(r.dir, r.command) = save_case(m, c.plan, c.index);
    return r;
}

std::string describe_failure(const Model &m, const Case &c, const CaseResult &r) {
    std::ostringstream s;
    s << "property case " << c.index << " (master seed " << master_seed() << ", model " << m.index << ", plan "
      << c.source << ") fails:\n";
    for (const std::string &p : r.problems) s << "  " << p << "\n";
    s << plan_table(c.plan) << "\nmodel: " << r.dir << "/model.json\nplan:  " << r.dir << "/plan.json\n"
      << "reproduce: " << r.command << "\n"
      << "rerun the case: HFUSE_PROPERTY_SEED=" << master_seed() << " HFUSE_PROPERTY_CASE=" << c.index
      << " hfuse_tests --gtest_filter='Property*'\n";
    return s.str();
}

// Builds a model's unfused baseline and reference; false (with a failure) if they disagree already.
bool prepare_baseline(Model &m, std::map<std::string, int> *known = nullptr) {
    try {
        Executor ex(singleton_groups(m.graph));
        m.unfused = ex.run(m.inputs.buffers);
    } catch (const std::exception &e) {
        auto [dir, cmd] = save_case(m, singleton_groups(m.graph), m.index * kPlansPerModel);
        if (const std::string bug = known_bug({e.what()}, singleton_groups(m.graph)); known && !bug.empty()) {
            (*known)[bug]++;
            std::printf("[property] model %d: known bug %s (%s)\n", m.index, bug.c_str(), dir.c_str());
            return false;
        }
        ADD_FAILURE() << "model " << m.index << " (seed " << m.seed << "): the unfused run failed: " << e.what()
                      << "\nmodel: " << dir << "/model.json (plan.json: the unfused plan)\nreproduce: " << cmd;
        return false;
    }
    m.reference = reference::run(m.graph, m.inputs.reference);
    auto problems = compare_outputs(m.graph, m.unfused, m.reference, "the reference");
    if (!problems.empty()) {
        FusedGraph unfused = singleton_groups(m.graph);
        auto [dir, cmd] = save_case(m, unfused, m.index * kPlansPerModel);
        std::string all;
        for (auto &p : problems) all += "  " + p + "\n";
        ADD_FAILURE() << "model " << m.index << ": the unfused run differs from the reference:\n"
                      << all << "model: " << dir << "/model.json (plan.json: the unfused plan)\nreproduce: " << cmd;
        return false;
    }
    return true;
}

// A model or plan, one line per node or group (for traces).
std::string compact(const json &j) {
    std::string s;
    for (const auto &kv : j.items()) {
        if (kv.value().is_array() && (kv.key() == "nodes" || kv.key() == "groups")) {
            s += "\"" + kv.key() + "\":\n";
            for (const json &e : kv.value()) s += "  " + e.dump() + "\n";
        } else {
            s += "\"" + kv.key() + "\": " + kv.value().dump() + "\n";
        }
    }
    return s;
}

// --- The property test: shards of cases -----------------------------------------------------------

class PropertyShard : public testing::TestWithParam<int> {};

TEST_P(PropertyShard, Cases) {
    const int shard = GetParam(), cases = num_cases(), only = only_case();
    const int models = (cases + kPlansPerModel - 1) / kPlansPerModel;
    ScheduleStats stats;
    int ran = 0, failed = 0, rejected_cases = 0, proposed = 0, refused = 0, nodes = 0, groups = 0;
    std::map<std::string, int> sources, mutations, known;
    const Halide::Target target = Halide::get_jit_target_from_environment();
    const auto start = std::chrono::steady_clock::now();
    for (int mi = shard; mi < models; mi += kShards) {
        if (only >= 0 && only / kPlansPerModel != mi) continue;
        Model m = make_model(mi);
        proposed += m.proposed;
        refused += m.refused;
        if (only >= 0) std::printf("model %d:\n%s\n", mi, compact(m.text).c_str());
        std::map<std::string, int> known_here;
        const bool baseline = prepare_baseline(m, &known_here);
        for (const auto &kv : known_here) known[kv.first] += kv.second;
        if (!baseline) {
            failed += known_here.empty();
            continue;
        }
        std::set<json> seen;  // identical plans (with schedules) are run once
        for (int j = 0; j < kPlansPerModel; j++) {
            const int ci = mi * kPlansPerModel + j;
            if (ci >= cases) continue;
            Case c;  // made even when only one case runs, so the duplicate check sees the same plans
            try {
                c = make_case(m, ci, stats);
                for (int retry = 1; retry < 4 && seen.count(plan_to_json(c.plan)); retry++) {
                    c = make_case(m, ci + retry * cases, stats);
                    c.index = ci;
                }
            } catch (const std::exception &e) {
                ADD_FAILURE() << "case " << ci << " (model " << mi << "): making the plan failed: " << e.what();
                failed++;
                continue;
            }
            seen.insert(plan_to_json(c.plan));
            if (only >= 0 && ci != only) continue;
            sources[c.kind]++;
            if (only >= 0)
                std::printf("case %d: %s\n%s\n", ci, c.source.c_str(), compact(plan_to_json(c.plan)).c_str());
            for (const FusedGroup &grp : c.plan.groups) {
                if (!grp.schedule.empty() && grp.schedule != default_schedule_params(c.plan.graph, grp, target))
                    stats.perturbed++;
            }
            CaseResult r = run_case(m, c);
            ran++;
            nodes += static_cast<int>(m.simplified.nodes.size());
            groups += static_cast<int>(c.plan.groups.size());
            stats.rejected += r.rejected;
            for (const FusedGroup &grp : c.plan.groups) {  // the templates that ran
                const json sch =
                    grp.schedule.empty() ? default_schedule_params(c.plan.graph, grp, target) : grp.schedule;
                stats.templates[sch.value("template", "?")]++;
            }
            for (const std::string mutation : {"merge", "recompute", "dissolve"}) {
                const std::string key = " " + mutation + (mutation == "recompute" ? " " : "");
                for (size_t at = c.source.find(key); at != std::string::npos; at = c.source.find(key, at + 1))
                    mutations[mutation]++;
            }
            rejected_cases += r.rejected > 0;
            for (const std::string &why : r.rejections)
                std::printf("[property] case %d: rejected: %s\n", ci, why.c_str());
            if (const std::string bug = known_bug(r.problems, c.plan); !bug.empty()) {
                known[bug]++;
                std::printf("[property] case %d: known bug %s (%s)\n", ci, bug.c_str(), r.dir.c_str());
            } else if (!r.problems.empty()) {
                failed++;
                ADD_FAILURE() << describe_failure(m, c, r);
            }
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "[property] shard %d/%d, seed %llu: %d cases (%d failed) in %.1f s; %d nodes, %d groups; "
        "schedules: %d perturbed, %d rejected (in %d cases); generator: %d of %d proposed nodes refused\n",
        shard, kShards, static_cast<unsigned long long>(master_seed()), ran, failed, secs, nodes, groups,
        stats.perturbed, stats.rejected, rejected_cases, refused, proposed);
    std::string tmpl, src;
    for (const auto &kv : stats.templates) tmpl += " " + kv.first + "=" + std::to_string(kv.second);
    for (const auto &kv : sources) src += " " + kv.first + "=" + std::to_string(kv.second);
    for (const auto &kv : mutations) src += " " + kv.first + "=" + std::to_string(kv.second);
    for (const auto &kv : known) src += "; known bug " + kv.first + ": " + std::to_string(kv.second) + " cases";
    std::printf("[property] groups by template:%s; plan sources:%s\n", tmpl.c_str(), src.c_str());
    // Most perturbed schedules must be usable, or the schedule dimension tests little.
    if (stats.perturbed >= 8) EXPECT_LE(stats.rejected * 3, stats.perturbed) << "too many rejected schedules";
}

INSTANTIATE_TEST_SUITE_P(Property, PropertyShard, testing::Range(0, kShards));

// --- Meta-tests: the property test can fail, and its files reproduce --------------------------------

// The first generated model (past the property cases) whose x86 plan has a conv_xv or conv_cv group (so
// schedules matter) and passes, and that case.
struct MetaCase {
    Model model;
    Case c;
};

MetaCase meta_case() {
    for (int mi = 1000000; mi < 1000000 + 200; mi++) {
        Model m = make_model(mi);
        FusedGraph f = with_default_schedules(plan_fusion(m.graph, {load_rules("x86")}),
                                              Halide::get_jit_target_from_environment());
        bool conv = false;
        for (const FusedGroup &grp : f.groups) {
            const std::string tmpl = grp.schedule.value("template", "");
            conv = conv || tmpl == "conv_xv" || tmpl == "conv_cv";
        }
        if (!conv || f.groups.size() > 3) continue;
        Case c;
        c.index = mi * kPlansPerModel;
        c.source = "x86";
        c.plan = f;
        try {
            Executor ex(singleton_groups(m.graph));
            m.unfused = ex.run(m.inputs.buffers);
            m.reference = reference::run(m.graph, m.inputs.reference);
            Outputs fused = Executor(f).run(m.inputs.buffers);
            // A bug the property cases report; the meta-tests need a working case.
            if (!compare_outputs(m.graph, m.unfused, m.reference, "the reference").empty() ||
                !compare_outputs(m.graph, fused, m.reference, "the reference").empty())
                continue;
        } catch (const std::exception &) {
            continue;
        }
        return {std::move(m), std::move(c)};
    }
    throw std::runtime_error("no generated model has a working conv_xv or conv_cv group under x86");
}

TEST(PropertyMeta, ComparisonCatchesWrongResults) {
    MetaCase mc = meta_case();
    // The untouched case passes, a corrupted result does not (and is saved).
    CaseResult ok = run_case(mc.model, mc.c);
    EXPECT_TRUE(ok.problems.empty()) << describe_failure(mc.model, mc.c, ok);
    CaseResult bad = run_case(mc.model, mc.c, /*corrupt=*/true);
    ASSERT_EQ(bad.problems.size(), 2u) << "a corrupted output must differ from the unfused run and the reference";
    EXPECT_NE(bad.problems[0].find("the unfused run"), std::string::npos) << bad.problems[0];
    EXPECT_NE(bad.command.find("--check"), std::string::npos);

    // A wrong plan: the same nodes over a model with different weights computes different outputs.
    json other = mc.model.text;
    for (auto &kv : other["weights"].items()) {
        if (kv.value().contains("seed")) kv.value()["seed"] = kv.value()["seed"].get<uint64_t>() + 7;
    }
    FusedGraph wrong = mc.c.plan;
    wrong.graph = simplify(load_generated(other, "meta"));
    Outputs out = Executor(wrong).run(mc.model.inputs.buffers);
    EXPECT_FALSE(compare_outputs(mc.model.graph, out, as_ref(mc.model.unfused), "the unfused run").empty());
    // And a missing output or a wrong shape is reported, not skipped.
    Outputs missing;
    EXPECT_FALSE(compare_outputs(mc.model.graph, missing, mc.model.reference, "the reference").empty());
    Outputs nan;
    for (const auto &kv : mc.model.unfused) {
        nan[kv.first] = kv.second.copy();
        nan[kv.first].data()[0] = NAN;
    }
    EXPECT_FALSE(compare_outputs(mc.model.graph, nan, mc.model.reference, "the reference").empty());
}

TEST(PropertyMeta, SavedFilesReproduceWithTheCli) {
    MetaCase mc = meta_case();
    // Perturb the schedules, so the plan file has to carry them.
    Rng rng(42);
    for (FusedGroup &grp : mc.c.plan.groups) grp.schedule = perturb_schedule(mc.c.plan, grp, grp.schedule, rng);
    CaseResult run = run_case(mc.model, mc.c);  // groups whose parameters are rejected get their defaults
    ASSERT_TRUE(run.problems.empty()) << describe_failure(mc.model, mc.c, run);
    auto [dir, cmd] = save_case(mc.model, mc.c.plan, mc.c.index);
    // The files describe the same model and plan, schedules included.
    Graph model = load_model(dir + "/model.json");
    FusedGraph back = read_plan_for_model(dir + "/plan.json", model);
    EXPECT_EQ(plan_to_json(back)["groups"], plan_to_json(mc.c.plan)["groups"]);
    // The CLI loads them, generates the same inputs and checks against the reference.
    test::CommandResult r = test::run_command(cmd);
    EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("seed 1000"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(": ok"), std::string::npos) << r.out;
    // A plan over the model as written ("rewritten": false) reproduces too.
    auto [dir2, cmd2] = save_case(mc.model, singleton_groups(mc.model.graph), mc.c.index + 1);
    EXPECT_FALSE(plan_to_json(read_plan_for_model(dir2 + "/plan.json", model))["rewritten"].get<bool>());
    r = test::run_command(cmd2);
    EXPECT_EQ(r.code, 0) << cmd2 << "\n" << r.out;
}

}  // namespace
}  // namespace hfuse
