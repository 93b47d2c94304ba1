package store

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzChatFile puts arbitrary bytes in a chat file: List and Load never panic, a file that
// does not parse is moved aside (and the next List is clean), and a chat that loads saves
// and loads back the same.
func FuzzChatFile(f *testing.F) {
	ch := versionedChat(3)
	ch.Messages = append(ch.Messages, Message{Role: "assistant", Content: "ok", Thinking: "hm", TokensPerSec: 3.5, Stopped: true})
	good, _ := jsonOf(ch)
	f.Add(good)
	f.Add([]byte(`{"id":"20261201-120000-crash","messages":null}`))
	f.Add([]byte(`{"id":"other"}`))
	f.Add([]byte("{not json"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		c, err := OpenChats(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, crashChatID+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, lerr := c.Load(crashChatID)
		list, err := c.List()
		if lerr == nil {
			if err != nil || len(list) != 1 {
				t.Fatalf("Load worked but List gave %d chats and %v", len(list), err)
			}
			if err := c.Save(got); err != nil {
				t.Fatalf("a loaded chat does not save: %v", err)
			}
			again, err := c.Load(crashChatID)
			if err != nil || !reflect.DeepEqual(normalise(again), normalise(got)) {
				t.Fatalf("save and load changed the chat: %v\n%+v\n%+v", err, again, got)
			}
			return
		}
		if errors.Is(lerr, errNotAChat) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("an unparsable chat was not moved aside: %v", err)
		}
		if _, err := c.List(); err != nil && errors.Is(lerr, errNotAChat) {
			t.Fatalf("List after the move: %v", err)
		}
	})
}

// FuzzSettingsFile puts arbitrary bytes in settings.json: LoadSettings never panics, always
// gives settings, moves an unparsable file aside, and settings that load and are valid
// save and load back the same.
func FuzzSettingsFile(f *testing.F) {
	s := DefaultSettings()
	s.AddRecent("/models/a.gguf")
	s.SystemPrompt = "be brief"
	good, _ := jsonOf(s)
	f.Add(good)
	f.Add([]byte(`{"config":{"threads":-3,"kv":"q3"}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := SettingsPath(t.TempDir())
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := LoadSettings(p)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return // unreadable, not damaged: nothing moved
			}
			if _, err := LoadSettings(p); err != nil {
				t.Fatalf("after the move: %v", err)
			}
			return
		}
		if got.Config.Validate() != nil {
			return // SaveSettings refuses it, and the app shows why
		}
		if err := SaveSettings(p, got); err != nil {
			t.Fatalf("valid settings do not save: %v", err)
		}
		again, err := LoadSettings(p)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("save and load changed the settings: %v\n%+v\n%+v", err, again, got)
		}
	})
}

// normalise drops what JSON cannot carry exactly (monotonic clock readings, locations).
func normalise(c Chat) Chat {
	c.Created, c.Updated = c.Created.Round(0).UTC(), c.Updated.Round(0).UTC()
	return c
}

// jsonOf is v as the store writes it.
func jsonOf(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }
