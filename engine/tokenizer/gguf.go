package tokenizer

import (
	"fmt"
	"log/slog"
)

// Metadata is the part of a GGUF file's key-value store the tokenizer reads; *gguf.File
// satisfies it. Each getter fails when the key is missing or has another type.
type Metadata interface {
	GetString(key string) (string, error)
	GetStrings(key string) ([]string, error)
	GetInts(key string) ([]int64, error)
	GetUint(key string) (uint64, error)
	GetBool(key string) (bool, error)
}

// GGUF token types (llama.cpp's llama_token_type).
const (
	tokNormal      = 1
	tokUnknown     = 2
	tokControl     = 3
	tokUserDefined = 4
	tokUnused      = 5
	tokByte        = 6
)

// FromGGUF builds the tokenizer from tokenizer.ggml.* keys (model "gpt2", i.e. byte-level
// BPE) and tokenizer.chat_template.
//
// Token types decide how added tokens behave. NORMAL tokens are BPE vocabulary. CONTROL
// tokens are special: recognised in text only with parseSpecial. USER_DEFINED tokens are
// always recognised, like HF's non-special added tokens. llama.cpp's converter marks an
// added token CONTROL when HF says special or when it merely looks special (<|...|>,
// <｜...｜>), so Qwen3's <|fim_prefix|> and DeepSeek's <｜User｜>, non-special in
// tokenizer.json, are CONTROL here: with parseSpecial=false the GGUF path tokenises them as
// plain text where the JSON path gives their id. <think> and <tool_call> do not look special,
// are USER_DEFINED, and behave as in HF. We follow the file rather than guess.
//
// Normalisation and ignore_merges are not stored in GGUF; they follow the pre-tokenizer as
// in the HF files of those models: NFC for qwen2/qwen35 (llama.cpp itself skips it),
// ignore_merges for llama-bpe and gpt-4o.
func FromGGUF(md Metadata) (*Tokenizer, error) {
	model, err := md.GetString("tokenizer.ggml.model")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if model != "gpt2" {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.model %q is not supported (only gpt2, byte-level BPE)", model)
	}
	pre := preGPT2
	if name, err := md.GetString("tokenizer.ggml.pre"); err == nil {
		if pre, err = preKindForGGUF(name); err != nil {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.pre: %w", err)
		}
	} else {
		slog.Warn("tokenizer: no tokenizer.ggml.pre, using GPT-2's pre-tokenizer", "err", err)
	}
	tokens, err := md.GetStrings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.tokens is empty")
	}
	types, err := md.GetInts("tokenizer.ggml.token_type")
	if err != nil {
		slog.Warn("tokenizer: no tokenizer.ggml.token_type, treating every token as normal", "err", err)
		types = nil
	} else if len(types) != len(tokens) {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type has %d entries for %d tokens", len(types), len(tokens))
	}
	merges, err := md.GetStrings("tokenizer.ggml.merges")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}

	b := newBuilder(len(tokens), len(merges))
	b.t.pre = pre
	b.t.pretok = pre.String()
	b.t.nfc = pre == preQwen2 || pre == preQwen35
	b.t.model.ignoreMerges = pre == preLlama3 || pre == preO200k
	for id, tok := range tokens {
		typ := int64(tokNormal)
		if types != nil {
			typ = types[id]
		}
		switch typ {
		case tokNormal, tokByte:
			b.normal(tok, id)
		case tokControl:
			b.addedTok(tok, id, true, false, []byte(tok))
		case tokUserDefined:
			b.addedTok(tok, id, false, false, []byte(tok))
		case tokUnknown, tokUnused:
			b.other(tok, id)
		default:
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type[%d] = %d is not a token type", id, typ)
		}
	}
	pairs := make([][2]string, 0, len(merges))
	for i, m := range merges {
		l, r, ok := splitMerge(m)
		if !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.merges[%d] = %q is not \"left right\"", i, m)
		}
		pairs = append(pairs, [2]string{l, r})
	}
	addMerges(b, pairs)
	if b.skipped > 0 {
		slog.Debug("tokenizer: merges naming unknown tokens were skipped", "count", b.skipped)
	}

	t := b.finish()
	optID := func(key string) int {
		v, err := md.GetUint(key)
		if err != nil {
			return -1
		}
		if v >= uint64(len(tokens)) {
			slog.Warn("tokenizer: token id out of range, ignored", "key", key, "id", v, "vocab", len(tokens))
			return -1
		}
		return int(v)
	}
	t.bos = optID("tokenizer.ggml.bos_token_id")
	t.eos = optID("tokenizer.ggml.eos_token_id")
	if v, err := md.GetBool("tokenizer.ggml.add_bos_token"); err == nil {
		t.addBOS = v
	}
	if s, err := md.GetString("tokenizer.chat_template"); err == nil {
		t.tmpl = s
	}
	t.initEOG(optID("tokenizer.ggml.eot_token_id"), optID("tokenizer.ggml.eom_token_id"))
	return t, nil
}
