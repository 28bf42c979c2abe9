#include "explore/cost_model.h"

#include "hfuse/op_registry.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <thread>

namespace hfuse::explore {
namespace {

// Rough machine numbers (a Zen 3 core at ~3 GHz, two FMA pipes; DRAM/L3 ~20 GB/s): ranking only.
constexpr double kGHz = 3.0;
constexpr double kBytesPerMs = 20e6;
constexpr double kGroupOverheadMs = 0.01;
// Fractions of peak: a conv/gemm under its template (conv_xv reaches ~84% of one core), the same
// op as its own root stage under the simple schedule, and everything else (memory-bound anyway).
constexpr double kTemplateEfficiency = 0.7;
constexpr double kSimpleEfficiency = 0.08;
constexpr double kOtherEfficiency = 0.2;

int cores() {
    if (const char *env = std::getenv("HL_NUM_THREADS")) {
        if (int n = std::atoi(env); n > 0) return n;
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

int64_t value_bytes(const Graph &g, const std::string &v) {
    return 4 * num_elements(g.type_of(v).shape);
}

}  // namespace

PlanCost estimate_plan(const FusedGraph &plan, const Halide::Target &target) {
    const Graph &g = plan.graph;
    const int lanes = target.natural_vector_size<float>();
    const double peak_flops_per_ms = lanes * 2.0 * 2.0 * kGHz * 1e6 * cores();
    PlanCost cost;
    std::map<std::string, int> readers;  // value -> groups reading it from outside
    for (const FusedGroup &grp : plan.groups) {
        GroupCost gc;
        gc.name = grp.name;
        const std::set<std::string> members(grp.nodes.begin(), grp.nodes.end());
        const std::string tmpl = grp.schedule.is_object() ? grp.schedule.value("template", "") : "";
        std::set<std::string> inputs, weights;
        double heavy = 0, other = 0;
        for (const std::string &name : grp.nodes) {
            const Node *n = g.find_node(name);
            const double f = node_flops(g, *n);
            const bool complex = find_op(n->op)->kind == PatternKind::ComplexOutFusable;
            if (complex && (name != grp.master || tmpl == "simple")) {
                gc.heavy_in_simple = true;
                heavy += f / kSimpleEfficiency;
            } else if (complex) {
                heavy += f / kTemplateEfficiency;
            } else {
                other += f / kOtherEfficiency;
            }
            gc.flops += f;
            for (const std::string &v : n->inputs) {
                if (v.empty()) continue;
                if (g.is_weight(v)) {
                    weights.insert(v);
                } else if (const Node *p = g.producer(v); !p || !members.count(p->name)) {
                    inputs.insert(v);
                }
            }
        }
        for (const std::string &v : inputs) {
            gc.bytes_in += value_bytes(g, v);
            readers[v]++;
        }
        for (const std::string &v : weights) gc.bytes_weights += value_bytes(g, v);
        for (const std::string &v : handed_out_values(plan, grp)) gc.bytes_out += value_bytes(g, v);
        gc.ms = (heavy + other) / peak_flops_per_ms +
                static_cast<double>(gc.bytes_in + gc.bytes_out + gc.bytes_weights) / kBytesPerMs + kGroupOverheadMs;
        cost.flops += gc.flops;
        cost.ms += gc.ms;
        cost.bytes_between_groups += gc.bytes_out;
        cost.groups.push_back(gc);
    }
    for (const auto &kv : readers) {
        if (!g.is_input(kv.first)) cost.bytes_between_groups += kv.second * value_bytes(g, kv.first);
    }
    return cost;
}

}  // namespace hfuse::explore
