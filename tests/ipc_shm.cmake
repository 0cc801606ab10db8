# tests for ipc_shm
