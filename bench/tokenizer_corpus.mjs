// Builds the tokenizer benchmark corpus from text every Debian machine has, one JSON string per
// line, in three equal-weight parts: English prose (/usr/share/common-licenses), code (this
// repository's C++ sources) and Chinese (the zh_CN gettext catalogues' translated strings).
//   node bench/tokenizer_corpus.mjs OUT.jsonl
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const out = [];
const add = (text, limit) => {
  let total = 0;
  for (const para of text.split(/\n\s*\n/)) {
    if (total >= limit) break;
    if (para.trim().length === 0) continue;
    out.push(JSON.stringify(para));
    total += Buffer.byteLength(para);
  }
  return total;
};
const PART = 2 << 20;  // about 2 MB of each kind
const licenses = "/usr/share/common-licenses";
let english = "";
for (const f of fs.readdirSync(licenses).sort()) {
  const p = path.join(licenses, f);
  if (fs.statSync(p).isFile()) english += fs.readFileSync(p, "utf8") + "\n\n";
}
let code = "";
const walk = (dir) => {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name < b.name ? -1 : 1)) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (/\.(cc|h|cu)$/.test(e.name)) code += fs.readFileSync(p, "utf8") + "\n\n";
  }
};
for (const d of ["engine", "kernels", "tools", "tests/unit"]) walk(path.join(root, d));
// gettext .mo: header, then tables of (length, offset) for originals and translations.
let chinese = "";
const moDir = "/usr/share/locale/zh_CN/LC_MESSAGES";
for (const f of (fs.existsSync(moDir) ? fs.readdirSync(moDir).sort() : [])) {
  const b = fs.readFileSync(path.join(moDir, f));
  if (b.length < 28 || b.readUInt32LE(0) !== 0x950412de) continue;
  const n = b.readUInt32LE(8), trans = b.readUInt32LE(16);
  for (let i = 1; i < n; ++i) {
    const len = b.readUInt32LE(trans + 8 * i), off = b.readUInt32LE(trans + 8 * i + 4);
    chinese += b.subarray(off, off + len).toString("utf8").replaceAll("\0", "\n") + "\n\n";
  }
}
const sizes = [english, code, chinese].map((t) => t.length ? 0 : 1);
const parts = [add(english.repeat(Math.ceil(PART / Math.max(english.length, 1))), PART),
               add(code.repeat(Math.ceil(PART / Math.max(code.length, 1))), PART),
               add(chinese, PART)];
fs.writeFileSync(process.argv[2], out.join("\n") + "\n");
console.error(`corpus: english ${parts[0]} B, code ${parts[1]} B, chinese ${parts[2]} B` +
              (sizes.some((x) => x) ? " (a part is missing)" : ""));
