#!/usr/bin/env node
// The JavaScript half of bench_tokenizer: encodes the documents of a JSONL file (one JSON string
// a line) with @lenml/tokenizers loaded from TOKENIZER_DIR/tokenizer.json, PASSES times, and
// prints {"seconds": best pass, "num_tokens": ...}. Usage: TOKENIZER_DIR DOCUMENTS PASSES
"use strict";
const fs = require("fs");
const path = require("path");

const [tokenizerDir, documentsPath, passesArg] = process.argv.slice(2);
const root = path.join(__dirname, "..");
const { TokenizerLoader } = require(
  path.join(root, ".cache", "tokenizers", "npm", "node_modules", "@lenml", "tokenizers"));
const readJson = (file) => JSON.parse(fs.readFileSync(path.join(tokenizerDir, file), "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson("tokenizer.json"),
  tokenizerConfig: readJson("tokenizer_config.json"),
});
const documents = fs.readFileSync(documentsPath, "utf8").trim().split("\n").map((l) => JSON.parse(l));
let best = Infinity;
let numTokens = 0;
for (let pass = 0; pass < Number(passesArg || 1); ++pass) {
  const start = process.hrtime.bigint();
  let tokens = 0;
  for (const document of documents) {
    tokens += tokenizer.encode(document, { add_special_tokens: false }).length;
  }
  best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  numTokens = tokens;
}
process.stdout.write(JSON.stringify({ seconds: best, num_tokens: numTokens }) + "\n");
