package remote

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/app/serve"
	"strata/engine"
	"strata/engine/quant"
	"strata/engine/synth"
)

func tinyModelFile(t *testing.T) string {
	t.Helper()
	spec, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	spec.Quant = quant.Q8_0
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// strataServer serves the tiny model in-process on loopback, as `strata serve` does.
func strataServer(t *testing.T, key string) (url string, backend *serve.Local) {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext = "cpu", 1, 1024
	m, err := engine.Open(context.Background(), tinyModelFile(t), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	backend = serve.NewLocal(m, engine.ContextStop)
	served := lengthCut{backend}
	srv := httptest.NewServer(serve.New(func() serve.Backend { return served }, serve.Options{APIKey: key}))
	t.Cleanup(srv.Close)
	return srv.URL, backend
}

// lengthCut serves with the model's end-of-turn tokens ignored: the synthetic model's random
// weights may pick one at any step, and these tests are about the client's handling of what
// the server sends (max_tokens cuts, stops, cut streams), not about the model's choices.
type lengthCut struct{ *serve.Local }

func (l lengthCut) Chat(ctx context.Context, in serve.ChatInput, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	sp.IgnoreEOS = true
	return l.Local.Chat(ctx, in, sp, onToken)
}

func (l lengthCut) Complete(ctx context.Context, prompt string, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	sp.IgnoreEOS = true
	return l.Local.Complete(ctx, prompt, sp, onToken)
}

// cutter forwards requests to target and breaks the connection after `after` streamed
// events: a server that goes away in the middle of an answer.
func cutter(t *testing.T, target string, after int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(resp.StatusCode)
		rd := bufio.NewReader(resp.Body)
		events := 0
		for {
			line, err := rd.ReadString('\n')
			if _, werr := io.WriteString(w, line); werr != nil {
				return
			}
			w.(http.Flusher).Flush()
			if strings.HasPrefix(line, "data:") && !strings.Contains(line, "[DONE]") {
				if events++; events == after {
					panic(http.ErrAbortHandler)
				}
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// exercise is the same round of checks against any OpenAI-compatible server.
func exercise(t *testing.T, baseURL, key, model string) {
	ctx := context.Background()
	c, err := NewClient(baseURL, key)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Connect(ctx, c, model)
	if err != nil {
		t.Fatalf("connect (models %q): %v", ids, err)
	}
	// The errors a user sees when connecting, in the server's own words.
	if _, err := mustClient(t, baseURL, key+"-wrong").Models(ctx); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "refused the API key") {
		t.Errorf("wrong key: %v, want ErrKey", err)
	}
	if _, err := Connect(ctx, c, model+"-absent"); !errors.Is(err, ErrModelGone) || !strings.Contains(err.Error(), model) {
		t.Errorf("unknown model: %v, want ErrModelGone naming %q", err, model)
	}
	msgs := []engine.Message{{Role: engine.RoleSystem, Content: "Be brief."}, {Role: engine.RoleUser, Content: "Hello there"}}
	sp := engine.Sampling{Temperature: 0, MaxTokens: 16, Seed: 1}

	var pieces []string
	res, err := m.Chat(ctx, msgs, sp, func(tk engine.Token) { pieces = append(pieces, tk.Text) })
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	streamed := strings.Join(pieces, "")
	if len(pieces) < 2 || streamed != res.Text+res.Thinking && streamed != res.Thinking+res.Text {
		t.Errorf("%d streamed pieces %q; result %q", len(pieces), streamed, res.Text)
	}
	if res.Text == "" || res.Stop != engine.StopMaxTokens || res.Timings.GeneratedTokens != 16 {
		t.Fatalf("round trip: text %q, stop %q, %d tokens: want 16 tokens cut by max_tokens", res.Text, res.Stop, res.Timings.GeneratedTokens)
	}
	// A conversation continues with the answer in it.
	more := append(append([]engine.Message(nil), msgs...), engine.Message{Role: engine.RoleAssistant, Content: res.Text}, engine.Message{Role: engine.RoleUser, Content: "And?"})
	if r2, err := m.Chat(ctx, more, engine.Sampling{MaxTokens: 4}, nil); err != nil || r2.Timings.GeneratedTokens < 1 {
		t.Errorf("second turn: %v, %+v", err, r2.Timings)
	}

	t.Run("stop", func(t *testing.T) {
		runes := []rune(res.Text)
		stop := string(runes[len(runes)/2 : len(runes)/2+1])
		want := res.Text[:strings.Index(res.Text, stop)]
		got, err := m.ChatWith(ctx, msgs, sp, Options{Stop: []string{stop}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Text != want || got.Stop != engine.StopEndOfTurn {
			t.Errorf("stop %q: got %q (%s), want %q", stop, got.Text, got.Stop, want)
		}
	})

	t.Run("cut stream", func(t *testing.T) {
		cm, err := Connect(ctx, mustClient(t, cutter(t, strings.TrimSuffix(c.base, "/v1"), 4), key), model)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cm.Chat(ctx, msgs, sp, nil)
		if !errors.Is(err, ErrStreamCut) {
			t.Fatalf("a stream cut after 4 events: %v, want ErrStreamCut", err)
		}
		if got.Text == "" || !strings.HasPrefix(res.Text, got.Text) || got.Text == res.Text {
			t.Errorf("partial answer %q, want a proper prefix of %q", got.Text, res.Text)
		}
		if !strings.Contains(err.Error(), "dropped") {
			t.Errorf("message %q does not say the connection dropped", err)
		}
	})

	t.Run("stop button", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		n := 0
		got, err := m.Chat(cctx, msgs, engine.Sampling{MaxTokens: 400}, func(engine.Token) {
			if n++; n == 2 {
				cancel()
			}
		})
		if err != nil || got.Stop != engine.StopCancelled {
			t.Errorf("cancelled chat: %v, stop %q", err, got.Stop)
		}
	})
}

func mustClient(t *testing.T, url, key string) *Client {
	t.Helper()
	c, err := NewClient(url, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAgainstStrataServe(t *testing.T) {
	url, b := strataServer(t, "sk-local")
	exercise(t, url, "sk-local", b.ModelID())
}

func TestPlainWordErrors(t *testing.T) {
	ctx := context.Background()
	url, b := strataServer(t, "sk-local")

	_, err := mustClient(t, url, "sk-wrong").Models(ctx)
	if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "refused the API key") {
		t.Errorf("wrong key: %v", err)
	}
	_, err = Connect(ctx, mustClient(t, url+"/v1/", "sk-local"), "no-such-model")
	if !errors.Is(err, ErrModelGone) || !strings.Contains(err.Error(), b.ModelID()) {
		t.Errorf("unknown model: %v (want the served ones named)", err)
	}
	// The model goes away after connecting: the server now serves another one.
	m, err := Connect(ctx, mustClient(t, url, "sk-local"), b.ModelID())
	if err != nil {
		t.Fatal(err)
	}
	m.id = "unloaded"
	if _, err := m.Chat(ctx, []engine.Message{{Role: engine.RoleUser, Content: "hi"}}, engine.Sampling{MaxTokens: 2}, nil); !errors.Is(err, ErrModelGone) {
		t.Errorf("model gone: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	_, err = mustClient(t, dead, "").Models(ctx)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("nothing listening: %v", err)
	}
	if _, err := NewClient("localhost:8080", ""); err == nil {
		t.Error("an address without http:// was taken")
	}
}

// lockedLog collects a child process's output while the test may read it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAgainstLlamaServer runs the same checks against llama.cpp's server when
// STRATA_LLAMA_SERVER names its binary (built from ../shared/peer; too slow to build in CI).
// llama-server answers a chat with the model it has loaded whatever name the request gives,
// so "model gone" shows there only when connecting (the model list), not mid-conversation.
func TestAgainstLlamaServer(t *testing.T) {
	bin := os.Getenv("STRATA_LLAMA_SERVER")
	if bin == "" {
		t.Skip("STRATA_LLAMA_SERVER is not set: no llama-server binary to test against")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-m", tinyModelFile(t), "--alias", "tiny", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"-c", "1024", "-t", "1", "--api-key", "sk-llama", "--jinja")
	logs := &lockedLog{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("llama-server did not become ready:\n%s", logs.String())
		}
	}
	exercise(t, url, "sk-llama", "tiny")
	if t.Failed() {
		t.Logf("llama-server's log:\n%s", logs.String())
	}
}
