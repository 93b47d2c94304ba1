package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestContextFullPolicies: a conversation longer than the context is refused by name with
// ContextStop, and with ContextDropOldest the oldest turns are left out, the system prompt
// kept, and the answer written; a full context during an answer stops it with StopContext.
func TestContextFullPolicies(t *testing.T) {
	m := openCPU(t, synthModel(t)) // MaxContext 256; its byte-level vocabulary encodes any text
	capacity := m.cfg.MaxContext
	msgs := []Message{{Role: RoleSystem, Content: "SYSTEM-PROMPT stays"}}
	for i := range 12 {
		msgs = append(msgs, Message{Role: RoleUser, Content: strings.Repeat("question ", 4) + string(rune('a'+i))},
			Message{Role: RoleAssistant, Content: strings.Repeat("answer ", 4)})
	}
	msgs = append(msgs, Message{Role: RoleUser, Content: "the newest question"})
	all, err := m.text.chatTokens(msgs, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) <= capacity {
		t.Fatalf("the test conversation is %d tokens, not more than the context's %d", len(all), capacity)
	}
	sp := Sampling{MaxTokens: 8, IgnoreEOS: true}

	stop := m.NewSession(SessionOptions{})
	if _, err := stop.Chat(context.Background(), msgs, sp, nil); !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "drop-oldest") {
		t.Fatalf("stop policy: %v, want ErrContextFull naming the other choice", err)
	}

	drop := m.NewSession(SessionOptions{ContextPolicy: ContextDropOldest})
	res, err := drop.Chat(context.Background(), msgs, sp, nil)
	if err != nil {
		t.Fatalf("drop-oldest: %v", err)
	}
	if res.Dropped <= 0 || res.Dropped >= len(msgs)-1 || len(res.Tokens) != sp.MaxTokens {
		t.Fatalf("drop-oldest: dropped %d of %d messages, %d tokens", res.Dropped, len(msgs), len(res.Tokens))
	}
	ids, dropped, err := drop.fitContext(msgs, nil, sp)
	if err != nil || dropped != res.Dropped || len(ids)+sp.MaxTokens > capacity {
		t.Fatalf("fitContext: %d tokens, %d dropped, %v", len(ids), dropped, err)
	}
	prompt := m.text.tok.Decode(ids)
	if !strings.Contains(prompt, "SYSTEM-PROMPT stays") || !strings.Contains(prompt, "the newest question") || strings.Contains(prompt, "question a") {
		t.Errorf("kept prompt %q: want the system prompt and the newest question, not the oldest", prompt)
	}
	// One message fewer dropped would not fit: the least was dropped.
	kept := append([]Message{msgs[0]}, msgs[1+dropped-1:]...)
	if more, _ := m.text.chatTokens(kept, nil, nil, true); len(more)+sp.MaxTokens <= capacity {
		t.Errorf("dropped %d messages where %d would do", dropped, dropped-1)
	}

	// The newest message alone too long: a clear error, not a crash, under either policy.
	huge := []Message{{Role: RoleUser, Content: strings.Repeat("x", 4*capacity)}}
	if _, err := drop.Chat(context.Background(), huge, sp, nil); !errors.Is(err, ErrContextFull) {
		t.Errorf("a message longer than the context: %v", err)
	}
	// A conversation that fits but leaves little room stops at the context's end.
	short := m.NewSession(SessionOptions{})
	res, err = short.Chat(context.Background(), []Message{{Role: RoleUser, Content: strings.Repeat("y ", capacity/2-20)}}, Sampling{IgnoreEOS: true}, nil)
	if err != nil || res.Stop != StopContext {
		t.Errorf("answer to the context's end: stop %q, %v", res.Stop, err)
	}
}

func TestParseContextPolicy(t *testing.T) {
	for in, want := range map[string]ContextPolicy{"": ContextStop, "stop": ContextStop, "drop-oldest": ContextDropOldest} {
		if got, err := ParseContextPolicy(in); got != want || err != nil {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	var ce *ConfigError
	if _, err := ParseContextPolicy("truncate"); !errors.As(err, &ce) || ce.Flag != "context-full" {
		t.Errorf("unknown policy: %v", err)
	}
}
