package tokens

import (
	"fmt"
	"hash/maphash"
	"iter"
	"math"
	"math/bits"
	"sync"
)

// bpe counts the tokens of a text as tiktoken's ordinary encoding does (tiktoken-go's
// EncodeOrdinary, which TestBPECountsAsTiktoken compares it with), without the tables that
// encoding keeps. tiktoken-go holds a vocabulary as a map from each token's bytes to its rank,
// its reverse and the tokens sorted, some 600,000 pointers for o200k_base that stay for the
// life of the process, and the garbage collector marked them all on every cycle: a process
// counting for an OpenAI model spent about twice the CPU collecting (issue 15). bpe keeps
// tables without pointers, which the collector does not scan: the ranks of the tokens by a
// 64-bit hash of their bytes (hashTable), which tells whether a whole piece is a token, and the
// ranks of the tokens by the pair of tokens BPE merges into each (pairTable), which the byte
// pair merge looks up. Two tokens of a vocabulary whose hashes collide are found when it is
// loaded; a piece of text that is not a token but hashes like one is as likely as a collision
// among 2^64 values. The pairs are exact.
type bpe struct {
	// piece returns the length of the first piece of a non-empty, valid UTF-8 text
	// (cl100kPiece, o200kPiece).
	piece func(text string) int
	seed  maphash.Seed
	ranks hashTable
	// byteRanks is the rank of each byte as a token of its own.
	byteRanks [256]uint32
	// pairs is the rank of the token each pair of tokens merges into.
	pairs pairTable
}

// maxRank is the highest rank a vocabulary may have: a pair of ranks and the rank of their
// merge are kept in 63 bits (pairTable).
const maxRank = 1<<rankBits - 1

// newBPE returns the counter of a vocabulary: its pre-tokenizer and each token's rank. Every
// byte must be a token, and no two tokens may have the same rank, as tiktoken requires.
func newBPE(piece func(string) int, vocabulary map[string]int) (*bpe, error) {
	tokens := make([]rankedToken, 0, len(vocabulary))
	ranked := make([]uint64, maxRank/64+1) // a bit for each rank of a token
	for token, rank := range vocabulary {
		if rank < 0 || rank > maxRank {
			return nil, fmt.Errorf("token %q has rank %d (0 to %d)", token, rank, maxRank)
		}
		if ranked[rank/64]&(1<<(rank%64)) != 0 {
			return nil, fmt.Errorf("token %q has the rank of another, %d", token, rank)
		}
		ranked[rank/64] |= 1 << (rank % 64)
		tokens = append(tokens, rankedToken{token, uint32(rank)})
	}
	b := &bpe{piece: piece}
	for c := range 256 {
		rank, ok := vocabulary[string([]byte{byte(c)})]
		if !ok {
			return nil, fmt.Errorf("byte %#02x is not a token", c)
		}
		b.byteRanks[c] = uint32(rank)
	}
	if err := b.hashRanks(tokens); err != nil {
		return nil, err
	}
	b.pairRanks(tokens)
	return b, nil
}

// rankedToken is a token of a vocabulary and its rank.
type rankedToken struct {
	bytes string
	rank  uint32
}

// hashRanks fills b.ranks, with a new seed when two tokens' hashes collide, which no seed
// should twice.
func (b *bpe) hashRanks(tokens []rankedToken) error {
	for range 3 {
		b.seed = maphash.MakeSeed()
		b.ranks = newHashTable(len(tokens))
		collided := false
		for _, t := range tokens {
			if !b.ranks.put(maphash.String(b.seed, t.bytes), t.rank) {
				collided = true
				break
			}
		}
		if !collided {
			return nil
		}
	}
	return fmt.Errorf("the hashes of %d tokens collide", len(tokens))
}

// pairRanks fills b.pairs: for each token of two bytes or more, the last merge of its own
// bytes, when byte pair merging them makes the token.
//
// Why the merge of a piece needs no other pair. Parts only grow, so every merge that made a
// part X of a piece merged bytes of X alone, and was the lowest-ranked (leftmost on a tie) of
// all the piece's candidates then, so of those within X too: merging X's bytes alone makes the
// same merges in the same order and ends with X. Hence whenever the merge of a piece joins
// parts A and B into a token T, A and B are the last merge of T's own bytes, which pairRanks
// found. A pair whose union is a token but that is not its last merge is never the lowest
// candidate (if it were, it would be merged, and would be T's last merge), so ranking it as
// no token leaves every choice of the merge as it was: the counts are tiktoken's exactly.
// TestBPEMergesAsBefore and FuzzBPECount compare them with the merge by bytes.
//
// Tokens are taken shortest first: merging T's bytes, every union but the last is shorter
// than T, so its pair is known by then, and the merge by pairs ends with T's last pair as its
// two parts. A token whose bytes do not merge into it (tiktoken's encodings have none) ends
// with more parts and has no pair: no merge makes it (by the above), and counting finds it
// whole by its hash (count).
func (b *bpe) pairRanks(tokens []rankedToken) {
	b.pairs = newPairTable(len(tokens))
	var buf []part
	for _, t := range shortestFirst(tokens) {
		if len(t.bytes) < 2 {
			continue
		}
		if len(t.bytes) > len(buf) {
			buf = make([]part, len(t.bytes))
		}
		if parts := b.mergeScan(b.byteParts(t.bytes, buf[:len(t.bytes)])); len(parts) == 2 {
			b.pairs.put(parts[0].token, parts[1].token, t.rank)
		}
	}
}

// shortestFirst returns tokens ordered by length (a counting sort).
func shortestFirst(tokens []rankedToken) []rankedToken {
	var starts []int // the index of the first token of each length, then of the next length
	for _, t := range tokens {
		for len(starts) <= len(t.bytes)+1 {
			starts = append(starts, 0)
		}
		starts[len(t.bytes)+1]++
	}
	for n := 1; n < len(starts); n++ {
		starts[n] += starts[n-1]
	}
	sorted := make([]rankedToken, len(tokens))
	for _, t := range tokens {
		sorted[starts[len(t.bytes)]] = t
		starts[len(t.bytes)]++
	}
	return sorted
}

// rank returns the rank of the token whose bytes are piece.
func (b *bpe) rank(piece string) (uint32, bool) {
	return b.ranks.get(maphash.String(b.seed, piece))
}

// isToken reports whether piece is a token.
func (b *bpe) isToken(piece string) bool {
	_, ok := b.rank(piece)
	return ok
}

// count returns the number of tokens of text.
func (b *bpe) count(text string) int64 {
	var n int64
	var scratch *mergeScratch // from scratches, for the first piece merged with a heap
	for piece := range b.pieces(text) {
		switch {
		case len(piece) == 1: // every byte is a token
			n++
		case b.isToken(piece):
			n++
		case len(piece) <= mergeScanMax:
			var buf [mergeScanMax]part
			n += int64(len(b.mergeScan(b.byteParts(piece, buf[:len(piece)]))))
		default:
			if scratch == nil {
				scratch = scratches.Get().(*mergeScratch)
			}
			n += int64(b.mergeHeap(piece, scratch))
		}
	}
	if scratch != nil {
		scratches.Put(scratch)
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

// The byte pair merge of a piece that is not a token itself is tiktoken's: it joins the
// adjacent parts whose union has the lowest rank, the leftmost of equals, until no union is a
// token, and the piece counts a token for each part left. The parts start as the piece's
// bytes, and are tokens throughout: the rank of a union is that of its pair of tokens
// (pairRanks). A piece of up to mergeScanMax bytes finds its lowest pair by a scan of its
// parts (mergeScan), a longer one with a heap (mergeHeap), whose merges cost the logarithm of
// the piece's length rather than the length (BenchmarkBPEMerge).

// noRank is the rank of a pair of parts whose union is not a token, above every rank.
const noRank = math.MaxUint32

// part is a token of a piece being merged.
type part struct {
	token uint32 // its rank
	pair  uint32 // the rank of its union with the next part, or noRank
}

// mergeScanMax is the longest piece merged by mergeScan.
const mergeScanMax = 32

// byteParts fills parts, as long as piece, with its bytes and the ranks of their pairs.
func (b *bpe) byteParts(piece string, parts []part) []part {
	for i := range len(piece) {
		parts[i].token = b.byteRanks[piece[i]]
	}
	for i := range len(piece) - 1 {
		parts[i].pair = b.pairs.get(parts[i].token, parts[i+1].token)
	}
	parts[len(piece)-1].pair = noRank
	return parts
}

// mergeScan merges parts, each with the rank of its pair, and returns the parts left, finding
// each merge's lowest pair by a scan of the parts.
func (b *bpe) mergeScan(parts []part) []part {
	for len(parts) > 1 {
		lowest, at := uint32(noRank), -1
		for i, p := range parts {
			if p.pair < lowest {
				lowest, at = p.pair, i
			}
		}
		if at < 0 {
			break
		}
		parts = append(parts[:at+1], parts[at+2:]...)
		parts[at].token = lowest
		parts[at].pair = noRank
		if at+1 < len(parts) {
			parts[at].pair = b.pairs.get(lowest, parts[at+1].token)
		}
		if at > 0 {
			parts[at-1].pair = b.pairs.get(parts[at-1].token, lowest)
		}
	}
	return parts
}

// mergeScratch is the memory of mergeHeap, kept for the next merge.
type mergeScratch struct {
	parts []linkedPart
	heap  pairHeap
}

// scratches keeps mergeScratches for count.
var scratches = sync.Pool{New: func() any { return new(mergeScratch) }}

// linkedPart is a part of a piece in a list of its parts.
type linkedPart struct {
	part
	prev, next int32 // the indexes of the parts before and after it; -1 and the piece's length at the ends
}

// mergeHeap returns the number of parts the merge of piece leaves, finding each merge's
// lowest pair with a heap. A heap entry is a pair's rank and its left part's index in the
// list, which orders equal ranks leftmost first; an entry whose part has since merged, or been
// merged into the part before it, no longer has its rank and is skipped.
func (b *bpe) mergeHeap(piece string, s *mergeScratch) int {
	n := len(piece)
	if cap(s.parts) < n {
		s.parts = make([]linkedPart, n)
		s.heap = make(pairHeap, 0, 2*n)
	}
	parts, heap := s.parts[:n], s.heap[:0]
	for i := range n {
		parts[i] = linkedPart{part{b.byteRanks[piece[i]], noRank}, int32(i - 1), int32(i + 1)}
	}
	for i := range n - 1 {
		if r := b.pairs.get(parts[i].token, parts[i+1].token); r != noRank {
			parts[i].pair = r
			heap = append(heap, uint64(r)<<32|uint64(i))
		}
	}
	heap.init()
	left := n
	for len(heap) > 0 {
		e := heap.pop()
		rank, i := uint32(e>>32), int32(uint32(e))
		if parts[i].pair != rank {
			continue
		}
		left--
		merged := parts[i].next
		next := parts[merged].next
		parts[merged].pair = noRank
		parts[i].token, parts[i].pair, parts[i].next = rank, noRank, next
		if next < int32(n) {
			parts[next].prev = i
			if r := b.pairs.get(rank, parts[next].token); r != noRank {
				parts[i].pair = r
				heap.push(uint64(r)<<32 | uint64(i))
			}
		}
		if prev := parts[i].prev; prev >= 0 {
			parts[prev].pair = b.pairs.get(parts[prev].token, rank)
			if parts[prev].pair != noRank {
				heap.push(uint64(parts[prev].pair)<<32 | uint64(prev))
			}
		}
	}
	s.heap = heap
	return left
}

// pairHeap is a binary min-heap of merge candidates (mergeHeap).
type pairHeap []uint64

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(e uint64) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if s[up] <= s[i] {
			break
		}
		s[up], s[i] = s[i], s[up]
		i = up
	}
}

func (h *pairHeap) pop() uint64 {
	s := *h
	e := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return e
}

func (h pairHeap) down(i int) {
	for {
		child := 2*i + 1
		if child >= len(h) {
			return
		}
		if right := child + 1; right < len(h) && h[right] < h[child] {
			child = right
		}
		if h[i] <= h[child] {
			return
		}
		h[i], h[child] = h[child], h[i]
		i = child
	}
}

// rankBits is the width of a rank in a pairTable's entry.
const rankBits = 21

// pairTable maps a pair of tokens' ranks to the rank of the token they merge into: an open
// addressing table of single words, each a pair's two ranks and its merge's, with the top bit
// set (an empty slot is 0). At most half full, a look-up reads one cache line or two.
type pairTable struct {
	slots []uint64
	shift uint // 64 less the log2 of len(slots)
}

// newPairTable returns a table for up to n pairs.
func newPairTable(n int) pairTable {
	size := 1 << bits.Len(uint(2*max(n, 1)-1)) // between 2n and 4n
	return pairTable{slots: make([]uint64, size), shift: uint(64 - bits.Len(uint(size-1)))}
}

// pairKey is the entry of pair x, y without its merge.
func pairKey(x, y uint32) uint64 {
	return 1<<63 | uint64(x)<<(2*rankBits) | uint64(y)<<rankBits
}

// slot returns the index of the first slot a key may be in: Fibonacci hashing, the top bits
// of the key times 2^64 over the golden ratio.
func (t *pairTable) slot(key uint64) uint64 {
	return (key * 0x9e3779b97f4a7c15) >> t.shift
}

// get returns the rank of the token that the pair x, y merges into, or noRank.
func (t *pairTable) get(x, y uint32) uint32 {
	key := pairKey(x, y)
	mask := uint64(len(t.slots) - 1)
	for i := t.slot(key); ; i = (i + 1) & mask {
		switch s := t.slots[i]; s &^ (1<<rankBits - 1) {
		case key:
			return uint32(s & (1<<rankBits - 1))
		case 0:
			return noRank
		}
	}
}

// put adds that the pair x, y merges into the token of rank merged, once for each pair.
func (t *pairTable) put(x, y, merged uint32) {
	key := pairKey(x, y)
	mask := uint64(len(t.slots) - 1)
	i := t.slot(key)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = key | uint64(merged)
}

// hashTable maps the 64-bit hash of each token's bytes to its rank: an open addressing table
// that finds a hash at the slot its top bits name, or in the slots after it. The hashes are
// uniform already, which a map would hash again: it looks up a piece some 20% faster than the
// map did, in as much memory (BenchmarkBPECount on mixed text; twice the slots, less full,
// were only a little faster).
type hashTable struct {
	slots []hashSlot
	shift uint // 64 less the log2 of len(slots)
}

// hashSlot is a token's hash and rank, or empty: rank noRank.
type hashSlot struct {
	hash uint64
	rank uint32
}

// newHashTable returns a table for n tokens.
func newHashTable(n int) hashTable {
	size := 1 << bits.Len(uint(n)) // over n, at most 2n: a slot is always empty; o200k_base's is 76% full
	t := hashTable{slots: make([]hashSlot, size), shift: uint(64 - bits.Len(uint(size-1)))}
	for i := range t.slots {
		t.slots[i].rank = noRank
	}
	return t
}

// get returns the rank of the token whose bytes hash to h.
func (t *hashTable) get(h uint64) (uint32, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := h >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.rank == noRank {
			return 0, false
		}
		if s.hash == h {
			return s.rank, true
		}
	}
}

// put adds a token's hash and rank, and reports false when another token has its hash.
func (t *hashTable) put(h uint64, rank uint32) bool {
	mask := uint64(len(t.slots) - 1)
	i := h >> t.shift
	for ; t.slots[i].rank != noRank; i = (i + 1) & mask {
		if t.slots[i].hash == h {
			return false
		}
	}
	t.slots[i] = hashSlot{h, rank}
	return true
}
