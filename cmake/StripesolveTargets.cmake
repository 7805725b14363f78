# Project-wide compile options and the helpers every module uses:
#   stripesolve_library(NAME SOURCES ... DEPS ...)   a static library stripesolve_<NAME>
#   stripesolve_test(NAME SOURCES ... DEPS ... [LABELS ...])  a GoogleTest binary registered with CTest
#   stripesolve_cuda_one_by_one(SOURCES...)          CUDA files kept out of unity batches

add_library(stripesolve_options INTERFACE)
target_compile_options(stripesolve_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wnon-virtual-dtor>
  $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wshadow=local>
  # clang (scripts/check-threads.sh): the thread-safety analysis of base/thread_annotations.h.
  $<$<COMPILE_LANG_AND_ID:CXX,Clang>:-Wthread-safety>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${STRIPESOLVE_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${STRIPESOLVE_NATIVE}>>:-march=native>)
target_include_directories(stripesolve_options INTERFACE ${PROJECT_SOURCE_DIR})
if(STRIPESOLVE_SANITIZE STREQUAL "address")
  target_compile_options(stripesolve_options INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(stripesolve_options INTERFACE -fsanitize=address,undefined)
elseif(STRIPESOLVE_SANITIZE STREQUAL "thread")
  target_compile_options(stripesolve_options INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(stripesolve_options INTERFACE -fsanitize=thread)
  target_compile_definitions(stripesolve_options INTERFACE STRIPESOLVE_TSAN=1)
elseif(STRIPESOLVE_SANITIZE)
  message(FATAL_ERROR "STRIPESOLVE_SANITIZE must be empty, 'address' or 'thread'")
endif()
if(STRIPESOLVE_HAVE_CUDA)
  target_compile_definitions(stripesolve_options INTERFACE STRIPESOLVE_HAVE_CUDA=1)
endif()

# Unity builds (CMAKE_UNITY_BUILD: the release and tsan presets) batch C++ files only: CMake 3.27
# and later batch CUDA files too, whose kernels and file-local helpers share names. Called in the
# directory of the target that compiles them.
function(stripesolve_cuda_one_by_one)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "\\.cu$")
      set_source_files_properties(${src} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
endfunction()

function(stripesolve_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  stripesolve_cuda_one_by_one(${ARG_SOURCES})
  add_library(stripesolve_${name} STATIC ${ARG_SOURCES})
  add_library(stripesolve::${name} ALIAS stripesolve_${name})
  target_link_libraries(stripesolve_${name} PUBLIC stripesolve_options ${ARG_DEPS}
                        PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

function(stripesolve_test name)
  if(NOT STRIPESOLVE_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(STRIPESOLVE_TEST_LABEL AND NOT STRIPESOLVE_TEST_LABEL IN_LIST ARG_LABELS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE stripesolve_options ${ARG_DEPS} GTest::gtest GTest::gmock
                        GTest::gtest_main)
  # The tests' own code at -O1 in release builds: half the build's compile time went into
  # optimizing test code at -O3; the code under test keeps the build's flags.
  target_compile_options(${name} PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release>>:-O1>)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  # LABELS only where there are some: an empty value vanishes from the unquoted list below, and
  # TIMEOUT became the test's label with 300 left unpaired (no timeout at all).
  set(properties TIMEOUT ${ARG_TIMEOUT})
  if(ARG_LABELS)
    list(APPEND properties LABELS "${ARG_LABELS}")
  endif()
  # The suppressions: OpenBLAS's pool, which TSan cannot see into. This replaces the test
  # preset's TSAN_OPTIONS, so the preset's options are repeated (a refused allocation returns
  # null, as without a sanitizer: ArenaTest.ARefusedBlockLeavesAnEmptyArenaThatSaysSo).
  if(STRIPESOLVE_SANITIZE STREQUAL "thread")
    list(APPEND properties ENVIRONMENT
         "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/cmake/tsan-suppressions.txt:halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1")
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES ${properties})
endfunction()
