// Package hubtest is a stand-in for the Hugging Face Hub in tests of app/library and its
// callers: a loopback HTTP server with the routes the client uses.
package hubtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"strata/engine/gguf"
	"strata/engine/synth"
)

// Hub serves the Hugging Face Hub routes app/library's client uses from files a test
// wrote: the tree listing (sizes and LFS SHA-256), search, and resolve/main downloads with
// Range, answering 401 (X-Error-Code GatedRepo) for a gated repository without the token
// "secret" and 404 for what it does not have. Cuts and holds stand in for a dropped
// connection and a slow one.
// pageSize is how many entries a page of the tree listing holds: small, so tests see
// several pages.
const pageSize = 2

type Hub struct {
	repos  map[string]map[string][]byte // repo -> path -> bytes
	gated  map[string]bool              // needs "Bearer secret"
	badSHA map[string]bool              // path whose listed SHA-256 is wrong

	mu     sync.Mutex
	cuts   []int64  // absolute offsets where the next downloads stop (each used once)
	holds  []int64  // offsets where the next download waits until the client goes (each used once)
	ranges []string // Range headers of resolve requests, "" for none
}

func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/api/models":
		q := strings.ToLower(r.URL.Query().Get("search"))
		if r.URL.Query().Get("filter") != "gguf" {
			http.Error(w, "want filter=gguf", http.StatusBadRequest)
			return
		}
		var out []map[string]any
		for id := range h.repos {
			if strings.Contains(strings.ToLower(id), q) {
				out = append(out, map[string]any{"id": id, "downloads": 7, "likes": 1, "gated": h.gated[id]})
			}
		}
		json.NewEncoder(w).Encode(out)
	case strings.HasPrefix(p, "/api/models/") && strings.HasSuffix(p, "/tree/main"):
		repo := strings.TrimSuffix(strings.TrimPrefix(p, "/api/models/"), "/tree/main")
		files, ok := h.access(w, r, repo)
		if !ok {
			return
		}
		names := make([]string, 0, len(files))
		for name := range files {
			names = append(names, name)
		}
		sort.Strings(names)
		out := []map[string]any{{"type": "directory", "path": "docs", "size": 0}}
		for _, name := range names {
			b := files[name]
			e := map[string]any{"type": "file", "path": name, "size": len(b)}
			if strings.HasSuffix(name, ".gguf") {
				sum := sha256.Sum256(b)
				oid := hex.EncodeToString(sum[:])
				h.mu.Lock()
				if h.badSHA[name] {
					oid = strings.Repeat("0", 64)
				}
				h.mu.Unlock()
				e["lfs"] = map[string]any{"oid": oid, "size": len(b), "pointerSize": 134}
			}
			out = append(out, e)
		}
		// Pages of pageSize entries, the next named by a Link header as the Hub does.
		start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		start = min(max(start, 0), len(out))
		end := min(start+pageSize, len(out))
		if end < len(out) {
			next := *r.URL
			q := next.Query()
			q.Set("cursor", strconv.Itoa(end))
			next.RawQuery = q.Encode()
			w.Header().Set("Link", "<"+next.String()+`>; rel="next"`)
		}
		out = out[start:end]
		json.NewEncoder(w).Encode(out)
	case strings.Contains(p, "/resolve/main/"):
		repo, file, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/resolve/main/")
		files, ok := h.access(w, r, repo)
		if !ok {
			return
		}
		b, ok := files[file]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "Entry not found", http.StatusNotFound)
			return
		}
		h.serveFile(w, r, b)
	default:
		http.NotFound(w, r)
	}
}

// access answers 404 for an unknown repository and 401 for a gated one without the token.
func (h *Hub) access(w http.ResponseWriter, r *http.Request, repo string) (map[string][]byte, bool) {
	files, ok := h.repos[repo]
	if !ok {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusNotFound)
		return nil, false
	}
	if h.gated[repo] && r.Header.Get("Authorization") != "Bearer secret" {
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "Access to model "+repo+" is restricted.", http.StatusUnauthorized)
		return nil, false
	}
	return files, true
}

// serveFile answers a download with Range support, stopping at the first pending cut point
// inside the range by dropping the connection.
func (h *Hub) serveFile(w http.ResponseWriter, r *http.Request, b []byte) {
	h.mu.Lock()
	h.ranges = append(h.ranges, r.Header.Get("Range"))
	h.mu.Unlock()
	start := int64(0)
	if rg := r.Header.Get("Range"); rg != "" {
		s, ok := strings.CutPrefix(rg, "bytes=")
		s = strings.TrimSuffix(s, "-")
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil || n >= int64(len(b)) {
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(b)-1, len(b)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)-int(start)))
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	}
	end := int64(len(b))
	hold := false
	h.mu.Lock()
	for i, c := range h.cuts {
		if c > start && c < end {
			end = c
			h.cuts = append(h.cuts[:i:i], h.cuts[i+1:]...)
			break
		}
	}
	for i, c := range h.holds {
		if c > start && c < end {
			end, hold = c, true
			h.holds = append(h.holds[:i:i], h.holds[i+1:]...)
			break
		}
	}
	h.mu.Unlock()
	w.Write(b[start:end])
	if hold {
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a slow moment: the client pauses here
		return
	}
	if end < int64(len(b)) {
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-body
	}
}

// New serves repos (repo -> file path -> bytes) on a loopback server closed with t; gated
// repositories need the token "secret".
func New(t testing.TB, repos map[string]map[string][]byte, gated ...string) (*Hub, *httptest.Server) {
	h := &Hub{repos: repos, gated: map[string]bool{}, badSHA: map[string]bool{}}
	for _, g := range gated {
		h.gated[g] = true
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

// SetCuts makes the next downloads drop the connection at these file offsets, once each.
func (h *Hub) SetCuts(at ...int64) { h.mu.Lock(); h.cuts = at; h.mu.Unlock() }

// SetHolds makes the next downloads stop sending at these offsets, once each, until the
// client goes away.
func (h *Hub) SetHolds(at ...int64) { h.mu.Lock(); h.holds = at; h.mu.Unlock() }

// SetBadSHA makes the listing publish a wrong SHA-256 for path.
func (h *Hub) SetBadSHA(path string) { h.mu.Lock(); h.badSHA[path] = true; h.mu.Unlock() }

// Ranges is the Range header of every download request so far ("" for none).
func (h *Hub) Ranges() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ranges...)
}

// SplitModel writes a tiny synthetic model split in three (tiny-Q8_0-0000N-of-00003.gguf)
// and a README, and returns them by name.
func SplitModel(t testing.TB) map[string][]byte {
	t.Helper()
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Layers, spec.Experts, spec.Pool = 2, 4, 256
	src := t.TempDir()
	whole := filepath.Join(src, "whole.gguf")
	if err := synth.Write(context.Background(), whole, spec, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(whole)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := gguf.WriteSplit(f, filepath.Join(src, "tiny-Q8_0"), 3)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"README.md": []byte("# tiny\n")}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}
