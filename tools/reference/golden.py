#!/usr/bin/env python3
"""Golden logits for deepinfer from the transformers DeepSeek-V4 reference.

Reads a checkpoint in the OFFICIAL DeepSeek-V4 layout (official tensor names,
FP8/FP4/BF16/F32 dtypes), dequantises it to fp32 with plain numpy (official_checkpoint.py),
loads it into transformers' DeepseekV4ForCausalLM in fp32/eager mode and writes reference
logits (full prefill, prefill+decode, chunked prefill, optional MTP draft).
See README.md next to this file. Every failure exits non-zero with a message.
"""
import argparse, json, os, shutil, tempfile

import numpy as np

from official_checkpoint import (clean_config, dequantise, die, log, read_checkpoint, read_header,
                                 write_checkpoint)

MTP_PREFIX = "mtp.0."
MTP_EXTRA = ("e_proj", "h_proj", "enorm", "hnorm", "norm")  # not part of the decoder block


# --------------------------------------------------------------- the reference
def load_reference(path, device):
    """from_pretrained in fp32/eager; fail on missing or mismatched keys."""
    import torch
    try:
        from transformers import DeepseekV4ForCausalLM
    except ImportError as e:
        die(f"this transformers has no DeepseekV4ForCausalLM ({e}); need >= 5.17")
    log(f"loading {path}")
    model, info = DeepseekV4ForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    fatal = False
    for key, val in info.items():  # missing_keys, unexpected_keys, mismatched_keys, error_msgs, ...
        if val:
            vals = sorted(map(str, val)) if isinstance(val, (list, set, tuple)) else val
            log(f"loading info {key}: {vals}")
            fatal |= key != "unexpected_keys"
    if fatal:
        die(f"{path}: transformers reported missing/mismatched keys or load errors (listed above)")
    bad = [n for n, p in model.named_parameters() if p.dtype != torch.float32]
    if bad:
        die(f"parameters not loaded as float32: {bad[:5]}")
    if model.config._attn_implementation != "eager":
        die(f"attention implementation is {model.config._attn_implementation}, expected eager")
    return model.to(device).eval()


def forward_logits(model, ids, start, past=None, use_cache=False):
    """One forward over ids [1, S] at positions start..start+S-1 -> (logits [S, V] fp32 numpy, cache)."""
    import torch
    pos = torch.arange(start, start + ids.shape[1], device=ids.device)[None]
    out = model(input_ids=ids, position_ids=pos, past_key_values=past, use_cache=use_cache)
    if out.logits.shape[1] != ids.shape[1]:
        die(f"model returned logits for {out.logits.shape[1]} positions, expected {ids.shape[1]}")
    if use_cache and out.past_key_values is None:
        die("use_cache=True but the model returned no past_key_values")
    return out.logits[0].float().cpu().numpy(), out.past_key_values


def max_rel_err(x, ref):
    """max over positions of ||x_p - ref_p|| / ||ref_p||."""
    x, ref = x.astype(np.float64), ref.astype(np.float64)
    return float(np.max(np.linalg.norm(x - ref, axis=-1) / np.maximum(np.linalg.norm(ref, axis=-1), 1e-30)))


def rmsnorm(x, w, eps):
    """y = w * x / sqrt(mean(x^2) + eps) over the last dim."""
    import torch
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def mtp_checkpoint(weights, config):
    """Tensors + config of a 1-layer official-layout model holding the mtp.0 decoder block."""
    t = {"embed.weight": weights["embed.weight"], "head.weight": weights["head.weight"]}
    for name, w in weights.items():
        if not name.startswith(MTP_PREFIX):
            continue
        rest = name[len(MTP_PREFIX):]
        if rest.startswith("hc_head_"):
            t[rest] = w
        elif rest == "norm.weight":
            t["norm.weight"] = w
        elif rest.split(".")[0] not in MTP_EXTRA:
            t["layers.0." + rest] = w
    cfg = clean_config(config)
    for k in ("layer_types", "mlp_layer_types"):
        cfg.pop(k, None)
    cfg.update(num_hidden_layers=1, compress_ratios=[0], num_hash_layers=0, num_nextn_predict_layers=0)
    return t, cfg


def run_mtp(main_x, ids, weights, mtp_model, config, device):
    """MTP logits for p = 0..n-2 from main streams X_p [1, n, hc, d] and tokens t_{p+1}."""
    import torch
    eps = float(config.get("rms_norm_eps", 1e-6))
    window = int(mtp_model.config.sliding_window)
    g = lambda key: torch.from_numpy(weights[MTP_PREFIX + key]).to(device)
    n = ids.shape[1]
    S = n - 1
    layer = mtp_model.model.layers[0]
    if mtp_model.config.layer_types != ["sliding_attention"] or getattr(layer.mlp, "is_hash", False):
        die(f"MTP stand-in model has layer_types={mtp_model.config.layer_types}, "
            f"hash={getattr(layer.mlp, 'is_hash', None)}; expected one sliding, non-hash layer")
    e = rmsnorm(mtp_model.model.embed_tokens(ids[:, 1:]).float(), g("enorm.weight"), eps)  # [1, S, d]
    h = rmsnorm(main_x[:, :S].float(), g("hnorm.weight"), eps)  # [1, S, hc, d]
    y = h @ g("h_proj.weight").T + (e @ g("e_proj.weight").T).unsqueeze(2)
    pos = torch.arange(S, device=device)[None]
    rot = mtp_model.model.rotary_emb
    pe = {t: rot(y, position_ids=pos, layer_type=t) for t in ("main", "compress")}
    d = pos[0][:, None] - pos[0][None, :]
    mask = torch.zeros(S, S, device=device).masked_fill(~((d >= 0) & (d < window)), float("-inf"))[None, None]
    out = layer(y, input_ids=ids[:, 1:], position_embeddings=pe, position_ids=pos,
                attention_mask=mask, past_key_values=None)
    if isinstance(out, tuple):
        out = out[0]
    if tuple(out.shape) != tuple(y.shape):
        die(f"MTP decoder layer returned shape {tuple(out.shape)}, expected {tuple(y.shape)}")
    logits = mtp_model.lm_head(mtp_model.model.norm(mtp_model.model.hc_head(out)))
    return logits[0].float().cpu().numpy()


# ----------------------------------------------------------------------- driver
def int_list(s):
    try:
        return [int(v) for v in s.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {s!r}")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="official-layout DeepSeek-V4 checkpoint dir")
    p.add_argument("--out", required=True, help="output dir for .npy/.json files")
    p.add_argument("--tokens-file", required=True, help="token ids, comma or whitespace separated")
    p.add_argument("--splits", type=int_list, nargs="+", default=[],
                   help="K values (e.g. 150,37 or 150 37): prefill K tokens, then decode one at a time")
    p.add_argument("--chunks", type=int_list, action="append", default=[],
                   help="chunk sizes summing to n (repeatable), e.g. 100,77,123")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    p.add_argument("--mtp", action="store_true", help="also compute MTP draft logits -> mtp.npy")
    p.add_argument("--save-pretrained-dump", action="store_true", help="dump transformers' save_pretrained layout")
    p.add_argument("--save-pretrained-out", default=None, help="keep the save_pretrained checkpoint here")
    p.add_argument("--tmp-dir", default=None, help="where to put the fp32 temp checkpoints")
    p.add_argument("--keep-tmp", action="store_true", help="do not delete the temp checkpoints")
    return p.parse_args()


def main():
    args = parse_args()
    args.splits = [k for group in args.splits for k in group]
    try:
        import torch
        import transformers
    except ImportError as e:
        die(f"needs torch and transformers: {e}")
    if not os.path.isdir(args.model):
        die(f"--model {args.model} is not a directory")
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        die(f"{args.model} has no config.json")
    with open(os.path.join(args.model, "config.json")) as f:
        config = json.load(f)
    try:
        with open(args.tokens_file) as f:
            tokens = int_list(f.read())
    except (OSError, argparse.ArgumentTypeError) as e:
        die(f"--tokens-file {args.tokens_file}: {e}")
    n, vocab = len(tokens), int(config.get("vocab_size", 0))
    if n < 2:
        die(f"need at least 2 tokens, got {n}")
    if vocab and not all(0 <= t < vocab for t in tokens):
        die(f"token ids outside [0, {vocab})")
    for k in args.splits:
        if not 1 <= k < n:
            die(f"--splits value {k} not in [1, {n - 1}]")
    for c in args.chunks:
        if sum(c) != n or min(c) < 1:
            die(f"--chunks {c} must be positive and sum to n = {n}")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.set_grad_enabled(False)
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="golden-", dir=args.tmp_dir)
    written, report = {}, {}

    def save(name, arr):
        np.save(os.path.join(args.out, name), arr.astype(np.float32))
        written[name] = list(arr.shape)
        log(f"wrote {name} {list(arr.shape)}")

    try:
        # step 1: dequantise
        weights = dequantise(read_checkpoint(args.model))
        log(f"dequantised {len(weights)} tensors")
        write_checkpoint(os.path.join(tmp, "main"), weights, clean_config(config))
        # step 2: reference model
        model = load_reference(os.path.join(tmp, "main"), device)
        ids = torch.tensor([tokens], dtype=torch.long, device=device)
        # step 3a: full prefill (captures the pre-hc_head streams for MTP)
        captured = []
        hook = model.model.hc_head.register_forward_pre_hook(
            lambda m, a, kw: captured.append((a[0] if a else next(iter(kw.values()))).detach().clone()),
            with_kwargs=True)
        full, _ = forward_logits(model, ids, 0)
        hook.remove()
        if len(captured) != 1 or tuple(captured[0].shape[:2]) != (1, n):
            die(f"hc_head pre-hook captured {[tuple(c.shape) for c in captured]}, expected one [1, {n}, hc, d]")
        save("full.npy", full)
        # step 3b: prefill K, then decode one token at a time
        for k in args.splits:
            parts = [forward_logits(model, ids[:, :k], 0, use_cache=True)]
            for pos in range(k, n):
                parts.append(forward_logits(model, ids[:, pos:pos + 1], pos, parts[-1][1], True))
            arr = np.concatenate([p[0] for p in parts])
            save(f"decode_from_{k}.npy", arr)
            report[f"decode_from_{k}.npy"] = max_rel_err(arr, full)
        # step 3c: chunked prefill
        for sizes in args.chunks:
            parts, start, past = [], 0, None
            for s in sizes:
                lg, past = forward_logits(model, ids[:, start:start + s], start, past, True)
                parts.append(lg)
                start += s
            name, arr = "chunks_" + "_".join(map(str, sizes)) + ".npy", np.concatenate(parts)
            save(name, arr)
            report[name] = max_rel_err(arr, full)
        # step 4: MTP
        if args.mtp:
            need = [MTP_PREFIX + k + ".weight" for k in MTP_EXTRA] + [MTP_PREFIX + "hc_head_fn"]
            if [k for k in need if k not in weights]:
                die(f"--mtp: checkpoint lacks {[k for k in need if k not in weights]}")
            t, cfg = mtp_checkpoint(weights, config)
            write_checkpoint(os.path.join(tmp, "mtp"), t, cfg)
            mtp_model = load_reference(os.path.join(tmp, "mtp"), device)
            save("mtp.npy", run_mtp(captured[0], ids, weights, mtp_model, config, device))
            del mtp_model
        # step 5: transformers' own save layout
        if args.save_pretrained_dump or args.save_pretrained_out:
            sp = args.save_pretrained_out or os.path.join(tmp, "save_pretrained")
            model.save_pretrained(sp)
            keys = {}
            for fn in sorted(os.listdir(sp)):
                if fn.endswith(".safetensors"):
                    for name, info in read_header(os.path.join(sp, fn))[0].items():
                        keys[name] = [info["dtype"], info["shape"]]
            if not keys:
                die(f"save_pretrained wrote no .safetensors files into {sp}")
            with open(os.path.join(args.out, "save_pretrained_keys.json"), "w") as f:
                json.dump(keys, f, indent=1, sort_keys=True)
            shutil.copy(os.path.join(sp, "config.json"), os.path.join(args.out, "save_pretrained_config.json"))
            written["save_pretrained_keys.json"] = [len(keys)]
            log(f"save_pretrained wrote {len(keys)} tensors into {sp}")
    finally:
        if args.keep_tmp:
            log(f"temp checkpoints kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    manifest = {"transformers": transformers.__version__, "torch": torch.__version__,
                "numpy": np.__version__, "device": device, "model_dir": os.path.abspath(args.model),
                "config": config, "tokens": tokens, "n": n, "files": written,
                "max_rel_err_vs_full": report}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    log(f"summary: n={n} vocab={full.shape[1]} device={device} out={args.out}")
    for name, err in report.items():
        log(f"  {name}: max per-position rel err vs full = {err:.3e}")
    log(f"  files: {', '.join(written)} + manifest.json")


if __name__ == "__main__":
    main()
