package gui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"strata/app/serve"
	"strata/engine"
	"strata/engine/quant"
	"strata/engine/synth"
)

// tinyModelFile writes the smallest synthetic model.
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

// countingEngine is the real engine, counting the models it opens.
type countingEngine struct {
	engineAPI
	opened atomic.Int32
}

func (e *countingEngine) Open(ctx context.Context, path string, cfg engine.Config, onProgress func(engine.Progress)) (Model, error) {
	cfg.Backend, cfg.Threads, cfg.MaxContext = "cpu", 1, 512
	e.opened.Add(1)
	return e.engineAPI.Open(ctx, path, cfg, onProgress)
}

// post sends a JSON request and decodes the answer.
func post(t *testing.T, url, key string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// The settings' server switch serves the model the app has loaded (the same one: the
// engine opened one model), shows where, and stops.
func TestServerSwitch(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	eng := &countingEngine{}
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "data"), ConfigDir: filepath.Join(dir, "config"), Engine: eng, Advise: testAdvice})
	w := a.Window()
	if err := a.ctl.Load(tinyModelFile(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the model", func() bool { st := a.ctl.LoadState(); return st.Loaded || st.Err != nil })
	if err := a.ctl.LoadState().Err; err != nil {
		t.Fatal(err)
	}
	g.ui.do(func() { a.Show(ScreenSettings) })
	g.ui.do(func() {
		a.settings.server.on.SetChecked(true)
		a.settings.server.port.SetText("0")
		a.settings.server.key.SetText("sk-gui")
	})
	g.tap(w, "Apply server")
	url, err := a.ctl.ServerStatus()
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("server status %q, %v", url, err)
	}
	if txt := g.text(w); !strings.Contains(txt, "On at "+url) {
		t.Errorf("settings show:\n%s", txt)
	}
	g.ui.do(func() { a.Show(ScreenChat) })
	g.until("the URL next to the model", func() bool { return strings.Contains(a.chat.banner.Text, "serving at "+url) })

	var res struct {
		Choices []struct {
			Message struct{ Content string }
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hello"}}, "max_tokens": 5, "temperature": 0}
	if code := post(t, url+"/chat/completions", "sk-gui", body, &res); code != 200 || len(res.Choices) != 1 || res.Usage.CompletionTokens < 1 {
		t.Fatalf("chat through the app's server: %d %+v", code, res)
	}
	if code := post(t, url+"/chat/completions", "", body, nil); code != http.StatusUnauthorized {
		t.Errorf("without the key: %d, want 401", code)
	}
	if n := eng.opened.Load(); n != 1 {
		t.Errorf("the engine opened %d models, want 1 (the server shares the app's)", n)
	}
	if s := a.ctl.Settings().Server; !s.Enabled || s.Port != 0 || s.APIKey != "sk-gui" {
		t.Errorf("saved server settings %+v", s)
	}

	g.ui.do(func() { a.Show(ScreenSettings); a.settings.server.on.SetChecked(false) })
	g.tap(w, "Apply server")
	if u, _ := a.ctl.ServerStatus(); u != "" {
		t.Errorf("still serving at %q", u)
	}
	if _, err := http.Get(url + "/models"); err == nil {
		t.Error("the server still answers after it was switched off")
	}
	g.ui.do(func() { a.settings.server.on.SetChecked(true); a.settings.server.port.SetText("http") })
	g.tap(w, "Apply server")
	if txt := g.text(w); !strings.Contains(txt, "Not applied: the port must be a number") {
		t.Errorf("a bad port shows:\n%s", txt)
	}
}

// overlayObjects walks the top dialog.
func overlayObjects(w fyne.Window, visit func(fyne.CanvasObject)) {
	if top := w.Canvas().Overlays().Top(); top != nil {
		objects(top, visit)
	}
}

// "Connect to a server" in the picker lists the server's models, connects, and the chat
// runs there; the tier map says so.
func TestConnectToServer(t *testing.T) {
	test.NewTempApp(t)
	cfg := engine.DefaultConfig()
	cfg.Backend, cfg.Threads, cfg.MaxContext = "cpu", 1, 512
	m, err := engine.Open(context.Background(), tinyModelFile(t), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	backend := serve.NewLocal(m, engine.ContextStop)
	srv := httptest.NewServer(serve.New(func() serve.Backend { return backend }, serve.Options{APIKey: "sk-far"}))
	defer srv.Close()

	dir := t.TempDir()
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "data"), ConfigDir: filepath.Join(dir, "config"), Engine: &fakeEngine{}, Advise: testAdvice})
	w := a.Window()
	g.ui.do(func() { a.Show(ScreenPicker) })
	g.tap(w, "Connect to a server")
	var addr, key *widget.Entry
	var models *widget.Select
	g.ui.do(func() {
		overlayObjects(w, func(o fyne.CanvasObject) {
			switch x := o.(type) {
			case *widget.Entry:
				if x.Password {
					key = x
				} else if addr == nil {
					addr = x
				}
			case *widget.Select:
				models = x
			}
		})
		addr.SetText(srv.URL)
		key.SetText("sk-far")
	})
	tapOverlay := func(label string) {
		g.ui.do(func() {
			overlayObjects(w, func(o fyne.CanvasObject) {
				if b, ok := o.(*widget.Button); ok && b.Text == label && !b.Disabled() {
					test.Tap(b)
				}
			})
		})
	}
	tapOverlay("List models")
	g.until("the model list", func() bool { return models.Selected == "tiny" })
	tapOverlay("Connect")
	g.until("the chat", func() bool { return a.screen == ScreenChat })
	if got := a.ctl.RemoteURL(); got != srv.URL+"/v1" {
		t.Fatalf("remote URL %q", got)
	}
	if !strings.Contains(a.chat.banner.Text, "tiny on 127.0.0.1") {
		t.Errorf("banner %q does not name the remote model", a.chat.banner.Text)
	}
	g.ui.do(func() {
		test.Type(a.chat.input, "Hello")
		a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	})
	a.ctl.Wait()
	v := a.ctl.Chat()
	if v.Err != "" || len(v.Chat.Messages) != 2 || v.Chat.Messages[1].Content == "" && v.Chat.Messages[1].Thinking == "" {
		t.Fatalf("remote answer: err %q, messages %+v", v.Err, v.Chat.Messages)
	}
	g.ui.do(func() { a.Show(ScreenTiers) })
	g.until("the tier map's note", func() bool { return strings.Contains(a.tiers.empty.Text, "runs remotely") })
	if s := a.ctl.Settings().Remote; s.URL != srv.URL || s.Model != "tiny" {
		t.Errorf("remembered %+v", s)
	}
}

// A stream that breaks keeps what arrived, marks the answer, and says so in plain words.
func TestRemoteCutAnswer(t *testing.T) {
	test.NewTempApp(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"big"}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, piece := range []string{"Half ", "an answer"} {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", piece)
			w.(http.Flusher).Flush()
		}
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	dir := t.TempDir()
	a, g := newTestApp(t, Options{DataDir: filepath.Join(dir, "data"), ConfigDir: filepath.Join(dir, "config"), Engine: &fakeEngine{}, Advise: testAdvice})
	if err := a.ctl.ConnectRemote(context.Background(), srv.URL, "", "big"); err != nil {
		t.Fatal(err)
	}
	g.ui.do(func() { a.Show(ScreenChat) })
	if err := a.ctl.Send("Hello"); err != nil {
		t.Fatal(err)
	}
	a.ctl.Wait()
	v := a.ctl.Chat()
	if len(v.Chat.Messages) != 2 || v.Chat.Messages[1].Content != "Half an answer" || !v.Chat.Messages[1].Cut {
		t.Fatalf("messages %+v", v.Chat.Messages)
	}
	if !strings.Contains(v.Err, "dropped in the middle of the answer") {
		t.Errorf("error %q", v.Err)
	}
	if l := tokensPerSecLabel(v.Chat.Messages[1]); !strings.Contains(l, "cut off") {
		t.Errorf("answer label %q", l)
	}
	if err := a.ctl.ConnectRemote(context.Background(), srv.URL, "", "gone"); err == nil || !strings.Contains(err.Error(), "does not serve") {
		t.Errorf("connecting to a model the server lacks: %v", err)
	}
}
