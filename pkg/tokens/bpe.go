package tokens

import (
	"fmt"
	"hash/maphash"
	"iter"
	"math"
)

// bpe counts the tokens of a text as tiktoken's ordinary encoding does (tiktoken-go's
// EncodeOrdinary, which TestBPECountsAsTiktoken compares it with), without the tables that
// encoding keeps. tiktoken-go holds a vocabulary as a map from each token's bytes to its rank,
// its reverse and the tokens sorted, some 600,000 pointers for o200k_base that stay for the
// life of the process, and the garbage collector marked them all on every cycle: a process
// counting for an OpenAI model spent about twice the CPU collecting (issue 15). Counting needs
// only whether a run of bytes is a token and its rank, so bpe keeps the ranks by a 64-bit hash
// of the token's bytes, in a map that holds no pointers. Two tokens of a vocabulary whose
// hashes collide are found when it is loaded; a piece of text that is not a token but hashes
// like one is as likely as a collision among 2^64 values.
type bpe struct {
	// piece returns the length of the first piece of a non-empty, valid UTF-8 text
	// (cl100kPiece, o200kPiece).
	piece func(text string) int
	seed  maphash.Seed
	ranks map[uint64]uint32
}

// newBPE returns the counter of a vocabulary: its pre-tokenizer and each token's rank.
func newBPE(piece func(string) int, vocabulary map[string]int) (*bpe, error) {
	for range 3 { // a new seed when two tokens' hashes collide, which no seed should twice
		b := &bpe{piece: piece, seed: maphash.MakeSeed()}
		b.ranks = make(map[uint64]uint32, len(vocabulary))
		collided := false
		for token, rank := range vocabulary {
			if rank < 0 || rank > math.MaxUint32 {
				return nil, fmt.Errorf("token %q has rank %d", token, rank)
			}
			h := maphash.String(b.seed, token)
			if _, dup := b.ranks[h]; dup {
				collided = true
				break
			}
			b.ranks[h] = uint32(rank)
		}
		if !collided {
			return b, nil
		}
	}
	return nil, fmt.Errorf("the hashes of %d tokens collide", len(vocabulary))
}

// rank returns the rank of the token whose bytes are piece.
func (b *bpe) rank(piece string) (uint32, bool) {
	r, ok := b.ranks[maphash.String(b.seed, piece)]
	return r, ok
}

// count returns the number of tokens of text.
func (b *bpe) count(text string) int64 {
	var n int64
	for piece := range b.pieces(text) {
		if _, ok := b.rank(piece); ok {
			n++
		} else {
			n += int64(b.merge(piece))
		}
	}
	return n
}

// pieces returns the pieces the pre-tokenizer cuts text into, in order. A piece's text is
// its runes made a string again, as tiktoken-go cuts its pieces: an invalid byte of text
// reads as U+FFFD in both.
func (b *bpe) pieces(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		text = validRunes(text)
		for text != "" {
			n := b.piece(text)
			if !yield(text[:n]) {
				return
			}
			text = text[n:]
		}
	}
}

// merge returns the number of tokens of a piece that is not a token itself: tiktoken's byte
// pair merge, which joins the adjacent parts whose union has the lowest rank until no union
// is a token.
func (b *bpe) merge(piece string) int {
	const none = math.MaxUint32 + 1 // no rank: the union is not a token
	type part struct {
		start int
		rank  int64 // of the union of this part and the next
	}
	parts := make([]part, len(piece)+1)
	for i := range parts {
		parts[i] = part{start: i, rank: none}
	}
	// rankOf is the rank of the union of parts i to i+skip+1, or none.
	rankOf := func(i, skip int) int64 {
		if i+skip+2 < len(parts) {
			if r, ok := b.rank(piece[parts[i].start:parts[i+skip+2].start]); ok {
				return int64(r)
			}
		}
		return none
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rankOf(i, 0)
	}
	for len(parts) > 1 {
		lowest, at := int64(none), -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < lowest {
				lowest, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		parts[at].rank = rankOf(at, 1)
		if at > 0 {
			parts[at-1].rank = rankOf(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}
