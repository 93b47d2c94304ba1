package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Message is one turn of a saved chat.
type Message struct {
	Role         string  `json:"role"` // "user" or "assistant"
	Content      string  `json:"content"`
	Thinking     string  `json:"thinking,omitempty"`
	TokensPerSec float64 `json:"tokens_per_sec,omitempty"` // decode speed of this answer
	Stopped      bool    `json:"stopped,omitempty"`        // the user stopped this answer
	Cut          bool    `json:"cut,omitempty"`            // the remote server's stream broke mid-answer
}

// Chat is one conversation as it is saved on disk.
type Chat struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Model    string    `json:"model,omitempty"` // path of the model it was held with
	System   string    `json:"system,omitempty"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	Messages []Message `json:"messages"`
}

// ErrNotFound is returned for a chat id with no file.
var ErrNotFound = errors.New("no such chat")

// Chats is the folder of saved chats, one <id>.json per chat.
type Chats struct {
	dir string
}

// OpenChats uses dir (created if missing) as the chats folder and removes the temporary
// files a killed writer left there.
func OpenChats(dir string) (*Chats, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: chats folder %s: %w", dir, err)
	}
	stale, _ := filepath.Glob(filepath.Join(dir, ".*"+tempSuffix))
	for _, p := range stale {
		os.Remove(p)
	}
	return &Chats{dir: dir}, nil
}

// errNotAChat marks a chat file that does not parse.
var errNotAChat = errors.New("not a chat file")

// Dir is the chats folder.
func (c *Chats) Dir() string { return c.dir }

// NewChat returns an empty chat with a fresh id; it is not saved until Save.
func NewChat(title string, now time.Time) Chat {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
	return Chat{ID: id, Title: title, Created: now, Updated: now}
}

// validID accepts the ids NewChat makes and refuses anything that could leave the folder.
func validID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("store: chat id %q: empty or too long", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("store: chat id %q: only letters, digits, - and _ are allowed", id)
		}
	}
	return nil
}

func (c *Chats) path(id string) string { return filepath.Join(c.dir, id+".json") }

// Save writes the chat atomically.
func (c *Chats) Save(ch Chat) error {
	if err := validID(ch.ID); err != nil {
		return err
	}
	data, err := json.MarshalIndent(ch, "", "  ")
	if err != nil {
		return fmt.Errorf("store: chat %s: %w", ch.ID, err)
	}
	return WriteFileAtomic(c.path(ch.ID), append(data, '\n'))
}

// Load reads one chat.
func (c *Chats) Load(id string) (Chat, error) {
	if err := validID(id); err != nil {
		return Chat{}, err
	}
	p := c.path(id)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Chat{}, fmt.Errorf("store: chat %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Chat{}, fmt.Errorf("store: %w", err)
	}
	var ch Chat
	if err := json.Unmarshal(data, &ch); err != nil {
		return Chat{}, fmt.Errorf("store: %s: %w: %w", p, errNotAChat, err)
	}
	if ch.ID != id {
		return Chat{}, fmt.Errorf("store: %s: holds chat %q, not %q", p, ch.ID, id)
	}
	return ch, nil
}

// List returns every readable chat, most recently updated first. Files that cannot be read
// are skipped and reported in the returned error (joined), so one damaged file does not
// hide the others; a file that does not parse is moved aside (MoveAside, ErrCorrupt).
func (c *Chats) List() ([]Chat, error) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("store: chats folder %s: %w", c.dir, err)
	}
	var chats []Chat
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		ch, err := c.Load(strings.TrimSuffix(name, ".json"))
		if errors.Is(err, errNotAChat) {
			p := filepath.Join(c.dir, name)
			if aside, merr := MoveAside(p, time.Now()); merr == nil {
				err = fmt.Errorf("store: %s: %w to %s (%v)", p, ErrCorrupt, aside, err)
			} else {
				err = errors.Join(err, merr)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		chats = append(chats, ch)
	}
	sort.SliceStable(chats, func(i, j int) bool {
		if !chats[i].Updated.Equal(chats[j].Updated) {
			return chats[i].Updated.After(chats[j].Updated)
		}
		return chats[i].ID > chats[j].ID
	})
	return chats, errors.Join(errs...)
}

// Rename changes a saved chat's title.
func (c *Chats) Rename(id, title string) error {
	ch, err := c.Load(id)
	if err != nil {
		return err
	}
	ch.Title = title
	return c.Save(ch)
}

// Delete removes a saved chat.
func (c *Chats) Delete(id string) error {
	if err := validID(id); err != nil {
		return err
	}
	err := os.Remove(c.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: chat %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}
