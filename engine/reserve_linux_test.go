package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/engine"
	"strata/engine/quant"
	"strata/engine/synth"
	"strata/platform"
)

// residentBytes is this process's resident memory (Linux /proc/self/statm).
func residentBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// TestResidentFillKeepsTheHostReserve opens a model whose experts (192 MiB) are four times
// the RAM left beyond a --host-reserve-gib set just below the available RAM, with
// --resident-experts on the CPU, and samples the available RAM and this process's memory
// while the arena fills. What the start-up took never exceeds what the reserve left: the
// arena holds only the experts that fit, the rest stay cold. The check is on this
// process's growth (other processes on the machine move the system's figure too); the
// system's lowest available RAM is logged beside it.
func TestResidentFillKeepsTheHostReserve(t *testing.T) {
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Layers, spec.Experts, spec.Hidden, spec.ExpertFFN, spec.Quant = 4, 32, 512, 512, quant.F16
	path := filepath.Join(t.TempDir(), "experts.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	info, err := engine.Inspect(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	room := info.ExpertBytes / 4
	avail0 := platform.ProbeMemory(context.Background()).AvailableBytes
	if avail0 <= 2*info.ExpertBytes {
		t.Fatalf("only %d bytes of RAM available for a %d-byte test", avail0, info.ExpertBytes)
	}
	reserve := avail0 - room
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.ResidentExperts, cfg.LearnProfile = "cpu", 2, 64, true, false
	cfg.HostReserveGiB = float64(reserve) / (1 << 30)

	rss0 := residentBytes(t)
	var (
		mu               sync.Mutex
		rssMax, availMin = rss0, avail0
		stop, done       = make(chan struct{}), make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			a := platform.ProbeMemory(context.Background()).AvailableBytes
			r := residentBytes(t)
			mu.Lock()
			availMin, rssMax = min(availMin, a), max(rssMax, r)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	m, err := engine.Open(context.Background(), path, cfg, nil)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	snap := m.Tiers()
	grew := rssMax - rss0
	t.Logf("experts %d MiB, room beyond the reserve %d MiB: arena %d MiB, process grew %d MiB; system available %d -> lowest %d MiB (reserve %d MiB)",
		info.ExpertBytes>>20, room>>20, snap.Cache.ArenaBytes>>20, grew>>20, avail0>>20, availMin>>20, reserve>>20)
	// The engine probes the available RAM itself, a moment after the test: other processes
	// may move it a little either way in between (drift, 16 MiB here).
	const drift = 16 << 20
	if snap.Cache == nil || snap.Cache.ArenaBytes == 0 || snap.Cache.ArenaBytes > room+drift {
		t.Fatalf("arena %+v, want some experts and at most the %d bytes beyond the reserve", snap.Cache, room)
	}
	// The arena, the KV cache and the buffers: the process took no more than the room, and
	// a little for what every open allocates (32 MiB; without the cap it takes all 192).
	if grew > room+drift+32<<20 {
		t.Errorf("start-up took %d MiB where %d MiB were free beyond the reserve", grew>>20, room>>20)
	}
	// The experts that fit are resident, the others cold.
	pinned, cold := 0, 0
	for _, row := range snap.Tier {
		for _, tier := range row {
			switch tier {
			case engine.TierPinned:
				pinned++
			case engine.TierCold:
				cold++
			}
		}
	}
	count := info.Layers * info.Experts
	if blob := info.ExpertBytes / int64(count); pinned == 0 || int64(pinned) > (room+drift)/blob || pinned+cold != count {
		t.Errorf("%d resident and %d cold of %d experts, want about the %d that fit in %d bytes", pinned, cold, count, room/blob, room)
	}
}
