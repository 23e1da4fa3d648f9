package tokens

import (
	"hash/maphash"

	lru "github.com/hashicorp/golang-lru/v2"
)

// cachedTexts is how many text counts a BPE counter remembers. An entry costs about 100
// bytes whatever the length of its text (texts are remembered by hash), so a full cache
// holds about 3 MiB.
const cachedTexts = 1 << 15

// textCache remembers the token counts of the texts a BPE counter has encoded, the least
// recently used forgotten first. A conversation is counted again on every turn (the context
// stage receives it whole), but only its newest messages are new: their older texts are
// counted once. Texts are keyed by a 128-bit hash of their bytes, so equal texts share an
// entry and no text is kept alive by the cache.
type textCache struct {
	seeds  [2]maphash.Seed
	counts *lru.Cache[[2]uint64, int64]
}

// newTextCache returns a cache of size entries.
func newTextCache(size int) *textCache {
	counts, err := lru.New[[2]uint64, int64](size)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &textCache{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, counts: counts}
}

// count returns count(text), counting it only when the cache does not know text.
func (c *textCache) count(text string, count func(string) int64) int64 {
	key := [2]uint64{maphash.String(c.seeds[0], text), maphash.String(c.seeds[1], text)}
	if n, ok := c.counts.Get(key); ok {
		return n
	}
	n := count(text)
	c.counts.Add(key, n)
	return n
}
