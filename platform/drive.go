package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DriveClass is how fast a drive reads sequentially.
type DriveClass string

// Drive classes, by the probe's sequential read speed.
const (
	DriveNVMe    DriveClass = "nvme"     // above 1500 MB/s
	DriveSATASSD DriveClass = "sata-ssd" // above 300 MB/s
	DriveSlow    DriveClass = "slow"     // an HDD, a USB stick, a network share
	DriveUnknown DriveClass = "unknown"
)

// ClassifyDrive names the class of a sequential read speed in MB/s (10^6 bytes per second).
func ClassifyDrive(mbps float64) DriveClass {
	switch {
	case mbps <= 0:
		return DriveUnknown
	case mbps > 1500:
		return DriveNVMe
	case mbps > 300:
		return DriveSATASSD
	}
	return DriveSlow
}

// Drive is the drive that holds one file.
type Drive struct {
	Path       string    `json:"path"`
	FS         string    `json:"fs,omitempty"` // filesystem type, where the OS says
	FreeBytes  int64     `json:"free_bytes"`
	TotalBytes int64     `json:"total_bytes"`
	Read       ReadProbe `json:"read"`
	Reason     string    `json:"reason,omitempty"` // why the space is unknown
}

// ReadProbe is the result of reading the start of the file sequentially.
type ReadProbe struct {
	MBps   float64    `json:"mbps"`
	Class  DriveClass `json:"class"`
	Bytes  int64      `json:"bytes"`            // how much was read
	Direct bool       `json:"direct"`           // unbuffered reads: the number is the drive's, not the cache's
	Cached bool       `json:"cached,omitempty"` // from an earlier probe of the same file
	Reason string     `json:"reason,omitempty"` // why the class is unknown, or a caveat
}

// DriveOptions tune ProbeDrive; the zero value is what the app uses.
type DriveOptions struct {
	CacheDir string        // where results are kept; "" = os.UserCacheDir()/strata
	NoCache  bool          // neither read nor write the cache
	MaxBytes int64         // read at most this much; 0 = 256 MiB
	MinBytes int64         // less than this read gives no class; 0 = 32 MiB
	Timeout  time.Duration // for the whole probe; 0 = 5 s
}

func (o DriveOptions) withDefaults() DriveOptions {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 20
	}
	if o.MinBytes <= 0 {
		o.MinBytes = 32 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	return o
}

// ProbeDrive reports the free space of the drive that holds path and how fast the file reads.
// It fails only when path cannot be opened as a regular file; everything else degrades to
// "unknown" with a reason. A measured speed is cached per file (path, size, mtime).
func ProbeDrive(ctx context.Context, path string, opt DriveOptions) (Drive, error) {
	opt = opt.withDefaults()
	abs, err := filepath.Abs(path)
	if err != nil {
		return Drive{}, fmt.Errorf("drive: %s: %w", path, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return Drive{}, fmt.Errorf("drive: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Drive{}, fmt.Errorf("drive: %s is not a regular file", abs)
	}
	d := Drive{Path: abs}
	type space struct {
		free, total int64
		fs          string
	}
	sp, err := within(ctx, opt.Timeout, func(context.Context) (space, error) {
		free, total, fs, err := diskSpace(filepath.Dir(abs))
		return space{free, total, fs}, err
	})
	if err != nil {
		d.Reason = "free space unknown: " + err.Error()
	}
	d.FreeBytes, d.TotalBytes, d.FS = sp.free, sp.total, sp.fs

	if d.FS == "tmpfs" {
		// Newer kernels accept O_DIRECT on tmpfs, but the "drive" is RAM: nothing to measure.
		d.Read = ReadProbe{Class: DriveUnknown, Reason: "the file is on tmpfs (in RAM): no drive to measure"}
		return d, nil
	}
	key := abs + "|" + strconv.FormatInt(st.Size(), 10) + "|" + strconv.FormatInt(st.ModTime().UnixNano(), 10)
	cacheFile := ""
	if !opt.NoCache {
		cacheFile = probeCacheFile(opt.CacheDir)
		if p, ok := loadProbe(cacheFile, key); ok {
			p.Cached = true
			d.Read = p
			return d, nil
		}
	}
	// The probe stops itself at opt.Timeout; within only catches a read that never returns.
	p, err := within(ctx, opt.Timeout+2*time.Second, func(ctx context.Context) (ReadProbe, error) {
		return readProbe(ctx, abs, st.Size(), opt), nil
	})
	if err != nil {
		p = ReadProbe{Class: DriveUnknown, Reason: "read probe: " + err.Error()}
	}
	d.Read = p
	if cacheFile != "" && p.Class != DriveUnknown {
		if err := storeProbe(cacheFile, key, p); err != nil {
			slog.Debug("drive probe not cached", "file", cacheFile, "err", err)
		}
	}
	return d, nil
}

// readProbe reads up to opt.MaxBytes from the start of the file, unbuffered when the
// filesystem allows it, and stops early at the deadline.
func readProbe(ctx context.Context, path string, size int64, opt DriveOptions) ReadProbe {
	p := ReadProbe{Class: DriveUnknown, Direct: true}
	f, align, err := OpenUnbuffered(path)
	if err != nil {
		// tmpfs and some overlays refuse direct I/O: read through the cache after asking the
		// OS to drop what it holds of the range, and say so.
		p.Direct = false
		f, err = os.Open(path)
		if err != nil {
			p.Reason = err.Error()
			return p
		}
		align = DirectIOAlign
		if derr := dropCache(f, 0, min(size, opt.MaxBytes)); derr != nil {
			p.Reason = "unbuffered reads not supported here and the cache could not be dropped: " + derr.Error()
		} else {
			p.Reason = "unbuffered reads not supported here; read through the cache after dropping it"
		}
	}
	defer f.Close()
	// Several readers keep a few requests in flight, as the engine's readers will: one
	// request at a time undersells an NVMe drive.
	const chunk, readers = 4 << 20, 4
	limit := min(size, opt.MaxBytes)
	chunks := (limit + chunk - 1) / chunk
	var next, total atomic.Int64
	var mu sync.Mutex
	var readErr error
	start := time.Now()
	deadline := start.Add(opt.Timeout)
	var wg sync.WaitGroup
	for range readers {
		buf, err := AlignedAlloc(chunk, align)
		if err != nil {
			p.Reason = join(p.Reason, err.Error())
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer FreeAligned(buf)
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := next.Add(1) - 1
				if i >= chunks {
					return
				}
				// Every read lies inside the file: a read that ends past EOF comes back short, and
				// ReadAt would retry the rest at an unaligned offset, which unbuffered files refuse.
				off := i * chunk
				want := min(chunk, limit-off) / int64(align) * int64(align)
				if want == 0 {
					return
				}
				k, err := f.ReadAt(buf[:want], off)
				total.Add(int64(k))
				if err != nil && !errors.Is(err, io.EOF) {
					mu.Lock()
					readErr = fmt.Errorf("read at offset %d: %w", off, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if readErr != nil {
		p.Reason = join(p.Reason, readErr.Error())
		return p
	}
	n := total.Load()
	elapsed := time.Since(start)
	p.Bytes = n
	if elapsed > 0 {
		p.MBps = float64(n) / 1e6 / elapsed.Seconds()
	}
	switch {
	case n < opt.MinBytes && n < size:
		p.Reason = join(p.Reason, fmt.Sprintf("stopped after %d MiB in %v: too little to judge", n>>20, elapsed.Round(time.Millisecond)))
	case n < opt.MinBytes:
		p.Reason = join(p.Reason, fmt.Sprintf("the file has only %d MiB: too little to judge", n>>20))
	case !p.Direct && p.MBps > 20000:
		p.Reason = join(p.Reason, "the reads came from memory, not the drive")
	default:
		p.Class = ClassifyDrive(p.MBps)
	}
	return p
}

// probeCacheFile is where measured speeds are kept.
func probeCacheFile(dir string) string {
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(base, "strata")
	}
	return filepath.Join(dir, "drive-probes.json")
}

func loadProbe(file, key string) (ReadProbe, bool) {
	if file == "" {
		return ReadProbe{}, false
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return ReadProbe{}, false
	}
	var m map[string]ReadProbe
	if err := json.Unmarshal(b, &m); err != nil {
		slog.Debug("drive probe cache unreadable; measuring again", "file", file, "err", err)
		return ReadProbe{}, false
	}
	p, ok := m[key]
	return p, ok
}

// storeProbe adds one result to the cache file, writing a new file and renaming it over the
// old so a crash or a second Strata never leaves half a file.
func storeProbe(file, key string, p ReadProbe) error {
	m := map[string]ReadProbe{}
	if b, err := os.ReadFile(file); err == nil {
		_ = json.Unmarshal(b, &m) // a damaged cache is replaced
	}
	m[key] = p
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "drive-probes-*.tmp")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// FreeSpace is how many bytes the current user may still write on the volume that holds
// dir (a folder that exists).
func FreeSpace(dir string) (int64, error) {
	free, _, _, err := diskSpace(dir)
	if err != nil {
		return 0, fmt.Errorf("drive: free space of %s: %w", dir, err)
	}
	return free, nil
}
