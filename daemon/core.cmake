# deepinfer_daemon_core: configuration (flags and config file) and systemd integration
# (sd_notify, watchdog, socket activation), implemented without libsystemd.
add_library(deepinfer_daemon_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/config.cc
  ${CMAKE_CURRENT_LIST_DIR}/config_options.cc
  ${CMAKE_CURRENT_LIST_DIR}/systemd.cc
)
target_include_directories(deepinfer_daemon_core PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_options(deepinfer_daemon_core PRIVATE ${DEEPINFER_WARNINGS})
