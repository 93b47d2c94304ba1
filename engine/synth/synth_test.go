package synth

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"strata/engine/gguf"
	"strata/engine/quant"
	"strata/engine/tokenizer"
)

func tinySpec(t *testing.T, typ quant.Type, pool int) Spec {
	t.Helper()
	s, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Quant, s.Pool = typ, pool
	return s
}

func write(t *testing.T, s Spec) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	var last, total int64
	if err := Write(context.Background(), path, s, func(d, tot int64) { last, total = d, tot }); err != nil {
		t.Fatal(err)
	}
	if last != total || total == 0 {
		t.Errorf("progress ended at %d of %d", last, total)
	}
	return path
}

// wantTensors is the qwen3moe tensor list, written out independently of plan().
func wantTensors(s Spec) []struct {
	name string
	ne   []int64
	f32  bool
} {
	type T = struct {
		name string
		ne   []int64
		f32  bool
	}
	h, e, f, v := int64(s.Hidden), int64(s.Experts), int64(s.ExpertFFN), int64(s.Vocab)
	q, kv, hd := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.HeadDim)
	out := []T{{"token_embd.weight", []int64{h, v}, false}}
	for l := range s.Layers {
		p := func(n string) string { return fmt.Sprintf("blk.%d.%s.weight", l, n) }
		out = append(out,
			T{p("attn_norm"), []int64{h}, true},
			T{p("attn_q"), []int64{h, q}, false},
			T{p("attn_k"), []int64{h, kv}, false},
			T{p("attn_v"), []int64{h, kv}, false},
			T{p("attn_output"), []int64{q, h}, false},
			T{p("attn_q_norm"), []int64{hd}, true},
			T{p("attn_k_norm"), []int64{hd}, true},
			T{p("ffn_norm"), []int64{h}, true},
			T{p("ffn_gate_inp"), []int64{h, e}, true},
			T{p("ffn_gate_exps"), []int64{h, f, e}, false},
			T{p("ffn_up_exps"), []int64{h, f, e}, false},
			T{p("ffn_down_exps"), []int64{f, h, e}, false},
		)
	}
	return append(out, T{"output_norm.weight", []int64{h}, true}, T{"output.weight", []int64{h, v}, false})
}

func TestWriteTiny(t *testing.T) {
	for _, c := range []struct {
		typ  quant.Type
		pool int
	}{{quant.F32, 0}, {quant.F16, 0}, {quant.Q8_0, 0}, {quant.Q4_K, 0}, {quant.Q4_K, 512}, {quant.Q6_K, 256}, {quant.MXFP4, 1024}} {
		t.Run(fmt.Sprintf("%s/pool%d", c.typ, c.pool), func(t *testing.T) {
			s := tinySpec(t, c.typ, c.pool)
			f, err := gguf.Open(write(t, s))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			want := wantTensors(s)
			if len(f.Tensors) != len(want) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(want))
			}
			for i, w := range want {
				got := f.Tensors[i]
				typ := c.typ
				if w.f32 {
					typ = quant.F32
				}
				if got.Name != w.name || got.Type != typ || fmt.Sprint(got.Ne) != fmt.Sprint(w.ne) {
					t.Errorf("tensor %d: %s %s %v, want %s %s %v", i, got.Name, got.Type, got.Ne, w.name, typ, w.ne)
				}
			}
			checkMetadata(t, f, s)
			checkScales(t, f, s)
		})
	}
}

func checkMetadata(t *testing.T, f *gguf.File, s Spec) {
	t.Helper()
	ints := map[string]int{"block_count": s.Layers, "context_length": s.Context, "embedding_length": s.Hidden,
		"feed_forward_length": s.FFN, "attention.head_count": s.Heads, "attention.head_count_kv": s.KVHeads,
		"expert_count": s.Experts, "expert_used_count": s.ExpertsUsed, "attention.key_length": s.HeadDim,
		"attention.value_length": s.HeadDim, "expert_feed_forward_length": s.ExpertFFN}
	for k, v := range ints {
		if got, err := f.ArchUint(k); err != nil || got != uint64(v) {
			t.Errorf("%s = %d, %v; want %d", k, got, err, v)
		}
	}
	if x, err := f.ArchFloat("rope.freq_base"); err != nil || x != 1e6 {
		t.Errorf("rope.freq_base = %g, %v", x, err)
	}
	if x, err := f.ArchFloat("attention.layer_norm_rms_epsilon"); err != nil || float32(x) != float32(1e-6) {
		t.Errorf("rms eps = %g, %v", x, err)
	}
	ft, _ := fileType(s.Quant)
	if got, err := f.GetUint("general.file_type"); err != nil || got != uint64(ft) {
		t.Errorf("file_type = %d, %v; want %d", got, err, ft)
	}
	toks, err := f.GetStrings("tokenizer.ggml.tokens")
	if err != nil || len(toks) != s.Vocab {
		t.Fatalf("%d tokens, want %d (%v)", len(toks), s.Vocab, err)
	}
	if toks[' '] != "Ġ" || toks['a'] != "a" || toks['\n'] != "Ċ" || toks[0] != "Ā" || toks[255] != "ÿ" {
		t.Errorf("byte tokens are not GPT-2's byte-to-unicode map: %q %q %q %q %q", toks[' '], toks['a'], toks['\n'], toks[0], toks[255])
	}
	seen := map[string]bool{}
	for _, tok := range toks {
		if seen[tok] {
			t.Errorf("token %q appears twice", tok)
		}
		seen[tok] = true
	}
	merges, err := f.GetStrings("tokenizer.ggml.merges")
	if err != nil || len(merges) == 0 {
		t.Fatalf("merges: %v, %v", merges, err)
	}
	for _, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok || !seen[a] || !seen[b] || !seen[a+b] {
			t.Errorf("merge %q: parts or result not in the vocabulary", m)
		}
	}
	types, err := f.GetInts("tokenizer.ggml.token_type")
	if err != nil || len(types) != s.Vocab {
		t.Fatalf("token types: %d, %v", len(types), err)
	}
	id := func(key string) int {
		v, err := f.GetUint(key)
		if err != nil {
			t.Fatal(err)
		}
		return int(v)
	}
	eos, bos, pad := id("tokenizer.ggml.eos_token_id"), id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.padding_token_id")
	if toks[eos] != "<|im_end|>" || toks[bos] != "<|endoftext|>" || pad != bos || toks[s.Vocab-2] != "<|im_start|>" {
		t.Errorf("specials: eos %q bos %q pad %d", toks[eos], toks[bos], pad)
	}
	for i, ty := range types {
		control := i >= s.Vocab-3
		if control && ty != tokenControl || !control && ty != tokenNormal {
			t.Errorf("token %d %q has type %d", i, toks[i], ty)
		}
	}
	if b, err := f.GetBool("tokenizer.ggml.add_bos_token"); err != nil || b {
		t.Errorf("add_bos_token = %v, %v", b, err)
	}
	if tpl, err := f.GetString("tokenizer.chat_template"); err != nil || !strings.Contains(tpl, "<|im_start|>") {
		t.Errorf("chat template: %v", err)
	}
	for _, k := range []string{"general.architecture", "general.type", "general.name", "tokenizer.ggml.model", "tokenizer.ggml.pre"} {
		if _, err := f.GetString(k); err != nil {
			t.Error(err)
		}
	}
}

// checkScales dequantises a few tensors and checks their mean and spread against the recipe.
func checkScales(t *testing.T, f *gguf.File, s Spec) {
	t.Helper()
	cases := []struct {
		name       string
		mean, std  float64
		tolMean    float64
		tolStdFrac float64
	}{
		{"blk.0.ffn_gate_exps.weight", 0, linearGain / math.Sqrt(float64(s.Hidden)), 0.002, 0.15},
		{"blk.1.ffn_down_exps.weight", 0, linearGain / math.Sqrt(float64(s.ExpertFFN)), 0.002, 0.15},
		{"blk.0.attn_output.weight", 0, attnOutGain * linearGain / math.Sqrt(float64(s.Heads*s.HeadDim)), 0.0002, 0.15},
		{"output.weight", 0, headGain / math.Sqrt(float64(s.Hidden)), 0.005, 0.15},
		{"token_embd.weight", 0, 1, 0.02, 0.15},
		{"blk.0.ffn_gate_inp.weight", 0, routerGain / math.Sqrt(float64(s.Hidden)), 0.01, 0.1},
		{"blk.1.attn_norm.weight", 1, normSpread, 0.03, 0.3},
	}
	for _, c := range cases {
		ti, ok := f.Tensor(c.name)
		if !ok {
			t.Fatalf("no tensor %s", c.name)
		}
		vals := make([]float32, ti.Elements())
		if err := quant.Dequantize(ti.Type, f.TensorData(ti), vals); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mean, std := meanStd(vals)
		if math.Abs(mean-c.mean) > c.tolMean || math.Abs(std-c.std) > c.tolStdFrac*c.std {
			t.Errorf("%s (%s): mean %.4g std %.4g, want %.4g and %.4g", c.name, ti.Type, mean, std, c.mean, c.std)
		}
	}
}

func meanStd(x []float32) (float64, float64) {
	var s, ss float64
	for _, v := range x {
		s += float64(v)
	}
	m := s / float64(len(x))
	for _, v := range x {
		ss += (float64(v) - m) * (float64(v) - m)
	}
	return m, math.Sqrt(ss / float64(len(x)))
}

func TestDeterministic(t *testing.T) {
	for _, c := range []struct {
		typ  quant.Type
		pool int
	}{{quant.Q8_0, 0}, {quant.Q4_K, 256}} {
		pool := c.pool
		s := tinySpec(t, c.typ, pool)
		a, err := os.ReadFile(write(t, s))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(write(t, s))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("pool %d: two writes with seed %d differ", pool, s.Seed)
		}
		s.Seed++
		c, err := os.ReadFile(write(t, s))
		if err != nil {
			t.Fatal(err)
		}
		if len(c) != len(a) || bytes.Equal(a, c) {
			t.Errorf("pool %d: seeds %d and %d give the same bytes (or sizes differ)", pool, s.Seed-1, s.Seed)
		}
	}
}

// TestZipfSkew routes every token's normalised embedding through layer 0's router (the
// router sees more than the embedding, but the embedding dominates at layer 0) and checks
// that expert popularity falls with the Zipf rank, and is flat without skew.
func TestZipfSkew(t *testing.T) {
	pop := func(zipf float64, typ quant.Type, pool int) ([]int, []int) {
		return layer0Popularity(t, zipf, typ, pool)
	}
	flat, _ := pop(0, quant.F32, 0)
	mn, mx := flat[0], flat[0]
	for _, c := range flat {
		mn, mx = min(mn, c), max(mx, c)
	}
	if mx > 3*mn {
		t.Errorf("without skew, popularity is uneven: %v", flat)
	}
	for _, c := range []struct {
		typ  quant.Type
		pool int
	}{{quant.F32, 0}, {quant.Q8_0, 2048}} { // drawn row by row, and assembled from a pool
		skewed, ranks := pop(1.5, c.typ, c.pool)
		byRank := make([]int, len(skewed))
		for e, r := range ranks {
			byRank[r] = skewed[e]
		}
		t.Logf("%s pool %d: popularity by Zipf rank: %v", c.typ, c.pool, byRank)
		if byRank[0] < 4*byRank[len(byRank)-1] || byRank[0] < byRank[3] || byRank[1] < byRank[8] {
			t.Errorf("%s pool %d: popularity does not fall with rank: %v", c.typ, c.pool, byRank)
		}
	}
}

func floats(t *testing.T, f *gguf.File, name string) []float32 {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	out := make([]float32, ti.Elements())
	if err := quant.Dequantize(ti.Type, f.TensorData(ti), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSpecErrors(t *testing.T) {
	if _, err := Preset("7b"); err == nil || !strings.Contains(err.Error(), "unknown preset") {
		t.Errorf("Preset(7b): %v", err)
	}
	s := Spec{}
	cases := []struct {
		name string
		edit func(s *Spec) error
		want string
	}{
		{"unknown key", func(s *Spec) error { return s.ApplyShape("layers=2,wings=3") }, "unknown key \"wings\""},
		{"not a number", func(s *Spec) error { return s.ApplyShape("hidden=big") }, "positive integer"},
		{"zero", func(s *Spec) error { return s.ApplyShape("experts=0") }, "positive integer"},
		{"no equals", func(s *Spec) error { return s.ApplyShape("hidden") }, "key=value"},
		{"bad float", func(s *Spec) error { return s.ApplyShape("rope_base=-1") }, "positive number"},
		{"rows not blocks", func(s *Spec) error { _ = s.ApplyShape("hidden=64"); return s.Validate() }, "hidden = 64 is not a multiple of Q4_K's 256-value blocks"},
		{"too many used", func(s *Spec) error { _ = s.ApplyShape("experts_used=9"); return s.Validate() }, "experts_used 9 > experts 8"},
		{"gqa", func(s *Spec) error { _ = s.ApplyShape("kv_heads=3"); return s.Validate() }, "not a multiple of kv_heads"},
		{"vocab", func(s *Spec) error { _ = s.ApplyShape("vocab=100"); return s.Validate() }, "vocab 100"},
		{"arch", func(s *Spec) error { s.Arch = "llama"; return s.Validate() }, "unknown architecture"},
		{"quant", func(s *Spec) error { s.Quant = quant.IQ1_S; return s.Validate() }, "cannot quantise to IQ1_S"},
	}
	for _, c := range cases {
		s, _ = Preset("tiny")
		if err := c.edit(&s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	s, _ = Preset("30b-a3b")
	if err := s.ApplyShape("layers=2, experts=4 ,rope_base=5e5"); err != nil || s.Layers != 2 || s.Experts != 4 || s.RopeBase != 5e5 || s.Hidden != 2048 {
		t.Errorf("ApplyShape: %v %+v", err, s)
	}
}

func TestWriteCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "m.gguf")
	err := Write(ctx, path, tinySpec(t, quant.Q8_0, 0), nil)
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("cancelled write: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 0 {
		t.Errorf("cancelled write left %v", entries)
	}
}

func TestPresetSizes(t *testing.T) {
	// The 30b-a3b preset must be about the size of the real Qwen3-30B-A3B in Q4_K.
	s, err := Preset("30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	var params, bytes int64
	for _, tp := range plan(s) {
		rb, err := quant.RowBytes(tp.typ, tp.rowLen())
		if err != nil {
			t.Fatal(err)
		}
		params += int64(tp.rowLen()) * int64(tp.rows())
		bytes += int64(rb) * int64(tp.rows())
	}
	if params < 30.0e9 || params > 31.0e9 || bytes < 16e9 || bytes > 19e9 {
		t.Errorf("30b-a3b: %d parameters, %d bytes", params, bytes)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
	s, _ = Preset("235b-a22b")
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
}

// TestTokenizerLoads checks the embedded vocabulary with the project's tokenizer: the
// merges apply, any bytes round-trip, and the ChatML specials are recognised.
func TestTokenizerLoads(t *testing.T) {
	f, err := gguf.Open(write(t, tinySpec(t, quant.F32, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode("Hello world", false)
	if len(ids) != 2 || tok.TokenText(ids[0]) != "Hello" || tok.TokenText(ids[1]) != "Ġworld" {
		texts := make([]string, len(ids))
		for i, id := range ids {
			texts[i] = tok.TokenText(id)
		}
		t.Errorf("Hello world -> %q", texts)
	}
	for _, s := range []string{"Hello world", "the cat\n\tsat ÿ€😀"} {
		if got := tok.Decode(tok.Encode(s, false)); got != s {
			t.Errorf("round trip %q -> %q", s, got)
		}
	}
	ids = tok.Encode("<|im_start|>user\nhi<|im_end|>", true)
	if eos, ok := tok.EOS(); !ok || ids[len(ids)-1] != eos || !tok.IsSpecial(ids[0]) || !tok.IsEndOfGeneration(eos) {
		t.Errorf("specials: %v (eos %d)", ids, eos)
	}
}

// TestGptOssPresets: the gpt-oss presets have the published sizes (gpt-oss-20b: 20.9 B
// parameters, ~12.1 GB with MXFP4 experts and Q8_0 attention; gpt-oss-120b: 116.8 B), and a
// small one writes a file whose metadata and tensors gpt-oss needs.
func TestGptOssPresets(t *testing.T) {
	for _, c := range []struct {
		name               string
		minP, maxP, maxB   float64
		layers, experts    int
		embdType, expertTy quant.Type
	}{
		{"gptoss-20b", 20.5e9, 21.3e9, 13e9, 24, 32, quant.Q8_0, quant.MXFP4},
		{"gptoss-120b", 116e9, 118e9, 66e9, 36, 128, quant.Q8_0, quant.MXFP4},
	} {
		s, err := PresetFor("gpt-oss", c.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		var params, bytes int64
		for _, tp := range plan(s) {
			rb, err := quant.RowBytes(tp.typ, tp.rowLen())
			if err != nil {
				t.Fatal(err)
			}
			params += int64(tp.rowLen()) * int64(tp.rows())
			bytes += int64(rb) * int64(tp.rows())
			if strings.HasSuffix(tp.name, "_exps.weight") && tp.typ != c.expertTy || tp.name == "token_embd.weight" && tp.typ != c.embdType {
				t.Errorf("%s: %s is %s", c.name, tp.name, tp.typ)
			}
		}
		t.Logf("%s: %.2f B parameters, %.2f GB", c.name, float64(params)/1e9, float64(bytes)/1e9)
		if float64(params) < c.minP || float64(params) > c.maxP || float64(bytes) > c.maxB || s.Layers != c.layers || s.Experts != c.experts {
			t.Errorf("%s: %d layers x %d experts, %d parameters, %d bytes", c.name, s.Layers, s.Experts, params, bytes)
		}
	}
	if _, err := PresetFor("qwen3moe", "gptoss-20b"); err == nil {
		t.Error("a gpt-oss preset was accepted for qwen3moe")
	}
	s, err := PresetFor("gpt-oss", "gptoss-small")
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(write(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, key := range []string{"gpt-oss.rope.scaling.type", "gpt-oss.rope.scaling.factor", "gpt-oss.rope.scaling.original_context_length", "gpt-oss.attention.sliding_window"} {
		if _, ok := f.Lookup(key); !ok {
			t.Errorf("no metadata key %s", key)
		}
	}
	for _, name := range []string{"blk.0.attn_sinks.weight", "blk.0.attn_q.bias", "blk.1.ffn_gate_inp.bias", "blk.3.ffn_down_exps.bias", "blk.2.post_attention_norm.weight"} {
		if _, ok := f.Tensor(name); !ok {
			t.Errorf("no tensor %s", name)
		}
	}
}

// layer0Popularity routes every token's normalised embedding through layer 0's router of a
// tiny model (4096 tokens, 16 experts, 2 per token) skewed by zipf: the picks per expert and
// each expert's Zipf rank.
func layer0Popularity(t *testing.T, zipf float64, typ quant.Type, pool int) (counts []int, ranks []int) {
	t.Helper()
	s := tinySpec(t, typ, pool)
	s.Zipf, s.Vocab, s.Experts, s.ExpertsUsed = zipf, 4096, 16, 2
	f, err := gguf.Open(write(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	emb := floats(t, f, "token_embd.weight")
	router := floats(t, f, "blk.0.ffn_gate_inp.weight")
	h := s.Hidden
	counts = make([]int, s.Experts)
	logits := make([]float64, s.Experts)
	for tok := 0; tok < s.Vocab; tok++ {
		x := emb[tok*h : (tok+1)*h]
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(h)+s.RMSEps)
		for e := range logits {
			var dot float64
			for j, w := range router[e*h : (e+1)*h] {
				dot += float64(w) * float64(x[j]) * inv
			}
			logits[e] = dot
		}
		order := make([]int, s.Experts)
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool { return logits[order[a]] > logits[order[b]] })
		for _, e := range order[:s.ExpertsUsed] {
			counts[e]++
		}
	}
	ranks = newGenerator(s).zipfRanks(0)
	return counts, ranks
}
