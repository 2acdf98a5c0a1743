// Token ids from Hugging Face's own JavaScript tokenizer (@huggingface/tokenizers,
// pinned in package.json), for comparison with coring's embed tokenizer.
//   node tokenize.mjs TOKENIZER_JSON SENTENCES_JSON
// Prints one JSON array of ids per sentence, in order.
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokenizerPath, sentencesPath] = process.argv.slice(2);
if (!tokenizerPath || !sentencesPath) {
  console.error("usage: node tokenize.mjs TOKENIZER_JSON SENTENCES_JSON");
  process.exit(2);
}
const tokenizer = new Tokenizer(JSON.parse(readFileSync(tokenizerPath, "utf8")), {});
for (const text of JSON.parse(readFileSync(sentencesPath, "utf8"))) {
  const { ids } = tokenizer.encode(text);
  console.log(JSON.stringify(ids.map(Number)));
}
