# hfuse_add_model(): a model compiled ahead of time by `hfuse compile`, as a static library to link.
#
#   hfuse_add_model(<target> MODEL <file>
#                   [PLAN <file> | RULES <name-or-file>... | UNFUSED | WHOLE]
#                   [AUTOSCHEDULE <mullapudi2016|adams2019|li2018>]
#                   [TARGET <halide-target>]      # default: host
#                   [NAME <c-identifier>])        # default: <target>, with '-', '.', ... made '_'
#
#   target_link_libraries(app PRIVATE <target>)    # NAME.a, NAME.h on the include path, -ldl, threads,
#                                                  # OpenMP (-fopenmp: NAME.h installs OpenMP's loops)
#
# Relative paths are relative to CMAKE_CURRENT_SOURCE_DIR. The library is written at build time into
# ${CMAKE_CURRENT_BINARY_DIR}/<target>.hfuse/ (NAME.a with the Halide runtime, NAME.h, hfuse_runtime.h,
# HalideBuffer.h, HalideRuntime.h), and is rebuilt when the model, its weight files, the plan, a rule
# file or the hfuse binary change: the model and plan are listed as dependencies, and `hfuse compile
# --depfile` lists the weight files and rule files it read (DEPFILE; Makefile and Ninja generators).
#
# The function needs the hfuse_cli target: include this file from hfuse's CMakeLists.txt (a consumer
# gets it with add_subdirectory(<hfuse>)). It sets these properties on <target>: HFUSE_NAME (the C
# function and library name), HFUSE_OUTPUT_DIR, HFUSE_HEADER.
include_guard(GLOBAL)

# The built-in rule sets (compiled into hfuse); any other RULES value is a rule-set file.
file(GLOB _hfuse_builtin_rule_files "${CMAKE_CURRENT_LIST_DIR}/../src/planner/rules/*.json")
# Global properties, not variables: the function runs in the caller's directory scope.
set_property(GLOBAL PROPERTY HFUSE_BUILTIN_RULES "")
foreach(_f IN LISTS _hfuse_builtin_rule_files)
  get_filename_component(_n "${_f}" NAME_WE)
  set_property(GLOBAL APPEND PROPERTY HFUSE_BUILTIN_RULES "${_n}")
endforeach()
unset(_f)
unset(_n)
unset(_hfuse_builtin_rule_files)

# C and C++ keywords a function cannot be named (the list hfuse compile checks, is_c_identifier).
set_property(GLOBAL PROPERTY HFUSE_C_KEYWORDS
  auto break case char const continue default do double else enum extern float for goto if inline int
  long register restrict return short signed sizeof static struct switch typedef union unsigned void
  volatile while bool class delete new namespace operator private protected public template this throw
  try typename using virtual catch friend mutable true false nullptr)

# Sets <out_var> to TRUE if <name> is a C identifier that is not a keyword, else FALSE.
function(_hfuse_is_c_identifier name out_var)
  set(ok FALSE)
  if(name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    get_property(keywords GLOBAL PROPERTY HFUSE_C_KEYWORDS)
    list(FIND keywords "${name}" kw)
    if(kw EQUAL -1)
      set(ok TRUE)
    endif()
  endif()
  set(${out_var} ${ok} PARENT_SCOPE)
endfunction()

# An absolute path for a file argument (relative to CMAKE_CURRENT_SOURCE_DIR), which must exist.
function(_hfuse_existing_file target keyword path out_var)
  get_filename_component(abs "${path}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${abs}" OR IS_DIRECTORY "${abs}")
    message(FATAL_ERROR "hfuse_add_model(${target}): ${keyword} '${path}': no such file (${abs})")
  endif()
  set(${out_var} "${abs}" PARENT_SCOPE)
endfunction()

function(hfuse_add_model target)
  # --- arguments ---------------------------------------------------------------------------------
  if(NOT target OR target MATCHES "^(MODEL|PLAN|RULES|TARGET|NAME|AUTOSCHEDULE|UNFUSED|WHOLE)$")
    message(FATAL_ERROR "hfuse_add_model: the first argument must be the name of the library target to "
                        "create, e.g. hfuse_add_model(my_model MODEL model.json)")
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 ARG "UNFUSED;WHOLE" "MODEL;PLAN;TARGET;NAME;AUTOSCHEDULE" "RULES")
  set(fn "hfuse_add_model(${target})")
  if(ARG_UNPARSED_ARGUMENTS)
    string(REPLACE ";" " " unknown "${ARG_UNPARSED_ARGUMENTS}")
    message(FATAL_ERROR "${fn}: unknown argument(s) '${unknown}' (keywords: MODEL, PLAN, "
                        "RULES, UNFUSED, WHOLE, AUTOSCHEDULE, TARGET, NAME)")
  endif()
  foreach(kw IN ITEMS MODEL PLAN TARGET NAME AUTOSCHEDULE RULES)
    if(kw IN_LIST ARG_KEYWORDS_MISSING_VALUES)
      message(FATAL_ERROR "${fn}: ${kw} needs a value")
    endif()
  endforeach()
  if(NOT DEFINED ARG_MODEL)
    message(FATAL_ERROR "${fn}: MODEL <file> is required (the model's .json file)")
  endif()
  if(TARGET ${target} OR TARGET ${target}_hfuse_compile)
    message(FATAL_ERROR "${fn}: a target named '${target}' (or '${target}_hfuse_compile') already exists")
  endif()
  if(NOT TARGET hfuse_cli)
    message(FATAL_ERROR "${fn}: the hfuse_cli target is not defined; add hfuse with add_subdirectory() "
                        "before calling hfuse_add_model")
  endif()

  _hfuse_existing_file(${target} MODEL "${ARG_MODEL}" model)
  set(depends "${model}")
  set(plan_args "")
  set(choices 0)
  if(DEFINED ARG_PLAN)
    _hfuse_existing_file(${target} PLAN "${ARG_PLAN}" plan)
    list(APPEND depends "${plan}")
    list(APPEND plan_args --plan "${plan}")
    math(EXPR choices "${choices} + 1")
  endif()
  if(DEFINED ARG_RULES)
    get_property(builtin_rules GLOBAL PROPERTY HFUSE_BUILTIN_RULES)
    foreach(r IN LISTS ARG_RULES)
      if(r IN_LIST builtin_rules)
        list(APPEND plan_args --rules "${r}")
      else()
        get_filename_component(abs "${r}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
        if(NOT EXISTS "${abs}" OR IS_DIRECTORY "${abs}")
          string(REPLACE ";" ", " builtin "${builtin_rules}")
          message(FATAL_ERROR "${fn}: RULES '${r}': neither a built-in rule set (${builtin}) nor a "
                              "rule-set file (${abs})")
        endif()
        list(APPEND depends "${abs}")
        list(APPEND plan_args --rules "${abs}")
      endif()
    endforeach()
    math(EXPR choices "${choices} + 1")
  endif()
  if(ARG_UNFUSED)
    list(APPEND plan_args --unfused)
    math(EXPR choices "${choices} + 1")
  endif()
  if(ARG_WHOLE)
    list(APPEND plan_args --whole)
    math(EXPR choices "${choices} + 1")
  endif()
  if(choices GREATER 1)
    message(FATAL_ERROR "${fn}: give at most one of PLAN, RULES, UNFUSED and WHOLE")
  endif()
  if(DEFINED ARG_AUTOSCHEDULE)
    set(schedulers mullapudi2016 adams2019 li2018)
    if(NOT ARG_AUTOSCHEDULE IN_LIST schedulers)
      message(FATAL_ERROR "${fn}: AUTOSCHEDULE '${ARG_AUTOSCHEDULE}' is not one of mullapudi2016, adams2019, "
                          "li2018")
    endif()
    list(APPEND plan_args --autoschedule "${ARG_AUTOSCHEDULE}")
  endif()

  set(halide_target host)
  if(DEFINED ARG_TARGET)
    set(halide_target "${ARG_TARGET}")  # checked by hfuse compile (a Halide target string)
  endif()

  if(DEFINED ARG_NAME)
    set(name "${ARG_NAME}")
    _hfuse_is_c_identifier("${name}" ok)
    if(NOT ok)
      message(FATAL_ERROR "${fn}: NAME '${name}' must be a C identifier (letters, digits, '_', not starting "
                          "with a digit) and not a C/C++ keyword")
    endif()
  else()
    string(MAKE_C_IDENTIFIER "${target}" name)  # '-', '.', ':' ... -> '_'; a leading digit gets '_'
    _hfuse_is_c_identifier("${name}" ok)
    if(NOT ok)
      message(FATAL_ERROR "${fn}: the target name does not make a usable C function name ('${name}' is a "
                          "C/C++ keyword); give one with NAME <c-identifier>")
    endif()
  endif()

  # --- the build rule ----------------------------------------------------------------------------
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/${target}.hfuse")
  set(lib "${dir}/${name}.a")
  set(header "${dir}/${name}.h")
  set(depfile "${dir}/${name}.d")
  # Exists before the build: CMake requires an imported target's include directories to exist.
  file(MAKE_DIRECTORY "${dir}")
  get_filename_component(model_shown "${model}" NAME)
  if(DEFINED ARG_PLAN)
    get_filename_component(plan_shown "${plan}" NAME)
    string(APPEND model_shown " (plan ${plan_shown})")
  endif()
  add_custom_command(
    OUTPUT "${lib}" "${header}"
    BYPRODUCTS "${dir}/HalideBuffer.h" "${dir}/HalideRuntime.h" "${dir}/hfuse_runtime.h"
    COMMAND $<TARGET_FILE:hfuse_cli> compile "${model}" ${plan_args} -o "${dir}" --name "${name}"
            --target "${halide_target}" --depfile "${depfile}"
    DEPENDS hfuse_cli ${depends}
    DEPFILE "${depfile}"
    COMMENT "hfuse: compiling ${model_shown} into ${name}.a for ${halide_target}"
    VERBATIM)
  add_custom_target(${target}_hfuse_compile DEPENDS "${lib}" "${header}")

  find_package(Threads REQUIRED)  # Threads::Threads in the caller's directory
  # -fopenmp for the callers: NAME.h then installs OpenMP's loops for a model that runs on them.
  find_package(OpenMP REQUIRED)
  set(openmp "")
  foreach(lang IN ITEMS C CXX)
    if(TARGET OpenMP::OpenMP_${lang})
      list(APPEND openmp OpenMP::OpenMP_${lang})
    endif()
  endforeach()
  add_library(${target} STATIC IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION "${lib}"
    INTERFACE_INCLUDE_DIRECTORIES "${dir}"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS};Threads::Threads;${openmp}"
    HFUSE_NAME "${name}"
    HFUSE_OUTPUT_DIR "${dir}"
    HFUSE_HEADER "${header}")
  add_dependencies(${target} ${target}_hfuse_compile)
endfunction()
