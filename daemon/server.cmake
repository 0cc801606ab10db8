add_library(deepinfer_server STATIC engine_worker.cc server.cc session.cc)
target_include_directories(deepinfer_server PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_options(deepinfer_server PRIVATE ${DEEPINFER_WARNINGS})
target_compile_definitions(deepinfer_server PUBLIC DEEPINFER_VERSION="${PROJECT_VERSION}")
target_link_libraries(deepinfer_server PUBLIC deepinfer_daemon_core deepinfer_ipc_wire deepinfer_ipc_shm
                      deepinfer_scheduler deepinfer_grammar spdlog::spdlog Threads::Threads)

add_executable(deepinferd main.cc)
target_link_libraries(deepinferd PRIVATE deepinfer_server deepinfer_cuda_backend)
target_compile_options(deepinferd PRIVATE ${DEEPINFER_WARNINGS})
