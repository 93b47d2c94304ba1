package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"strata/engine/gguf"
	"strata/engine/tokenizer"
)

// runTokenize is `strata tokenize`: text to ids (TEXT, or --jsonl batches) and ids to text
// (--decode), with the tokenizer of a GGUF model (-m) or of a tokenizer.json (--tokenizer).
func runTokenize(ctx context.Context, args []string, io IO) error {
	fs := newFlags("tokenize", io)
	modelPath := fs.String("m", "", "model GGUF file (its tokenizer.ggml.* metadata)")
	tokPath := fs.String("tokenizer", "", "HF tokenizer.json or tokenizer.json.gz")
	special := fs.Bool("special", false, "recognise special tokens written in the text (<|im_start|>)")
	asJSON := fs.Bool("json", false, `print {"ids":[...]} (or {"text":...} with --decode)`)
	jsonl := fs.Bool("jsonl", false, `read one JSON string per line from stdin, print one {"ids":[...]} per line`)
	decode := fs.String("decode", "", "token ids to turn back into text: 1,2,3")
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	if (*modelPath == "") == (*tokPath == "") {
		return usagef("give exactly one of -m MODEL or --tokenizer FILE")
	}
	if fs.NArg() > 1 {
		return usagef("give the text as one argument (quote it); got %d arguments", fs.NArg())
	}
	modes := 0
	for _, on := range []bool{fs.NArg() == 1, *jsonl, *decode != ""} {
		if on {
			modes++
		}
	}
	if modes != 1 {
		return usagef("give exactly one of TEXT, --jsonl or --decode 1,2,3")
	}

	tk, err := loadTokenizer(*modelPath, *tokPath)
	if err != nil {
		return err
	}
	switch {
	case *decode != "":
		ids, err := parseIntList(*decode)
		if err != nil {
			return usagef("--decode: %v", err)
		}
		for _, id := range ids {
			if id < 0 || id >= tk.VocabSize() {
				return fmt.Errorf("--decode: id %d is outside the vocabulary (0..%d)", id, tk.VocabSize()-1)
			}
		}
		text := tk.Decode(ids)
		if *asJSON {
			enc := json.NewEncoder(io.Out)
			enc.SetEscapeHTML(false) // keep <|im_end|> readable
			return enc.Encode(struct {
				Text string `json:"text"`
			}{text})
		}
		_, err = fmt.Fprintln(io.Out, text)
		return err
	case *jsonl:
		return tokenizeLines(ctx, tk, *special, io)
	}
	ids := tk.Encode(fs.Arg(0), *special)
	if *asJSON {
		return writeIDs(io, ids)
	}
	_, err = fmt.Fprintln(io.Out, joinInts(ids))
	return err
}

func loadTokenizer(modelPath, tokPath string) (*tokenizer.Tokenizer, error) {
	if tokPath != "" {
		return tokenizer.LoadFile(tokPath)
	}
	f, err := gguf.Open(modelPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", modelPath, err)
	}
	return tk, nil
}

// tokenizeLines reads one JSON string per line and writes one {"ids":[...]} per line.
func tokenizeLines(ctx context.Context, tk *tokenizer.Tokenizer, special bool, io IO) error {
	sc := bufio.NewScanner(io.In)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	out := bufio.NewWriter(io.Out)
	defer out.Flush()
	for line := 1; sc.Scan(); line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var text string
		if err := json.Unmarshal(sc.Bytes(), &text); err != nil {
			return fmt.Errorf("stdin line %d: want one JSON string: %v", line, err)
		}
		if err := writeIDs(IO{Out: out}, tk.Encode(text, special)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	return nil
}

func writeIDs(io IO, ids []int) error {
	if ids == nil {
		ids = []int{}
	}
	return json.NewEncoder(io.Out).Encode(struct {
		IDs []int `json:"ids"`
	}{ids})
}

func joinInts(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}
