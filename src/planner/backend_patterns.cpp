#include "hfuse/error.h"
#include "hfuse/planner.h"
#include "planner/graph_util.h"

#include <deque>
#include <map>
#include <mutex>
#include <set>

namespace hfuse {
namespace {

// A deque: pointers handed out stay valid when later patterns are registered.
std::deque<BackendPattern> &pattern_registry() {
    static std::deque<BackendPattern> patterns;
    return patterns;
}
std::mutex registry_mutex;

const std::set<std::string> kActivations = {"Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"};

}  // namespace

void register_backend_pattern(BackendPattern pattern) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (BackendPattern &p : pattern_registry()) {
        if (p.id() == pattern.id()) {
            p = std::move(pattern);  // re-registering replaces
            return;
        }
    }
    pattern_registry().push_back(std::move(pattern));
}

const BackendPattern *find_backend_pattern(const std::string &id) {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (const BackendPattern &p : pattern_registry()) {
        if (p.id() == id) return &p;
    }
    return nullptr;
}

std::vector<const BackendPattern *> backend_patterns() {
    std::lock_guard<std::mutex> lock(registry_mutex);
    std::vector<const BackendPattern *> out;
    for (const BackendPattern &p : pattern_registry()) out.push_back(&p);
    return out;
}

EpilogueDescriptor describe_epilogue(const Graph &g, const std::vector<std::string> &nodes) {
    EpilogueDescriptor d;
    d.nodes = nodes;
    const Node *master = nodes.empty() ? nullptr : g.find_node(nodes[0]);
    if (!master || master->inputs.size() < 2) throw Error("an epilogue starts with a Gemm, MatMul or Conv");
    d.master = master->name;
    d.master_op = master->op;
    d.master_attrs = master->attrs;
    d.input = master->inputs[0];
    d.weight = master->inputs[1];
    if (master->inputs.size() > 2 && !master->inputs[2].empty()) d.bias = master->inputs[2];
    std::string current = master->outputs[0];
    for (size_t i = 1; i < nodes.size(); i++) {
        const Node *n = g.find_node(nodes[i]);
        if (!n) throw Error("unknown node in an epilogue").at_node(nodes[i]);
        if (n->op == "Add" && n->inputs.size() == 2 && d.bias.empty() && d.activation.empty()) {
            d.bias = n->inputs[0] == current ? n->inputs[1] : n->inputs[0];
        } else if (kActivations.count(n->op) && d.activation.empty() && n->inputs[0] == current) {
            d.activation = n->op;
            d.activation_attrs = n->attrs;
        } else {
            throw Error("does not fit an epilogue (one bias Add, then one activation)").at_node(n->name, n->op);
        }
        current = n->outputs[0];
    }
    return d;
}

FusedGraph claim_backend_patterns(const FusedGraph &fused, const std::vector<std::string> &backends) {
    const Graph &g = fused.graph;
    planner::NodeGraph ng(g);
    std::set<std::string> enabled(backends.begin(), backends.end());
    for (const std::string &b : backends) {
        bool known = false;
        for (const BackendPattern *p : backend_patterns()) known = known || p->backend == b;
        if (!known) throw Error("no backend named '" + b + "' has registered patterns");
    }
    std::map<std::string, int> group_of;  // node -> index into fused.groups
    for (size_t i = 0; i < fused.groups.size(); i++) {
        for (const std::string &n : fused.groups[i].nodes) group_of[n] = static_cast<int>(i);
    }
    std::set<std::string> claimed;
    std::vector<FusedGroup> claims;
    for (const BackendPattern *p : backend_patterns()) {
        if (!enabled.count(p->backend) || p->ops.empty()) continue;
        for (size_t start = 0; start < g.nodes.size(); start++) {
            // Follow the chain: each next op the only consumer of the previous one's single output.
            std::vector<std::string> chain;
            int cur = static_cast<int>(start);
            for (size_t k = 0; k < p->ops.size(); k++) {
                const Node &n = g.nodes[cur];
                if (n.op != p->ops[k] || claimed.count(n.name) || fused.groups[group_of[n.name]].nodes.size() != 1)
                    break;
                chain.push_back(n.name);
                if (k + 1 == p->ops.size()) break;
                if (n.outputs.size() != 1 || ng.is_model_output[cur] || ng.consumers[cur].size() != 1) break;
                int next = ng.consumers[cur][0];
                int uses = 0;  // the consumer must read the value once (Add(x, x) is no bias add)
                for (const std::string &v : g.nodes[next].inputs) uses += v == n.outputs[0];
                if (uses != 1) break;
                cur = next;
            }
            if (chain.size() != p->ops.size()) continue;
            EpilogueDescriptor d;
            try {
                d = describe_epilogue(g, chain);
            } catch (const Error &) {
                continue;  // the ops match but the wiring does not (e.g. two biases)
            }
            if (p->accepts && !p->accepts(g, d)) continue;
            FusedGroup grp;
            grp.nodes = chain;
            grp.master = chain.front();
            grp.backend = p->id();
            claims.push_back(grp);
            claimed.insert(chain.begin(), chain.end());
        }
    }
    FusedGraph out;
    out.graph = g;
    out.rules = fused.rules;
    out.rewritten = fused.rewritten;
    for (const FusedGroup &grp : fused.groups) {
        if (!claimed.count(grp.nodes.front())) out.groups.push_back(grp);
    }
    for (const FusedGroup &grp : claims) out.groups.push_back(grp);
    return check_plan(std::move(out));
}

}  // namespace hfuse
