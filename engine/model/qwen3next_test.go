package model_test

import (
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"strata/engine/compute/cpu"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/model/modeltest"
	"strata/engine/quant"
)

// tensorOut is one tensor of a rewritten GGUF.
type tensorOut struct {
	name string
	typ  quant.Type
	ne   []int64
	data []byte
}

// rewriteGGUF copies the GGUF at src to a temporary file with its keys passed through keys
// (false drops one), extra keys added, and its tensors through tensors; it returns the new path.
func rewriteGGUF(t *testing.T, src string, keys func(kv gguf.KV) (gguf.KV, bool), tensors func(f *gguf.File, ts []tensorOut) []tensorOut, extra ...gguf.KV) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if kv, ok := keys(kv); ok {
			w.Add(kv.Key, kv.Value)
		}
	}
	for _, kv := range extra {
		w.Add(kv.Key, kv.Value)
	}
	var ts []tensorOut
	for _, ti := range f.Tensors {
		ts = append(ts, tensorOut{ti.Name, ti.Type, slices.Clone(ti.Ne), slices.Clone(f.TensorData(ti))})
	}
	for _, o := range tensors(f, ts) {
		if err := w.AddTensor(o.name, o.typ, o.ne, func(out io.Writer) error { _, err := out.Write(o.data); return err }); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "rewritten.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func keepKeys(kv gguf.KV) (gguf.KV, bool) { return kv, true }

func keepTensors(_ *gguf.File, ts []tensorOut) []tensorOut { return ts }

// permuteBlocks reorders the blocks of size bytes of data: block new[perm[j]] = old[j].
func permuteBlocks(data []byte, size int, perm []int) []byte {
	out := make([]byte, len(data))
	for j, p := range perm {
		copy(out[p*size:(p+1)*size], data[j*size:(j+1)*size])
	}
	return out
}

// toQwen3Next rewrites the F32 qwen35moe file at src as the same model in qwen3next's layout:
// value heads in grouped order (GGUF head j of the tiled file is head (j%nk)·r + j/nk),
// beta and alpha fused per key head into ssm_ba, no rope sections. With fusedQKVZ, the
// linear layers' q, k, v and z are also fused per key head into ssm_in, as older qwen3next
// files have them.
func toQwen3Next(t *testing.T, src string, fusedQKVZ bool) string {
	h := modeltest.Hparams(t, src)
	if h.Arch != "qwen35moe" {
		t.Fatalf("%s is a %s", src, h.Arch)
	}
	nk, nv, kd, vd := h.SSM.KHeads, h.SSM.VHeads, h.SSM.KDim, h.SSM.VDim
	r := nv / nk
	perm := make([]int, nv) // tiled head j -> grouped head
	for j := range perm {
		perm[j] = (j%nk)*r + j/nk
	}
	keys := func(kv gguf.KV) (gguf.KV, bool) {
		if kv.Key == "general.architecture" {
			return gguf.KV{Key: kv.Key, Value: gguf.NewString("qwen3next")}, true
		}
		if kv.Key == "qwen35moe.rope.dimension_sections" {
			return kv, false
		}
		kv.Key = strings.Replace(kv.Key, "qwen35moe.", "qwen3next.", 1)
		return kv, true
	}
	tensors := func(_ *gguf.File, ts []tensorOut) []tensorOut {
		byName := map[string][]byte{}
		for _, o := range ts {
			if o.typ != quant.F32 {
				t.Fatalf("tensor %s is %s: the conversion handles F32 files", o.name, o.typ)
			}
			byName[o.name] = o.data
		}
		var out []tensorOut
		for _, o := range ts {
			layer, rest, _ := strings.Cut(strings.TrimPrefix(o.name, "blk."), ".")
			b := "blk." + layer + "."
			row := int(o.ne[0]) * 4
			switch rest {
			case "attn_qkv.weight":
				qk := 2 * nk * kd * row
				o.data = append(o.data[:qk:qk], permuteBlocks(o.data[qk:], vd*row, perm)...)
				if fusedQKVZ {
					z := permuteBlocks(byName[b+"attn_gate.weight"], vd*row, perm)
					var in []byte
					for g := range nk {
						in = append(in, o.data[g*kd*row:(g+1)*kd*row]...)
						in = append(in, o.data[(nk+g)*kd*row:(nk+g+1)*kd*row]...)
						in = append(in, o.data[qk+g*r*vd*row:qk+(g+1)*r*vd*row]...)
						in = append(in, z[g*r*vd*row:(g+1)*r*vd*row]...)
					}
					o = tensorOut{b + "ssm_in.weight", quant.F32, []int64{o.ne[0], int64(len(in) / row)}, in}
				}
			case "attn_gate.weight":
				if fusedQKVZ {
					continue
				}
				o.data = permuteBlocks(o.data, vd*row, perm)
			case "ssm_conv1d.weight":
				qk := 2 * nk * kd * row
				o.data = append(o.data[:qk:qk], permuteBlocks(o.data[qk:], vd*row, perm)...)
			case "ssm_dt.bias", "ssm_a":
				o.data = permuteBlocks(o.data, 4, perm)
			case "ssm_out.weight":
				rows := int(o.ne[1])
				for i := range rows {
					copy(o.data[i*row:(i+1)*row], permuteBlocks(o.data[i*row:(i+1)*row], vd*4, perm))
				}
			case "ssm_alpha.weight":
				continue
			case "ssm_beta.weight":
				be := permuteBlocks(o.data, row, perm)
				al := permuteBlocks(byName[b+"ssm_alpha.weight"], row, perm)
				var ba []byte
				for g := range nk {
					ba = append(ba, be[g*r*row:(g+1)*r*row]...)
					ba = append(ba, al[g*r*row:(g+1)*r*row]...)
				}
				o = tensorOut{b + "ssm_ba.weight", quant.F32, []int64{o.ne[0], int64(2 * nv)}, ba}
			}
			out = append(out, o)
		}
		return out
	}
	return rewriteGGUF(t, src, keys, tensors)
}

// TestQwen3NextLayoutMatchesTransformers: qwen35moe-tiny's F32 variant, rewritten in
// qwen3next's layout (grouped value heads, fused ssm_ba, no rope sections; once with q, k, v
// and z fused in ssm_in), is the same model: the float path stays within reference.json's
// float-path bound of the reference at every position and the greedy tokens are identical.
func TestQwen3NextLayoutMatchesTransformers(t *testing.T) {
	dir := fixtures.Path(t, "qwen35moe-tiny")
	ref := loadReference(t, dir)
	for name, v := range ref.Variants {
		f, err := gguf.Open(filepath.Join(dir, v.File))
		if err != nil {
			t.Fatal(err)
		}
		allF32 := true
		for _, ti := range f.Tensors {
			allF32 = allF32 && ti.Type == quant.F32
		}
		f.Close()
		if !allF32 {
			continue // the rewrite permutes float32 values
		}
		for _, fused := range []bool{false, true} {
			path := toQwen3Next(t, filepath.Join(dir, v.File), fused)
			e := open(t, path, true)
			if e.net.H.Arch != "qwen3next" || !e.net.H.Hybrid.GroupedVHeads {
				t.Fatalf("rewritten file reads as %+v", e.net.H.Hybrid)
			}
			for _, p := range v.Prompts {
				pl, gl, gen := e.run(t, p.Tokens, len(p.Generated), "f32", nil)
				dp := modeltest.MaxAbsDiff(pl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File)))
				dg := modeltest.MaxAbsDiff(gl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["gen_logits"].File)))
				if lim := ref.Tolerances.FloatPath.MaxAbsLogit; dp > lim || dg > lim {
					t.Errorf("%s ssm_in=%v %s: logits differ by %.3g (prompt) / %.3g (decode), limit %g", name, fused, p.Name, dp, dg, lim)
				}
				if !slices.Equal(gen, p.Generated) {
					t.Errorf("%s ssm_in=%v %s: greedy %v, want %v", name, fused, p.Name, gen, p.Generated)
				}
			}
		}
		return
	}
	t.Fatal("reference.json lists no all-F32 variant to rewrite")
}

// TestHybridBadInput: missing Gated DeltaNet tensors, state sizes that do not match the
// tensors and head splits that do not divide give errors naming the tensor or key.
func TestHybridBadInput(t *testing.T) {
	dir := fixtures.Path(t, "qwen35moe-tiny")
	ref := loadReference(t, dir)
	var src string
	for _, v := range ref.Variants {
		src = filepath.Join(dir, v.File)
		break
	}
	h := modeltest.Hparams(t, src)
	first := slices.Index(h.Recurrent, true)
	if first < 0 {
		t.Fatal("the fixture has no Gated DeltaNet layer")
	}
	drop := func(suffix string) func(*gguf.File, []tensorOut) []tensorOut {
		name := "blk." + strconv.Itoa(first) + "." + suffix
		return func(_ *gguf.File, ts []tensorOut) []tensorOut {
			return slices.DeleteFunc(ts, func(o tensorOut) bool { return o.name == name })
		}
	}
	setKey := func(suffix string, v uint32) func(gguf.KV) (gguf.KV, bool) {
		return func(kv gguf.KV) (gguf.KV, bool) {
			if kv.Key == h.Arch+"."+suffix {
				kv.Value = gguf.NewUint32(v)
			}
			return kv, true
		}
	}
	dropKey := func(suffix string) func(gguf.KV) (gguf.KV, bool) {
		return func(kv gguf.KV) (gguf.KV, bool) { return kv, kv.Key != h.Arch+"."+suffix }
	}
	r := h.SSM.VHeads / h.SSM.KHeads
	for _, c := range []struct {
		what    string
		keys    func(gguf.KV) (gguf.KV, bool)
		tensors func(*gguf.File, []tensorOut) []tensorOut
		want    string
	}{
		{"no conv", keepKeys, drop("ssm_conv1d.weight"), "ssm_conv1d.weight"},
		{"no A", keepKeys, drop("ssm_a"), "ssm_a"},
		{"no dt bias", keepKeys, drop("ssm_dt.bias"), "ssm_dt.bias"},
		{"no qkv", keepKeys, drop("attn_qkv.weight"), "attn_qkv.weight"},
		{"no norm", keepKeys, drop("ssm_norm.weight"), "ssm_norm.weight"},
		{"state size", setKey("ssm.state_size", uint32(h.SSM.KDim+2)), keepTensors, "attn_qkv.weight"},
		{"conv kernel", setKey("ssm.conv_kernel", uint32(h.SSM.ConvKernel+1)), keepTensors, "ssm_conv1d.weight"},
		{"value heads", setKey("ssm.time_step_rank", uint32(h.SSM.KHeads*r+1)), keepTensors, "time_step_rank"},
		{"inner size", setKey("ssm.inner_size", uint32(h.SSM.VHeads*h.SSM.VDim+1)), keepTensors, "inner_size"},
		{"no shared ffn", dropKey("expert_shared_feed_forward_length"), keepTensors, "expert_shared_feed_forward_length"},
		{"no group count", dropKey("ssm.group_count"), keepTensors, "ssm.group_count"},
		{"short layer list", func(kv gguf.KV) (gguf.KV, bool) {
			if kv.Key == h.Arch+".attention.recurrent_layers" {
				kv.Value = gguf.NewBools([]bool{true})
			}
			return kv, true
		}, keepTensors, "recurrent_layers"},
	} {
		path := rewriteGGUF(t, src, c.keys, c.tensors)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		b := cpu.New(cpu.Options{Threads: 1, FloatPath: true})
		_, err = model.Load(f, b, nil)
		b.Close()
		f.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.what, err, c.want)
		}
	}
}

// TestHybridLayerPattern: the listed recurrent layers win over full_attention_interval (as in
// llama.cpp), and multi-token-prediction layers counted in block_count are left out: both
// rewrites of the fixture still give its reference logits.
func TestHybridLayerPattern(t *testing.T) {
	dir := fixtures.Path(t, "qwen35moe-tiny")
	ref := loadReference(t, dir)
	for _, v := range ref.Variants {
		src := filepath.Join(dir, v.File)
		f, err := gguf.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		h, err := model.ReadHparams(f)
		_, listed := f.Lookup(h.Arch + ".attention.recurrent_layers")
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"interval 2", "one mtp layer"} {
			var extra []gguf.KV
			edit := func(kv gguf.KV) (gguf.KV, bool) {
				switch {
				case name == "interval 2" && kv.Key == h.Arch+".full_attention_interval" && listed:
					kv.Value = gguf.NewUint32(2)
				case name == "one mtp layer" && kv.Key == h.Arch+".block_count":
					kv.Value = gguf.NewUint32(uint32(h.Layers + 1))
				case name == "one mtp layer" && kv.Key == h.Arch+".attention.recurrent_layers":
					kv.Value = gguf.NewBools(append(slices.Clone(h.Recurrent), false))
				}
				return kv, true
			}
			if name == "one mtp layer" {
				extra = append(extra, gguf.KV{Key: h.Arch + ".nextn_predict_layers", Value: gguf.NewUint32(1)})
			}
			e := open(t, rewriteGGUF(t, src, edit, keepTensors, extra...), true)
			if e.net.H.Layers != h.Layers || !slices.Equal(e.net.H.Recurrent, h.Recurrent) {
				t.Fatalf("%s: %d layers %v, want %d %v", name, e.net.H.Layers, e.net.H.Recurrent, h.Layers, h.Recurrent)
			}
			p := v.Prompts[len(v.Prompts)-1]
			pl, _, _ := e.run(t, p.Tokens, 0, "f32", nil)
			if d := modeltest.MaxAbsDiff(pl, modeltest.ReadF32(t, filepath.Join(dir, p.Files["logits"].File))); d > ref.Tolerances.FloatPath.MaxAbsLogit {
				t.Errorf("%s: logits differ by %.3g (limit %g)", name, d, ref.Tolerances.FloatPath.MaxAbsLogit)
			}
		}
		return
	}
}
