#include "compose/position_view.h"

#include "hfuse/attributes.h"
#include "hfuse/error.h"
#include "hfuse/op_registry.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <set>

namespace hfuse::compose {
namespace {

// The last two dims of `shape` (empty below rank 2).
Shape last_two(const Shape &shape) {
    return shape.size() < 2 ? Shape{} : Shape(shape.end() - 2, shape.end());
}

// Why node `n` (of the group whose positions are `plane`) reads a position other than the one it
// computes, or a broadcast the view would change; "" if it reads none. Outputs of a 1x1 plane (all
// their operands 1x1 too) stay as they are in the view.
std::string node_blocker(const Graph &g, const Node &n, const Shape &plane) {
    const std::string who = "'" + n.name + "' (" + n.op + ")";
    for (const std::string &v : n.outputs) {
        const TensorType &t = g.type_of(v);
        if (t.rank() != 4 || (last_two(t.shape) != plane && last_two(t.shape) != Shape{1, 1})) {
            return who + " has an output of another plane than the group's";
        }
    }
    if (n.op == "Conv") {
        const Attributes a(n.attrs);
        const Shape &w = g.type_of(n.inputs[1]).shape;
        const std::vector<int64_t> pads = a.get_ints("pads", {}), strides = a.get_ints("strides", {1, 1});
        const bool pointwise = w.size() == 4 && w[2] == 1 && w[3] == 1 &&
                               a.get_string("auto_pad", "NOTSET") != "SAME_UPPER" &&
                               a.get_string("auto_pad", "NOTSET") != "SAME_LOWER" &&
                               std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 1; }) &&
                               std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
        return pointwise ? "" : who + " is no 1x1, stride-1, unpadded conv";
    }
    if (n.op == "BatchNormalization") return "";  // per channel
    const PatternKind kind = find_op(n.op)->kind;
    if (kind == PatternKind::Elementwise) return "";  // its other inputs are constants read at lowering
    if (kind == PatternKind::Broadcast && n.inputs.size() == 2) {
        // Numpy broadcasting aligns the last dims: an operand spanning the plane or constant across it
        // broadcasts the same over the row; one of (1, W) or (H, 1) would not.
        for (const std::string &v : n.inputs) {
            const Shape &s = g.type_of(v).shape;
            const bool fits =
                s.empty() || (s.size() == 1 && s[0] == 1) || last_two(s) == plane || last_two(s) == Shape{1, 1};
            if (!fits) return who + " broadcasts '" + v + "' [" + to_string(s) + "] along the rows or columns";
            // (Weights are lowered from the model's buffers, in its dims.)
            if (g.is_weight(v) && last_two(s) == plane) return who + " reads '" + v + "', a constant over the plane";
        }
        return "";
    }
    return who + " reads positions other than its own";
}

}  // namespace

Shape group_plane(const Graph &g, const FusedGroup &grp) {
    Shape plane = last_two(g.type_of(g.find_node(grp.master)->outputs[0]).shape);
    if (plane.size() != 2) return plane;
    for (const std::string &name : grp.nodes) {
        for (const std::string &v : g.find_node(name)->outputs) {
            const Shape &s = g.type_of(v).shape;
            if (s.size() == 4 && s[2] * s[3] > plane[0] * plane[1]) plane = last_two(s);
        }
    }
    return plane;
}

std::string position_view_blocker(const Graph &g, const FusedGroup &grp) {
    const Node *master = g.find_node(grp.master);
    if (!master || master->outputs.empty()) return "the group has no master";
    const TensorType &out = g.type_of(master->outputs[0]);
    if (out.rank() != 4) return "the master's output is not 4-D";
    const Shape plane = group_plane(g, grp);
    for (const std::string &name : grp.nodes) {
        if (std::string why = node_blocker(g, *g.find_node(name), plane); !why.empty()) return why;
    }
    return "";
}

Shape as_position_row(const Shape &shape, const Shape &plane) {
    if (shape.size() < 2 || last_two(shape) != plane) return shape;
    Shape row(shape.begin(), shape.end() - 2);
    row.push_back(1);
    row.push_back(plane[0] * plane[1]);
    return row;
}

Graph position_view(const Graph &g, const FusedGroup &grp) {
    if (std::string why = position_view_blocker(g, grp); !why.empty()) {
        throw Error("internal: group " + grp.name + " has no position view: " + why);
    }
    // The group's nodes as a graph of their own, every value seen as a row of its positions.
    const Shape plane = group_plane(g, grp);
    Graph view = subgraph(g, std::set<std::string>(grp.nodes.begin(), grp.nodes.end()));
    for (auto &[value, t] : view.types) t.shape = as_position_row(t.shape, plane);
    for (auto &[value, c] : view.weights) c.type = view.types.at(value);
    for (GraphInput &in : view.inputs) in.shape = view.types.at(in.name).shape;
    return view;
}

bool flattens_positions(const nlohmann::json &schedule) {
    return schedule.is_object() && schedules::param_bool_or(schedule, "flatten_positions", false);
}

TensorBuffer reshaped(const TensorBuffer &buffer, const Shape &shape) {
    const int n = buffer.dimensions();
    std::vector<halide_dimension_t> dims(shape.size());
    int k = 0;  // the buffer's next dim, Halide order (innermost first)
    bool fits = true;
    for (size_t j = 0; j < shape.size() && fits; j++) {
        const int64_t extent = shape[shape.size() - 1 - j];
        // The buffer's dims that make up this one, each continuing the one before (dims of extent 1
        // aside, whose strides say nothing).
        int64_t elements = 1, stride = -1, next = -1;
        while (elements < extent && k < n) {
            const auto d = buffer.dim(k++);
            if (d.min() != 0) throw Error("internal: reshaping a buffer whose dims do not start at 0");
            if (d.extent() == 1) continue;
            if (next >= 0 && d.stride() != next) throw Error("internal: reshaping a strided buffer");
            if (stride < 0) stride = d.stride();
            next = int64_t{d.stride()} * d.extent();
            elements *= d.extent();
        }
        fits = elements == extent;
        if (stride < 0) stride = j ? int64_t{dims[j - 1].stride} * dims[j - 1].extent : 1;  // extent 1
        dims[j] = halide_dimension_t(0, static_cast<int32_t>(extent), static_cast<int32_t>(stride));
    }
    int64_t total = 1;
    for (int64_t e : shape) total *= e;
    for (; k < n && fits; k++) fits = buffer.dim(k).extent() == 1;
    if (!fits || total != static_cast<int64_t>(buffer.number_of_elements())) {
        throw Error("internal: a buffer of " + std::to_string(buffer.number_of_elements()) + " elements viewed as [" +
                    to_string(shape) + "]");
    }
    return TensorBuffer(const_cast<float *>(buffer.data()), static_cast<int>(dims.size()), dims.data());
}

}  // namespace hfuse::compose
