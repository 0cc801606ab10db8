# tests for daemon_core: configuration, the systemd protocols and the shipped unit files.
deepinfer_unit_test(daemon_config_test unit/daemon_config_test.cc)
target_link_libraries(daemon_config_test PRIVATE deepinfer_daemon_core)
deepinfer_unit_test(config_options_test unit/config_options_test.cc)
target_link_libraries(config_options_test PRIVATE deepinfer_daemon_core)

# A socket-activated program for the systemd-socket-activate end-to-end test: takes the
# listening socket with ListenFds(), accepts one connection, writes "ok" and exits.
add_executable(deepinfer_listen_fds_helper helpers/listen_fds_helper.cc)
target_link_libraries(deepinfer_listen_fds_helper PRIVATE deepinfer_daemon_core)
target_compile_options(deepinfer_listen_fds_helper PRIVATE ${DEEPINFER_WARNINGS})

deepinfer_unit_test(systemd_test unit/systemd_test.cc)
target_link_libraries(systemd_test PRIVATE deepinfer_daemon_core)
target_compile_definitions(systemd_test PRIVATE
  DEEPINFER_LISTEN_FDS_HELPER="$<TARGET_FILE:deepinfer_listen_fds_helper>")
add_dependencies(systemd_test deepinfer_listen_fds_helper)

deepinfer_unit_test(systemd_units_test unit/systemd_units_test.cc)
target_link_libraries(systemd_units_test PRIVATE deepinfer_daemon_core)
