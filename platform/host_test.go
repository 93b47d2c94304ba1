package platform

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestWithinGivesUpOnAStuckProbe(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	_, err := within(context.Background(), 20*time.Millisecond, func(context.Context) (int, error) {
		<-stuck // ignores its context, like a hung driver call
		return 1, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "gave up after 20ms") {
		t.Errorf("err = %v", err)
	}
}

func TestWithinPassesResults(t *testing.T) {
	v, err := within(context.Background(), time.Minute, func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Errorf("got %d %v", v, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := within(ctx, time.Minute, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestProbeThisHost(t *testing.T) {
	h := Probe(context.Background())
	if h.OS != runtime.GOOS || h.CPU.LogicalCores < 1 {
		t.Errorf("got %+v", h)
	}
	if (runtime.GOOS == "linux" || runtime.GOOS == "windows") && h.RAM.TotalBytes <= 0 {
		t.Errorf("no RAM total: %+v", h.RAM)
	}
	if len(h.GPUs.Devices) == 0 && h.GPUs.Reason == "" {
		t.Errorf("no GPU and no reason")
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back Host
	if err := json.Unmarshal(b, &back); err != nil || back.RAM != h.RAM || back.CPU.Model != h.CPU.Model {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}
}
