package tokens_test

import (
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
)

func TestFitsWindow(t *testing.T) {
	msgs := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "12345678"}} // 4 + 2 tokens
	tools := []*typev1.Tool{{Name: "calc"}}                                       // 1 token
	tests := []struct {
		window, buffer, output int64
		need                   int64
		fits                   bool
	}{
		{window: 0, need: 0, fits: true},
		{window: 17, buffer: 5, output: 5, need: 7, fits: true},
		{window: 16, buffer: 5, output: 5, need: 7, fits: false},
	}
	for _, tc := range tests {
		need, fits := tokens.FitsWindow("some-model", msgs, tools, tc.window, tc.buffer, tc.output)
		if need != tc.need || fits != tc.fits {
			t.Errorf("window %d, buffer %d, output %d: %d, %v; want %d, %v",
				tc.window, tc.buffer, tc.output, need, fits, tc.need, tc.fits)
		}
	}
}
