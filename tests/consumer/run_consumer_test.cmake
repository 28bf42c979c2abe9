# ctest's Consumer.AddSubdirectory: configures, builds and runs tests/consumer (a project that
# add_subdirectory()s hfuse and calls hfuse_add_model) in a fresh binary directory, then checks that
# the compiled models are regenerated exactly when their inputs change:
#
#   a no-op build runs no `hfuse compile`;
#   touching the plan file (listed in DEPENDS) rebuilds only the library compiled from it;
#   touching the weight file (known only from hfuse compile's depfile: DEPFILE) rebuilds both;
#   touching the model file (DEPENDS) rebuilds both; the program is relinked and run again.
#
# The model, weight and plan files are copies in WORK_DIR/inputs, so hfuse's source tree is not touched.
#
#   cmake -DHFUSE_DIR=<hfuse> -DCONSUMER_SRC=<hfuse>/tests/consumer -DWORK_DIR=<dir> [-DGENERATOR=<g>]
#         [-DMAKE_PROGRAM=<make>] [-DBUILD_TYPE=Release] [-DJOBS=2] [-DC_COMPILER=<cc>] [-DCXX_COMPILER=<c++>]
#         -P run_consumer_test.cmake
cmake_minimum_required(VERSION 3.22)

foreach(v IN ITEMS HFUSE_DIR CONSUMER_SRC WORK_DIR)
  if(NOT ${v})
    message(FATAL_ERROR "run_consumer_test.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()
if(NOT JOBS)
  set(JOBS 2)
endif()

string(TIMESTAMP t_start "%s")
function(step_time label)
  string(TIMESTAMP now "%s")
  math(EXPR s "${now} - ${t_start}")
  message(STATUS "consumer test: ${label} (${s} s since start)")
endfunction()

# A fresh binary directory, and copies of the files whose changes must trigger regeneration.
file(REMOVE_RECURSE "${WORK_DIR}")
set(inputs "${WORK_DIR}/inputs")
set(build "${WORK_DIR}/build")
file(MAKE_DIRECTORY "${inputs}")
file(COPY "${HFUSE_DIR}/models/conv_bias_relu_maxpool.json" "${HFUSE_DIR}/models/conv_bias_relu_maxpool.w.f32"
          "${CONSUMER_SRC}/cbrm_two_groups.plan.json"
     DESTINATION "${inputs}")

set(configure_args -S "${CONSUMER_SRC}" -B "${build}" "-DHFUSE_DIR=${HFUSE_DIR}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
    "-DCONSUMER_MODEL_DIR=${inputs}" "-DCONSUMER_PLAN=${inputs}/cbrm_two_groups.plan.json")
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(C_COMPILER)
  list(APPEND configure_args "-DCMAKE_C_COMPILER=${C_COMPILER}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" ${configure_args} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer test: configuring the consumer project failed (${rc})")
endif()
step_time("configured")

# Builds the consumer; `out_var` gets the build's output (also printed).
function(build_consumer label out_var)
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build}" --parallel ${JOBS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: building (${label}) failed (${rc})")
  endif()
  step_time("built (${label})")
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

function(run_consumer)
  execute_process(COMMAND "${build}/consumer" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: the consumer program failed (${rc})")
  endif()
  step_time("ran the consumer")
endfunction()

# Which libraries a build regenerated must be exactly `expected` (a list of names, maybe empty); the
# COMMENT of hfuse_add_model's rule says "hfuse: compiling <model> into <name>.a".
function(expect_regenerated label out expected)
  set(got "")
  foreach(name IN ITEMS cbrm cbrm_two_groups)
    string(FIND "${out}" " into ${name}.a" pos)
    if(NOT pos EQUAL -1)
      list(APPEND got ${name})
    endif()
  endforeach()
  if(NOT "${got}" STREQUAL "${expected}")
    message(FATAL_ERROR "consumer test: after ${label}, expected regenerated [${expected}], got [${got}]")
  endif()
  if(expected)
    string(FIND "${out}" "Linking CXX executable consumer" pos)
    if(pos EQUAL -1)
      message(FATAL_ERROR "consumer test: after ${label}, the consumer was not relinked")
    endif()
  endif()
  message(STATUS "consumer test: after ${label}: regenerated [${got}], as expected")
endfunction()

# Make compares modification times: leave a second between a build and a touch.
function(touch_later file)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E sleep 1.1)
  file(TOUCH "${file}")
endfunction()

build_consumer("from scratch" out)
expect_regenerated("the first build" "${out}" "cbrm;cbrm_two_groups")
run_consumer()

build_consumer("nothing changed" out)
expect_regenerated("a no-op build" "${out}" "")

touch_later("${inputs}/cbrm_two_groups.plan.json")
build_consumer("plan touched" out)
expect_regenerated("touching the plan" "${out}" "cbrm_two_groups")

touch_later("${inputs}/conv_bias_relu_maxpool.w.f32")
build_consumer("weights touched" out)
expect_regenerated("touching the weight file (depfile)" "${out}" "cbrm;cbrm_two_groups")

touch_later("${inputs}/conv_bias_relu_maxpool.json")
build_consumer("model touched" out)
expect_regenerated("touching the model file" "${out}" "cbrm;cbrm_two_groups")
run_consumer()

step_time("passed")
