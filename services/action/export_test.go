package action

// NewMemoryLedger returns the in-memory ledger New uses when Options.Ledger is nil.
func NewMemoryLedger(size int) Ledger { return newMemoryLedger(size) }

// NewMemoryLedgerOfBytes is NewMemoryLedger whose done records take at most maxBytes.
func NewMemoryLedgerOfBytes(size int, maxBytes int64) Ledger {
	l := newMemoryLedger(size)
	l.maxBytes = maxBytes
	return l
}
