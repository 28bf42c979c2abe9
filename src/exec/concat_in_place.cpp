#include "exec/concat_in_place.h"

#include "hfuse/attributes.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace hfuse::exec {
namespace {

int64_t elements(const Shape &shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

// Values placed relative to each other, as a union-find whose links carry offsets: a value lies
// `offset` floats past its parent's start. Each set is one storage; its root records the span of
// its values (from the root's start) and the ranges of the values groups write.
class Placement {
public:
    struct Found {
        std::string root;
        int64_t offset;  // from the root's start
    };

    Found find(const std::string &v) {
        auto it = parent_.find(v);
        if (it == parent_.end()) return {v, 0};
        Found up = find(it->second.first);
        it->second = {up.root, it->second.second + up.offset};  // path compression
        return {up.root, it->second.second};
    }

    // Adds `v` (`size` floats, written by a group unless `written` is false) as a set of its own.
    void add(const std::string &v, int64_t size, bool written) {
        if (sets_.count(v) || parent_.count(v)) return;
        Set s;
        s.lo = 0;
        s.hi = size;
        if (written) s.written.push_back({0, size});
        sets_[v] = s;
    }

    // Places `a` `delta` floats past `b`; false (nothing changed) where that contradicts the
    // placement so far or makes two written values overlap.
    bool join(const std::string &a, const std::string &b, int64_t delta) {
        const Found fa = find(a), fb = find(b);
        if (fa.root == fb.root) return fa.offset == fb.offset + delta;
        // The root of a's set goes under b's root, at pos(a) - offset(a) = pos(b) + delta - offset(a).
        const int64_t shift = fb.offset + delta - fa.offset;
        const Set &sa = sets_.at(fa.root);
        Set merged = sets_.at(fb.root);
        merged.lo = std::min(merged.lo, sa.lo + shift);
        merged.hi = std::max(merged.hi, sa.hi + shift);
        for (const auto &[lo, hi] : sa.written) merged.written.push_back({lo + shift, hi + shift});
        std::sort(merged.written.begin(), merged.written.end());
        for (size_t i = 1; i < merged.written.size(); i++) {
            if (merged.written[i].first < merged.written[i - 1].second) return false;
        }
        sets_[fb.root] = std::move(merged);
        sets_.erase(fa.root);
        parent_[fa.root] = {fb.root, shift};
        return true;
    }

    // Every value with its set's root, its offset from the storage's start, and the storage's floats.
    std::map<std::string, SharedSlice> slices(const std::set<std::string> &values) {
        std::map<std::string, SharedSlice> out;
        for (const std::string &v : values) {
            const Found f = find(v);
            const Set &s = sets_.at(f.root);
            out[v] = {f.root, s.hi - s.lo, f.offset - s.lo};
        }
        return out;
    }

private:
    struct Set {
        int64_t lo = 0, hi = 0;
        std::vector<std::pair<int64_t, int64_t>> written;
    };
    std::map<std::string, std::pair<std::string, int64_t>> parent_;  // value -> (parent, offset in it)
    std::map<std::string, Set> sets_;                                // by root
};

}  // namespace

InPlaceConcats place_concats_in_place(const FusedGraph &plan, const ValueLayouts &layouts) {
    const Graph &g = plan.graph;
    const std::set<std::string> returned(g.outputs.begin(), g.outputs.end());
    // Floats passed between groups or given to the model, stored dense.
    auto dense = [&](const std::string &v) {
        return !v.empty() && !g.is_weight(v) && !layouts.count(v) && g.type_of(v).dtype == DType::Float32;
    };
    // Those of them the executor allocates.
    auto storable = [&](const std::string &v) { return dense(v) && !g.is_input(v) && !returned.count(v); };
    InPlaceConcats out;
    Placement placement;
    std::set<std::string> placed;                // the values of shared storages
    for (const FusedGroup &grp : plan.groups) {  // in plan order: a Concat's inputs are placed before it
        if (grp.nodes.size() != 1 || !grp.backend.empty()) continue;
        const Node &n = *g.find_node(grp.nodes[0]);
        if (n.op != "Concat" || n.outputs.size() != 1) continue;
        const std::string &c = n.outputs[0];
        const Shape &shape = g.type_of(c).shape;
        int axis = static_cast<int>(Attributes(n.attrs).get_int("axis"));
        if (axis < 0) axis += static_cast<int>(shape.size());
        if (!dense(c) || !std::all_of(n.inputs.begin(), n.inputs.end(), dense)) continue;
        ConcatCopy copy;
        for (int d = 0; d < axis; d++) copy.outer *= shape[d];
        for (const std::string &v : n.inputs) copy.runs.push_back(elements(g.type_of(v).shape) / copy.outer);
        out.copies[grp.name] = copy;  // unless placed below
        // Slices are contiguous where every dim outside the axis has extent 1.
        if (copy.outer != 1 || !storable(c)) continue;
        std::set<std::string> inputs(n.inputs.begin(), n.inputs.end());
        if (inputs.size() != n.inputs.size() || !std::all_of(n.inputs.begin(), n.inputs.end(), storable)) continue;
        // Tried on a copy: kept only if every input takes its place.
        Placement tried = placement;
        tried.add(c, elements(shape), false);
        bool fits = true;
        int64_t begin = 0;
        for (const std::string &v : n.inputs) {
            const int64_t size = elements(g.type_of(v).shape);
            tried.add(v, size, true);  // a no-op for a value placed before (an earlier Concat's output: not written)
            fits = fits && tried.join(v, c, begin);
            begin += size;
        }
        if (!fits) continue;
        placement = std::move(tried);
        placed.insert(c);
        placed.insert(n.inputs.begin(), n.inputs.end());
        out.groups.insert(grp.name);
        out.copies.erase(grp.name);
    }
    out.slices = placement.slices(placed);
    return out;
}

void copy_concat(const ConcatCopy &copy, const std::vector<const float *> &inputs, float *output) {
    for (int64_t o = 0; o < copy.outer; o++) {
        for (size_t i = 0; i < inputs.size(); i++) {
            const int64_t run = copy.runs[i];
            std::memcpy(output, inputs[i] + o * run, sizeof(float) * run);
            output += run;
        }
    }
}

}  // namespace hfuse::exec
