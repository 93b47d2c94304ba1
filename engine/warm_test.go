package engine

import (
	"context"
	"testing"
	"time"
)

func TestWarmFits(t *testing.T) {
	for _, c := range []struct {
		size, avail int64
		want        bool
	}{
		{17 << 30, 23 << 30, true},  // a 30b-a3b file on a 24 GiB machine
		{17 << 30, 18 << 30, false}, // no room to spare: mapping it all would push other pages out
		{60 << 30, 31 << 30, false}, // larger than RAM
		{1 << 20, 0, false},         // available RAM unknown
		{0, 8 << 30, false},
	} {
		if got := warmFits(c.size, c.avail); got != c.want {
			t.Errorf("warmFits(%d, %d) = %v, want %v", c.size, c.avail, got, c.want)
		}
	}
}

// A CPU load maps the file's pages in the background and says when it is done; Close right
// after Open stops the warm-up before the file is unmapped.
func TestWarmAfterCPULoad(t *testing.T) {
	path := synthModel(t)
	cfg := DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext, cfg.LearnProfile = "cpu", 2, 32, false
	for range 3 {
		m, err := Open(context.Background(), path, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := Open(context.Background(), path, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.place.warm == nil {
		t.Fatal("a CPU load of a model that fits in RAM started no warm-up")
	}
	select {
	case <-m.Warmed():
	case <-time.After(time.Minute):
		t.Fatal("the warm-up of a 4 MB model did not finish in a minute")
	}
	s := m.NewSession(SessionOptions{})
	if _, err := s.Generate(context.Background(), []int{1, 2, 3}, Sampling{MaxTokens: 2, IgnoreEOS: true}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestTouchPages(t *testing.T) {
	b := make([]byte, 10000)
	b[0], b[4096], b[8192], b[100] = 1, 2, 4, 8 // b[100] is not a page start
	if got := touchPages(b, 4096); got != 7 {
		t.Errorf("touchPages read %d, want 1+2+4", got)
	}
}
