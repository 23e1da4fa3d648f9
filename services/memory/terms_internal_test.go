package memory

import (
	"slices"
	"testing"
)

// terms splits words at anything but letters and digits, and the runs of a script written
// without spaces into their overlapping pairs of characters, one run per script.
func TestTerms(t *testing.T) {
	for text, want := range map[string][]string{
		"The user's DB-01 runs Café": {"user", "s", "db", "01", "runs", "café"},
		"東京に":                        {"東京", "京に"},
		"東":                          {"東"},
		"東京タワーは2024年":                {"東京", "京タ", "タワ", "ワー", "ーは", "2024", "年"},
		"大阪市とbangkokกรุงเทพ": {"大阪", "阪市", "市と", "bangkok", "กร", "รุ", "ุง", "งเ", "เท", "ทพ"},
		"喝茶，吃饭":              {"喝茶", "吃饭"},
		"서울에 살아요":            {"서울에", "살아요"},
		"":                   nil,
	} {
		if got := terms(text); !slices.Equal(got, want) {
			t.Errorf("terms(%q) = %q, want %q", text, got, want)
		}
	}
}
