package store

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writerEnv names the folder the writer child writes in; set only in the child.
const writerEnv = "STRATA_STORE_WRITER_DIR"

// crashChatID is the chat the writer child rewrites.
const crashChatID = "20261201-120000-crash"

// versionedChat is version v of the test chat: its title names v and every message repeats
// it, so a file mixing two versions, or cut short, is caught.
func versionedChat(v int) Chat {
	ch := Chat{ID: crashChatID, Title: "v" + strconv.Itoa(v), Created: time.Unix(0, 0).UTC(), Updated: time.Unix(int64(v), 0).UTC()}
	for i := range v%5 + 1 {
		ch.Messages = append(ch.Messages, Message{Role: "user", Content: strings.Repeat(strconv.Itoa(v)+" ", 2000+i)})
	}
	return ch
}

// checkChat says what is wrong with a chat read back, or "".
func checkChat(ch Chat) (int, string) {
	v, err := strconv.Atoi(strings.TrimPrefix(ch.Title, "v"))
	if err != nil {
		return 0, fmt.Sprintf("title %q", ch.Title)
	}
	want := versionedChat(v)
	if len(ch.Messages) != len(want.Messages) {
		return v, fmt.Sprintf("version %d with %d messages, want %d", v, len(ch.Messages), len(want.Messages))
	}
	for i := range want.Messages {
		if ch.Messages[i].Content != want.Messages[i].Content {
			return v, fmt.Sprintf("version %d: message %d differs", v, i)
		}
	}
	return v, ""
}

// TestWriterChild is the process TestKilledWriterKeepsOldOrNew kills: it rewrites one chat
// and the settings, version after version, until it is killed (or two seconds pass). It
// does nothing in an ordinary test run.
func TestWriterChild(t *testing.T) {
	dir := os.Getenv(writerEnv)
	if dir == "" {
		return
	}
	c, err := OpenChats(filepath.Join(dir, "chats"))
	if err != nil {
		t.Fatal(err)
	}
	v := 0
	if ch, err := c.Load(crashChatID); err == nil {
		v, _ = checkChat(ch)
	}
	fmt.Println("ready")
	settings := SettingsPath(dir)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		v++
		if err := c.Save(versionedChat(v)); err != nil {
			t.Fatal(err)
		}
		s := DefaultSettings()
		s.SystemPrompt = strings.Repeat("v"+strconv.Itoa(v)+" ", 500)
		if err := SaveSettings(settings, s); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKilledWriterKeepsOldOrNew starts this test binary as a writer child again and again,
// kills it (SIGKILL; TerminateProcess on Windows) at a random moment of its writes, and
// reopens the files: every time the chat and the settings are one whole version, never
// empty, half-written or unreadable, and no file was moved aside as damaged.
func TestKilledWriterKeepsOldOrNew(t *testing.T) {
	const kills = 200
	dir := t.TempDir()
	c, err := OpenChats(filepath.Join(dir, "chats"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Save(versionedChat(0)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(28, 1))
	last, progressed := 0, 0
	for i := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriterChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), writerEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("kill %d: the writer did not start (%q, %v)", i, line, err)
		}
		time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		ch, err := c.Load(crashChatID)
		if err != nil {
			t.Fatalf("kill %d: chat unreadable: %v", i, err)
		}
		v, bad := checkChat(ch)
		if bad != "" {
			t.Fatalf("kill %d: chat is not one whole version: %s", i, bad)
		}
		if v < last {
			t.Fatalf("kill %d: chat went back from version %d to %d", i, last, v)
		}
		if v > last {
			progressed++
		}
		last = v
		if _, err := os.Stat(SettingsPath(dir)); err == nil {
			s, err := LoadSettings(SettingsPath(dir))
			if err != nil {
				t.Fatalf("kill %d: settings unreadable: %v", i, err)
			}
			if f := strings.Fields(s.SystemPrompt); len(f) != 500 || strings.Count(s.SystemPrompt, f[0]) != 500 {
				t.Fatalf("kill %d: settings are not one whole version (%d words)", i, len(f))
			}
		}
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "*", "*.corrupt-*")); len(aside) > 0 {
		t.Errorf("files moved aside as damaged: %v", aside)
	}
	// The writer starts writing as it says ready, so every kill lands in a write or
	// between two; some runs must have finished writes too (on a slow disk most kills
	// land in the first one, which is the case that matters most).
	if progressed == 0 {
		t.Errorf("the chat never advanced in %d runs: the writer never finished a write", kills)
	}
	t.Logf("%d kills; the chat advanced in %d of them, to version %d", kills, progressed, last)
}
