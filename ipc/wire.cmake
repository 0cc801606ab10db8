# deepinfer_ipc_wire: frame codec, handshake and request/reply JSON, peer credentials
# (docs/protocol.md). Links deepinfer_engine only for AppendJsonString and IsValidUtf8
# (engine/common/json_writer.*, engine/tokenizer/utf8.*); no engine types cross its API.
set(DEEPINFER_IPC_WIRE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/frame.cc
  ${CMAKE_CURRENT_LIST_DIR}/protocol.cc
  ${CMAKE_CURRENT_LIST_DIR}/protocol_fields.cc
  ${CMAKE_CURRENT_LIST_DIR}/protocol_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/peer.cc
)
add_library(deepinfer_ipc_wire STATIC ${DEEPINFER_IPC_WIRE_SOURCES})
target_include_directories(deepinfer_ipc_wire PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_options(deepinfer_ipc_wire PRIVATE ${DEEPINFER_WARNINGS})
target_link_libraries(deepinfer_ipc_wire PUBLIC deepinfer_engine simdjson::simdjson)
