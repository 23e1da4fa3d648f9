package tokens

import (
	"iter"
	"log/slog"
	"strings"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/textcut"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// BPE encodings of OpenAI models.
const (
	// EncodingCL100K is the tokenizer of GPT-4, GPT-3.5 Turbo and the text-embedding-3 and
	// ada-002 embedding models.
	EncodingCL100K = "cl100k_base"
	// EncodingO200K is the tokenizer of GPT-4o, GPT-4.1, GPT-4.5, GPT-5, gpt-oss and the
	// o-series reasoning models.
	EncodingO200K = "o200k_base"
)

// families maps model-name prefixes to encodings, most specific first: a model matches a
// prefix when its name equals it or continues it with '-' or '.' (or, for a prefix ending in
// '-', with anything).
var families = []struct {
	prefix   string
	encoding string
}{
	{"gpt-4o", EncodingO200K},
	{"chatgpt-4o", EncodingO200K},
	{"gpt-4.1", EncodingO200K},
	{"gpt-4.5", EncodingO200K},
	{"gpt-5", EncodingO200K},
	{"gpt-oss", EncodingO200K},
	{"o1", EncodingO200K},
	{"o3", EncodingO200K},
	{"o4", EncodingO200K},
	{"gpt-4", EncodingCL100K},
	{"gpt-3.5-turbo", EncodingCL100K},
	{"gpt-35-turbo", EncodingCL100K}, // Azure's spelling
	{"text-embedding-3-", EncodingCL100K},
	{"text-embedding-ada-002", EncodingCL100K},
}

// EncodingFor returns the BPE encoding of an OpenAI-family model, or EncodingEstimate for any
// other model. The name is matched case-insensitively after dropping a routing prefix such
// as "openai/" (OpenRouter) and ignoring a ":tag" suffix (Ollama).
func EncodingFor(model string) string {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	name, _, _ = strings.Cut(name, ":")
	for _, f := range families {
		rest, ok := strings.CutPrefix(name, f.prefix)
		if ok && (rest == "" || rest[0] == '-' || rest[0] == '.' || strings.HasSuffix(f.prefix, "-")) {
			return f.encoding
		}
	}
	return EncodingEstimate
}

// ForModel returns the Counter of model: its BPE tokenizer for OpenAI-family models (see
// EncodingFor), the Estimator for every other model. A tokenizer is loaded once, on first
// use, from BPE files compiled into the binary.
func ForModel(model string) Counter {
	switch enc := EncodingFor(model); enc {
	case EncodingCL100K:
		return cl100k()
	case EncodingO200K:
		return o200k()
	default:
		return Estimator
	}
}

var (
	cl100k = sync.OnceValue(func() Counter { return loadBPE(EncodingCL100K, cl100kPiece) })
	o200k  = sync.OnceValue(func() Counter { return loadBPE(EncodingO200K, o200kPiece) })
)

// loadBPE returns the counter of a BPE encoding, which remembers the counts of the texts it
// has encoded (textCache). The BPE files ship inside the binary (tiktoken-go-loader), so
// loading only fails when they are corrupt; the estimate then stands in, with an error log.
func loadBPE(encoding string, piece func(string) int) Counter {
	b, err := loadVocabulary(encoding, piece)
	if err != nil {
		slog.Error("tokenizer unavailable, counting with the estimate", "encoding", encoding, "error", err)
		return Estimator
	}
	encode := func(text string) int64 {
		var n int64
		for segment := range segments(text) {
			// Ordinary encoding: text that looks like a special token is counted as text, as
			// providers do for user content.
			n += b.count(segment)
		}
		return n
	}
	cache := newTextCache(cachedTexts)
	return &counter{encoding: encoding, text: func(text string) int64 { return cache.count(text, encode) }}
}

// loadVocabulary reads an encoding's BPE file from those compiled into the binary and returns
// its counter, which cuts text with piece (cl100kPiece, o200kPiece).
func loadVocabulary(encoding string, piece func(string) int) (*bpe, error) {
	vocabulary, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe(encoding + ".tiktoken")
	if err != nil {
		return nil, err
	}
	return newBPE(piece, vocabulary)
}

// Segment sizes of BPE counting, in bytes.
const (
	// segmentBytes is the most text encoded at once.
	segmentBytes = 2048
	// hardCutBytes is the size of the pieces a segment without a word boundary is cut into.
	hardCutBytes = 256
)

// segments cuts text into pieces that are encoded separately, which bounds the cost of BPE
// (quadratic in the length of a run the tokenizer cannot split, such as a long run of one
// letter). A piece ends before a space that starts a word, where tokenizers split anyway, so
// ordinary text counts exactly as a whole; a window of segmentBytes without such a boundary is
// cut every hardCutBytes (at character boundaries), which may count a few tokens more than
// encoding it whole.
func segments(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		// known is where the last window's search for a boundary ended in the text that is
		// left: none is before it. A text without spaces (CJK) is cut every hardCutBytes, and
		// each window after the first has only those bytes to search.
		known := 0
		for len(text) > segmentBytes {
			cut := wordBoundary(text[:segmentBytes+1], known)
			if cut <= 0 {
				// Not UTF-8 up to there (no boundary): cut anyway, counting goes on.
				if cut = textcut.Boundary(text, hardCutBytes); cut == 0 {
					cut = hardCutBytes
				}
			}
			if !yield(text[:cut]) {
				return
			}
			text, known = text[cut:], segmentBytes-cut
		}
		if text != "" {
			yield(text)
		}
	}
}

// wordBoundary returns the last index i of window at which a single space starts a word
// (window[i] is ' ', window[i-1] and window[i+1] are not white space), or -1; from is where
// the search may stop, known to have none before it.
func wordBoundary(window string, from int) int {
	for i := len(window) - 2; i > max(from-1, 0); i-- {
		if window[i] == ' ' && !isSpace(window[i-1]) && !isSpace(window[i+1]) {
			return i
		}
	}
	return -1
}

// isSpace reports whether b is ASCII white space.
func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}
