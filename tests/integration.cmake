# Integration: the daemon on a temporary socket, driven by the client library and the CLI.
deepinfer_unit_test(daemon_test integration/daemon_test.cc)
target_link_libraries(daemon_test PRIVATE deepinfer_client)
add_dependencies(daemon_test deepinferd deepinfer)
deepinfer_unit_test(engine_loop_test integration/engine_loop_test.cc)
target_link_libraries(engine_loop_test PRIVATE deepinfer_client)
add_dependencies(engine_loop_test deepinferd deepinfer)
