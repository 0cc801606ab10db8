# deepinfer_ipc_wire: frame codec, handshake and request/reply JSON (written by the wire-protocol work).
