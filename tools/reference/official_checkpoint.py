"""The official DeepSeek-V4 checkpoint layout in plain numpy, for tools/reference/golden.py.

Reads a checkpoint's safetensors (official tensor names; FP8 e4m3 with e8m0 block scales, MXFP4
experts, BF16, F32), dequantises it to fp32, and writes an fp32 checkpoint that transformers
loads. Every failure exits non-zero with a message.
"""
import copy, json, os, struct, sys

import numpy as np


def die(msg):
    print(f"golden.py: ERROR: {msg}", file=sys.stderr)
    sys.exit(1)


def log(msg):
    print(f"[golden] {msg}", flush=True)


# ---------------------------------------------------------------- number formats
def _e4m3_table():
    """fp32 value of every E4M3FN byte (bias 7, no inf, 0x7F/0xFF = NaN)."""
    b = np.arange(256)
    exp, man = (b >> 3) & 0xF, (b & 7).astype(np.float64)
    val = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1.0 + man / 8.0) * np.exp2(exp - 7.0))
    val = np.where(b & 0x80, -val, val)
    val[(b & 0x7F) == 0x7F] = np.nan
    return val.astype(np.float32)


E4M3 = _e4m3_table()
E8M0 = np.append(np.exp2(np.arange(255) - 127.0), np.nan).astype(np.float32)  # e -> 2^(e-127), 0xFF NaN
_MAG = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
E2M1 = np.array(_MAG + [-m for m in _MAG], dtype=np.float32)  # nibble bit 3 = sign


def bf16_to_f32(u16):
    """BF16 bit patterns (uint16) -> fp32 by moving them into the high 16 bits."""
    return (u16.astype(np.uint32) << 16).view(np.float32)


# ------------------------------------------------------------ safetensors reading
# raw storage dtype used to hold each safetensors dtype (F8/I8 kept as raw bytes)
ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F8_E4M3": np.uint8,
             "F8_E8M0": np.uint8, "I8": np.uint8, "U8": np.uint8, "I32": np.int32, "I64": np.int64}


def read_header(path):
    """Return (header dict without __metadata__, byte offset of the data section)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            die(f"{path}: too short to be a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8:
            die(f"{path}: header length {n} exceeds file size {size}")
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            die(f"{path}: header is not valid JSON ({e})")
    header.pop("__metadata__", None)
    return header, 8 + n


def read_safetensors(path):
    """Read every tensor of one file: name -> (safetensors dtype, numpy array)."""
    header, base = read_header(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        dt, shape, (s, e) = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in ST_DTYPES:
            die(f"{path}: tensor {name} has unsupported dtype {dt}")
        npdt = np.dtype(ST_DTYPES[dt])
        count = int(np.prod(shape, dtype=np.int64))
        if e - s != count * npdt.itemsize or base + e > mm.size:
            die(f"{path}: tensor {name} ({dt} {shape}) has bad data offsets {s}..{e}")
        out[name] = (dt, np.array(mm[base + s:base + e]).view(npdt).reshape(shape))
    return out


def read_checkpoint(ckpt):
    """Read all tensors of an official checkpoint dir (single file or index-sharded)."""
    index, single = os.path.join(ckpt, "model.safetensors.index.json"), os.path.join(ckpt, "model.safetensors")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(single):
        files = ["model.safetensors"]
    else:
        die(f"{ckpt}: neither model.safetensors nor model.safetensors.index.json found")
    tensors = {}
    for fn in files:
        log(f"reading {fn}")
        for name, t in read_safetensors(os.path.join(ckpt, fn)).items():
            if name in tensors:
                die(f"tensor {name} appears in more than one shard")
            tensors[name] = t
    return tensors


# ------------------------------------------------------------------ dequantising
def block_scales(name, dt, s):
    """Decode a companion scale tensor to fp32 (E8M0, or F32/BF16 for FP8-expert variants)."""
    if dt == "F8_E8M0":
        return E8M0[s]
    if dt == "F32":
        return s.astype(np.float32)
    if dt == "BF16":
        return bf16_to_f32(s)
    die(f"scale tensor {name} has unsupported dtype {dt}")


def dequant_fp8(name, q, S):
    """W[o,i] = e4m3(q[o,i]) * S[o//128, i//128]."""
    if q.ndim != 2:
        die(f"FP8 tensor {name} is not 2-D: {q.shape}")
    o, i = q.shape
    want = (-(-o // 128), -(-i // 128))
    if S.shape != want:
        die(f"FP8 tensor {name} {q.shape}: scale shape {S.shape}, expected {want}")
    return E4M3[q] * np.repeat(np.repeat(S, 128, axis=0), 128, axis=1)[:o, :i]


def dequant_fp4(name, q, S):
    """Packed e2m1 [out, in/2] (low nibble = column 2c, high = 2c+1) times S[o, i//32]."""
    if q.ndim != 2:
        die(f"FP4 tensor {name} is not 2-D: {q.shape}")
    o, i = q.shape[0], 2 * q.shape[1]
    if S.shape != (o, -(-i // 32)):
        die(f"FP4 tensor {name} {q.shape} (logical [{o}, {i}]): scale shape {S.shape}, expected {(o, -(-i // 32))}")
    w = np.empty((o, i), dtype=np.float32)
    w[:, 0::2], w[:, 1::2] = E2M1[q & 0xF], E2M1[q >> 4]
    return w * np.repeat(S, 32, axis=1)[:, :i]


def companion_scale(name, raw):
    """Name of the `.scale` tensor that belongs to weight `name`, or None."""
    cands = [name + ".scale"] + ([name[:-len(".weight")] + ".scale"] if name.endswith(".weight") else [])
    found = [c for c in cands if c in raw]
    return found[0] if found else None


def dequantise(raw):
    """Official tensors -> {name: fp32 or int64 array}; `.scale` companions are consumed."""
    out, used = {}, set()
    for name, (dt, a) in raw.items():
        if name.endswith(".scale"):
            continue
        if dt in ("F8_E4M3", "I8"):
            sname = companion_scale(name, raw)
            if sname is None:
                die(f"quantised tensor {name} ({dt}) has no companion .scale tensor")
            used.add(sname)
            S = block_scales(sname, *raw[sname])
            w = dequant_fp8(name, a, S) if dt == "F8_E4M3" else dequant_fp4(name, a, S)
        elif dt == "BF16":
            w = bf16_to_f32(a)
        elif dt in ("F32", "F16"):
            w = a.astype(np.float32)
        elif dt in ("I64", "I32"):
            w = a.astype(np.int64)
        else:
            die(f"tensor {name}: do not know how to convert dtype {dt}")
        if w.dtype == np.float32 and not np.all(np.isfinite(w)):
            die(f"tensor {name}: non-finite values after dequantisation")
        out[name] = np.asarray(w, order="C")  # (ascontiguousarray would make 0-d 1-d)
    unused = sorted(n for n in raw if n.endswith(".scale") and n not in used)
    if unused:
        die(f"{len(unused)} .scale tensors belong to no FP8/FP4 weight, e.g. {unused[:5]}")
    return out


def clean_config(cfg):
    """Deep copy of the official config without quantization_config / expert_dtype."""
    c = copy.deepcopy(cfg)
    c.pop("quantization_config", None)
    c.pop("expert_dtype", None)
    return c


def write_checkpoint(path, tensors, config):
    """Write an fp32 official-name checkpoint (one model.safetensors + config.json)."""
    from safetensors.numpy import save_file
    os.makedirs(path, exist_ok=True)
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(copy.deepcopy(config), f, indent=2)
