package tokenizer

// addedTrie finds added tokens in text, leftmost-longest, like the Aho-Corasick matcher of
// HF tokenizers. The root is an array because it is consulted at every byte.
type addedTrie struct {
	root  [256]int32 // child node of the root per first byte, 0 = none
	nodes []trieNode // nodes[0] is unused (0 means "no node")
}

type trieNode struct {
	next map[byte]int32
	tok  int32 // token id ending here, -1 if none
}

func (t *addedTrie) empty() bool { return len(t.nodes) == 0 }

func (t *addedTrie) add(s string, id int32) {
	if s == "" {
		return
	}
	if len(t.nodes) == 0 {
		t.nodes = append(t.nodes, trieNode{tok: -1})
	}
	n := t.root[s[0]]
	if n == 0 {
		n = int32(len(t.nodes))
		t.nodes = append(t.nodes, trieNode{tok: -1})
		t.root[s[0]] = n
	}
	for i := 1; i < len(s); i++ {
		nd := &t.nodes[n]
		c, ok := nd.next[s[i]]
		if !ok {
			c = int32(len(t.nodes))
			if nd.next == nil {
				nd.next = make(map[byte]int32)
			}
			nd.next[s[i]] = c
			t.nodes = append(t.nodes, trieNode{tok: -1})
		}
		n = c
	}
	if t.nodes[n].tok < 0 { // the first registration of a string wins
		t.nodes[n].tok = id
	}
}

// longest returns the id and end of the longest token starting at i, or (-1, i).
func (t *addedTrie) longest(s string, i int) (int32, int) {
	n := t.root[s[i]]
	tok, end := int32(-1), i
	for j := i + 1; n != 0; j++ {
		nd := &t.nodes[n]
		if nd.tok >= 0 {
			tok, end = nd.tok, j
		}
		if j >= len(s) || nd.next == nil {
			break
		}
		n = nd.next[s[j]]
	}
	return tok, end
}

// split walks s and calls emit for each text gap (id -1) and each matched token. A matched
// token that skip reports is left inside the text, and matching resumes after it, which is
// what HF does with encode_special_tokens for special tokens.
func (t *addedTrie) split(s string, skip func(int32) bool, emit func(text string, id int32)) {
	if t.empty() {
		if s != "" {
			emit(s, -1)
		}
		return
	}
	start := 0
	for i := 0; i < len(s); {
		id, end := t.longest(s, i)
		if id < 0 {
			i++
			continue
		}
		if !skip(id) {
			if start < i {
				emit(s[start:i], -1)
			}
			emit(s[i:end], id)
			start = end
		}
		i = end
	}
	if start < len(s) {
		emit(s[start:], -1)
	}
}
