#include "explore/schedule_variants.h"

#include "compose/composer.h"
#include "exec/group_lowering.h"
#include "explore/plan_space.h"
#include "hfuse/error.h"
#include "schedules/conv_template.h"

#include <algorithm>
#include <set>

namespace hfuse::explore {
namespace {

using nlohmann::json;

// Choices of the string parameters (schedules/README.md).
const std::map<std::string, std::vector<std::string>> kChoices = {
    {"reduction_order", {"kx,ci,ky", "ci,kx,ky", "kx,ky,ci"}},
    {"compute", {"tile", "root"}},
    {"algorithm", {"direct", "winograd"}},
    {"channel_loop", {"inner", "outer"}},
    {"input_at", {"root", "task"}},
    {"position_tiles", {"flat", "in_rows"}},
};

// Integer steps: small values +-1 and x2 / /2 (register tiles, unrolling), large ones x2 / /2 (rows or
// elements per task); conv_cv's input copy planar or blocked by x2 / /2. Out-of-range values are left
// to the checker.
std::vector<int64_t> integer_steps(const std::string &key, int64_t v) {
    if (key == "unroll_window") return {1 - v};
    if (key == "winograd_tile") return {v == 2 ? 4 : 2};  // F(2x2, 3x3) <-> F(4x4, 3x3)
    if (key == "input_block") return v > 0 ? std::vector<int64_t>{0, v / 2, v * 2} : std::vector<int64_t>{4, 8};
    std::set<int64_t> s = {v * 2, v / 2};
    if (v <= 8) {
        s.insert(v - 1);
        s.insert(v + 1);
    }
    s.erase(v);
    std::vector<int64_t> out;
    for (int64_t x : s) {
        if (x >= (key == "parallel_threshold" ? 0 : 1)) out.push_back(x);
    }
    return out;
}

// Accumulators a conv_xv, conv_flat or conv_cv register tile holds (conv_cv: plus a broadcast per
// position and a weight vector): beyond the vector registers they spill.
bool fits_registers(const json &s, const Halide::Target &target) {
    const std::string tmpl = s.value("template", "");
    const int registers = target.natural_vector_size<float>() >= 16 ? 32 : 16;
    if (tmpl == "conv_cv") {
        const int64_t positions = s.value("tile_positions", 1);
        return positions * s.value("tile_c_vectors", 1) + positions + 1 <= registers;
    }
    if (tmpl != "conv_xv" && tmpl != "conv_flat") return true;
    const int64_t acc = s.value("tile_x_vectors", 1) * s.value("tile_y", 1) * s.value("tile_c", 1);
    return acc <= registers - 2;
}

}  // namespace

struct VariantChecker::Impl {
    Graph graph;
    Halide::Target target;
    exec::WeightBuffers weights;
};

VariantChecker::VariantChecker(const Graph &graph, const Halide::Target &target)
    : impl_(std::make_unique<Impl>(Impl{graph, target, exec::make_weight_buffers(graph)})) {}

VariantChecker::~VariantChecker() = default;

std::string VariantChecker::check(const FusedGraph &plan, const std::string &group) const {
    for (const FusedGroup &grp : plan.groups) {
        if (grp.name != group) continue;
        try {
            compose::lower_and_compose(impl_->graph, plan, grp, impl_->weights, impl_->target);
        } catch (const Error &e) {
            return e.what();
        } catch (const Halide::Error &e) {
            return e.what();
        }
    }
    return "";
}

std::vector<ScheduleVariant> schedule_neighbours(const FusedGraph &plan, const VariantChecker &checker,
                                                 const Halide::Target &target, uint64_t seed) {
    std::vector<ScheduleVariant> out;
    FusedGraph work = plan;  // each variant checked on it in turn, then set back
    for (size_t gi = 0; gi < plan.groups.size(); gi++) {
        const FusedGroup &grp = plan.groups[gi];
        if (!grp.schedule.is_object() || !grp.backend.empty()) continue;
        // The parameters present, and those left out at the value their template then runs with
        // ("absent"): a neighbour also sets each one step from that value, so that `explore` tries,
        // say, the reduction unrolled on a machine whose defaults leave it rolled.
        const std::map<std::string, json> &absent = schedules::conv_absent_params(grp.schedule.value("template", ""));
        std::vector<std::pair<std::string, json>> params;
        for (const auto &kv : grp.schedule.items()) params.emplace_back(kv.key(), kv.value());
        for (const auto &[key, value] : absent) {
            if (!grp.schedule.contains(key)) params.emplace_back(key, value);
        }
        for (const auto &[key, value] : params) {
            if (key == "template" || key == "why" || key == "vector_width") continue;
            std::vector<json> values;
            if (value.is_number_integer()) {
                for (int64_t x : integer_steps(key, value.get<int64_t>())) values.push_back(x);
            } else if (value.is_boolean()) {
                values.push_back(!value.get<bool>());
            } else if (value.is_string() && kChoices.count(key)) {
                for (const std::string &c : kChoices.at(key)) {
                    if (c != value.get<std::string>()) values.push_back(c);
                }
            }
            for (const json &v : values) {
                const std::string from = grp.schedule.contains(key) ? value.dump() : "(absent: " + value.dump() + ")";
                ScheduleVariant var{gi, grp.schedule, grp.name + "." + key + " " + from + "->" + v.dump()};
                json &s = var.schedule;
                s[key] = v;
                // Set back to the value it runs with absent: left out, so that the variant is the same
                // plan (the same key) as one without it, and `explore` does not time it twice.
                if (absent.count(key) && absent.at(key) == v) s.erase(key);
                s.erase("why");
                if (key == "algorithm" && v == "direct") s.erase("winograd_tile");  // Winograd's alone
                if (!fits_registers(s, target)) continue;
                work.groups[gi].schedule = s;
                const bool accepted = checker.check(work, grp.name).empty();
                work.groups[gi].schedule = grp.schedule;
                if (accepted) out.push_back(std::move(var));
            }
        }
    }
    SeededRandom rng(seed);
    for (size_t i = out.size(); i > 1; i--) std::swap(out[i - 1], out[rng.below(i)]);
    return out;
}

}  // namespace hfuse::explore
