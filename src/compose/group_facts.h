// A group's facts, derived once from the graph and the group (its members and their placements):
// which template family its master leads, what that template needs to know (the conv's, product's,
// pool's, reduction's or attention's shapes, the epilogue inlined into the tile, a pointwise producer
// computed per task), or why no template fits. The default schedule is chosen from these facts
// (compose/schedule_choice.cpp, the conv's from schedules/conv_choice.cpp) and the composer applies
// the schedule with them (compose/composer.cpp); neither looks at the graph to re-derive them.
#pragma once

#include "hfuse/fused_graph.h"
#include "hfuse/graph.h"
#include "planner/attention_pattern.h"
#include "schedules/attention_template.h"
#include "schedules/conv_template.h"
#include "schedules/gemm_template.h"
#include "schedules/pool_template.h"
#include "schedules/reduction_template.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace hfuse::compose {

// The template families, each led by its kind of master.
enum class Family { None, Conv, Gemm, Pool, Reduction, Attention };

// The family of a schedule's template name (None for "simple"); an Error naming schedule.template
// for a name no template has.
Family family_of_template(const std::string &template_name);
// What a family's template needs of a group, for errors ("a group led by a 2-D Conv").
const char *family_needs(Family family);

// How a group fits a template family: what the template needs to know, or why it does not fit.
struct GroupFacts {
    Family family = Family::None;
    std::string why;  // set when the master's family has a template that does not fit this group
    const Node *master = nullptr;
    std::string tile_value;       // the group output the master is computed per tile of ("" in gemm root mode)
    std::set<std::string> chain;  // the nodes from the master's consumer to tile_value, inlined into the tile
    schedules::ConvGroupShape conv;
    // conv: a pointwise conv of the group feeding the (depthwise) master through `producer_chain`,
    // inlined elementwise ops (conv.producer_input_channels says so too); nullptr when none.
    const Node *producer = nullptr;
    std::set<std::string> producer_chain;
    bool conv_root = false;  // conv: the group's other members are no epilogue it can tile (a reduction,
                             // a Concat, several outputs): the conv at root by its template, the rest simple
    schedules::GemmGroupShape gemm;
    std::vector<const Node *> products;  // gemm: the master and the other Gemm/MatMul members
    schedules::PoolGroupShape pool;
    schedules::ReductionGroupShape reduction;
    std::optional<planner::AttentionPattern> attention;
    schedules::AttentionGroupShape attention_shape;
};

// The facts of `group` in `graph` (family None, with `why` set where the master's family has a
// template that does not fit, e.g. an epilogue it cannot tile).
GroupFacts analyse_group(const Graph &graph, const FusedGroup &group);

// Shapes of members other than the master, which the composer schedules too: a global pool's
// (each channel's plane reduced), a reduction along one axis' (Softmax, LayerNormalization over the
// last axis), and a pool's computed per tile of a Func of shape `output` (`computed_input`: its
// windows read a value a member computes, inlined into it).
bool is_global_pool(const Node &n);
schedules::ReductionGroupShape global_pool_shape(const Graph &graph, const Node &n);
schedules::ReductionGroupShape axis_reduction_shape(const Graph &graph, const Node &n);
schedules::PoolGroupShape pool_group_shape(const Graph &graph, const Node &pool, const Shape &output,
                                           bool computed_input);

// Whether `pool`'s input is computed by a member of its group inlined into it (a Pad, an activation).
bool pool_input_inlined(const Graph &graph, const FusedGroup &group, const Node &pool);

}  // namespace hfuse::compose
