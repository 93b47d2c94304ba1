package gpu_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/fixtures"
	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/model/modeltest"
	"strata/engine/quant"
	"strata/engine/synth"
)

// newGPU opens the backend or skips where there is no NVIDIA driver (here; CI).
func newGPU(t *testing.T) *gpu.Backend {
	t.Helper()
	b, err := gpu.New(gpu.Options{})
	if errors.Is(err, gpu.ErrNoGPU) {
		t.Skipf("no NVIDIA GPU or driver, skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

type runner struct {
	net *model.Model
}

// run evaluates the prompt in one batch, then decodes n tokens greedily one at a time.
func (r runner) run(t *testing.T, prompt []int, n int, kvType string) (promptLogits, genLogits []float32, gen []int) {
	t.Helper()
	return modeltest.Greedy(t, r.net, prompt, n, kvType, nil)
}

func load(t *testing.T, path string, b compute.Backend) runner {
	t.Helper()
	return runner{net: modeltest.Load(t, path, b)}
}

func readF32(t *testing.T, path string) []float32 { return modeltest.ReadF32(t, path) }

func compare(got, want []float32) (maxAbs, rel float64) { return modeltest.Compare(got, want) }

// TestFixtureModelOnGPU runs every fixture variant whose head size the GPU kernels handle
// against transformers' logits and greedy continuations.
func TestFixtureModelOnGPU(t *testing.T) {
	dir := fixtures.Path(t, "qwen3moe-tiny")
	b := newGPU(t)
	raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Variants map[string]struct {
			File    string `json:"file"`
			Prompts []struct {
				Name      string                           `json:"name"`
				Tokens    []int                            `json:"tokens"`
				Generated []int                            `json:"generated"`
				Files     map[string]struct{ File string } `json:"files"`
			} `json:"prompts"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for name, v := range ref.Variants {
		path := filepath.Join(dir, v.File)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		h, err := model.ReadHparams(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !gpu.HeadDimSupported(h.HeadDim) {
			t.Logf("%s: head size %d has no GPU attention kernel; the engine runs it on the CPU", name, h.HeadDim)
			continue
		}
		ran++
		r := load(t, path, b)
		for _, p := range v.Prompts {
			pl, gl, gen := r.run(t, p.Tokens, len(p.Generated), "f16")
			want := append(readF32(t, filepath.Join(dir, p.Files["logits"].File)), readF32(t, filepath.Join(dir, p.Files["gen_logits"].File))...)
			maxAbs, rel := compare(append(pl, gl...), want)
			t.Logf("%s %s: max |Δlogit| %.3g, RMS/std %.4f", name, p.Name, maxAbs, rel)
			if rel > 0.03 || maxAbs > 0.25 {
				t.Errorf("%s %s: logits off: max %.3g, RMS/std %.4f", name, p.Name, maxAbs, rel)
			}
			for i := range gen {
				if gen[i] != p.Generated[i] {
					t.Errorf("%s %s: greedy tokens %v, want %v", name, p.Name, gen, p.Generated)
					break
				}
			}
		}
	}
	if ran == 0 {
		t.Fatal("no fixture variant has a head size the GPU handles")
	}
}

// TestSynthModelGPUMatchesCPU compares the GPU with the CPU float path on a synthetic model
// in several weight types (shapes only: the synth model's logits have no outside reference).
func TestSynthModelGPUMatchesCPU(t *testing.T) {
	b := newGPU(t)
	for _, qt := range []quant.Type{quant.Q4_K, quant.Q8_0, quant.Q6_K, quant.Q5_K, quant.Q4_0, quant.MXFP4} {
		t.Run(qt.String(), func(t *testing.T) {
			spec, err := synth.Preset("tiny")
			if err != nil {
				t.Fatal(err)
			}
			spec.Quant = qt
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := synth.Write(context.Background(), path, spec, nil); err != nil {
				t.Fatal(err)
			}
			c := cpu.New(cpu.Options{Threads: 4, FloatPath: true})
			defer c.Close()
			prompt := []int{1, 5, 9, 200, 17, 3, 77, 300, 42, 11, 5, 6}
			wl, wg, wgen := load(t, path, c).run(t, prompt, 12, "f32")
			gl, gg, ggen := load(t, path, b).run(t, prompt, 12, "f16")
			maxAbs, rel := compare(append(gl, gg...), append(wl, wg...))
			t.Logf("%s: GPU vs CPU float path: max |Δlogit| %.3g, RMS/std %.4f", qt, maxAbs, rel)
			// Decode dots 8-bit activations with the weights (MatVecQ8, the fused MoE kernels):
			// the fixtures' bound for such a path against a float path is RMS/std 0.03
			// (tolerances.int8_activations in qwen3moe-tiny/reference.json).
			if rel > 0.03 {
				t.Errorf("%s: GPU logits differ from the CPU float path: RMS/std %.4f", qt, rel)
			}
			same := 0
			for i := range wgen {
				if wgen[i] == ggen[i] {
					same++
				}
			}
			if same < len(wgen)*3/4 {
				t.Errorf("%s: greedy tokens agree %d/%d: GPU %v, CPU %v", qt, same, len(wgen), ggen, wgen)
			}
		})
	}
}
