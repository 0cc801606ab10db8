// A sample of JSONSchemaBench's MaskBench corpus (bench/data/maskbench, real-world schemas with
// LLM-generated valid and invalid instances) as deepinfer-grammar cases, and a summary of
// `deepinfer-grammar check` runs over them. No npm dependencies.
//
//   node bench/maskbench.mjs OUT.json [DATA_DIR]
//     one case per file DATA_DIR/*.json (default bench/data/maskbench): name = the file name,
//     constraint = its "schema", accept = JSON.stringify (compact) of the "data" of every test with
//     "valid": true, reject = of every test with "valid": false. Files without tests still make a
//     case (it only checks that the schema compiles).
//   node bench/maskbench.mjs summarize CASES.json CHECK_OUTPUT [TITLE]
//     reads the stdout of `deepinfer-grammar check` ("PASS|FAIL name index", "ERROR name: reason")
//     and prints: schemas, schemas that compile (each refused one as "ERROR name: reason"), valid
//     instances accepted / total and invalid instances rejected / total, then every failure.
//     A refused schema's valid instances count as not accepted and its invalid instances are
//     counted apart (neither rejected by the grammar nor accepted). With SUMMARY_JSON=path set, the
//     figures are also written there as JSON.
//
// JSON.stringify re-serializes each instance, so a number such as 1.0 is written as 1 and integers
// beyond 2^53 lose precision; the corpus's instances are small, so this does not come up here.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const defaultData = path.join(here, 'data', 'maskbench');

function convert(outPath, dataDir = defaultData) {
  const files = fs.readdirSync(dataDir).filter((f) => f.endsWith('.json')).sort();
  const cases = [];
  for (const file of files) {
    const doc = JSON.parse(fs.readFileSync(path.join(dataDir, file), 'utf8'));
    const accept = [], reject = [];
    for (const t of doc.tests ?? []) (t.valid ? accept : reject).push(JSON.stringify(t.data));
    cases.push({ name: file, kind: 'json_schema', constraint: doc.schema, accept, reject });
  }
  fs.writeFileSync(outPath, JSON.stringify(cases, null, 1) + '\n');
  const nAccept = cases.reduce((n, c) => n + c.accept.length, 0);
  const nReject = cases.reduce((n, c) => n + c.reject.length, 0);
  console.error(`${cases.length} cases (${nAccept} valid, ${nReject} invalid instances) from ` +
                `${dataDir} -> ${outPath}`);
}

function summarize(casesPath, outputPath, title = '') {
  const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
  const result = new Map(cases.map((c) => [c.name, { error: null, ok: [] }]));
  for (const line of fs.readFileSync(outputPath, 'utf8').split('\n')) {
    let m;
    if ((m = /^(PASS|FAIL) (.*) (\d+)$/.exec(line)) && result.has(m[2])) {
      result.get(m[2]).ok[Number(m[3])] = m[1] === 'PASS';
    } else if ((m = /^ERROR (\S+): (.*)$/.exec(line)) && result.has(m[1])) {
      result.get(m[1]).error = m[2];
    }
  }
  const s = {
    schemas: cases.length, compiled: 0,
    valid: 0, validAccepted: 0, validInRefused: 0,
    invalid: 0, invalidRejected: 0, invalidInRefused: 0,
  };
  const errors = [], failures = [];
  for (const c of cases) {
    const r = result.get(c.name);
    s.valid += c.accept.length;
    s.invalid += c.reject.length;
    if (r.error !== null) {
      errors.push(`ERROR ${c.name}: ${r.error}`);
      s.validInRefused += c.accept.length;
      s.invalidInRefused += c.reject.length;
      continue;
    }
    s.compiled++;
    c.accept.forEach((text, i) => {
      if (r.ok[i] === true) s.validAccepted++;
      else failures.push(`${c.name} accept [${i}] valid instance rejected: ${clip(text)}`);
    });
    c.reject.forEach((text, j) => {
      const i = c.accept.length + j;
      if (r.ok[i] === true) s.invalidRejected++;
      else failures.push(`${c.name} reject [${i}] invalid instance accepted: ${clip(text)}`);
    });
  }
  const lines = [];
  if (title) lines.push(`== ${title}`);
  lines.push(`schemas:                    ${s.schemas}`);
  lines.push(`schemas that compile:       ${s.compiled} / ${s.schemas}`);
  lines.push(...errors.map((e) => `  ${e}`));
  lines.push(`valid instances accepted:   ${s.validAccepted} / ${s.valid}` +
             (s.validInRefused ? ` (${s.validInRefused} of them in refused schemas)` : ''));
  lines.push(`invalid instances rejected: ${s.invalidRejected} / ${s.invalid - s.invalidInRefused}` +
             (s.invalidInRefused
                ? ` (of compiled schemas; ${s.invalidInRefused} more in refused schemas)` : ''));
  lines.push(`failures: ${failures.length}`);
  lines.push(...failures.map((f) => `  ${f}`));
  console.log(lines.join('\n') + '\n');
  if (process.env.SUMMARY_JSON) {
    fs.writeFileSync(process.env.SUMMARY_JSON,
                     JSON.stringify({ title, ...s, errors, failures }, null, 1) + '\n');
  }
}

function clip(text, n = 160) {
  return text.length <= n ? text : `${text.slice(0, n)}... (${text.length} chars)`;
}

const args = process.argv.slice(2);
if (args[0] === 'summarize' && args.length >= 3) summarize(...args.slice(1));
else if (args.length >= 1 && args[0] !== 'summarize') convert(...args);
else {
  console.error('usage: maskbench.mjs OUT.json [DATA_DIR] | ' +
                'maskbench.mjs summarize CASES.json CHECK_OUTPUT [TITLE]');
  process.exit(2);
}
