package meshproc

import (
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/logtest"
)

// LogBuffer keeps what a process writes, across restarts. It is safe for concurrent use: the
// copying goroutines of stdout and stderr (or a command run in the test's process) write to it
// while a test reads it.
type LogBuffer struct {
	logtest.Buffer
}

// note appends a line of the harness's own, marked and timed, e.g. a start or an exit.
func (b *LogBuffer) note(format string, args ...any) {
	fmt.Fprintf(b, "=== %s meshproc: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
