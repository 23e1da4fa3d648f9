package action

import (
	"slices"
	"sync"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Accounting collects the accounting entries of the paid requests a call makes to other
// services on its run's behalf (knowledge_search's query embeddings); the call's response
// carries them into the run's accounting. It is safe for concurrent use, and a nil
// *Accounting drops what it is given.
type Accounting struct {
	mu      sync.Mutex
	entries []*typev1.AccountingEntry
}

// Add records entries; nil ones are skipped.
func (a *Accounting) Add(entries ...*typev1.AccountingEntry) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range entries {
		if e != nil {
			a.entries = append(a.entries, e)
		}
	}
}

// list returns the entries recorded so far.
func (a *Accounting) list() []*typev1.AccountingEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.entries)
}
