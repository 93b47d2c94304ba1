package experts

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"strata/engine/gguf"
)

// BenchmarkFillArena fills an arena of about STRATA_BENCH_GB (default 4) GB of randomly
// chosen experts of the model at STRATA_BENCH_MODEL, from the GGUF in place and, when an
// experts.bin sits next to it, from that: unbuffered, through the mapping with the file's
// pages evicted first (Linux), and through the mapping with them cached.
//
//	STRATA_BENCH_MODEL=/tmp/m30.gguf go test ./engine/experts -run '^$' -bench FillArena -benchtime 1x
func BenchmarkFillArena(b *testing.B) {
	path := os.Getenv("STRATA_BENCH_MODEL")
	if path == "" {
		b.Skip("set STRATA_BENCH_MODEL to a MoE GGUF file to measure arena fills")
	}
	gb := 4.0
	if s := os.Getenv("STRATA_BENCH_GB"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			b.Fatal(err)
		}
		gb = v
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	layouts := map[string]*Layout{}
	if layouts["gguf"], err = GGUFLayout(f); err != nil {
		b.Fatal(err)
	}
	if l, ok := FindPack(f); ok {
		defer l.Close()
		layouts["pack"] = l
	}
	s := layouts["gguf"].Shape
	n := min(s.Count(), int(gb*1e9/float64(s.BlobBytes())))
	ids := allIDs(s)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	ids = ids[:n]
	for _, kind := range []string{"gguf", "pack"} {
		l := layouts[kind]
		if l == nil {
			continue
		}
		for _, mode := range []string{"unbuffered", "mapped-cold", "mapped-warm"} {
			b.Run(kind+"/"+mode, func(b *testing.B) {
				o := DefaultFillOptions()
				o.Unbuffered = mode == "unbuffered"
				if w := os.Getenv("STRATA_BENCH_WORKERS"); w != "" {
					o.Workers, _ = strconv.Atoi(w)
				}
				if mode == "mapped-warm" {
					a, _, err := FillArena(context.Background(), l, ids, o, nil)
					if err != nil {
						b.Fatal(err)
					}
					a.Close()
				}
				b.SetBytes(int64(n) * s.BlobBytes())
				for b.Loop() {
					if mode != "mapped-warm" {
						b.StopTimer()
						if err := evictFile(l.Path); err != nil {
							b.Skipf("cannot evict %s from the page cache: %v", filepath.Base(l.Path), err)
						}
						b.StartTimer()
					}
					a, st, err := FillArena(context.Background(), l, ids, o, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if st.Unbuffered != o.Unbuffered {
						b.Fatalf("fill fell back: %s", st.Fallback)
					}
					b.ReportMetric(float64(st.Reads), "reads")
					b.ReportMetric(float64(st.ReadBytes)/float64(st.Bytes), "read/placed")
					a.Close()
					b.StartTimer()
				}
			})
		}
	}
}
