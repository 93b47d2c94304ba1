package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

type hfAdded struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// hfComponent is the shape shared by normalizers, pre-tokenizers and post-processors.
type hfComponent struct {
	Type           string        `json:"type"`
	Normalizers    []hfComponent `json:"normalizers"`
	Pretokenizers  []hfComponent `json:"pretokenizers"`
	Processors     []hfComponent `json:"processors"`
	Pattern        *struct{ Regex, String *string }
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
	Single         []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
	} `json:"single"`
	SpecialTokens map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
}

// FromHFJSON reads a Hugging Face tokenizer.json (BPE model with a byte-level
// pre-tokenizer). The reader may be gzipped; that is detected from the content.
func FromHFJSON(r io.Reader) (*Tokenizer, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	t, err := parseJSONData(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return t, nil
}

// LoadFile reads a tokenizer.json or tokenizer.json.gz. A tokenizer_config.json beside it
// (BOS/EOS, add_bos_token, chat_template) and a chat_template.jinja are read too, as
// transformers does for a model folder.
func LoadFile(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parseJSONData(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if cf, err := os.Open(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		err = t.applyHFConfig(cf)
		cf.Close()
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		t.tmpl = string(b)
	}
	return t, nil
}

// gunzipIfNeeded inflates data when it is gzip, into a buffer sized from the gzip trailer.
func gunzipIfNeeded(data []byte) ([]byte, error) {
	if len(data) < 18 || data[0] != 0x1f || data[1] != 0x8b {
		return data, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	defer zr.Close()
	size := gzipSize(data)
	if !plausibleSize(size, len(data)) {
		size = 4 * len(data)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}

func parseHFJSON(s *jscan) (*Tokenizer, error) {
	var (
		added                              []hfAdded
		normalizer, preTok, post           hfComponent
		modelType                          = ""
		merges                             [][2][]byte
		ignoreMerges, byteFallback, hasVoc bool
		filling                            bool // the vocabulary goroutine runs
		unsupported                        []string
		b                                  *builder
		vocabDone                          = make(chan error, 1)
	)
	sub := func(dst any) error {
		raw, err := s.skip()
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, dst)
	}
	err := s.object(func(key string) error {
		switch key {
		case "added_tokens":
			return sub(&added)
		case "normalizer":
			return sub(&normalizer)
		case "pre_tokenizer":
			return sub(&preTok)
		case "post_processor":
			return sub(&post)
		case "model":
			return s.object(func(key string) error {
				var err error
				switch key {
				case "type":
					return sub(&modelType)
				case "ignore_merges":
					return sub(&ignoreMerges)
				case "byte_fallback":
					return sub(&byteFallback)
				case "vocab":
					if hasVoc {
						return fmt.Errorf("two vocab sections")
					}
					hasVoc = true
					vocab, err := readVocab(s)
					if err != nil {
						return err
					}
					// Fill the vocabulary table while the merges are being read.
					size := 0
					for _, v := range vocab {
						size = max(size, v.id+1)
					}
					b = newBuilder(size, 0)
					filling = true
					go func() {
						for _, v := range vocab {
							if v.id < 0 {
								vocabDone <- fmt.Errorf("vocab: token %q has negative id %d", v.tok, v.id)
								return
							}
							addNormal(b, v.tok, v.id)
						}
						vocabDone <- nil
					}()
					return nil
				case "merges":
					merges, err = readMerges(s)
					return err
				case "continuing_subword_prefix", "end_of_word_suffix":
					var v *string
					if err := sub(&v); err != nil {
						return err
					}
					if v != nil && *v != "" {
						unsupported = append(unsupported, key)
					}
					return nil
				}
				_, err = s.skip()
				return err
			})
		}
		_, err := s.skip()
		return err
	})
	if filling { // the vocabulary goroutine must be done before b is touched or dropped
		if verr := <-vocabDone; err == nil {
			err = verr
		}
	}
	if err != nil {
		return nil, err
	}
	if modelType != "BPE" {
		return nil, fmt.Errorf("model type %q is not supported (only byte-level BPE)", modelType)
	}
	if !hasVoc {
		return nil, fmt.Errorf("model has no vocab")
	}
	if byteFallback {
		unsupported = append(unsupported, "byte_fallback")
	}
	if len(unsupported) > 0 {
		return nil, fmt.Errorf("unsupported BPE options: %s", strings.Join(unsupported, ", "))
	}
	nfc, err := hfNormalizer(normalizer)
	if err != nil {
		return nil, err
	}
	pre, err := hfPreTokenizer(preTok)
	if err != nil {
		return nil, err
	}

	b.t.nfc = nfc
	b.t.pre = pre
	b.t.pretok = pre.String()
	b.t.model.ignoreMerges = ignoreMerges
	addMerges(b, merges)
	if b.skipped > 0 {
		slog.Debug("tokenizer: merges naming unknown tokens were skipped", "count", b.skipped)
	}
	for _, a := range added {
		if a.ID < 0 {
			return nil, fmt.Errorf("added token %q has negative id %d", a.Content, a.ID)
		}
		if a.LStrip || a.RStrip || a.SingleWord {
			return nil, fmt.Errorf("added token %q: lstrip/rstrip/single_word are not supported", a.Content)
		}
		b.addedTok(a.Content, a.ID, a.Special, a.Normalized, b.bl.tokenBytes(a.Content))
	}
	t := b.finish()
	t.bos, t.addBOS = hfPostBOS(post)
	t.initEOG()
	return t, nil
}

type vocabEntry struct {
	tok []byte // aliases the JSON buffer
	id  int
}

func readVocab(s *jscan) ([]vocabEntry, error) {
	out := make([]vocabEntry, 0, 1<<17)
	if err := s.expect('{'); err != nil {
		return nil, fmt.Errorf("vocab: %w", err)
	}
	for first := true; ; first = false {
		more, err := s.more('}', first)
		if err != nil {
			return nil, fmt.Errorf("vocab: %w", err)
		}
		if !more {
			break
		}
		key, err := s.strBytes()
		if err == nil {
			err = s.expect(':')
		}
		if err != nil {
			return nil, fmt.Errorf("vocab: %w", err)
		}
		id, err := s.integer()
		if err != nil {
			return nil, fmt.Errorf("vocab: token %q: %w", key, err)
		}
		out = append(out, vocabEntry{key, id})
	}
	return out, nil
}

// readMerges accepts both forms: "a b" strings and ["a", "b"] pairs. The strings alias
// the JSON buffer.
func readMerges(s *jscan) ([][2][]byte, error) {
	out := make([][2][]byte, 0, 1<<17)
	err := s.array(func() error {
		if s.peek() == '"' {
			line, err := s.strBytes()
			if err != nil {
				return err
			}
			i := bytes.IndexByte(line, ' ')
			if i <= 0 || i == len(line)-1 {
				return fmt.Errorf("merge %d: %q is not \"left right\"", len(out), line)
			}
			out = append(out, [2][]byte{line[:i], line[i+1:]})
			return nil
		}
		var pair [2][]byte
		err := s.expect('[')
		if err == nil {
			pair[0], err = s.strBytes()
		}
		if err == nil {
			err = s.expect(',')
		}
		if err == nil {
			pair[1], err = s.strBytes()
		}
		if err == nil {
			err = s.expect(']')
		}
		if err != nil {
			return fmt.Errorf("merge %d: want [\"left\", \"right\"]: %w", len(out), err)
		}
		out = append(out, pair)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("merges: %w", err)
	}
	return out, nil
}

func hfNormalizer(n hfComponent) (nfc bool, err error) {
	switch n.Type {
	case "":
		return false, nil
	case "NFC":
		return true, nil
	case "Sequence":
		for _, c := range n.Normalizers {
			v, err := hfNormalizer(c)
			if err != nil {
				return false, err
			}
			nfc = nfc || v
		}
		return nfc, nil
	}
	return false, fmt.Errorf("normalizer %q is not supported", n.Type)
}

func hfPreTokenizer(p hfComponent) (preKind, error) {
	var res []string
	sawByteLevel := false
	var walk func(c hfComponent) error
	walk = func(c hfComponent) error {
		switch c.Type {
		case "Sequence":
			for _, x := range c.Pretokenizers {
				if err := walk(x); err != nil {
					return err
				}
			}
		case "Split":
			if c.Pattern == nil || c.Pattern.Regex == nil || c.Behavior != "Isolated" || c.Invert {
				return fmt.Errorf("pre-tokenizer: only Split with a Regex, Isolated, not inverted, is supported")
			}
			res = append(res, *c.Pattern.Regex)
		case "ByteLevel":
			if c.AddPrefixSpace {
				return fmt.Errorf("pre-tokenizer: ByteLevel add_prefix_space is not supported")
			}
			sawByteLevel = true
			if c.UseRegex == nil || *c.UseRegex {
				res = append(res, reGPT2)
			}
		default:
			return fmt.Errorf("pre-tokenizer %q is not supported", c.Type)
		}
		return nil
	}
	if err := walk(p); err != nil {
		return 0, err
	}
	if !sawByteLevel {
		return 0, fmt.Errorf("pre-tokenizer: not byte-level (no ByteLevel step)")
	}
	return preKindForRegexes(res)
}

// hfPostBOS finds a BOS that a TemplateProcessing post-processor prepends (Llama-3).
func hfPostBOS(p hfComponent) (int, bool) {
	switch p.Type {
	case "Sequence":
		for _, c := range p.Processors {
			if id, ok := hfPostBOS(c); ok {
				return id, ok
			}
		}
	case "TemplateProcessing":
		if len(p.Single) > 0 && p.Single[0].SpecialToken != nil {
			if st, ok := p.SpecialTokens[p.Single[0].SpecialToken.ID]; ok && len(st.IDs) == 1 {
				return st.IDs[0], true
			}
		}
	}
	return -1, false
}

// applyHFConfig reads tokenizer_config.json: bos_token, eos_token, add_bos_token and
// chat_template.
func (t *Tokenizer) applyHFConfig(r io.Reader) error {
	var cfg struct {
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		AddBOS       *bool           `json:"add_bos_token"`
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.NewDecoder(r).Decode(&cfg); err != nil {
		return err
	}
	if name := hfTokenName(cfg.BOS); name != "" {
		if id, ok := t.ID(name); ok {
			t.bos = id
		}
	}
	if name := hfTokenName(cfg.EOS); name != "" {
		if id, ok := t.ID(name); ok {
			t.eos = id
		}
	}
	if cfg.AddBOS != nil {
		t.addBOS = *cfg.AddBOS
	}
	if len(cfg.ChatTemplate) > 0 {
		var s string
		if json.Unmarshal(cfg.ChatTemplate, &s) == nil {
			t.tmpl = s
		} else {
			var named []struct{ Name, Template string }
			if json.Unmarshal(cfg.ChatTemplate, &named) == nil {
				for _, n := range named {
					if n.Name == "default" {
						t.tmpl = n.Template
					}
				}
			}
		}
	}
	t.initEOG()
	return nil
}

// hfTokenName reads a token given either as a string or as {"content": ...}.
func hfTokenName(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}
