// The text of include/hfuse/hfuse_runtime.h, compiled in (embed_runtime_header.cmake): the block cache
// and OpenMP loop runtime a model compiled by ModelPipeline::compile_to_static_library installs, written
// beside its header as hfuse_runtime.h.
#pragma once

namespace hfuse::exec {

const char *runtime_header_text();

}  // namespace hfuse::exec
