# tests for ipc_wire
