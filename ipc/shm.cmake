# deepinfer_ipc_shm: shared-memory region, SPSC rings, eventfd, peer credentials.
