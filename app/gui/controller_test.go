package gui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"strata/app/store"
	"strata/engine"
)

// newTestController makes a controller on temporary folders with the fake engine, whose
// UI updates run at once.
func newTestController(t *testing.T, eng Engine) (*Controller, Options) {
	t.Helper()
	dir := t.TempDir()
	opts := Options{DataDir: filepath.Join(dir, "data"), ConfigDir: filepath.Join(dir, "config"), Engine: eng}
	c, err := newController(opts, func(f func()) { f() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, opts
}

// writeFakeModel makes a file the fake engine accepts.
func writeFakeModel(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake.gguf")
	if err := os.WriteFile(p, []byte("GGUF fake model"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func loadFake(t *testing.T, c *Controller, path string) {
	t.Helper()
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the model to load", func() bool { st := c.LoadState(); return !st.Loading })
	if st := c.LoadState(); st.Err != nil || !st.Loaded {
		t.Fatalf("load: %+v", st)
	}
}

func TestChatStreamStopSaveReload(t *testing.T) {
	c, opts := newTestController(t, &fakeEngine{tokenDelay: time.Millisecond})
	if err := c.Send("hello"); err == nil {
		t.Fatal("Send without a model was accepted")
	}
	loadFake(t, c, writeFakeModel(t))
	c.SetSystem("be brief")
	if err := c.Send("hello there\nsecond line"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "tokens to stream", func() bool { return strings.Contains(c.Chat().Chat.Messages[1].Content, "t5 ") })
	if err := c.Send("again"); err == nil {
		t.Fatal("a second Send while generating was accepted")
	}
	c.Stop()
	c.Wait()
	view := c.Chat()
	if view.Generating || len(view.Chat.Messages) != 2 {
		t.Fatalf("after stop: %+v", view)
	}
	ans := view.Chat.Messages[1]
	if !ans.Stopped || ans.Thinking != "t0 t1 " || !strings.HasPrefix(ans.Content, "t2 t3 ") || ans.TokensPerSec <= 0 {
		t.Fatalf("stopped answer: %+v", ans)
	}
	if view.Chat.Title != "hello there" {
		t.Errorf("title %q, want the first line of the first message", view.Chat.Title)
	}

	// The chat is on disk and reads back as it was shown.
	chats, err := store.OpenChats(filepath.Join(opts.DataDir, "chats"))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := chats.Load(view.Chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	if saved.System != "be brief" || len(saved.Messages) != 2 || saved.Messages[1].Content != ans.Content {
		t.Fatalf("saved chat %+v differs from the shown one", saved)
	}

	// A second controller on the same folders (the app restarted) lists and opens it.
	c2, err := newController(opts, func(f func()) { f() })
	if err != nil {
		t.Fatal(err)
	}
	list, err := c2.Chats()
	if err != nil || len(list) != 1 || list[0].ID != view.Chat.ID {
		t.Fatalf("after restart: %v, %v", list, err)
	}
	if err := c2.SelectChat(view.Chat.ID); err != nil {
		t.Fatal(err)
	}
	if got := c2.Chat().Chat.Messages[1].Content; got != ans.Content {
		t.Fatalf("reopened answer %q, want %q", got, ans.Content)
	}
	if c2.Settings().SystemPrompt != "be brief" {
		t.Errorf("system prompt not remembered: %q", c2.Settings().SystemPrompt)
	}
}

func TestRegenerateEditRenameDelete(t *testing.T) {
	c, _ := newTestController(t, &fakeEngine{})
	loadFake(t, c, writeFakeModel(t))
	if err := c.SetAdvanced(advancedFields{Temperature: "0", TopK: "0", TopP: "1", MinP: "0", RepeatPenalty: "1", MaxTokens: "4", Seed: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Regenerate(); err == nil {
		t.Fatal("Regenerate with no answer was accepted")
	}
	if err := c.Send("first"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if got := c.Chat().Chat.Messages; len(got) != 2 || got[1].Content != "t2 t3 " || got[1].Stopped {
		t.Fatalf("answer with max 4 tokens: %+v", got)
	}
	if err := c.Regenerate(); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if got := c.Chat().Chat.Messages; len(got) != 2 {
		t.Fatalf("regenerate should replace the answer, not add one: %d messages", len(got))
	}
	if c.LastUserMessage() != "first" {
		t.Fatalf("last user message %q", c.LastUserMessage())
	}
	if err := c.EditLast("edited"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	got := c.Chat().Chat.Messages
	if len(got) != 2 || got[0].Content != "edited" {
		t.Fatalf("after edit: %+v", got)
	}

	id := c.Chat().Chat.ID
	if err := c.RenameChat(id, "  "); err == nil {
		t.Error("an empty name was accepted")
	}
	if err := c.RenameChat(id, "Renamed"); err != nil {
		t.Fatal(err)
	}
	list, _ := c.Chats()
	if len(list) != 1 || list[0].Title != "Renamed" {
		t.Fatalf("renamed list: %+v", list)
	}
	if err := c.DeleteChat(id); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.Chats(); len(list) != 0 {
		t.Fatalf("after delete: %+v", list)
	}
	if cur := c.Chat().Chat; cur.ID == id || len(cur.Messages) != 0 {
		t.Fatalf("deleting the open chat should open a new one: %+v", cur)
	}
}

func TestSystemPromptReachesEngine(t *testing.T) {
	c, _ := newTestController(t, &fakeEngine{})
	loadFake(t, c, writeFakeModel(t))
	c.SetSystem("you are terse")
	c.SetAdvanced(fieldsOf(engine.Sampling{MaxTokens: 3, TopP: 1}))
	if err := c.Send("hi"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	sess := c.chat.session.(*fakeSession)
	if len(sess.last) != 2 || sess.last[0].Role != engine.RoleSystem || sess.last[0].Content != "you are terse" || sess.last[1].Content != "hi" {
		t.Fatalf("engine got %+v", sess.last)
	}
}

func TestApplySettingsValidatesSavesReloads(t *testing.T) {
	eng := &fakeEngine{}
	c, opts := newTestController(t, eng)
	f := formOf(c.Settings().Config)
	f.MaxContext = "eight thousand"
	if _, err := c.ApplySettings(f); err == nil || !strings.Contains(err.Error(), "context length") {
		t.Fatalf("bad context accepted or unclear: %v", err)
	}
	if _, err := os.Stat(store.SettingsPath(opts.ConfigDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused settings were written: %v", err)
	}
	f.MaxContext = "8192"
	f.KVType = "int8"
	reloading, err := c.ApplySettings(f)
	if err != nil || reloading {
		t.Fatalf("no model loaded: reloading=%v err=%v", reloading, err)
	}
	saved, err := store.LoadSettings(store.SettingsPath(opts.ConfigDir))
	if err != nil || saved.Config.MaxContext != 8192 || saved.Config.KVType != "int8" {
		t.Fatalf("saved %+v, %v", saved.Config, err)
	}

	loadFake(t, c, writeFakeModel(t))
	f.Threads = "3"
	if reloading, err := c.ApplySettings(f); err != nil || !reloading {
		t.Fatalf("with a model loaded: reloading=%v err=%v", reloading, err)
	}
	waitFor(t, "the reload", func() bool { return !c.LoadState().Loading })
	st := c.LoadState()
	if st.Err != nil || !st.Loaded || eng.opened != 2 {
		t.Fatalf("reload: %+v, opened %d times", st, eng.opened)
	}
	c.mu.Lock()
	threads := c.model.Config().Threads
	c.mu.Unlock()
	if threads != 3 {
		t.Fatalf("reloaded model has %d threads, want 3", threads)
	}
}

func TestLoadFailureIsPlain(t *testing.T) {
	c, _ := newTestController(t, &fakeEngine{openErr: fmt.Errorf(`model: m.gguf: architecture "llama": %w`, engine.ErrUnsupportedArch)})
	if err := c.Load(writeFakeModel(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the load to fail", func() bool { return !c.LoadState().Loading })
	st := c.LoadState()
	if st.Err == nil || st.Loaded {
		t.Fatalf("load state %+v", st)
	}
	if msg := friendly("Loading the model", st.Err); !strings.Contains(msg, "does not run this model's architecture") {
		t.Fatalf("message %q", msg)
	}

	c2, _ := newTestController(t, &fakeEngine{})
	c2.Inspect(filepath.Join(t.TempDir(), "gone.gguf"))
	waitFor(t, "the card", func() bool { _, _, err := c2.Card(); return err != nil })
	if _, _, err := c2.Card(); !strings.Contains(friendly("Reading the model", err), "not there any more") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestCancelLoad(t *testing.T) {
	c, _ := newTestController(t, &fakeEngine{stepDelay: 200 * time.Millisecond})
	if err := c.Load(writeFakeModel(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "progress", func() bool { return c.LoadState().Progress.Phase == "mapping" })
	if err := c.Load(writeFakeModel(t)); err == nil {
		t.Fatal("a second load while loading was accepted")
	}
	c.CancelLoad()
	waitFor(t, "the cancelled load", func() bool { return !c.LoadState().Loading })
	st := c.LoadState()
	if st.Loaded || !errors.Is(st.Err, context.Canceled) {
		t.Fatalf("after cancel: %+v", st)
	}
	if got := friendly("Loading the model", st.Err); got != "Loading the model was cancelled." {
		t.Fatalf("message %q", got)
	}
}

// TestContextPolicySetting: the "when a chat is full" choice is saved, survives a restart,
// and reaches the engine's session; what a full context did is told in plain words.
func TestContextPolicySetting(t *testing.T) {
	c, opts := newTestController(t, &fakeEngine{})
	if err := c.Load(writeFakeModel(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the load", func() bool { return c.LoadState().Loaded })
	policy := func() engine.ContextPolicy {
		c.mu.Lock()
		defer c.mu.Unlock()
		m := c.model.(*fakeModel)
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.opts.ContextPolicy
	}
	if got := policy(); got != engine.ContextStop {
		t.Fatalf("default policy %q, want stop", got)
	}
	if err := c.SetContextPolicy(engine.ContextDropOldest); err != nil {
		t.Fatal(err)
	}
	if got := policy(); got != engine.ContextDropOldest {
		t.Fatalf("policy after the setting: %q", got)
	}
	again, err := newController(opts, func(f func()) { f() })
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Settings().ContextFull; got != string(engine.ContextDropOldest) {
		t.Fatalf("saved policy %q", got)
	}
	if n := contextNotice(engine.Result{Dropped: 3}); !strings.Contains(n, "oldest 3 messages") || !strings.Contains(n, "system prompt was kept") {
		t.Errorf("dropped notice %q", n)
	}
	if n := contextNotice(engine.Result{Stop: engine.StopContext}); !strings.Contains(n, "filled the model's context") {
		t.Errorf("full notice %q", n)
	}
	if n := contextNotice(engine.Result{Stop: engine.StopEndOfTurn}); n != "" {
		t.Errorf("a normal answer has a notice %q", n)
	}
	if msg := friendly("Writing the answer", fmt.Errorf("engine: %w: 300 tokens", engine.ErrContextFull)); !strings.Contains(msg, "drop the oldest turns") {
		t.Errorf("context-full message %q", msg)
	}
}
