package mcp

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// tailBytes is how much of a child's stderr is kept to explain a failure.
const tailBytes = 2048

// tailWriter receives a stdio server's stderr: it logs each line at debug level and keeps the
// last tailBytes. It is safe for concurrent use.
type tailWriter struct {
	log     *slog.Logger
	mu      sync.Mutex
	tail    []byte
	partial []byte
}

// Write logs the complete lines of p and remembers the end of the output.
func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tail = append(w.tail, p...)
	if over := len(w.tail) - tailBytes; over > 0 {
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(w.partial[:i])); line != "" {
			w.log.Debug("MCP server stderr", "line", line)
		}
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > tailBytes { // a line without end: log what there is
		w.log.Debug("MCP server stderr", "line", string(w.partial))
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// String returns the kept end of the output, trimmed.
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.tail))
}

// suffix returns "; stderr: " and the end of the output, or "" when there is none.
func (w *tailWriter) suffix() string {
	if w == nil {
		return ""
	}
	if s := w.String(); s != "" {
		return "; stderr: " + s
	}
	return ""
}

// explain appends the end of the stderr output to msg.
func (w *tailWriter) explain(msg string) string {
	return msg + w.suffix()
}
