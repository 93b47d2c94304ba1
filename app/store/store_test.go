package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"strata/engine"
)

func TestChatRoundTrip(t *testing.T) {
	c, err := OpenChats(filepath.Join(t.TempDir(), "chats"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ch := NewChat("first", now)
	ch.System = "be brief"
	ch.Messages = []Message{
		{Role: "user", Content: "hello"},
		{Role: "assistant", Content: "```go\nfmt.Println(1)\n```", Thinking: "hmm", TokensPerSec: 12.5, Stopped: true},
	}
	if err := c.Save(ch); err != nil {
		t.Fatal(err)
	}
	got, err := c.Load(ch.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ch) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, ch)
	}

	older := NewChat("older", now.Add(-time.Hour))
	if err := c.Save(older); err != nil {
		t.Fatal(err)
	}
	list, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != ch.ID || list[1].ID != older.ID {
		t.Fatalf("List order: %v", list)
	}

	if err := c.Rename(older.ID, "renamed"); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Load(older.ID); got.Title != "renamed" {
		t.Fatalf("Rename: title %q", got.Title)
	}
	if err := c.Delete(ch.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(ch.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load after Delete: %v, want ErrNotFound", err)
	}
	if err := c.Delete(ch.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
}

func TestChatBadInput(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenChats(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "../settings", `a\b`, "a/b", strings.Repeat("x", 65)} {
		if _, err := c.Load(id); err == nil {
			t.Errorf("Load(%q) accepted a bad id", id)
		}
		if err := c.Save(Chat{ID: id}); err == nil {
			t.Errorf("Save(%q) accepted a bad id", id)
		}
	}
	// A damaged file is reported by name and does not hide the good chats.
	good := NewChat("good", time.Now())
	if err := c.Save(good); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := c.List()
	if err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Fatalf("List error %v should name broken.json", err)
	}
	if len(list) != 1 || list[0].ID != good.ID {
		t.Fatalf("List kept %v, want only the good chat", list)
	}
	// It was moved aside, so the next start lists no error; the bytes are kept.
	aside, _ := filepath.Glob(filepath.Join(dir, "broken.json.corrupt-*"))
	if !errors.Is(err, ErrCorrupt) || len(aside) != 1 || !strings.Contains(err.Error(), aside[0]) {
		t.Fatalf("damaged chat: error %v, moved to %v", err, aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != "{not json" {
		t.Errorf("the moved file holds %q", b)
	}
	if _, err := c.List(); err != nil {
		t.Errorf("second List: %v", err)
	}
	// A killed writer's temporary file is removed when the folder is opened again.
	stale := filepath.Join(dir, "."+good.ID+".json.123"+tempSuffix)
	if err := os.WriteFile(stale, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenChats(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file kept (%v)", err)
	}
}

func TestWriteFileAtomicLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "f.json")
	for _, content := range []string{"one", "two, longer than one"} {
		if err := WriteFileAtomic(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("folder holds %v, want only f.json", names)
	}
	// A folder in the way makes a clear error and keeps no temporary file.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(blocked, []byte("x")); err == nil {
		t.Fatal("writing over a non-empty folder succeeded")
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".blocked.*.tmp"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}

func TestSettingsPersistence(t *testing.T) {
	p := SettingsPath(filepath.Join(t.TempDir(), "strata"))
	s, err := LoadSettings(p)
	if err != nil {
		t.Fatalf("missing file: %v", err)
	}
	if !reflect.DeepEqual(s, DefaultSettings()) {
		t.Fatalf("missing file gave %+v, want defaults", s)
	}
	s.Config.Threads = 6
	s.Config.MaxContext = 8192
	s.Config.KVType = "int8"
	s.WizardDone = true
	s.Mode = "cpu"
	for _, m := range []string{"a.gguf", "b.gguf", "a.gguf"} {
		s.AddRecent(m)
	}
	if err := SaveSettings(p, s); err != nil {
		t.Fatal(err)
	}
	got, err := LoadSettings(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
	}
	if want := []string{"a.gguf", "b.gguf"}; !reflect.DeepEqual(got.RecentModels, want) {
		t.Fatalf("recent %v, want %v", got.RecentModels, want)
	}

	bad := s
	bad.Config.KVType = "q3"
	if err := SaveSettings(p, bad); err == nil || !strings.Contains(err.Error(), "--kv") {
		t.Fatalf("invalid settings saved or unclear error: %v", err)
	}
	if got, _ := LoadSettings(p); got.Config.KVType != "int8" {
		t.Fatalf("a refused save changed the file: kv %q", got.Config.KVType)
	}

	if err := os.WriteFile(p, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = LoadSettings(p)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("damaged file: error %v should name %s", err, p)
	}
	if !reflect.DeepEqual(got, DefaultSettings()) {
		t.Fatalf("damaged file gave %+v, want defaults", got)
	}
	aside, _ := filepath.Glob(p + ".corrupt-*")
	if !errors.Is(err, ErrCorrupt) || len(aside) != 1 || !strings.Contains(err.Error(), aside[0]) {
		t.Fatalf("damaged settings: error %v, moved to %v", err, aside)
	}
	if _, err := LoadSettings(p); err != nil {
		t.Errorf("after the move: %v", err)
	}
}

// TestSettingsMigration: a settings file from before version 2 saved 0 for adaptive swaps and
// the PCIe share, the old defaults, and loads with auto for both (the share stays 0 beside
// the pinned-memory cap the wizard sets under WSL2); a version-2 file keeps the 0s the user
// chose; a file from a newer Strata loads with an error that says so.
func TestSettingsMigration(t *testing.T) {
	const auto = engine.Auto
	for _, tc := range []struct {
		name, file string
		adapt      int
		pcie       float64
		wantErr    string
	}{
		{"before versions", `{"config": {"AdaptEvery": 0, "PCIeFrac": 0, "Threads": 3}, "wizard_done": true}`, auto, auto, ""},
		{"before versions, swaps every 64", `{"config": {"AdaptEvery": 64, "PCIeFrac": 0.3}}`, 64, 0.3, ""},
		{"before versions, WSL2", `{"config": {"AdaptEvery": 0, "PCIeFrac": 0, "PinnedBudgetMiB": 1024}}`, auto, 0, ""},
		{"version 2, both off", `{"version": 2, "config": {"AdaptEvery": 0, "PCIeFrac": 0}}`, 0, 0, ""},
		{"version 2, absent keep the defaults", `{"version": 2, "config": {"Threads": 3}}`, auto, auto, ""},
		{"newer", `{"version": 99, "config": {"AdaptEvery": 0, "PCIeFrac": 0}}`, 0, 0, "settings version 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "settings.json")
			if err := os.WriteFile(p, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := LoadSettings(p)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("load: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), p)):
				t.Fatalf("load: error %v, want one naming %s and %q", err, p, tc.wantErr)
			}
			if s.Config.AdaptEvery != tc.adapt || s.Config.PCIeFrac != tc.pcie {
				t.Errorf("adapt every %d, pcie share %g; want %d, %g", s.Config.AdaptEvery, s.Config.PCIeFrac, tc.adapt, tc.pcie)
			}
			if tc.wantErr != "" {
				return
			}
			if s.Version != settingsVersion {
				t.Errorf("version %d after loading, want %d", s.Version, settingsVersion)
			}
			// saved and loaded again, nothing moves
			if err := SaveSettings(p, s); err != nil {
				t.Fatal(err)
			}
			again, err := LoadSettings(p)
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Errorf("round trip: %v\n got %+v\nwant %+v", err, again, s)
			}
		})
	}
}

func TestAddRecentKeepsAtMost(t *testing.T) {
	var s Settings
	for i := 0; i < maxRecent+3; i++ {
		s.AddRecent(string(rune('a'+i)) + ".gguf")
	}
	if len(s.RecentModels) != maxRecent || s.RecentModels[0] != string(rune('a'+maxRecent+2))+".gguf" {
		t.Fatalf("recent %v", s.RecentModels)
	}
}
