# cmake -DDIR=<dir> -P clear_dir.cmake: empties DIR (the tests' scratch directory), creating it if missing.
if(NOT DIR)
  message(FATAL_ERROR "clear_dir.cmake: pass -DDIR=<directory>")
endif()
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
