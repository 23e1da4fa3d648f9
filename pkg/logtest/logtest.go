// Package logtest holds what tests read logs with.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer collects what a logger's handler, or a child process's output, writes to it from any
// goroutine, and returns it whole: a bytes.Buffer is not safe for a write and a read at once.
// The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
