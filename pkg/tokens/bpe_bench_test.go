package tokens

import (
	"strings"
	"testing"
)

// benchTexts are 64 KiB of what a run counts: English prose, Go code and JSON mixed, and
// Chinese and Japanese text.
func benchTexts() []struct{ name, text string } {
	const size = 64 << 10
	unit := "The agent read the file, found 3 failing tests and fixed them; " +
		"it's done, isn't it? They'll re-run CI at 10:42.\n" +
		"func (s *Server) Handle(ctx context.Context, req *Request) (*Response, error) {\n" +
		"\tif err := s.check(ctx, req.ID); err != nil {\n" +
		"\t\treturn nil, fmt.Errorf(\"check %d: %w\", req.ID, err)\n\t}\n" +
		"\treturn &Response{OK: true}, nil\n}\n" +
		`{"tool": "write_file", "arguments": {"path": "src/main.go", "lines": [1, 20, 300], ` +
		`"force": false}}` + "\n\n"
	mixed := strings.Repeat(unit, size/len(unit)+1)[:size]
	cjkUnit := "敏捷的棕色狐狸跳过了懒狗。日本語のテキストを数えます、東京は晴れ。"
	cjk := strings.Repeat(cjkUnit, size/len(cjkUnit)+1)[:size]
	cjk = strings.ToValidUTF8(cjk, "") // the last character whole or not at all
	return []struct{ name, text string }{{"mixed-64KiB", mixed}, {"cjk-64KiB", cjk}}
}

// BenchmarkPreTokenize measures the pre-tokenizer alone: cutting text into the pieces that
// BPE merges.
func BenchmarkPreTokenize(b *testing.B) {
	benchEncodings(b, func(bp *bpe, text string) {
		for range bp.pieces(text) { // every piece cut, none used
		}
	})
}

// BenchmarkBPECount measures counting a text's tokens as a counter does when its cache does
// not know the text: cut into segments, pre-tokenized and merged.
func BenchmarkBPECount(b *testing.B) {
	benchEncodings(b, func(bp *bpe, text string) {
		for segment := range segments(text) {
			bp.count(segment)
		}
	})
}

// benchEncodings runs work on each of benchTexts with each encoding's vocabulary, a
// sub-benchmark each, reporting the text's bytes a second.
func benchEncodings(b *testing.B, work func(bp *bpe, text string)) {
	for _, enc := range encodings {
		bp, err := loadVocabulary(enc.name, enc.piece)
		if err != nil {
			b.Fatal(err)
		}
		for _, bt := range benchTexts() {
			b.Run(enc.name+"/"+bt.name, func(b *testing.B) {
				b.SetBytes(int64(len(bt.text)))
				for b.Loop() {
					work(bp, bt.text)
				}
			})
		}
	}
}
