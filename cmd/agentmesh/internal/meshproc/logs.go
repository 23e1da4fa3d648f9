package meshproc

import (
	"bytes"
	"fmt"
	"sync"
	"time"
)

// LogBuffer keeps what a process writes, across restarts. It is safe for concurrent use: the
// copying goroutines of stdout and stderr (or a command run in the test's process) write to it
// while a test reads it.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// note appends a line of the harness's own, marked and timed, e.g. a start or an exit.
func (b *LogBuffer) note(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(&b.buf, "=== %s meshproc: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
