package textcut_test

import (
	"testing"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/textcut"
)

func TestBoundary(t *testing.T) {
	const mixed = "aé😀b" // 1, 2, 4 and 1 bytes: a=0, é=1..2, 😀=3..6, b=7
	for _, tc := range []struct {
		name string
		s    string
		n    int
		want int
	}{
		{"ascii", "hello", 3, 3},
		{"at a character's start", mixed, 3, 3},
		{"inside a two-byte character", mixed, 2, 1},
		{"inside a four-byte character", mixed, 6, 3},
		{"past the end", mixed, 100, len(mixed)},
		{"at the end", mixed, len(mixed), len(mixed)},
		{"at the start", mixed, 0, 0},
		{"negative", mixed, -1, 0},
		{"only continuation bytes", "\x80\x80\x80\x80", 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := textcut.Boundary(tc.s, tc.n)
			if got != tc.want {
				t.Fatalf("Boundary(%q, %d) = %d, want %d", tc.s, tc.n, got, tc.want)
			}
			if utf8.ValidString(tc.s) && (!utf8.ValidString(tc.s[:got]) || !utf8.ValidString(tc.s[got:])) {
				t.Errorf("cut at %d splits a character of %q", got, tc.s)
			}
		})
	}
}

func TestTail(t *testing.T) {
	const mixed = "aé😀b" // 1, 2, 4 and 1 bytes: a=0, é=1..2, 😀=3..6, b=7
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"one byte", 1, "b"},
		{"ends inside a four-byte character", 3, "b"},
		{"a whole four-byte character", 5, "😀b"},
		{"ends inside a two-byte character", 6, "😀b"},
		{"all of it", len(mixed), mixed},
		{"past the start", 100, mixed},
		{"none", 0, ""},
		{"negative", -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := textcut.Tail(mixed, tc.n); got != tc.want {
				t.Errorf("Tail(%q, %d) = %q, want %q", mixed, tc.n, got, tc.want)
			}
		})
	}
}

func TestMiddle(t *testing.T) {
	for _, tc := range []struct {
		s, mark string
		n       int
		want    string
	}{
		{"short", "…", 10, "short"},
		{"abcdefghij", "…", 10, "abcdefghij"},
		{"abcdefghijk", "…", 9, "abc…ijk"},
		{"ééééé", " … ", 9, "é … é"}, // cut between characters, never inside one
		{"abcdef", "……", 2, "……"},
	} {
		got := textcut.Middle(tc.s, tc.n, tc.mark)
		if got != tc.want || (len(tc.s) > tc.n && len(got) > max(tc.n, len(tc.mark))) {
			t.Errorf("Middle(%q, %d, %q) = %q, want %q", tc.s, tc.n, tc.mark, got, tc.want)
		}
	}
}
