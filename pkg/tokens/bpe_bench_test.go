package tokens

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
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
// sub-benchmark each, reporting the text's bytes a second and the CPU time of an operation
// (cpu-ns/op: user and system time of the whole process), which varies less than its time on a
// machine that other work shares.
func benchEncodings(b *testing.B, work func(bp *bpe, text string)) {
	for _, enc := range encodings {
		bp, err := loadVocabulary(enc.name, enc.piece)
		if err != nil {
			b.Fatal(err)
		}
		for _, bt := range benchTexts() {
			b.Run(enc.name+"/"+bt.name, func(b *testing.B) {
				b.SetBytes(int64(len(bt.text)))
				cpu := cpuTime()
				for b.Loop() {
					work(bp, bt.text)
				}
				b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBPEMerge measures the two ways merge finds the lowest pair, a scan of the parts
// and a heap, on a piece of Chinese text of each length in bytes, which sets mergeScanMax.
// Pieces of CJK text run to 256 bytes (the segments' hard cut); a segment cut at a word
// boundary may hold longer ones.
func BenchmarkBPEMerge(b *testing.B) {
	bp, err := loadVocabulary(EncodingO200K, o200kPiece)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("敏捷的棕色狐狸跳过了懒狗日本語のテキストを数えます東京は晴れ", 40)
	for _, n := range []int{6, 12, 18, 24, 30, 45, 60, 90, 120, 180, 360, 1500} {
		piece := text[:n]
		b.Run(fmt.Sprintf("scan/bytes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			parts := make([]part, n)
			for b.Loop() {
				bp.mergeScan(bp.byteParts(piece, parts))
			}
		})
		b.Run(fmt.Sprintf("heap/bytes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			var s mergeScratch
			for b.Loop() {
				bp.mergeHeap(piece, &s)
			}
		})
	}
}

// BenchmarkNewBPE measures making a counter's tables from a vocabulary read from its BPE file,
// which a process does once for each encoding it counts with.
func BenchmarkNewBPE(b *testing.B) {
	for _, enc := range encodings {
		vocabulary, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe(enc.name + ".tiktoken")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(enc.name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if _, err := newBPE(enc.piece, vocabulary); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
