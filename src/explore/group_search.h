// Each group's schedule parameters, searched against the plan they vary in one process.
//
// Separate processes differ by more than the few percent a parameter is worth (the core they get,
// page placement, other load on the machine); two plans timed in one process, interleaved, do not.
// So a round of this search sets one neighbour (schedule_variants.h) in every class of alike groups
// at once and is timed with `hfuse bench --plan ROUND --against BASE --profile`, which profiles each
// group beside the same nodes' group of BASE, alternately. A class's variant pays when its groups
// took at most (1 - min_gain) of BASE's time for them. The winners are composed into one plan, which
// is timed against BASE the same way; those that do not pay there are dropped and the rest composed
// again (explore.cpp).
//
// Alike groups (the repeated blocks of a stage) are one class: the same ops, attributes, shapes,
// placements and schedule. They take the same variant, so their times add up to one measurement and
// a tuning record (tuning_record.h) gets one schedule for each distinct segment.
#pragma once

#include "explore/candidate.h"
#include "explore/schedule_variants.h"
#include "hfuse/fused_graph.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hfuse::explore {

struct GroupClass {
    std::vector<size_t> groups;             // indices into the plan's groups, the first one's variants
    std::string label;                      // "g3 (3 alike): Conv /layer1/..."
    std::vector<ScheduleVariant> variants;  // of groups[0], in the order the rounds take them
};

// The classes of `plan`'s groups scheduled by the templates that have at least one variant in
// `neighbours` (schedule_neighbours() of `plan`), in the order of their first group.
std::vector<GroupClass> group_classes(const FusedGraph &plan, const std::vector<ScheduleVariant> &neighbours);

// Round `round`'s plan: `base` with each class that has a variant `round` given it on all its groups;
// `changes` gets each variant's description. Nothing to vary (no class has so many variants): nullopt.
std::optional<FusedGraph> round_plan(const FusedGraph &base, const std::vector<GroupClass> &classes, size_t round,
                                     std::vector<std::string> *changes = nullptr);

// What `bench --against --profile` said of each group: its median and that of BASE's group of the
// same nodes, by the group's name (schedules aside, a round's groups are BASE's).
struct GroupTimes {
    std::map<std::string, std::pair<double, double>> ms;  // name -> (plan, against)
};
// From an evaluation timed against another plan: the groups timed on both sides; nullopt when it
// did not run or has no group profile.
std::optional<GroupTimes> group_times(const Evaluation &e);

// A class's time under the varied plan over BASE's, its groups summed; nullopt when one of them was
// not timed on both sides.
std::optional<double> class_ratio(const GroupClass &c, const FusedGraph &plan, const GroupTimes &times);

// One variant timed in one round.
struct GroupTrial {
    size_t round = 0;
    double ratio = 0;  // the class's time with it over BASE's
};

// The variant each class keeps: its fastest trial when that took at most (1 - min_gain) of BASE's
// time, by class index; classes with none are left out.
std::map<size_t, size_t> winning_variants(const std::vector<std::vector<GroupTrial>> &trials, double min_gain);

// `base` with `winners` (class index -> variant index) applied.
FusedGraph with_variants(const FusedGraph &base, const std::vector<GroupClass> &classes,
                         const std::map<size_t, size_t> &winners);

}  // namespace hfuse::explore
