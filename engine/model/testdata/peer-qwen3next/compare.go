//go:build ignore

// compare checks Strata's logits against the peer's under the fixtures README's 8-bit rule:
// RMS(Δ)/std(peer) <= 0.03 and max |Δ| <= 0.25 on at least 90% of positions, and the greedy
// tokens identical. Usage: go run compare.go STRATA.f32 PEER.f32 VOCAB STRATA_TOKENS PEER_TOKENS
// (tokens as comma lists). It exits 1 when a rule fails.
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
)

func read(path string) []float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: go run compare.go STRATA.f32 PEER.f32 VOCAB STRATA_TOKENS PEER_TOKENS")
		os.Exit(2)
	}
	got, want := read(os.Args[1]), read(os.Args[2])
	vocab, err := strconv.Atoi(os.Args[3])
	if err != nil || vocab <= 0 || len(got) != len(want) || len(want)%vocab != 0 {
		fmt.Fprintf(os.Stderr, "sizes: %d and %d values, vocab %s\n", len(got), len(want), os.Args[3])
		os.Exit(2)
	}
	var mean, se, ss, worst float64
	for _, w := range want {
		mean += float64(w)
	}
	mean /= float64(len(want))
	rows, over, argmaxSame := len(want)/vocab, 0, 0
	for r := range rows {
		var rowMax float64
		bg, bw := 0, 0
		for j := range vocab {
			i := r*vocab + j
			d := float64(got[i]) - float64(want[i])
			se += d * d
			ss += (float64(want[i]) - mean) * (float64(want[i]) - mean)
			rowMax = math.Max(rowMax, math.Abs(d))
			if got[i] > got[r*vocab+bg] {
				bg = j
			}
			if want[i] > want[r*vocab+bw] {
				bw = j
			}
		}
		worst = math.Max(worst, rowMax)
		if rowMax > 0.25 {
			over++
		}
		if bg == bw {
			argmaxSame++
		}
	}
	rel := math.Sqrt(se / ss)
	fmt.Printf("positions %d: RMS(Δ)/std %.4f, max |Δ| %.3g, %d above 0.25, argmax agrees at %d\n", rows, rel, worst, over, argmaxSame)
	fmt.Printf("greedy: strata %s\n        peer   %s\n", os.Args[4], os.Args[5])
	ok := rel <= 0.03 && float64(over) <= 0.1*float64(rows) && os.Args[4] == os.Args[5]
	if !ok {
		fmt.Println("FAIL: outside the 8-bit rule or the greedy tokens differ")
		os.Exit(1)
	}
	fmt.Println("ok: within the 8-bit rule, greedy tokens identical")
}
