// The JSON-Schema-Test-Suite (bench/data/json-schema-test-suite) as deepinfer-grammar cases, and a
// summary of a `deepinfer-grammar check` run over them. No npm dependencies.
//
//   node bench/json_schema_test_suite.mjs convert OUT.json [DATA_DIR]
//     one case per test group: name "FILE/description" (FILE relative to draft2020-12/, " #n"
//     appended to repeated names), constraint = the group's schema, accept = JSON.stringify (compact)
//     of every valid instance, reject = of every invalid one.
//   node bench/json_schema_test_suite.mjs summarize CASES.json CHECK_OUTPUT [TITLE]
//     reads the stdout of `deepinfer-grammar check` ("PASS|FAIL name index", "ERROR name: reason")
//     and prints, per file and in total: tests, passed (valid accepted or invalid rejected), schemas
//     refused (compile errors) and their tests, false positives (invalid instance accepted) and
//     false negatives (valid instance rejected). Tests of refused schemas count only as refused.
//     With SUMMARY_JSON=path set, the figures are also written there as JSON.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const defaultData = path.join(here, 'data', 'json-schema-test-suite', 'draft2020-12');

function listJson(dir, rel = '') {
  const out = [];
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...listJson(dir, r));
    else if (e.name.endsWith('.json')) out.push(r);
  }
  return out.sort();
}

function convert(outPath, dataDir = defaultData) {
  const cases = [];
  const seen = new Map();
  for (const file of listJson(dataDir)) {
    const groups = JSON.parse(fs.readFileSync(path.join(dataDir, file), 'utf8'));
    for (const g of groups) {
      let name = `${file}/${g.description}`;
      const n = (seen.get(name) ?? 0) + 1;
      seen.set(name, n);
      if (n > 1) name += ` #${n}`;
      const accept = [], reject = [];
      for (const t of g.tests) (t.valid ? accept : reject).push(JSON.stringify(t.data));
      cases.push({ name, file, kind: 'json_schema', constraint: g.schema, accept, reject });
    }
  }
  fs.writeFileSync(outPath, JSON.stringify(cases, null, 1) + '\n');
  console.error(`${cases.length} cases from ${listJson(dataDir).length} files -> ${outPath}`);
}

function summarize(casesPath, outputPath, title = '') {
  const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
  const byName = new Map(cases.map((c) => [c.name, c]));
  const result = new Map(cases.map((c) => [c.name, { error: null, ok: [] }]));
  for (const line of fs.readFileSync(outputPath, 'utf8').split('\n')) {
    let m;
    if ((m = /^(PASS|FAIL) (.*) (\d+)$/.exec(line)) && result.has(m[2])) {
      result.get(m[2]).ok[Number(m[3])] = m[1] === 'PASS';
    } else if (line.startsWith('ERROR ')) {
      // The name may itself contain ": ", so match against the known names.
      for (const name of byName.keys()) {
        if (line.startsWith(`ERROR ${name}: `)) {
          result.get(name).error = line.slice(`ERROR ${name}: `.length);
          break;
        }
      }
    }
  }
  const zero = () => ({ tests: 0, passed: 0, refused: 0, refusedTests: 0, fp: 0, fn: 0 });
  const perFile = new Map();
  const total = zero();
  const details = [];
  for (const c of cases) {
    const r = result.get(c.name);
    const f = perFile.get(c.file) ?? zero();
    perFile.set(c.file, f);
    const n = c.accept.length + c.reject.length;
    for (const s of [f, total]) s.tests += n;
    if (r.error !== null) {
      for (const s of [f, total]) {
        s.refused++;
        s.refusedTests += n;
      }
      details.push(`refused  ${c.name}: ${r.error}`);
      continue;
    }
    for (let i = 0; i < n; i++) {
      const valid = i < c.accept.length;
      const text = valid ? c.accept[i] : c.reject[i - c.accept.length];
      if (r.ok[i] === true) {
        for (const s of [f, total]) s.passed++;
      } else if (valid) {
        for (const s of [f, total]) s.fn++;
        details.push(`false-   ${c.name} [${i}] valid rejected: ${text}`);
      } else {
        for (const s of [f, total]) s.fp++;
        details.push(`false+   ${c.name} [${i}] invalid accepted: ${text}`);
      }
    }
  }
  const row = (name, s) =>
    `| ${name} | ${s.tests} | ${s.passed} | ${s.refused} | ${s.refusedTests} | ${s.fp} | ${s.fn} |`;
  const lines = [];
  if (title) lines.push(`### ${title}`, '');
  lines.push('| file | tests | passed | schemas refused | their tests | false + | false - |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|');
  for (const [file, s] of [...perFile].sort()) lines.push(row(file, s));
  lines.push(row('**total**', total));
  console.log(lines.join('\n') + '\n');
  if (process.env.SUMMARY_DETAILS) {
    fs.writeFileSync(process.env.SUMMARY_DETAILS, details.join('\n') + '\n');
  }
  if (process.env.SUMMARY_JSON) {
    fs.writeFileSync(
      process.env.SUMMARY_JSON,
      JSON.stringify({ title, total, files: Object.fromEntries(perFile) }, null, 1) + '\n',
    );
  }
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'convert' && args.length >= 1) convert(...args);
else if (cmd === 'summarize' && args.length >= 2) summarize(...args);
else {
  console.error('usage: json_schema_test_suite.mjs convert OUT.json [DATA_DIR] | ' +
                'summarize CASES.json CHECK_OUTPUT [TITLE]');
  process.exit(2);
}
