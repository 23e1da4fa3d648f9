package tokens

import (
	"strings"
	"testing"
)

// A text is encoded once: counting it again, as every turn counts the conversation again, is
// answered from the cache; another text of the same length is encoded.
func TestTextCacheCountsOnce(t *testing.T) {
	encoded := map[string]int{}
	encode := func(text string) int64 {
		encoded[text]++
		return int64(len(strings.Fields(text)))
	}
	c := newTextCache(8)
	for range 3 {
		for _, text := range []string{"one two three", "one-two three", "four"} {
			if got, want := c.count(text, encode), int64(len(strings.Fields(text))); got != want {
				t.Errorf("count(%q) = %d, want %d", text, got, want)
			}
		}
	}
	for text, n := range encoded {
		if n != 1 {
			t.Errorf("%q was encoded %d times, want once", text, n)
		}
	}
	if len(encoded) != 3 {
		t.Errorf("encoded %d texts, want 3", len(encoded))
	}
}

// The cache forgets the least recently used texts beyond its size.
func TestTextCacheBounded(t *testing.T) {
	encodes := 0
	encode := func(string) int64 { encodes++; return 1 }
	c := newTextCache(2)
	c.count("a", encode)
	c.count("b", encode)
	c.count("a", encode) // a is now the most recent
	c.count("c", encode) // forgets b
	c.count("a", encode)
	if encodes != 3 {
		t.Fatalf("%d encodes before b is counted again, want 3", encodes)
	}
	c.count("b", encode)
	if encodes != 4 {
		t.Errorf("%d encodes, want b encoded again (4)", encodes)
	}
}
