// The JavaScript oracle for ditto's tokenizer: @lenml/tokenizers (a port of the Hugging Face
// tokenizers behaviour, from transformers.js) loading a model directory's tokenizer.json and
// tokenizer_config.json.
//
//   node tests/tokenizer/js_tokenize.mjs --model DIR --input texts.jsonl [--output out.jsonl]
//        [--add-special-tokens | --no-add-special-tokens]          {"text"} lines -> {"ids"} lines
//   node tests/tokenizer/js_tokenize.mjs --model DIR --decode --input ids.jsonl
//        [--skip-special-tokens] [--no-clean-up-tokenization-spaces]  {"ids"} lines -> {"text"} lines
//   node tests/tokenizer/js_tokenize.mjs --model DIR --bench --input texts.jsonl [--repeat N]
//        single-thread encode throughput: prints one JSON object {"bytes", "best_s", "mb_per_s", ...}
//   --hf-classes (diagnostic): the Split regex's \s, \S and (?i:'s) as Oniguruma reads them.
//
// Defaults follow Hugging Face: add_special_tokens true, skip_special_tokens false, and
// clean_up_tokenization_spaces from tokenizer_config.json. Input lines are JSON objects, one per
// line ("\n"-separated; a final empty line is ignored). The package is looked up in
// $DITTO_NODE_MODULES or third_party/npm/node_modules of this repository.

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const nodeModules =
  process.env.DITTO_NODE_MODULES ?? path.join(here, "..", "..", "third_party", "npm", "node_modules");

function usage(message) {
  process.stderr.write(`js_tokenize.mjs: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = {
    model: null, input: null, output: null, decode: false, bench: false, repeat: 5,
    addSpecialTokens: true, skipSpecialTokens: false, cleanUp: null, hfClasses: false,
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    switch (a) {
      case "--model": args.model = value(); break;
      case "--input": args.input = value(); break;
      case "--output": args.output = value(); break;
      case "--decode": args.decode = true; break;
      case "--bench": args.bench = true; break;
      case "--repeat": args.repeat = Number(value()); break;
      case "--add-special-tokens": args.addSpecialTokens = true; break;
      case "--no-add-special-tokens": args.addSpecialTokens = false; break;
      case "--skip-special-tokens": args.skipSpecialTokens = true; break;
      case "--clean-up-tokenization-spaces": args.cleanUp = true; break;
      case "--no-clean-up-tokenization-spaces": args.cleanUp = false; break;
      case "--hf-classes": args.hfClasses = true; break;
      default: usage(`unknown argument ${a}`);
    }
  }
  if (!args.model) usage("--model DIR is required");
  if (!args.input) usage("--input FILE is required");
  return args;
}

async function loadTokenizer(modelDir) {
  const entry = path.join(nodeModules, "@lenml", "tokenizers", "dist", "main.mjs");
  if (!fs.existsSync(entry)) usage(`@lenml/tokenizers not found at ${entry} (run make deps)`);
  const { TokenizerLoader } = await import(pathToFileURL(entry).href);
  const readJson = (name) => JSON.parse(fs.readFileSync(path.join(modelDir, name), "utf8"));
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: readJson("tokenizer.json"),
    tokenizerConfig: readJson("tokenizer_config.json"),
  });
}

// Diagnostic (--hf-classes; the parity test never uses it): rewrites the Split pre-tokenizer
// regexes so that \s, \S and the (?i:'s) alternative mean what they mean in Oniguruma, the
// engine of Hugging Face tokenizers (and in PCRE2 10.42 with PCRE2_UCP, as ditto uses it, which
// maps U+180E to a non-space first). ECMAScript's \s differs on two characters: it includes
// U+FEFF (a format character, Cf) and excludes U+0085 (NEL, White_Space=yes); and caseless 's'
// also matches U+017F there. A difference from ditto that remains under this flag is not
// explained by the regex engines' character classes.
const HF_SPACE = "\\t-\\r\\x85\\p{Z}";

function hfClasses(source) {
  let out = "";
  let inClass = false;
  for (let i = 0; i < source.length; ++i) {
    const c = source[i];
    if (c === "\\") {
      const next = source[i + 1];
      if (next === "s") out += inClass ? HF_SPACE : `[${HF_SPACE}]`;
      else if (next === "S" && !inClass) out += `[^${HF_SPACE}]`;
      else if (next === "S") usage("\\S inside a character class is not supported");
      else out += c + next;
      ++i;
      continue;
    }
    if (c === "[") inClass = true;
    else if (c === "]") inClass = false;
    out += c;
  }
  return out.replace("[sS]", "[sS\\u017f]");
}

function useHfClasses(tokenizer) {
  const visit = (pt) => {
    if (!pt) return;
    if (Array.isArray(pt.tokenizers)) pt.tokenizers.forEach(visit);
    if (pt.pattern instanceof RegExp && pt.config?.type === "Split") {
      pt.pattern = new RegExp(hfClasses(pt.pattern.source), pt.pattern.flags);
    }
  };
  visit(tokenizer.pre_tokenizer);
}

function readJsonLines(file) {
  const lines = fs.readFileSync(file, "utf8").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  return lines.map((line, i) => {
    try {
      return JSON.parse(line);
    } catch (e) {
      usage(`${file}:${i + 1}: ${e.message}`);
    }
  });
}

function encodeAll(tokenizer, texts, addSpecialTokens) {
  return texts.map((text) => tokenizer.encode(text, { add_special_tokens: addSpecialTokens }));
}

function bench(tokenizer, texts, args) {
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);
  let tokens = 0;
  for (const ids of encodeAll(tokenizer, texts, args.addSpecialTokens)) tokens += ids.length;  // warmup
  let best = Infinity;
  for (let r = 0; r < args.repeat; ++r) {
    const t0 = process.hrtime.bigint();
    encodeAll(tokenizer, texts, args.addSpecialTokens);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    best = Math.min(best, s);
  }
  return { impl: "@lenml/tokenizers", strings: texts.length, bytes, tokens, repeat: args.repeat,
           best_s: best, mb_per_s: bytes / 1e6 / best };
}

const args = parseArgs(process.argv.slice(2));
const tokenizer = await loadTokenizer(args.model);
if (args.hfClasses) useHfClasses(tokenizer);
const records = readJsonLines(args.input);
let out;
if (args.bench) {
  out = JSON.stringify(bench(tokenizer, records.map((r) => r.text), args)) + "\n";
} else if (args.decode) {
  const options = { skip_special_tokens: args.skipSpecialTokens };
  if (args.cleanUp !== null) options.clean_up_tokenization_spaces = args.cleanUp;
  // tokenizer.decode rejects an empty list; the decode of no tokens is the empty string.
  out = records
    .map((r) => JSON.stringify({ text: r.ids.length ? tokenizer.decode(r.ids, options) : "" }) + "\n")
    .join("");
} else {
  out = encodeAll(tokenizer, records.map((r) => r.text), args.addSpecialTokens)
    .map((ids) => JSON.stringify({ ids }) + "\n")
    .join("");
}
if (args.output) fs.writeFileSync(args.output, out);
else process.stdout.write(out);
