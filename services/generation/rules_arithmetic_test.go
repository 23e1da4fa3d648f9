package generation

import "testing"

func TestArithmetic(t *testing.T) {
	for in, want := range map[string]string{
		"what is 6 times 7":             "6*7",
		"calculate (2+3)*4":             "(2+3)*4",
		"What is 12 minus 5?":           "12-5",
		"what's 3 x 4.":                 "3*4",
		"compute 100 divided by 8":      "100/8",
		"what is 2 + 2 (roughly)":       "2+2",
		"how much is 7 multiplied by 6": "7*6",
	} {
		if got, ok := arithmetic(in); !ok || got != want {
			t.Errorf("arithmetic(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"what is 42", "tell me a story", "call me at 5"} {
		if got, ok := arithmetic(in); ok {
			t.Errorf("arithmetic(%q) = %q, want none", in, got)
		}
	}
}
