# Writes OUT, a C++ file defining hfuse::builtin_rule_files(): the built-in rule sets are the shipped
# JSON files themselves, so the two can never disagree. Run at build time (see CMakeLists.txt).
file(GLOB files "${IN_DIR}/*.json")
set(body "")
foreach(f ${files})
  get_filename_component(name "${f}" NAME_WE)
  file(READ "${f}" text)
  string(APPEND body "        {\"${name}\", R\"hfuse_json(${text})hfuse_json\"},\n")
endforeach()
file(WRITE "${OUT}.tmp" "// Generated from src/planner/rules/*.json by embed_rules.cmake. Do not edit.\n#include <map>\n#include <string>\n\nnamespace hfuse {\nconst std::map<std::string, std::string> &builtin_rule_files() {\n    static const std::map<std::string, std::string> files = {\n${body}    };\n    return files;\n}\n}  // namespace hfuse\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
