# ct_npb: what the NPB kernels share (npb.h): the class option, --check-only lines,
# communication accounting, the relative-error checks and the result line of the
# contract in docs/npb.md. Included by kernels/npb/<bench>/CMakeLists.txt; defined once.
include(${PROJECT_SOURCE_DIR}/common/ct_mpi.cmake)
if(NOT TARGET ct_npb)
  add_library(ct_npb STATIC ${CMAKE_CURRENT_LIST_DIR}/npb.c)
  target_include_directories(ct_npb PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(ct_npb PUBLIC ct_mpi m)
endif()
