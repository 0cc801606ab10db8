#!/usr/bin/env python3
"""Writes the seed corpus for frame_fuzz into tests/fuzz/corpus/frame/.

Each seed is: one byte choosing max_frame_bytes (index into kMaxFrames in frame_fuzz.cc, 4 = 4096),
one byte seeding the chunk sizes, then a byte stream of length-prefixed frames.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "frame")


def frame(body):
    if isinstance(body, str):
        body = body.encode()
    return struct.pack("<I", len(body)) + body


SEEDS = {
    "hello": [b'{"op":"hello","protocol":1,"client":"deepinfer 0.1"}'],
    "hello_v2": [b'{"op":"hello","protocol":2}'],
    "generate_prompt": ['{"op":"generate","id":7,"prompt":"Hello, w\\u00f6rld\\n","max_tokens":16,'
                        '"temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":1,'
                        '"stop":["\\n\\n"],"stop_ids":[1],"logprobs":true,"top_logprobs":2}'],
    "generate_messages": ['{"op":"generate","id":8,"messages":[{"role":"system","content":"Be '
                          'brief."},{"role":"user","content":"2+2?"}],"response_format":'
                          '{"type":"json_schema","json_schema":{"schema":{"type":"object"}}}}'],
    "generate_ids": [b'{"op":"generate","id":18446744073709551615,"prompt_ids":[0,1,2,999],'
                     b'"temperature":0}'],
    "generate_processors": [b'{"op":"generate","id":9,"prompt_ids":[5],"repetition_penalty":1.2,'
                            b'"frequency_penalty":-0.5,"presence_penalty":2,'
                            b'"logit_bias":{"0":100,"999":-100,"17":0.5}}',
                            b'{"op":"generate","id":10,"prompt":"x","logit_bias":{"5":1,"5":2}}',
                            b'{"op":"generate","id":11,"prompt":"x","logit_bias":{"-1":1,"x":1}}'],
    "generate_bad": [b'{"op":"generate","id":1,"prompt":"x","max_tokens":0}',
                     b'{"op":"generate","id":2,"prompt":"x","prompt_ids":[1]}',
                     b'{"op":"generate","id":3,"prompt_ids":[1000,-1]}'],
    "pipeline": [b'{"op":"health"}', b'{"op":"status"}', b'{"op":"cancel","id":7}',
                 b'{"op":"nope"}', b'{"no_op":1}', b'[1,2]', b'not json'],
    "replies": [b'{"op":"hello","ok":true,"protocol":1,"server":"deepinferd 0.1.0",'
                b'"model":"v4","vocab_size":129280}',
                b'{"op":"hello","ok":false,"protocol":1,"error":{"code":"version_mismatch",'
                b'"message":"m"}}',
                b'{"op":"shm","bytes":1048576,"ring_slots":4096}',
                b'{"op":"accepted","id":7,"prompt_tokens":12}',
                b'{"op":"error","id":7,"error":{"code":"invalid_argument","message":"x"}}',
                b'{"op":"status","queue":{"live":1},"uptime_s":3.5}',
                b'{"op":"health","ok":false,"reason":"draining"}'],
    "escapes": ['{"op":"generate","id":4,"prompt":"\\ud83d\\ude00 \\u0000 \\" \\\\ \\/"}',
                '{"op":"generate","id":5,"prompt":"\\ud800"}'],
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for i, (name, bodies) in enumerate(sorted(SEEDS.items())):
        stream = b"".join(frame(b) for b in bodies)
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(bytes([4, i]) + stream)
    # Framing errors: zero length, over the limit, a truncated frame, a tiny limit.
    raw = {
        "zero_length": bytes([4, 1]) + frame(b'{"op":"health"}') + b"\0\0\0\0",
        "too_long": bytes([2, 2]) + struct.pack("<I", 65) + b"{" * 65,
        "huge_length": bytes([7, 3]) + b"\xff\xff\xff\xff" + b"{}",
        "truncated": bytes([4, 4]) + frame(b'{"op":"status"}')[:-3],
        "limit_7": bytes([1, 5]) + frame(b'{"a":1}') + frame(b'{"op":1}'),
    }
    for name, data in raw.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
