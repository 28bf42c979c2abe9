# Writes OUT, a C++ file defining hfuse::exec::runtime_header_text(): the text of
# include/hfuse/hfuse_runtime.h (IN), which ModelPipeline::compile_to_static_library writes beside a
# compiled model's header. Run at build time (see CMakeLists.txt), so the two never disagree.
file(READ "${IN}" text)
file(WRITE "${OUT}.tmp" "// Generated from include/hfuse/hfuse_runtime.h by embed_runtime_header.cmake. Do not edit.\n#include \"exec/runtime_header.h\"\n\nnamespace hfuse::exec {\nconst char *runtime_header_text() {\n    return R\"hfuse_runtime(${text})hfuse_runtime\";\n}\n}  // namespace hfuse::exec\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
