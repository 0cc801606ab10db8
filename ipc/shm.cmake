# deepinfer_ipc_shm: shared-memory region, SPSC rings, eventfd, peer credentials.
# Header-only use of Boost.Interprocess (mapped_region); Status comes from engine/common/status.h,
# of which only the inline parts are used here (no link to deepinfer_engine).
find_package(Boost 1.81 REQUIRED)
add_library(deepinfer_ipc_shm STATIC
  ${CMAKE_CURRENT_LIST_DIR}/shm_region.cc
  ${CMAKE_CURRENT_LIST_DIR}/eventfd.cc
)
target_include_directories(deepinfer_ipc_shm PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_options(deepinfer_ipc_shm PRIVATE ${DEEPINFER_WARNINGS})
target_link_libraries(deepinfer_ipc_shm PUBLIC Boost::headers Threads::Threads)
