package tokens_test

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/tokens"
)

// BenchmarkEstimate measures the estimate of a turn's texts: English prose, the hot path of
// every run whose model has no known tokenizer, and text in Chinese and with emoji.
func BenchmarkEstimate(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"ascii-64B", strings.Repeat("The quick brown fox jumps. ", 3)[:64]},
		{"ascii-16KiB", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 373)[:16<<10]},
		{"cjk-16KiB", strings.Repeat("敏捷的棕色狐狸跳过了懒狗。", 420)[:16380]},
		{"mixed-16KiB", strings.Repeat("Deploy 🚀 the 服务 now, réglé. ", 480)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				tokens.Estimate(bc.text)
			}
		})
	}
}
