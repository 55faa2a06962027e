# ct_mpi: the MPI half of the kernel harness (ct_mpi.h, ct_phase.h). Included by every
# directory with MPI kernels (after find_package(MPI)); defined by the first of them.
if(NOT TARGET ct_mpi)
  add_library(ct_mpi STATIC ${CMAKE_CURRENT_LIST_DIR}/ct_mpi.c ${CMAKE_CURRENT_LIST_DIR}/ct_phase.c)
  target_link_libraries(ct_mpi PUBLIC ct_common MPI::MPI_C)
endif()
