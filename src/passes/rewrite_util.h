// Helpers shared by the graph rewrites (fold_constants, remove_identities, fold_batchnorm, fuse_layer_norm,
// fuse_gelu): queries
// about how values are used, rewiring, fresh names, and removing what a rewrite left unused.
#pragma once

#include "hfuse/graph.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace hfuse::passes {

inline bool is_model_output(const Graph &g, const std::string &value) {
    return std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end();
}

// How many node input slots read `value` (a node reading it twice counts twice).
inline int count_uses(const Graph &g, const std::string &value) {
    int uses = 0;
    for (const Node &n : g.nodes) uses += static_cast<int>(std::count(n.inputs.begin(), n.inputs.end(), value));
    return uses;
}

// Index in g.nodes of the node producing `value`, or -1 for inputs and weights.
inline int producer_index(const Graph &g, const std::string &value) {
    for (size_t i = 0; i < g.nodes.size(); i++) {
        const std::vector<std::string> &outs = g.nodes[i].outputs;
        if (std::find(outs.begin(), outs.end(), value) != outs.end()) return static_cast<int>(i);
    }
    return -1;
}

// The weight named `value` if it is a float32 weight, else nullptr.
inline const Constant *float_weight(const Graph &g, const std::string &value) {
    auto it = g.weights.find(value);
    return it != g.weights.end() && it->second.type.dtype == DType::Float32 ? &it->second : nullptr;
}

// Index in g.nodes of the one node reading `value` once, or -1 (no reader, several, or a model output:
// a value a pattern rewrite may fold away).
inline int sole_reader(const Graph &g, const std::string &value) {
    if (is_model_output(g, value) || count_uses(g, value) != 1) return -1;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        const std::vector<std::string> &in = g.nodes[i].inputs;
        if (std::find(in.begin(), in.end(), value) != in.end()) return static_cast<int>(i);
    }
    return -1;
}

// The value of `value` if it is a float32 weight holding one value (any shape of extent-1 dims).
inline bool float_scalar(const Graph &g, const std::string &value, float *out) {
    const Constant *k = float_weight(g, value);
    if (!k || k->f32.size() != 1) return false;
    *out = k->f32[0];
    return true;
}

// Makes every node that reads `from` read `to` instead.
inline void replace_uses(Graph &g, const std::string &from, const std::string &to) {
    for (Node &n : g.nodes) std::replace(n.inputs.begin(), n.inputs.end(), from, to);
}

// `base`, or `base.1`, `base.2`, ... : the first name no input, weight or node output uses yet.
inline std::string fresh_value_name(const Graph &g, const std::string &base) {
    auto taken = [&](const std::string &v) { return g.is_input(v) || g.is_weight(v) || producer_index(g, v) >= 0; };
    std::string name = base;
    for (int k = 1; taken(name); k++) name = base + "." + std::to_string(k);
    return name;
}

// Records that `into` now stands for `removed` too (and for whatever `removed` had absorbed).
inline void absorb(Node &into, const Node &removed) {
    into.absorbed.push_back(removed.name);
    into.absorbed.insert(into.absorbed.end(), removed.absorbed.begin(), removed.absorbed.end());
}

// The other input of binary node `n` than `value`, or "" when `value` is not one of its two inputs.
inline std::string other_input(const Node &n, const std::string &value) {
    if (n.inputs.size() != 2) return "";
    if (n.inputs[0] == value) return n.inputs[1];
    if (n.inputs[1] == value) return n.inputs[0];
    return "";
}

// After a rewrite dropped the readers of `values`: erases those that nothing reads any more and that
// are not model outputs -- weights, and nodes none of whose outputs is used (then, in turn, their
// inputs). Only values the rewrite orphaned are considered: dead code of the user's model stays.
inline void drop_if_unused(Graph &g, std::vector<std::string> values) {
    while (!values.empty()) {
        const std::string v = values.back();
        values.pop_back();
        if (v.empty() || g.is_input(v) || is_model_output(g, v) || count_uses(g, v) > 0) continue;
        if (g.is_weight(v)) {
            g.weights.erase(v);
            continue;
        }
        const int p = producer_index(g, v);
        if (p < 0) continue;
        const Node &n = g.nodes[p];
        bool dead = std::all_of(n.outputs.begin(), n.outputs.end(),
                                [&](const std::string &o) { return !is_model_output(g, o) && count_uses(g, o) == 0; });
        if (!dead) continue;
        values.insert(values.end(), n.inputs.begin(), n.inputs.end());
        g.nodes.erase(g.nodes.begin() + p);
    }
}

// Replaces the nodes at `pattern` (indices into g.nodes) by `into`, which takes the place of the
// last of them (its inputs, read from before the pattern, come earlier) and the name of
// g.nodes[named_after], absorbing every pattern node; weights the pattern alone read go.
inline void replace_pattern(Graph &g, std::vector<size_t> pattern, size_t named_after, Node into) {
    into.name = g.nodes[named_after].name;
    into.absorbed = g.nodes[named_after].absorbed;
    std::vector<std::string> orphaned;
    for (size_t k : pattern) {
        if (k != named_after) absorb(into, g.nodes[k]);
        for (const std::string &v : g.nodes[k].inputs) {
            if (g.is_weight(v)) orphaned.push_back(v);
        }
    }
    std::sort(pattern.rbegin(), pattern.rend());
    g.nodes[pattern.front()] = std::move(into);
    for (size_t i = 1; i < pattern.size(); i++)
        g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(pattern[i]));
    drop_if_unused(g, orphaned);
}

}  // namespace hfuse::passes
