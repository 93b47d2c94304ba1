package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// inflater gunzips on its own goroutine into a buffer sized from the gzip trailer, so the
// JSON reader can parse what has arrived while the rest is still being inflated.
type inflater struct {
	buf  []byte // final size; buf[:n] is ready
	mu   sync.Mutex
	cond *sync.Cond
	n    int
	done bool
	err  error
}

// gzipSize is the uncompressed size a gzip trailer records (mod 2^32), or -1 if data is not
// gzip.
func gzipSize(data []byte) int {
	if len(data) < 18 || data[0] != 0x1f || data[1] != 0x8b {
		return -1
	}
	return int(binary.LittleEndian.Uint32(data[len(data)-4:]))
}

// plausibleSize: deflate cannot expand more than 1032 times, and we cap at 1 GiB.
func plausibleSize(size, compressed int) bool {
	return size > 0 && size <= 1<<30 && size <= 1032*compressed
}

func startInflater(data []byte, size int) (*inflater, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	f := &inflater{buf: make([]byte, size)}
	f.cond = sync.NewCond(&f.mu)
	go f.run(zr)
	return f, nil
}

func (f *inflater) run(zr *gzip.Reader) {
	const chunk = 256 << 10
	n := 0
	var err error
	for err == nil && n < len(f.buf) {
		var k int
		k, err = zr.Read(f.buf[n:min(n+chunk, len(f.buf))])
		n += k
		f.mu.Lock()
		f.n = n
		f.cond.Broadcast()
		f.mu.Unlock()
	}
	if err == nil || errors.Is(err, io.EOF) { // the buffer is full: the stream must end here
		var one [1]byte
		if k, _ := io.ReadFull(zr, one[:]); k > 0 {
			err = fmt.Errorf("gzip: more data than the trailer's size %d", len(f.buf))
		} else if n < len(f.buf) {
			err = fmt.Errorf("gzip: %d bytes, the trailer says %d", n, len(f.buf))
		} else {
			err = zr.Close()
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("gzip: %w", err)
	} else {
		err = nil
	}
	f.mu.Lock()
	f.done, f.err = true, err
	f.cond.Broadcast()
	f.mu.Unlock()
}

// wait blocks until byte need is ready or the stream ended, and returns what is ready.
func (f *inflater) wait(need int) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n <= need && !f.done {
		f.cond.Wait()
	}
	return f.buf[:f.n]
}

// finish waits for the end of the stream and returns its error.
func (f *inflater) finish() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for !f.done {
		f.cond.Wait()
	}
	return f.err
}

// parseJSONData parses a tokenizer.json given whole, or gzipped: then inflating and parsing
// overlap.
func parseJSONData(data []byte) (*Tokenizer, error) {
	size := gzipSize(data)
	if size < 0 {
		return parseHFJSON(&jscan{b: data})
	}
	if !plausibleSize(size, len(data)) { // the trailer is only mod 2^32: inflate first
		plain, err := gunzipIfNeeded(data)
		if err != nil {
			return nil, err
		}
		return parseHFJSON(&jscan{b: plain})
	}
	inf, err := startInflater(data, size)
	if err != nil {
		return nil, err
	}
	t, perr := parseHFJSON(&jscan{fill: inf.wait})
	if err := inf.finish(); err != nil {
		return nil, err
	}
	return t, perr
}
