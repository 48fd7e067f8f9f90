# surogate_strict_warnings(TARGET): with -DSUROGATE_WARNINGS_AS_ERRORS=ON (CI: .ci/run through
# scripts/test.sh) a warning in our own code fails the build, C++ and the host side of CUDA alike.
# Off by default, so a user's newer compiler cannot break their build. ptxas's register-spill
# reports stay warnings: the two kernels that spill do so by design (docs/cuda.md, "Register spills").
function(surogate_strict_warnings target)
  if(SUROGATE_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror> $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>)
  endif()
endfunction()

# surogate_add_module(NAME SOURCES ... [CUDA_SOURCES ...] [DEPS ...])
# Declares the static library surogate_<NAME> for one folder of src/ and records it so
# the CLI links every module without a central list to edit.
function(surogate_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;CUDA_SOURCES;DEPS" ${ARGN})
  set(target surogate_${name})
  set(sources ${ARG_SOURCES})
  if(SUROGATE_CUDA AND ARG_CUDA_SOURCES)
    list(APPEND sources ${ARG_CUDA_SOURCES})
  endif()
  add_library(${target} STATIC ${sources})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  surogate_strict_warnings(${target})
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${SUROGATE_UNITY_BUILD})
  if(SUROGATE_CUDA)
    target_compile_definitions(${target} PUBLIC SUROGATE_WITH_CUDA=1)
  endif()
  set_property(GLOBAL APPEND PROPERTY SUROGATE_MODULES ${target})
endfunction()

# The real tokenizers of tests/fixtures/tokenizers/, unpacked by tests/fixtures/CMakeLists.txt.
set(SUROGATE_TOKENIZERS_DIR "${PROJECT_BINARY_DIR}/tests/fixtures/tokenizers")

# surogate_add_test(NAME SOURCES ... DEPS ...): one GoogleTest executable registered with CTest.
# Everything a test reads is inside the repository (tests/fixtures/) or the build tree.
function(surogate_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  surogate_strict_warnings(${name})
  target_compile_definitions(${name} PRIVATE
    SUROGATE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    SUROGATE_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures"
    SUROGATE_TOKENIZERS_DIR="${SUROGATE_TOKENIZERS_DIR}"
    SUROGATE_BINARY="$<TARGET_FILE:surogate>")
  add_dependencies(${name} surogate_test_tokenizers)
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
endfunction()
