// The rule-driven fusion planner (see include/hfuse/planner.h).
//
// Vertices are the groups of the input fused graph (single ops in a first round). Like TVM's
// FuseOps, each vertex v, in topological order, tries to join the group of its immediate
// post-dominator d together with every vertex on the paths between them: all of those must be kinds
// the rule set lets v's group absorb, so diamonds and branches fuse exactly when every path allows it.
// Beyond TVM: window consumers, injective producers into any consumer, reductions after producers,
// and multi-output groups (a model output that is also used inside does not cut the group) — each
// enabled by the rule set. Every merge keeps the groups acyclic (hence convex) and within the limits.
#include "hfuse/planner.h"

#include "hfuse/attributes.h"
#include "hfuse/error.h"
#include "hfuse/passes.h"
#include "hfuse/tensor.h"
#include "planner/attention_pattern.h"
#include "planner/graph_util.h"
#include "planner/post_dominators.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>

namespace hfuse {
namespace {

using planner::NodeGraph;

// Whether a node is named in `names`, by its own name or one a rewrite folded into it (so
// "stop_after": ["bn1"] still works once bn1 lives inside conv1).
bool named_in(const Node &n, const std::set<std::string> &names) {
    return names.count(n.name) ||
           std::any_of(n.absorbed.begin(), n.absorbed.end(), [&](const std::string &a) { return names.count(a); });
}

// Whether the rules (or the op itself) keep a node out of every fusion.
bool is_opaque_node(const Node &n, const RuleSet &rules) {
    return find_op(n.op)->kind == PatternKind::Opaque || rules.opaque_ops.count(n.op) ||
           named_in(n, rules.opaque_nodes);
}

// Distinct activations the nodes read from outside themselves (weights not counted).
int count_inputs(const Graph &g, const std::set<std::string> &nodes) {
    std::set<std::string> inputs;
    for (const std::string &name : nodes) {
        for (const std::string &v : g.find_node(name)->inputs) {
            if (v.empty() || g.is_weight(v)) continue;
            const Node *p = g.producer(v);
            if (!p || !nodes.count(p->name)) inputs.insert(v);
        }
    }
    return static_cast<int>(inputs.size());
}

class RoundPlanner {
public:
    RoundPlanner(const FusedGraph &in, const RuleSet &rules) : in_(in), rules_(rules), ng_(in.graph) {
        const int n = static_cast<int>(in.groups.size());
        parent_.resize(n);
        std::iota(parent_.begin(), parent_.end(), 0);
        for (const FusedGroup &g : in.groups) {
            std::vector<int> nodes;
            for (const std::string &name : g.nodes) nodes.push_back(ng_.index.at(name));
            members_.push_back(nodes);
            for (int node : nodes) vertex_of_node_[node] = static_cast<int>(members_.size()) - 1;
            master_.push_back(ng_.index.at(g.master));
            claimed_.push_back(!g.backend.empty());
        }
        successors_.resize(n);
        predecessors_.resize(n);
        for (int v = 0; v < n; v++) {
            for (int node : members_[v]) {
                for (int c : ng_.consumers[node]) {
                    int w = vertex_of_node_.at(c);
                    if (w != v) successors_[v].insert(w);
                    if (w != v) predecessors_[w].insert(v);
                }
            }
        }
    }

    FusedGraph run() {
        const int n = static_cast<int>(members_.size());
        // The post-dominator tree of the vertex graph. A model output is an exit to the sink; with
        // multi_output a value that is also consumed inside the graph is not, so it can be handed out
        // by the group that absorbs its consumers.
        std::vector<std::vector<int>> succ(n);
        for (int v = 0; v < n; v++) {
            succ[v].assign(successors_[v].begin(), successors_[v].end());
            bool output = std::any_of(members_[v].begin(), members_[v].end(),
                                      [&](int node) { return ng_.is_model_output[node]; });
            if (succ[v].empty() || (output && !rules_.multi_output)) succ[v].push_back(n);
        }
        ipdom_ = planner::immediate_post_dominators(succ);

        const int phases = rules_.defer_injective ? 2 : 1;
        for (int phase = 0; phase < phases; phase++) {
            for (int v = 0; v < n; v++) try_fuse(v, phase, phases);
        }
        return result();
    }

private:
    int find(int v) { return parent_[v] == v ? v : parent_[v] = find(parent_[v]); }

    // The kind a group shows to the rules: its master's (a same-shape broadcast counts as elementwise).
    PatternKind group_kind(int root) { return effective_kind(in_.graph, in_.graph.nodes[master_[root]]); }

    bool is_opaque(int v) {
        for (int node : members_[v]) {
            if (is_opaque_node(in_.graph.nodes[node], rules_)) return true;
        }
        return claimed_[v];  // a backend owns it as matched
    }

    bool stops(int v) {
        return std::any_of(members_[v].begin(), members_[v].end(),
                           [&](int node) { return named_in(in_.graph.nodes[node], rules_.stop_after); });
    }

    // Vertices on the paths from v to d, excluding both.
    std::vector<int> between(int v, int d) {
        std::set<int> seen;
        std::vector<int> stack(successors_[v].begin(), successors_[v].end());
        while (!stack.empty()) {
            int u = stack.back();
            stack.pop_back();
            if (u == d || !seen.insert(u).second) continue;
            for (int s : successors_[u]) stack.push_back(s);
        }
        return std::vector<int>(seen.begin(), seen.end());
    }

    void try_fuse(int v, int phase, int phases) {
        const int n = static_cast<int>(members_.size());
        int g = find(v);
        PatternKind kind = group_kind(g);
        bool injective = kind == PatternKind::Injective;
        if (phases == 2 && injective != (phase == 1)) return;
        if (is_opaque(v) || stops(v)) return;
        const int d = ipdom_[v];
        if (d == n || find(d) == g) return;

        std::vector<int> path = between(v, d);
        path.push_back(d);
        if (path.size() == 1) {
            if (const int64_t bytes = expanded_for_its_reader(g, find(d))) {
                notes_[v] = "not merged with '" + in_.graph.nodes[master_[find(d)]].name +
                            "': it scales a larger value by this group's output, which its reader computes "
                            "as it reads (a prologue) rather than this group storing it (" +
                            human_bytes(bytes) + ") for the reader to read back";
                return;
            }
        }
        // A depthwise conv absorbing its pointwise producer leads the merged group.
        const bool into_depthwise = path.size() == 1 && joins_depthwise(g, find(d));
        const int depthwise = master_[find(d)];
        const FusionRule *edge_rule = nullptr;
        for (int u : path) {
            if (is_opaque(u)) return;
            // A vertex on the path that another stop_after vertex feeds may not join either.
            if (u != d && stops(u)) return;
            PatternKind uk = group_kind(find(u));
            if (find(u) == g) continue;
            const FusionRule *r = rules_.find(kind, uk);
            if (!r && u == d && path.size() == 1 && (joins_sibling(g, find(d)) || into_depthwise)) {
                r = rules_.find(kind, PatternKind::Elementwise);
            }
            if (!r) return;
            if (uk == PatternKind::Window && kind == PatternKind::ComplexOutFusable && !rules_.window_fusion) return;
            if (!edge_rule) edge_rule = r;
        }
        if (!edge_rule) return;

        // Tentatively merge and check the limits and acyclicity of the groups.
        std::set<int> roots = {g};
        for (int u : path) roots.insert(find(u));
        std::vector<std::set<std::string>> parts;
        for (int r : roots) parts.push_back(node_names(r));
        const std::set<std::string> own = node_names(g);  // v's group, the side reaching out
        const std::string with = "'" + in_.graph.nodes[master_[find(d)]].name + "'";  // for the notes
        std::vector<int> saved = parent_;
        for (int r : roots) parent_[r] = g;
        if (!within_limits(g) || has_cycle()) {
            parent_ = saved;
            return;
        }
        if (rules_.cost_model) {
            // The merge must pay: what it keeps out of memory against what it recomputes (where the
            // model cannot tell, the rules decide).
            std::map<std::string, Placement> placement = placements();
            placement[in_.graph.nodes[master_[g]].name] = edge_rule->placement;
            const MergePrice whole = price_nodes(in_.graph, node_names(g), placement, rules_.machine);
            MergePrice apart;
            for (const std::set<std::string> &nodes : parts)
                apart += price_nodes(in_.graph, nodes, placement, rules_.machine);
            const MergePrice added = whole - apart;
            if (!added.pays() && !added.close()) {
                parent_ = saved;
                notes_[v] = "not merged with " + with + ": " + added.why();
                return;
            }
            if (!added.pays()) {
                notes_[v] = "merged with " + with + " by the rules, the model cannot tell: " + added.why();
                undecided_[v] = own;
            }
        }
        // The merged group is led by its highest-ranked master (the earliest on a tie).
        int best = master_[g];
        for (int r : roots) {
            int m = master_[r];
            int rank_m = planner::kind_rank(find_op(in_.graph.nodes[m].op)->kind);
            int rank_b = planner::kind_rank(find_op(in_.graph.nodes[best].op)->kind);
            if (rank_m > rank_b || (rank_m == rank_b && m < best)) best = m;
        }
        if (into_depthwise) best = depthwise;
        // The producer side is placed as the rule says (check_plan turns it into "output" if it is
        // still needed outside the group).
        hints_[in_.graph.nodes[master_[g]].name] = edge_rule->placement;
        master_[g] = best;
    }

    // The bytes of the value vertex `d` makes, where `d` is a lone broadcast (a squeeze-and-excitation
    // Mul of an activation by the per-channel gate group `g` computes) read only by a complex-op group
    // that may take it as a prologue; else 0. Merged with g, the Mul stores its whole output for the
    // reader to read back; in the reader, applied as the reader reads the activation, which it reads
    // anyway, only the gate is stored. Zen 5, AVX-512, 2 threads, in the networks (run --profile, 4-6
    // alternations, medians, with conv_xv's and conv_cv's prologue schedules): the changed groups of
    // MobileNet-V3-Large -0.11 ms (whole net 2.51 -> 2.43 ms), RegNet-Y 800MF 2.24 -> 1.85 ms,
    // RegNet-Y 3.2GF 7.97 -> 7.31, EfficientNet-B0 2.08 -> 1.68 (the gates 0.02-0.09 ms faster each,
    // their readers up to 0.03 slower). Under the cost model only: other rule sets keep their rules.
    int64_t expanded_for_its_reader(int g, int d) {
        if (!rules_.cost_model) return 0;
        const std::set<std::string> lone = node_names(d);
        if (lone.size() != 1) return 0;
        const int node = ng_.index.at(*lone.begin());
        const Node &b = in_.graph.nodes[node];
        if (effective_kind(in_.graph, b) != PatternKind::Broadcast || ng_.is_model_output[node] ||
            ng_.consumers[node].size() != 1)
            return 0;
        const int64_t out = num_elements(in_.graph.type_of(b.outputs[0]).shape);
        // Only where what g hands the broadcast is smaller than its output (g's gate, not the activation).
        const std::set<std::string> own = node_names(g);
        for (int producer : ng_.producers[node]) {
            if (!own.count(in_.graph.nodes[producer].name)) continue;
            for (const std::string &value : in_.graph.nodes[producer].outputs) {
                if (std::find(b.inputs.begin(), b.inputs.end(), value) != b.inputs.end() &&
                    num_elements(in_.graph.type_of(value).shape) >= out)
                    return 0;
            }
        }
        const int reader = find(vertex_of_node_.at(ng_.consumers[node][0]));
        const PatternKind reader_kind = group_kind(reader);
        if (reader_kind != PatternKind::ComplexOutFusable || !rules_.find(PatternKind::Broadcast, reader_kind))
            return 0;
        return out * static_cast<int64_t>(sizeof(float));
    }

    // The node names of group `root` (a union-find root).
    std::set<std::string> node_names(int root) {
        std::set<std::string> names;
        for (size_t v = 0; v < members_.size(); v++) {
            if (find(static_cast<int>(v)) != root) continue;
            for (int node : members_[v]) names.insert(in_.graph.nodes[node].name);
        }
        return names;
    }

    // Placements so far: the input groups' own (but "output"), then this round's hints.
    std::map<std::string, Placement> placements() const {
        std::map<std::string, Placement> p;
        for (const FusedGroup &grp : in_.groups) {
            for (const auto &[name, where] : grp.placement) {
                if (where != Placement::Output && where != Placement::Folded) p[name] = where;
            }
        }
        for (const auto &[name, where] : hints_) p[name] = where;
        return p;
    }

    static bool is_product(const Node &n) { return n.op == "Gemm" || n.op == "MatMul"; }

    // sibling_products: group g (led by a Gemm/MatMul) feeds group d, led by a Gemm/MatMul of the
    // same output shape, only through d's elementwise or broadcast ops — the two products meet in
    // an epilogue (x W + h U) and can be computed together per output tile.
    bool joins_sibling(int g, int d) {
        if (!rules_.sibling_products) return false;
        const Node &mg = in_.graph.nodes[master_[g]], &md = in_.graph.nodes[master_[d]];
        if (!is_product(mg) || !is_product(md) || in_.graph.type_of(mg.outputs[0]) != in_.graph.type_of(md.outputs[0]))
            return false;
        for (size_t v = 0; v < members_.size(); v++) {
            if (find(static_cast<int>(v)) != g) continue;
            for (int node : members_[v]) {
                for (int c : ng_.consumers[node]) {
                    if (find(vertex_of_node_.at(c)) != d) continue;
                    PatternKind k = effective_kind(in_.graph, in_.graph.nodes[c]);
                    if (k != PatternKind::Elementwise && k != PatternKind::Broadcast) return false;
                }
            }
        }
        return true;
    }

    // pointwise_into_depthwise: group g is exactly the pointwise feed of group d's master, a padded
    // depthwise conv (MobileNet's expand and its activation before its 3x3): the depthwise template
    // computes the pointwise conv per task, for the task's channels, so the expanded value never goes
    // through memory. Anything else in g would leave the pointwise conv to the simple schedule, many
    // times slower than the two groups apart.
    bool joins_depthwise(int g, int d) {
        if (!rules_.pointwise_into_depthwise) return false;
        const planner::PointwiseFeed feed = planner::pointwise_feed(ng_, master_[d]);
        if (feed.conv < 0 || feed.conv != master_[g]) return false;
        if (!strided_feed_pays(master_[d])) return false;
        size_t members = 0;
        for (size_t v = 0; v < members_.size(); v++) {
            if (find(static_cast<int>(v)) != g) continue;
            for (int node : members_[v]) {
                if (node != feed.conv && !feed.between.count(node)) return false;
                members++;
            }
        }
        return members == feed.between.size() + 1;
    }

    // A strided depthwise conv's output is a fraction of its feed's, so the pointwise conv computed per
    // task (a block of channels, the input read again per block) weighs more against the depthwise
    // conv it saves a pass for: the merge pays where the expanded value would otherwise leave the
    // core's private cache (the machine model's cache_bytes), and not below it. Sapphire Rapids,
    // AVX-512, 2 threads, in the networks (bench --profile, 2 rounds, merged against apart): values of
    // 1.8-4.8 MB 1.04-1.74x (MobileNet-V2's 16->96 at 112x112 and 24->144 at 56x56, EfficientNet-B0's,
    // MobileNet-V3's 16->64); of 0.45-0.9 MB 0.58-1.17x (MobileNet-V3's three 5x5 and 3x3 blocks at
    // 56-14, MobileNet-V2's 96->576 at 14x14, whose depthwise conv apart takes channel vectors).
    // The value of one image is what counts: conv_dw's tasks are an image's channel blocks, and what
    // paid was large planes, not large batches (MobileNet-V2's 96->576 at 14x14 to 7x7 at batch 8,
    // 3.6 MB, 0.45 MB an image, Zen 5, AVX-512, 2 threads, --measure-undecided: merged 0.94 ms,
    // apart 0.56). Without a cost model, stride 1 alone.
    bool strided_feed_pays(int dw) {
        const Node &n = in_.graph.nodes[dw];
        const std::vector<int64_t> strides = Attributes(n.attrs).get_ints("strides", {1, 1});
        if (std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 1; })) return true;
        const Shape &feed = in_.graph.type_of(n.inputs[0]).shape;
        const int64_t images = feed.empty() ? 1 : std::max<int64_t>(feed[0], 1);
        return rules_.cost_model && 4 * num_elements(feed) / images > rules_.machine.cache_bytes;
    }

    // Whether a group's complex-out-fusable nodes are a pointwise conv feeding a depthwise conv.
    bool is_pointwise_depthwise_pair(const std::set<int> &nodes) {
        std::vector<int> convs;
        for (int node : nodes) {
            if (find_op(in_.graph.nodes[node].op)->kind == PatternKind::ComplexOutFusable) convs.push_back(node);
        }
        return convs.size() == 2 && planner::is_pointwise_conv(in_.graph, in_.graph.nodes[convs[0]]) &&
               planner::is_padded_depthwise_conv(in_.graph, in_.graph.nodes[convs[1]]) &&
               planner::reaches(ng_, convs[0], convs[1]);
    }

    // Whether the complex-out-fusable nodes of a group are sibling products: Gemm/MatMul of one
    // output shape, none reading another (through the group or outside it).
    bool are_siblings(const std::set<int> &nodes) {
        std::vector<int> products;
        for (int node : nodes) {
            if (find_op(in_.graph.nodes[node].op)->kind == PatternKind::ComplexOutFusable) products.push_back(node);
        }
        for (int p : products) {
            const Node &n = in_.graph.nodes[p];
            if (!is_product(n) ||
                in_.graph.type_of(n.outputs[0]) != in_.graph.type_of(in_.graph.nodes[products[0]].outputs[0]))
                return false;
            for (int q : products) {
                if (q != p && planner::reaches(ng_, p, q)) return false;
            }
        }
        return true;
    }

    bool within_limits(int root) {
        std::set<int> nodes;
        for (size_t v = 0; v < members_.size(); v++) {
            if (find(static_cast<int>(v)) == root) nodes.insert(members_[v].begin(), members_[v].end());
        }
        if ((int)nodes.size() > rules_.max_group_ops) return false;
        int complex = 0;
        bool has_window = false;
        for (int node : nodes) {
            PatternKind k = find_op(in_.graph.nodes[node].op)->kind;
            complex += k == PatternKind::ComplexOutFusable;
            has_window = has_window || k == PatternKind::Window;
        }
        const bool complex_pairs = rules_.find(PatternKind::ComplexOutFusable, PatternKind::ComplexOutFusable);
        if (complex > 1 && !complex_pairs && !(rules_.sibling_products && are_siblings(nodes)) &&
            !(rules_.pointwise_into_depthwise && is_pointwise_depthwise_pair(nodes)))
            return false;
        // A window op joins a complex-led group as its output (the conv computed per pool tile):
        // nothing in the group may read it.
        if (complex > 0 && has_window) {
            for (int node : nodes) {
                if (find_op(in_.graph.nodes[node].op)->kind != PatternKind::Window) continue;
                for (int c : ng_.consumers[node]) {
                    if (nodes.count(c)) return false;
                }
            }
        }
        std::set<std::string> names;
        for (int node : nodes) names.insert(in_.graph.nodes[node].name);
        return count_inputs(in_.graph, names) <= rules_.max_group_inputs;
    }

    // Whether the groups (union-find roots) depend on each other in a cycle.
    bool has_cycle() {
        const int n = static_cast<int>(members_.size());
        std::vector<std::set<int>> edges(n);
        for (int v = 0; v < n; v++) {
            for (int w : successors_[v]) {
                if (find(v) != find(w)) edges[find(v)].insert(find(w));
            }
        }
        std::vector<int> state(n, 0);
        std::function<bool(int)> cyclic = [&](int v) {
            if (state[v] == 1) return true;
            if (state[v] == 2) return false;
            state[v] = 1;
            for (int w : edges[v]) {
                if (cyclic(w)) return true;
            }
            state[v] = 2;
            return false;
        };
        for (int v = 0; v < n; v++) {
            if (find(v) == v && cyclic(v)) return true;
        }
        return false;
    }

    FusedGraph result() {
        FusedGraph out;
        out.graph = in_.graph;
        out.rules = in_.rules;
        out.rules.push_back(rules_.name);
        out.rewritten = in_.rewritten;
        std::map<int, FusedGroup> by_root;
        for (size_t v = 0; v < members_.size(); v++) {
            int r = find(static_cast<int>(v));
            FusedGroup &grp = by_root[r];
            const FusedGroup &old = in_.groups[v];
            grp.master = in_.graph.nodes[master_[r]].name;
            if (grp.backend.empty()) grp.backend = old.backend;
            if (grp.schedule.empty()) grp.schedule = old.schedule;
            grp.undecided.insert(grp.undecided.end(), old.undecided.begin(), old.undecided.end());
            for (const std::string &name : old.nodes) {
                grp.nodes.push_back(name);
                // Earlier placements carry over, except "output", which merging may have made internal.
                auto p = old.placement.find(name);
                if (p != old.placement.end() && p->second != Placement::Output && p->second != Placement::Folded) {
                    grp.placement[name] = p->second;
                }
            }
        }
        for (auto &kv : by_root) {
            for (const std::string &name : kv.second.nodes) {
                if (auto h = hints_.find(name); h != hints_.end()) kv.second.placement[name] = h->second;
            }
            // Nodes still needed outside the group get "output" from check_plan, whatever the hint.
            std::set<int> group_nodes;
            for (const std::string &name : kv.second.nodes) group_nodes.insert(ng_.index.at(name));
            for (auto it = kv.second.placement.begin(); it != kv.second.placement.end();) {
                if (planner::is_live_out(ng_, ng_.index.at(it->first), group_nodes)) {
                    it = kv.second.placement.erase(it);
                } else {
                    ++it;
                }
            }
            for (const auto &[v, note] : notes_) {
                if (find(v) == kv.first) kv.second.why += (kv.second.why.empty() ? "" : "; ") + note;
            }
            for (const auto &[v, part] : undecided_) {
                if (find(v) == kv.first) kv.second.undecided.emplace_back(part.begin(), part.end());
            }
            out.groups.push_back(std::move(kv.second));
        }
        return check_plan(std::move(out));
    }

    const FusedGraph &in_;
    const RuleSet &rules_;
    NodeGraph ng_;
    std::vector<std::vector<int>> members_;  // vertex -> node indices
    std::map<int, int> vertex_of_node_;
    std::vector<int> master_;  // per union-find root: master node index
    std::vector<bool> claimed_;
    std::vector<std::set<int>> successors_, predecessors_;
    std::vector<int> parent_;
    std::vector<int> ipdom_;
    std::map<std::string, Placement> hints_;
    std::map<int, std::string> notes_;  // vertex -> a merge the cost model declined or could not price, and why
    // vertex -> its group's nodes before a merge the model could not price (FusedGroup::undecided)
    std::map<int, std::set<std::string>> undecided_;
};

// A round plans a partition: recompute copies of owned nodes are dropped, and a node every reader
// recomputed becomes a group of its own again (the round's own recompute step may copy it again).
FusedGraph without_copies(const FusedGraph &f) {
    FusedGraph out = f;
    std::set<std::string> owned, copied;
    for (FusedGroup &grp : out.groups) {
        std::vector<std::string> kept;
        for (const std::string &n : grp.nodes) {
            if (is_recompute_copy(grp, n)) {
                copied.insert(n);
                grp.placement.erase(n);
            } else {
                owned.insert(n);
                kept.push_back(n);
            }
        }
        grp.nodes = kept;
    }
    if (copied.empty()) return f;
    for (const Node &n : f.graph.nodes) {
        if (!copied.count(n.name) || owned.count(n.name)) continue;
        FusedGroup alone;
        alone.master = n.name;
        alone.nodes = {n.name};
        out.groups.push_back(alone);
    }
    return check_plan(std::move(out));
}

// Recomputes group `i` of `f` in every group that reads it, if the rules allow; returns whether it did
// (`f` is then the new plan, checked and reordered). `light`: f.graph without its weights' values
// (planner::without_weight_values), on which the trial plan is checked.
bool try_recompute(FusedGraph &f, int i, const RuleSet &rules, const Graph &light) {
    const Graph &g = f.graph;
    const FusedGroup &p = f.groups[i];
    if (!p.backend.empty()) return false;
    for (const std::string &name : p.nodes) {
        const Node &n = *g.find_node(name);
        if (!planner::is_cheap(find_op(n.op)->kind) || is_opaque_node(n, rules) || named_in(n, rules.stop_after)) {
            return false;
        }
    }
    const std::set<std::string> out = handed_out_values(f, p);
    for (const std::string &v : out) {
        if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
    }
    std::vector<int> readers;
    for (size_t j = 0; j < f.groups.size(); j++) {
        const FusedGroup &c = f.groups[j];
        bool reads = (int)j != i && std::any_of(c.nodes.begin(), c.nodes.end(), [&](const std::string &n) {
                         const std::vector<std::string> &in = g.find_node(n)->inputs;
                         return std::any_of(in.begin(), in.end(), [&](const std::string &v) { return out.count(v); });
                     });
        if (reads) readers.push_back(static_cast<int>(j));
    }
    if (readers.size() < 2) return false;  // one reader: the round itself decides whether they fuse
    if (rules.cost_model) {
        const std::set<std::string> copied(p.nodes.begin(), p.nodes.end());
        const MergePrice price = price_recompute(g, copied, out, static_cast<int>(readers.size()), rules.machine);
        if (!price.pays() && !price.close()) {
            const std::string note =
                "not recomputed in its " + std::to_string(readers.size()) + " readers: " + price.why();
            std::string &why = f.groups[i].why;  // once: recompute_shared_groups asks again after each copy
            if (why.find(note) == std::string::npos) why += (why.empty() ? "" : "; ") + note;
            return false;
        }
    }
    const PatternKind kind = effective_kind(g, *g.find_node(p.master));
    for (int j : readers) {
        const FusedGroup &c = f.groups[j];
        std::set<std::string> merged(c.nodes.begin(), c.nodes.end());
        merged.insert(p.nodes.begin(), p.nodes.end());
        bool opaque_reader = std::any_of(c.nodes.begin(), c.nodes.end(), [&](const std::string &name) {
            return is_opaque_node(*g.find_node(name), rules);
        });
        if (opaque_reader || !c.backend.empty() || !rules.find(kind, effective_kind(g, *g.find_node(c.master))) ||
            (int)merged.size() > rules.max_group_ops || count_inputs(g, merged) > rules.max_group_inputs) {
            return false;
        }
    }
    FusedGraph trial;
    trial.graph = light;
    trial.groups = f.groups;
    for (int j : readers) {
        FusedGroup &c = trial.groups[j];
        for (const std::string &n : p.nodes) {
            if (std::find(c.nodes.begin(), c.nodes.end(), n) != c.nodes.end()) continue;
            c.nodes.push_back(n);
            c.placement[n] = Placement::Recompute;
        }
        // "output" and "folded" were derived from the old boundaries: check_plan derives them again.
        for (auto it = c.placement.begin(); it != c.placement.end();) {
            bool derived = it->second == Placement::Output || it->second == Placement::Folded;
            it = derived ? c.placement.erase(it) : std::next(it);
        }
    }
    trial.groups.erase(trial.groups.begin() + i);
    try {
        f.groups = check_plan(std::move(trial)).groups;
    } catch (const Error &) {
        return false;  // not a legal plan (a cycle through the copies): keep the group
    }
    return true;
}

// The rule set's `recompute`: a group of cheap ops whose values several groups read (and the model
// does not return) is copied into each reader as "recompute" members and disappears, so its values
// never go through memory. Each reader must be able to absorb it under the rules and limits.
FusedGraph recompute_shared_groups(FusedGraph f, const RuleSet &rules) {
    // One group at a time, from the last back (so a chain of cheap groups feeding several groups is
    // copied whole), until none can go; every success removes a group.
    const Graph light = planner::without_weight_values(f.graph);
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = static_cast<int>(f.groups.size()) - 1; i >= 0 && !changed; i--) {
            changed = try_recompute(f, i, rules, light);
        }
    }
    return f;
}

// The rule set's `attention`: the groups owning an attention's nodes (planner::match_attention) join
// into one (a group owning them all already is marked so again: each round says why anew), led by
// its second product, where the rules let none of those nodes stay apart (opaque,
// stop_after), the joined group keeps the limits, and no path leaves it and comes back (check_plan).
// Its template computes the attention per tile of queries with an online softmax, so the merge
// always pays: the scores and the probabilities, written and read once each apart, never go through
// memory, for the same FLOPs (plus one rescale of a tile's outputs per block of keys).
FusedGraph join_attention_groups(FusedGraph f, const RuleSet &rules) {
    if (!rules.attention) return f;
    const Graph &graph = f.graph;  // merging changes only the groups
    FusedGraph trial;              // the plans tried, on the graph without its weights' values
    trial.graph = planner::without_weight_values(graph);
    const planner::NodeGraph ng(graph);
    for (const planner::AttentionPattern &a : planner::find_attentions(graph)) {
        std::set<size_t> owners;
        bool free = true;
        for (const Node *n : a.nodes()) {
            free = free && !is_opaque_node(*n, rules) && (n == a.output || !named_in(*n, rules.stop_after));
            for (size_t i = 0; i < f.groups.size(); i++) {
                const FusedGroup &grp = f.groups[i];
                if (std::count(grp.nodes.begin(), grp.nodes.end(), n->name) && !is_recompute_copy(grp, n->name))
                    owners.insert(i);
            }
        }
        if (!free || owners.empty()) continue;
        std::vector<FusedGroup> joined = f.groups;
        FusedGroup &into = joined[*owners.begin()];
        std::set<std::string> nodes;
        for (size_t i : owners) {
            const FusedGroup &grp = f.groups[i];
            nodes.insert(grp.nodes.begin(), grp.nodes.end());
            for (const auto &[name, where] : grp.placement) {
                // "output" is derived again from the joined group's boundary.
                if (where != Placement::Output && where != Placement::Folded) into.placement[name] = where;
            }
            if (i != *owners.begin() && !grp.why.empty()) into.why += (into.why.empty() ? "" : "; ") + grp.why;
        }
        if (static_cast<int>(nodes.size()) > rules.max_group_ops || count_inputs(graph, nodes) > rules.max_group_inputs)
            continue;
        into.nodes.clear();
        for (const Node &n : graph.nodes) {
            if (nodes.count(n.name)) into.nodes.push_back(n.name);
        }
        into.master = a.output->name;
        into.placement[a.scores->name] = Placement::ComputeAt;
        for (const Node *n : a.score_ops) into.placement[n->name] = Placement::Inline;
        into.placement[a.softmax->name] = Placement::ComputeAt;
        // Computed at root by the template (its readers in the group read it), or handed out.
        std::set<int> members;
        for (const std::string &n : nodes) members.insert(ng.index.at(n));
        if (planner::is_live_out(ng, ng.index.at(a.output->name), members)) {
            into.placement.erase(a.output->name);
        } else {
            into.placement[a.output->name] = Placement::Root;
        }
        const int64_t scores_bytes = 4 * num_elements(graph.type_of(a.softmax_input()).shape);
        into.why += std::string(into.why.empty() ? "" : "; ") + "attention '" + a.scores->name + "' .. '" +
                    a.output->name + "' per tile of queries with an online softmax: its scores and probabilities (" +
                    human_bytes(2 * scores_bytes) + ") never go through memory";
        trial.groups.clear();
        for (size_t i = 0; i < joined.size(); i++) {
            if (i == *owners.begin() || !owners.count(i)) trial.groups.push_back(joined[i]);
        }
        try {
            f.groups = check_plan(trial).groups;
        } catch (const Error &) {
            // A path leaves the joined group and comes back (or the plan is otherwise not one): apart.
        }
    }
    return f;
}

// Under a cost model, a Transpose a product of its group reads as a B contiguous along K (inlined,
// the product takes dot products) is placed at root where the copy costs less than the dot products
// lose (price_operand_copy): the product then reads B along N. The reason goes into the group's why.
FusedGraph materialise_transposed_operands(FusedGraph f, const RuleSet &rules) {
    if (!rules.cost_model) return f;
    for (FusedGroup &grp : f.groups) {
        for (const std::string &name : grp.nodes) {
            const Node &n = *f.graph.find_node(name);
            const Node *t = k_contiguous_transpose(f.graph, grp, n);
            if (!t) continue;
            // Placed otherwise already (an output, a copy, or root by an earlier round: then said again).
            auto p = grp.placement.find(t->name);
            const bool open = p == grp.placement.end() || p->second == Placement::Inline;
            if (!open && p->second != Placement::Root) continue;
            const OperandCopyPrice price = price_operand_copy(f.graph, n, rules.machine);
            if (!price.pays()) continue;
            grp.placement[t->name] = Placement::Root;
            grp.why += (grp.why.empty() ? "" : "; ") + price.why(t->name, n.name);
        }
    }
    return f;
}

// Under a cost model, each group of several ops says what it keeps out of memory and what it
// recomputes, before the merges the round declined (which planning left in its "why").
FusedGraph explained(FusedGraph f, const RuleSet &rules) {
    if (!rules.cost_model) return f;
    for (FusedGroup &grp : f.groups) {
        if (grp.nodes.size() < 2) continue;
        const std::set<std::string> nodes(grp.nodes.begin(), grp.nodes.end());
        const std::string price = price_nodes(f.graph, nodes, grp.placement, rules.machine).why();
        grp.why = price + (grp.why.empty() ? "" : "; " + grp.why);
    }
    return f;
}

}  // namespace

FusedGraph plan_round(const FusedGraph &fused, const RuleSet &rules) {
    // check_plan orders the groups topologically and fills in masters: the planner relies on both.
    FusedGraph checked = check_plan(without_copies(fused));
    for (FusedGroup &grp : checked.groups) grp.why.clear();  // each round says why again
    FusedGraph planned = RoundPlanner(checked, rules).run();
    if (rules.recompute) planned = recompute_shared_groups(std::move(planned), rules);
    planned = join_attention_groups(std::move(planned), rules);
    return explained(materialise_transposed_operands(std::move(planned), rules), rules);
}

FusedGraph plan_fusion(const Graph &graph, const std::vector<RuleSet> &rounds,
                       const std::vector<std::string> &backends) {
    FusedGraph f = singleton_groups(simplify(graph));
    f.rewritten = true;
    if (!backends.empty()) f = claim_backend_patterns(f, backends);
    for (const RuleSet &r : rounds) f = plan_round(f, r);
    return f;
}

}  // namespace hfuse
