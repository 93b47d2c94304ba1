package platform

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestClassifyDrive(t *testing.T) {
	for _, tc := range []struct {
		mbps float64
		want DriveClass
	}{
		{0, DriveUnknown}, {-1, DriveUnknown}, {80, DriveSlow}, {300, DriveSlow}, {301, DriveSATASSD},
		{550, DriveSATASSD}, {1500, DriveSATASSD}, {1501, DriveNVMe}, {7000, DriveNVMe},
	} {
		if got := ClassifyDrive(tc.mbps); got != tc.want {
			t.Errorf("ClassifyDrive(%g) = %s, want %s", tc.mbps, got, tc.want)
		}
	}
}

func writeFile(t *testing.T, dir string, n int) string {
	t.Helper()
	p := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(p, bytes.Repeat([]byte{0x5a}, n), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProbeDriveMeasuresAndCaches(t *testing.T) {
	dir := t.TempDir()
	cache := t.TempDir()
	const size = 6<<20 + 1000 // not a multiple of the alignment: the last read is short
	path := writeFile(t, dir, size)
	opt := DriveOptions{CacheDir: cache, MinBytes: 1 << 20}

	d, err := ProbeDrive(context.Background(), path, opt)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" || runtime.GOOS == "windows" {
		if d.FreeBytes <= 0 || d.TotalBytes < d.FreeBytes {
			t.Errorf("space: %+v", d)
		}
	}
	r := d.Read
	if r.Bytes != size/DirectIOAlign*DirectIOAlign || r.MBps <= 0 || r.Cached { // the last partial sector is skipped
		t.Fatalf("probe: %+v", r)
	}
	if r.Direct && r.Class != ClassifyDrive(r.MBps) {
		t.Errorf("class %s for %g MB/s", r.Class, r.MBps)
	}
	if !r.Direct {
		t.Logf("no direct I/O here: %s", r.Reason)
	}
	if r.Class == DriveUnknown {
		return // nothing cached: covered by the tmpfs test
	}

	again, err := ProbeDrive(context.Background(), path, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Read.Cached || again.Read.MBps != r.MBps {
		t.Errorf("second probe not from the cache: %+v", again.Read)
	}
	// A changed file (new mtime) is measured again.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	third, err := ProbeDrive(context.Background(), path, opt)
	if err != nil {
		t.Fatal(err)
	}
	if third.Read.Cached {
		t.Errorf("changed file answered from the cache: %+v", third.Read)
	}
}

func TestProbeDriveSmallFileHasNoClass(t *testing.T) {
	path := writeFile(t, t.TempDir(), 64<<10)
	d, err := ProbeDrive(context.Background(), path, DriveOptions{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Read.Class != DriveUnknown || !strings.Contains(d.Read.Reason, "too little to judge") || d.Read.Bytes != 64<<10 {
		t.Errorf("got %+v", d.Read)
	}
}

func TestProbeDriveTmpfsIsNotADrive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("tmpfs is a Linux filesystem")
	}
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm on this machine")
	}
	dir, err := os.MkdirTemp("/dev/shm", "strata-probe-")
	if err != nil {
		t.Skipf("cannot write /dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	path := writeFile(t, dir, 4<<20)
	d, err := ProbeDrive(context.Background(), path, DriveOptions{NoCache: true, MinBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if d.FS != "tmpfs" {
		t.Errorf("fs = %q, want tmpfs", d.FS)
	}
	if d.Read.Class != DriveUnknown || d.Read.Bytes != 0 || !strings.Contains(d.Read.Reason, "tmpfs") {
		t.Errorf("got %+v", d.Read)
	}
}

func TestProbeDriveRefusesBadPaths(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "missing.gguf"), dir} {
		if _, err := ProbeDrive(context.Background(), p, DriveOptions{NoCache: true}); err == nil {
			t.Errorf("%s: no error", p)
		}
	}
}

func TestProbeCacheSurvivesDamage(t *testing.T) {
	dir := t.TempDir()
	file := probeCacheFile(dir)
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := loadProbe(file, "k"); ok {
		t.Fatal("damaged cache answered")
	}
	want := ReadProbe{MBps: 2100, Class: DriveNVMe, Bytes: 256 << 20, Direct: true}
	if err := storeProbe(file, "k", want); err != nil {
		t.Fatal(err)
	}
	if got, ok := loadProbe(file, "k"); !ok || got != want {
		t.Errorf("got %+v %v", got, ok)
	}
}

// dropCache is what the buffered fallback relies on to measure the drive, not the cache.
func TestDropCache(t *testing.T) {
	path := writeFile(t, t.TempDir(), 1<<20)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = dropCache(f, 0, 1<<20)
	switch runtime.GOOS {
	case "linux":
		if err != nil {
			t.Errorf("dropCache: %v", err)
		}
	default:
		if err == nil {
			t.Errorf("dropCache claims to work on %s", runtime.GOOS)
		}
	}
}

// A probe that runs out of time gives no class rather than a number from too few reads.
func TestProbeDriveOutOfTime(t *testing.T) {
	path := writeFile(t, t.TempDir(), 8<<20)
	d, err := ProbeDrive(context.Background(), path, DriveOptions{NoCache: true, MinBytes: 4 << 20, Timeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if d.Read.Class != DriveUnknown || !strings.Contains(d.Read.Reason, "too little to judge") {
		t.Errorf("got %+v", d.Read)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err = ProbeDrive(ctx, path, DriveOptions{NoCache: true, MinBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if d.Read.Class != DriveUnknown {
		t.Errorf("cancelled probe has a class: %+v", d.Read)
	}
}
