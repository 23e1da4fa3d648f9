// Package recall holds the limits of recalling memories, which the memory stage that searches
// them and the context stage that asks for and assembles them share.
package recall

// MaxHits is the most memories one search of the memory stage finds: the largest limit of a
// Search, and so the largest memory_limit of a context assembly and the most memories its
// recalled (what an earlier turn's search found) may hold. A larger one is refused.
const MaxHits = 100
