package synth

import (
	"slices"
	"testing"

	"strata/engine/quant"
)

// hotQuarter is the share of picks the hottest quarter of the experts took.
func hotQuarter(counts []int) float64 {
	c := slices.Clone(counts)
	slices.SortFunc(c, func(a, b int) int { return b - a })
	hot, all := 0, 0
	for i, n := range c {
		if i < len(c)/4 {
			hot += n
		}
		all += n
	}
	return float64(hot) / float64(all)
}

func TestZipfForHotQuarter(t *testing.T) {
	for _, bad := range []struct {
		share         float64
		experts, used int
	}{{0.4, 3, 1}, {0.4, 16, 0}, {0.4, 16, 17}, {1, 16, 2}, {1.5, 16, 2}} {
		if z, err := ZipfForHotQuarter(bad.share, bad.experts, bad.used); err == nil {
			t.Errorf("share %g of %d experts (%d used): exponent %g, want an error", bad.share, bad.experts, bad.used, z)
		}
	}
	if z, err := ZipfForHotQuarter(0.25, 128, 8); err != nil || z != 0 {
		t.Errorf("a flat share gives exponent %g (%v), want 0", z, err)
	}
	// The exponent grows with the share, and the simulated router reaches the share.
	prev := 0.0
	for _, share := range []float64{0.3, 0.4, 0.6, 0.9} {
		z, err := ZipfForHotQuarter(share, 128, 8)
		if err != nil {
			t.Fatal(err)
		}
		noise := make([]float32, hotQuarterTokens*128)
		fillNormal(stream(7, "other draws", 0), noise, routerGain)
		got := hotQuarterShare(z, noise, 128, 8)
		t.Logf("hottest quarter %.2f: Zipf exponent %.3f, %.3f on other draws", share, z, got)
		if z <= prev || got < share-0.02 || got > share+0.02 {
			t.Errorf("share %g: exponent %g (previous %g) routes %.3f to the hottest quarter", share, z, prev, got)
		}
		prev = z
	}
}

// TestHotQuarterSkewOfTheWrittenRouter: the exponent chosen for a 40% hottest quarter
// gives a written model whose layer-0 router sends about 40% of the picks to its hottest
// quarter (the check of TestZipfSkew: token embeddings through the router), where --zipf 1
// sends far more.
func TestHotQuarterSkewOfTheWrittenRouter(t *testing.T) {
	z, err := ZipfForHotQuarter(0.4, 16, 2)
	if err != nil {
		t.Fatal(err)
	}
	counts, _ := layer0Popularity(t, z, quant.F32, 0)
	balanced := hotQuarter(counts)
	counts, _ = layer0Popularity(t, 1, quant.F32, 0)
	zipf1 := hotQuarter(counts)
	t.Logf("hottest quarter of layer 0: %.3f at exponent %.3f (for 0.4), %.3f at 1", balanced, z, zipf1)
	if balanced < 0.32 || balanced > 0.48 {
		t.Errorf("exponent %g: the hottest quarter takes %.3f of the routes, want about 0.4", z, balanced)
	}
	if zipf1 < balanced+0.1 {
		t.Errorf("--zipf 1 gives the hottest quarter %.3f, not clearly more than the balanced %.3f", zipf1, balanced)
	}
}
