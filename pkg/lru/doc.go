// Package lru holds Cache, a bounded map that evicts its least recently used entries: the
// generation stage's response cache and the memory stage's search cache keep their entries in
// one. A Cache takes no lock: its owner, which keeps more than the entries (a search cache's
// index by user), holds its own around both, so that an eviction and the owner's bookkeeping of
// it happen under one lock.
package lru
