// Scheduling a group's pipeline with one of Halide 14's autoschedulers instead of hfuse's templates.
//
// The group is lowered as usual (exec::lower_group leaves every Func unscheduled; pinning the output
// buffer's shape is a constraint, not a schedule, and all three autoschedulers accept it). Every input
// ImageParam and every output Func gets estimates equal to its static shape, the autoscheduler's
// plugin is loaded (once per process), and Pipeline::auto_schedule applies its schedule in place:
//
//   exec::LoweredGroup lowered = exec::lower_group(g, nodes, live_out, weights);
//   Halide::Pipeline p(lowered.output_funcs);
//   exec::autoschedule_group(g, lowered, p, ScheduleSource::Adams2019, target, /*parallelism=*/2);
//   p.compile_jit(target);
//
// Adams2019 runs one pass of its beam search unless HL_NUM_PASSES is set (its default of 5 took 96 s
// and 4 GB on a single conv group, against 2 s for one pass); HL_BEAM_SIZE=1 makes it greedy.
//
// The plugins are found where the Halide CMake package said at build time (its imported targets
// Halide::Mullapudi2016, Halide::Adams2019, Halide::Li2018), else next to the loaded libHalide
// (<libdir>/halide14/); a missing plugin is an hfuse::Error naming the paths tried.
#pragma once

#include "exec/group_lowering.h"
#include "hfuse/executor.h"

#include <Halide.h>

#include <string>

namespace hfuse::exec {

// Halide's registered name of the autoscheduler ("Adams2019", ...); `source` must not be Templates.
std::string autoscheduler_name(ScheduleSource source);

// The plugin's file; throws an Error naming the paths tried when it is not installed.
std::string autoscheduler_plugin_path(ScheduleSource source);

// Loads the plugin of `source` unless this process already did (thread-safe).
void load_autoscheduler(ScheduleSource source);

// Cores to plan for: `requested` if > 0, else HL_NUM_THREADS if set, else every core.
int autoscheduler_parallelism(int requested);

// What `source`'s choices depend on besides the pipeline, as text for the kernel cache's key: the
// cores it plans for (autoscheduler_parallelism(requested)) and the environment variables Halide 14's
// autoschedulers read, as they will be when it runs (HL_NUM_PASSES: 1 for Adams2019 unless set, as
// load_autoscheduler() sets it).
std::string autoscheduler_inputs(ScheduleSource source, int requested);

// Sets shape estimates on `lowered`'s params and output Funcs and schedules `pipeline` (made from
// lowered.output_funcs) with `source`'s autoscheduler, as Halide 14 does it:
// auto_schedule(name, target, MachineParams(parallelism, 16 MiB last-level cache, balance 40)).
// Throws an Error if the autoscheduler rejects the pipeline.
void autoschedule_group(const Graph &graph, const LoweredGroup &lowered, Halide::Pipeline &pipeline,
                        ScheduleSource source, const Halide::Target &target, int parallelism);

}  // namespace hfuse::exec
