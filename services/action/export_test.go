package action

// NewMemoryLedger returns the in-memory ledger New uses when Options.Ledger is nil.
func NewMemoryLedger(size int) Ledger { return newMemoryLedger(size) }
