# tests for ipc_wire: frame codec, protocol messages, peer credentials, and the frame fuzzer.
deepinfer_unit_test(ipc_frame_test unit/ipc_frame_test.cc)
target_link_libraries(ipc_frame_test PRIVATE deepinfer_ipc_wire)
deepinfer_unit_test(ipc_protocol_test unit/ipc_protocol_test.cc unit/ipc_protocol_reply_test.cc)
target_link_libraries(ipc_protocol_test PRIVATE deepinfer_ipc_wire)
deepinfer_unit_test(ipc_peer_test unit/ipc_peer_test.cc)
target_link_libraries(ipc_peer_test PRIVATE deepinfer_ipc_wire)

# The fuzz entry point (fuzz/frame_fuzz.cc) under a plain driver: the seeds, then mutated and
# random inputs for about two seconds. Runs with every compiler, so CI always exercises it.
set(DEEPINFER_FRAME_CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/frame)
add_executable(frame_fuzz_smoke fuzz/frame_fuzz.cc fuzz/frame_fuzz_smoke.cc)
target_link_libraries(frame_fuzz_smoke PRIVATE deepinfer_ipc_wire)
target_compile_options(frame_fuzz_smoke PRIVATE ${DEEPINFER_WARNINGS})
add_test(NAME frame_fuzz_smoke
         COMMAND frame_fuzz_smoke ${DEEPINFER_FRAME_CORPUS} --seconds=2 --iterations=2000000)
set_tests_properties(frame_fuzz_smoke PROPERTIES TIMEOUT 60)

# Under clang, the real libFuzzer target: the wire sources are compiled into it so that they carry
# the coverage instrumentation. Run: frame_fuzz tests/fuzz/corpus/frame -max_total_time=60
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  get_target_property(DEEPINFER_IPC_WIRE_SOURCES deepinfer_ipc_wire SOURCES)
  add_executable(frame_fuzz fuzz/frame_fuzz.cc ${DEEPINFER_IPC_WIRE_SOURCES}
                 ${PROJECT_SOURCE_DIR}/engine/common/json_writer.cc
                 ${PROJECT_SOURCE_DIR}/engine/tokenizer/utf8.cc)
  target_include_directories(frame_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(frame_fuzz PRIVATE simdjson::simdjson)
  target_compile_options(frame_fuzz PRIVATE ${DEEPINFER_WARNINGS}
                         -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer)
  target_link_options(frame_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
  # Two seconds of real fuzzing in CTest; new inputs go to the build tree, never the sources.
  set(DEEPINFER_FRAME_FUZZ_WORK ${CMAKE_CURRENT_BINARY_DIR}/frame_fuzz_corpus)
  file(MAKE_DIRECTORY ${DEEPINFER_FRAME_FUZZ_WORK})
  add_test(NAME frame_fuzz COMMAND frame_fuzz -max_total_time=2 -rss_limit_mb=2048
                                   ${DEEPINFER_FRAME_FUZZ_WORK} ${DEEPINFER_FRAME_CORPUS})
  set_tests_properties(frame_fuzz PROPERTIES TIMEOUT 60)
endif()
