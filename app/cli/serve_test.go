package cli

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServeRefusesOpenHostWithoutKey(t *testing.T) {
	code, _, errs := runCLI(t, "serve", "-m", "whatever.gguf", "--host", "0.0.0.0")
	if code != 2 || !strings.Contains(errs, "--api-key") {
		t.Fatalf("serve on 0.0.0.0 without a key: exit %d, %s", code, errs)
	}
}

// lockedBuffer is a bytes.Buffer the server goroutine writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `strata serve` prints its URL, answers there, and stops cleanly when interrupted.
func TestServeStartsAndStops(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if stderr, err := synthCLI(t, "--preset", "tiny", "--quant", "q8_0", "-o", model); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"-m", model, "--backend", "cpu", "--threads", "1", "--max-context", "256", "--port", "0"}, IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: errb})
	}()
	urlRE := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/v1)`)
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(errb.String()); m != nil {
			url = m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended early: %v\n%s", err, errb.String())
		default:
		}
	}
	if url == "" {
		t.Fatalf("no URL printed: %s", errb.String())
	}
	resp, err := http.Get(strings.TrimSuffix(url, "/v1") + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/health: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after interrupt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
