package serve

import (
	"strings"
	"testing"
)

// Stop sequences split across streamed pieces are found, and nothing of them is sent.
func TestStopFilterAcrossPieces(t *testing.T) {
	cases := []struct {
		pieces []string
		stops  []string
		want   string
		hit    bool
	}{
		{[]string{"hel", "lo wo", "rld"}, []string{"o w"}, "hell", true},
		{[]string{"ab", "c", "d"}, []string{"cx", "bcd"}, "a", true},
		{[]string{"a<", "|e", "nd", "|>b"}, []string{"<|end|>"}, "a", true},
		{[]string{"a<", "|x"}, []string{"<|end|>"}, "a<|x", false},
		{[]string{"plain"}, nil, "plain", false},
	}
	for _, c := range cases {
		f := &stopFilter{stops: c.stops}
		var got strings.Builder
		hit := false
		for _, p := range c.pieces {
			out, h := f.feed(p)
			got.WriteString(out)
			hit = hit || h
		}
		if !hit {
			got.WriteString(f.flush())
		}
		if got.String() != c.want || hit != c.hit {
			t.Errorf("%q with stops %q: got %q (hit %v), want %q (hit %v)", c.pieces, c.stops, got.String(), hit, c.want, c.hit)
		}
	}
}

func TestToolHold(t *testing.T) {
	h := &toolHold{format: callsHermes}
	var streamed strings.Builder
	for _, p := range []string{"Let me look.", "\n<tool", "_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>",
		"\n<tool_call>\n{\"name\": \"now\", \"arguments\": \"{}\"}\n</tool_call>"} {
		streamed.WriteString(h.feed(p))
	}
	calls, rest := h.finish("")
	if streamed.String() != "Let me look.\n" {
		t.Errorf("streamed %q: the call's text leaked", streamed.String())
	}
	if len(calls) != 2 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city": "Oslo", "unit": "c"}` ||
		calls[1].Function.Name != "now" || calls[1].Function.Arguments != "{}" || calls[0].ID == "" || calls[0].ID == calls[1].ID {
		t.Errorf("calls %+v", calls)
	}
	if rest != "" {
		t.Errorf("rest %q, want nothing", rest)
	}

	// A malformed call is returned as text rather than lost.
	h = &toolHold{format: callsHermes}
	h.feed("x <tool_call>{not json}</tool_call>")
	calls, rest = h.finish("")
	if len(calls) != 0 || rest != "<tool_call>{not json}</tool_call>" {
		t.Errorf("malformed: calls %+v, rest %q", calls, rest)
	}
}

func TestCheckHost(t *testing.T) {
	for _, c := range []struct {
		host, key string
		ok        bool
	}{
		{"127.0.0.1", "", true}, {"localhost", "", true}, {"::1", "", true}, {"[::1]", "", true},
		{"0.0.0.0", "", false}, {"", "", false}, {"192.168.1.5", "", false}, {"0.0.0.0", "k", true},
	} {
		if err := CheckHost(c.host, c.key); (err == nil) != c.ok {
			t.Errorf("CheckHost(%q, key %q) = %v, want ok %v", c.host, c.key, err, c.ok)
		}
	}
}

func TestHarmonyCalls(t *testing.T) {
	raw := "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"
	h := &toolHold{format: callsHarmony}
	if out := h.feed(`{"city":"Paris"}`); out != "" {
		t.Errorf("streamed %q before the call was read", out)
	}
	calls, rest := h.finish(raw)
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris"}` || rest != "" {
		t.Errorf("calls %+v, rest %q", calls, rest)
	}
	h = &toolHold{format: callsHarmony}
	h.feed("Just an answer.")
	if calls, rest := h.finish("<|channel|>final<|message|>Just an answer.<|return|>"); len(calls) != 0 || rest != "Just an answer." {
		t.Errorf("no call: calls %+v, rest %q", calls, rest)
	}
	for tmpl, want := range map[string]string{
		"{{ messages }}":                       callsNone,
		"{% if tools %}<tool_call>{% endif %}": callsHermes,
		"{% if tools %}<|channel|>commentary to=functions.{% endif %}": callsHarmony,
	} {
		if got := callFormat(tmpl); got != want {
			t.Errorf("callFormat(%q) = %q, want %q", tmpl, got, want)
		}
	}
}
