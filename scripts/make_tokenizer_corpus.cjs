#!/usr/bin/env node
// Writes tests/golden/tokenizer/corpus.jsonl: hard strings for the tokenizer golden tests, one
// JSON object {"text": ...} a line. Hand-written fragments by category, then systematic
// variations and seeded random mixes of them. Deterministic: same output every run.
//
// Left out on purpose, where the JavaScript reference is known to differ from Hugging Face
// tokenizers (Rust/Oniguruma), which lockstep follows:
//   U+0085 and U+FEFF (JS \s says no/yes, Oniguruma yes/no), "'" followed by U+017F (long s;
//   Unicode case folding matches it to 's' in (?i:'s), the JS rewrite does not), lone surrogates.
"use strict";
const fs = require("fs");
const path = require("path");

const prose = [
  "The quick brown fox jumps over the lazy dog.",
  "Hello, world! How are you doing today?",
  "It was the best of times, it was the worst of times, it was the age of wisdom...",
  "Reinforcement learning from human feedback (RLHF) fine-tunes a policy against a reward model.",
  "She said, \"I can't believe it's already 5 o'clock!\"",
  "Mr. O'Neil's dog—a beagle—barked at 3:45 a.m.; nobody woke up.",
  "E-mail me at john.doe+test@example.com or visit https://example.org/path?q=1&r=2#frag.",
  "Pi is approximately 3.14159265358979, and e is about 2.718281828.",
  "The U.S.A. isn't the U.K., and vice-versa.",
  "   Leading spaces and trailing spaces   ",
  "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!",
  "camelCaseIdentifier snake_case_identifier kebab-case-identifier PascalCase",
  "Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopic",
  "Well... I don't know; maybe? Maybe not!? (Who knows.)",
  "He paid $1,234,567.89 for 42% of the shares on 2024-03-15T12:34:56Z.",
  "Tab\tseparated\tvalues\tin\ta\trow",
  "Line one\nLine two\n\nLine four after a blank line\n",
  "Windows line endings\r\nare here\r\n\r\nand here",
  "A sentence with a very-long-hyphenated-compound-word-that-keeps-going-and-going.",
  "Quotes: 'single', \"double\", `backtick`, «guillemets», „German“, “curly” and ‘curly’.",
  "Ellipsis… em dash — en dash – minus − bullet • degree ° section § pilcrow ¶",
  "naïve café résumé coöperate façade jalapeño Zürich São Paulo Kraków",
  "Straße, Ærøskøbing, Þórshöfn, İstanbul, ĳssel, Œuvre",
];
const code = [
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}",
  "#include <iostream>\nint main() { std::cout << \"hi\\n\"; return 0; }",
  "const x = await fetch(`/api/${id}`).then(r => r.json());",
  "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
  "SELECT name, COUNT(*) AS n FROM users WHERE age >= 18 GROUP BY name ORDER BY n DESC;",
  "if [[ -f \"$HOME/.bashrc\" ]]; then source ~/.bashrc; fi  # comment",
  "x = [i**2 for i in range(10) if i % 2 == 0]  # squares",
  "    \n        indented\n            more\n    \n",
  "fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![0xFF; 16]; Ok(()) }",
  "<div class=\"container\"><p id='x'>Text &amp; more &lt;tags&gt;</p></div>",
  "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;k&&l||!m",
  "// TODO(user): fix this!!!\n/* block\n * comment */",
  "lambda x: x if x else None;;;;::::....,,,,",
  "\t\t\treturn;\n\t}\n}\n",
  "0x1F 0b1010 0o777 1_000_000 3.0e-8 .5 5. 1e+100",
  "print(f\"{value!r:>10}\")",
  "matrix = [[1, 2, 3],\n          [4, 5, 6]]",
];
const cjk = [
  "你好，世界！今天天气很好。",
  "机器学习是人工智能的一个分支。",
  "強化学習は人工知能の一分野です。",
  "ひらがなとカタカナとカンジ、ﾊﾝｶｸｶﾀｶﾅもある。",
  "한국어 문장입니다. 안녕하세요!",
  "中文English混合mixed文本text123数字",
  "「引用」『二重引用』【括弧】〈山括弧〉",
  "全角スペース　と　全角数字１２３",
  "𠀀𠀁𪚥 rare CJK extension characters 𰀀",
  "繁體中文與简体中文",
];
const scripts = [
  "مرحبا بالعالم! كيف حالك؟",
  "اللُّغَةُ العَرَبِيَّةُ جَمِيلَةٌ",
  "שלום עולם, מה שלומך?",
  "नमस्ते दुनिया, आप कैसे हैं?",
  "สวัสดีครับ ภาษาไทยไม่มีช่องว่าง",
  "Привет, мир! Как дела?",
  "Γειά σου Κόσμε· τι κάνεις;",
  "Բարեւ աշխարհ",
  "გამარჯობა მსოფლიო",
  "ሰላም ልዑል",
  "வணக்கம் உலகம்",
  "Xin chào thế giới, tiếng Việt có dấu.",
  "Ǆ ǅ ǆ Ǉ ǈ ǉ digraphs and ᾈ titlecase",
];
const emoji = [
  "😀😃😄😁😆", "👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 🏴‍☠️ flags",
  "🇺🇸🇬🇧🇯🇵🇩🇪🇫🇷", "1️⃣2️⃣#️⃣*️⃣", "❤️ ❤ ♥️ ☺️", "🧑🏽‍💻 coding", "👩🏿‍🚀🚀🌕",
  "🤦🏻‍♂️ facepalm", "emoji🙂in😉the🤔middle", "🫠🫥🫶 newer emoji", "©️®️™️",
];
const combining = [
  "e\u0301", "cafe\u0301", "A\u030A", "\u212B", "\u2126", "\u1100\u1161\u11A8", "\u1100\u1161",
  "Z\u0351\u036B\u0343\u036A\u0302\u036B\u033D\u034F\u0334\u0319\u0324\u031E\u0349\u035A\u032F\u031E\u0320\u034DA\u036B\u0357\u0334\u0362\u0335\u031C\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030E\u0305\u035B\u0341\u0334\u033B\u0348\u034D\u0354\u0339O\u0342\u030C\u030C\u0358\u0328\u0335\u0339\u033B\u031D\u0333",
  "o\u0308\u0304", "o\u0304\u0308", "\u0041\u0323\u0307", "\u1E0A\u0323", "\u0301 leading mark",
  "\u00C5\u0301", "\uFB01 ligature fi", "\u2460\u2461 circled", "x\u20D7 vector",
  "\u0915\u094D\u0937", "\u0E01\u0E34\u0E4A", "\u05E9\u05C1\u05B8",
];
const numbers = [
  "0", "7", "42", "123", "1234", "12345", "123456", "1234567", "12345678901234567890",
  "3.14", "-0.001", "+1e-9", "1,000,000", "1.000.000,00", "2024-01-01", "12:30:45", "v1.2.3",
  "١٢٣٤٥", "۱۲۳", "१२३", "１２３４５", "²³¹", "½ ¼ ¾", "Ⅻ ⅻ", "₀₁₂", "99.9%", "#1", "No.5",
  "100km/h", "3x4=12", "0.1+0.2=0.30000000000000004",
];
const whitespace = [
  " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", " \n ", "  \n\n  ", "a  b", "a   b", "a\u00A0b",
  "a\u3000b", "a\u2028b", "a\u2029b", "a\u2003b", "a\u200Bb", "a\u202Fb", "\t \t \t", " \r \n ",
  "end with spaces   ", "   ", "\n \n \n", "word\n\n\n\nword", "x \t\n y", "\v\f", "a\u1680b",
  "a\u205Fb", "a\u180Eb",
];
const contractions = [
  "I'm", "I'M", "i'M", "You're", "YOU'RE", "yOu'Re", "they'll", "THEY'LL", "We've", "WE'VE",
  "he'd", "HE'D", "it's", "IT'S", "It'S", "don't", "DON'T", "Don'T", "can't", "won't",
  "'s", "'S", "'t", "'re", "'ve", "'m", "'ll", "'d", "''s", "'ss", "rock'n'roll",
  "it’s (curly)", "O'Reilly's", "the '90s", "y'all'd've", "'LL'Ll'lL",
];
const specials = [
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
  "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
  "text<|endoftext|>more text", " <|im_end|> ", "<|im_start|><|im_end|>", "<<|im_end|>>",
  "<|im_start", "im_start|>", "<|im_start |>", "<|IM_START|>", "<think>\nreasoning\n</think>\n\nanswer",
  "<|begin_of_text|>", "<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>",
  "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_250|>",
  "<|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>", "<tool_call>{}</tool_call>",
  "<|vision_start|><|image_pad|><|vision_end|>", "<||>", "<|>", "<|endoftext|><|endoftext|>",
];
const invalidLooking = [
  "\\xff\\xfe\\x00", "Ã©tÃ© mojibake", "\uFFFD", "\uFFFD\uFFFD replacement", "\uFFFF\uFFFE",
  "\uE000\uF8FF private use", "\u0000nul", "\u0001\u0002\u0003\u001F controls", "\u007F del",
  "%C3%A9%E2%82%AC", "\\ud800\\udc00", "\u{10FFFF}", "\u{E0001}\u{E0041} tags", "\u200D\u200C",
  "\u202Eright-to-left override\u202C", "\u00AD soft hyphen", "\u034F cgj", "\uFE0F alone",
  "&#x1F600; &#128512;", "\\u00e9", "=?UTF-8?B?w6k=?=", "\u0080\u0081\u009F",
];

const fragments = [].concat(prose, code, cjk, scripts, emoji, combining, numbers, whitespace,
                            contractions, specials, invalidLooking);

// Seeded PRNG (mulberry32) so the corpus never changes between runs.
let seed = 0x5eed1234;
function random() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];

const corpus = [];
const add = (text) => corpus.push(text);
fragments.forEach(add);
// Variations of every fragment: spacing and case around it.
for (const f of fragments) {
  add(" " + f);
  add(f + " ");
  add(f + "\n");
  add("  " + f + "  ");
  add(f.toUpperCase());
  add(f.toLowerCase());
  add(f + f);
}
// Numbers of every length, alone and in context.
for (let n = 1; n <= 48; ++n) {
  let digits = "";
  for (let i = 0; i < n; ++i) digits += String((i * 7 + n) % 10);
  add(digits);
  add("x" + digits + "y");
  add(" " + digits + ".5");
}
// Whitespace runs of every length and kind.
for (let n = 1; n <= 24; ++n) {
  add(" ".repeat(n) + "word");
  add("word" + " ".repeat(n));
  add("a" + " ".repeat(n) + "b");
  add("\n".repeat(n));
  add("a" + "\t".repeat(n) + "b" + "\n".repeat(n % 5) + " ".repeat(n % 3) + "c");
}
// Seeded random mixes of fragments from all categories, with random joiners.
const joiners = ["", " ", "  ", "\n", "\t", "\n\n", ", ", " - ", "\r\n"];
while (corpus.length < 2400) {
  const parts = 2 + Math.floor(random() * 5);
  let text = pick(fragments);
  for (let i = 1; i < parts; ++i) text += pick(joiners) + pick(fragments);
  add(text);
}
// A few long documents.
for (let i = 0; i < 8; ++i) {
  let text = "";
  for (let j = 0; j < 200; ++j) text += pick(fragments) + pick(joiners);
  add(text);
}

const excluded = /[\u0085\uFEFF]|'\u017F|[\uD800-\uDFFF]/u;
const lines = [];
const seen = new Set();
for (const text of corpus) {
  if (excluded.test(text) || text.length === 0 || seen.has(text)) continue;
  seen.add(text);
  lines.push(JSON.stringify({ text }));
}
const out = path.join(__dirname, "..", "tests", "golden", "tokenizer", "corpus.jsonl");
fs.writeFileSync(out, lines.join("\n") + "\n");
console.log(`[make_tokenizer_corpus] wrote ${lines.length} strings to ${out}`);
