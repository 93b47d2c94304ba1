package engine_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"strata/engine"
	"strata/engine/gguf"
	"strata/engine/quant"
	"strata/engine/synth"
)

// hybridTensor is one tensor of a rewritten hybrid GGUF.
type hybridTensor struct {
	name string
	typ  quant.Type
	ne   []int64
	data []byte
}

// rewriteHybrid copies the GGUF at src with the keys set in keys (a nil value drops the key)
// and its tensors passed through edit; it returns the new file's path.
func rewriteHybrid(t *testing.T, src string, keys map[string]*uint32, edit func([]hybridTensor) []hybridTensor) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		v, ok := keys[kv.Key]
		switch {
		case !ok:
			w.Add(kv.Key, kv.Value)
		case v != nil:
			w.Add(kv.Key, gguf.NewUint32(*v))
		}
	}
	var ts []hybridTensor
	for _, ti := range f.Tensors {
		ts = append(ts, hybridTensor{ti.Name, ti.Type, slices.Clone(ti.Ne), slices.Clone(f.TensorData(ti))})
	}
	if edit != nil {
		ts = edit(ts)
	}
	for _, o := range ts {
		if err := w.AddTensor(o.name, o.typ, o.ne, func(out io.Writer) error { _, err := out.Write(o.data); return err }); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// noPanic runs f and turns a panic into a test error.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: panic: %v", what, r)
		}
	}()
	f()
}

// TestHybridBadInputThroughTheEngine: a qwen35moe or qwen3next file with a Gated DeltaNet or
// shared-expert tensor missing or of the wrong shape, a recurrent state the keys make too
// large or empty, or a head split that does not divide is refused by engine.Open with an
// error naming the tensor or key, and Inspect and PlanFor, which read the header only,
// never panic and name the key where the keys alone are wrong.
func TestHybridBadInputThroughTheEngine(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	u := func(v uint32) *uint32 { return &v }
	for _, arch := range []string{"qwen35moe", "qwen3next"} {
		spec, err := synth.PresetFor(arch, "tiny")
		if err != nil {
			t.Fatal(err)
		}
		spec.Quant, spec.Pool = quant.Q8_0, 64
		src := filepath.Join(t.TempDir(), arch+".gguf")
		if err := synth.Write(context.Background(), src, spec, nil); err != nil {
			t.Fatal(err)
		}
		hs := spec.Hybrid
		first := "blk.0." // layer 0 is Gated DeltaNet (attention every AttnEvery-th)
		drop := func(name string) func([]hybridTensor) []hybridTensor {
			return func(ts []hybridTensor) []hybridTensor {
				return slices.DeleteFunc(ts, func(o hybridTensor) bool { return o.name == name })
			}
		}
		// reshape gives an F32 tensor the shape ne (zeros).
		reshape := func(name string, ne ...int64) func([]hybridTensor) []hybridTensor {
			return func(ts []hybridTensor) []hybridTensor {
				for i := range ts {
					if ts[i].name == name {
						n := int64(4)
						for _, d := range ne {
							n *= d
						}
						ts[i].ne, ts[i].data = ne, make([]byte, n)
					}
				}
				return ts
			}
		}
		gate := first + "ssm_beta.weight"
		if arch == "qwen3next" {
			gate = first + "ssm_ba.weight"
		}
		key := func(k string) string { return arch + "." + k }
		channels := int64(2*hs.KHeads*hs.KDim + hs.VHeads*hs.VDim)
		for _, c := range []struct {
			what     string
			keys     map[string]*uint32
			tensors  func([]hybridTensor) []hybridTensor
			want     string
			keysOnly bool // the header alone is wrong: Inspect and PlanFor refuse it too
		}{
			{"no beta/alpha projection", nil, drop(gate), gate, false},
			{"no conv", nil, drop(first + "ssm_conv1d.weight"), first + "ssm_conv1d.weight", false},
			{"no A", nil, drop(first + "ssm_a"), first + "ssm_a", false},
			{"no shared expert", nil, drop(first + "ffn_up_shexp.weight"), first + "ffn_up_shexp.weight", false},
			{"conv of other channels", nil, reshape(first+"ssm_conv1d.weight", int64(hs.ConvKernel), channels+2), first + "ssm_conv1d.weight", false},
			{"A of other heads", nil, reshape(first+"ssm_a", int64(hs.VHeads+1)), first + "ssm_a", false},
			{"state size", map[string]*uint32{key("ssm.state_size"): u(uint32(hs.KDim + 2))}, nil, "attn_qkv.weight", false},
			{"conv kernel", map[string]*uint32{key("ssm.conv_kernel"): u(uint32(hs.ConvKernel + 1))}, nil, "ssm_conv1d.weight", false},
			{"conv of one tap", map[string]*uint32{key("ssm.conv_kernel"): u(1)}, nil, "ssm.conv_kernel", true},
			{"empty state", map[string]*uint32{key("ssm.state_size"): u(0)}, nil, "ssm.state_size", true},
			{"value heads do not divide", map[string]*uint32{key("ssm.time_step_rank"): u(uint32(hs.KHeads*(hs.VHeads/hs.KHeads) + 1))}, nil, "ssm.time_step_rank", true},
			{"inner size does not divide", map[string]*uint32{key("ssm.inner_size"): u(uint32(hs.VHeads*hs.VDim + 1))}, nil, "ssm.inner_size", true},
			{"no group count", map[string]*uint32{key("ssm.group_count"): nil}, nil, "ssm.group_count", true},
			{"state past any memory", map[string]*uint32{key("ssm.conv_kernel"): u(1 << 24), key("ssm.state_size"): u(1 << 24),
				key("ssm.group_count"): u(1 << 12), key("ssm.time_step_rank"): u(1 << 12), key("ssm.inner_size"): u(1 << 24)}, nil, "ssm.", true},
		} {
			path := rewriteHybrid(t, src, c.keys, c.tensors)
			name := fmt.Sprintf("%s %s", arch, c.what)
			noPanic(t, name+": Inspect", func() {
				info, err := engine.Inspect(context.Background(), path)
				switch {
				case c.keysOnly && (err == nil || !strings.Contains(err.Error(), c.want)):
					t.Errorf("%s: Inspect: %v, want an error naming %q", name, err, c.want)
				case err == nil && (info.RecurrentBytes <= 0 || info.NonExpertBytes <= 0):
					t.Errorf("%s: Inspect: recurrent state %d bytes, non-expert weights %d", name, info.RecurrentBytes, info.NonExpertBytes)
				}
			})
			noPanic(t, name+": PlanFor", func() {
				cfg := engine.DefaultConfig()
				cfg.Backend = "cpu"
				_, _, err := engine.PlanFor(context.Background(), path, cfg)
				if c.keysOnly && (err == nil || !strings.Contains(err.Error(), c.want)) {
					t.Errorf("%s: PlanFor: %v, want an error naming %q", name, err, c.want)
				}
			})
			noPanic(t, name+": Open", func() {
				cfg := engine.DefaultConfig()
				cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.LearnProfile = "cpu", 2, 64, false
				m, err := engine.Open(context.Background(), path, cfg, nil)
				if err == nil {
					m.Close()
				}
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: Open: %v, want an error naming %q", name, err, c.want)
				}
			})
		}
	}
}
