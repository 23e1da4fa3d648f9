package ratelog_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/logtest"
	"github.com/agentmesh/agentmesh/pkg/ratelog"
)

// TestWarnLogsAKeyOncePerInterval: a key is a warning once per interval, the next one saying
// how many were logged at debug level meanwhile; another key is a warning at once; a key
// forgotten past the bound is a warning again at its next event.
func TestWarnLogsAKeyOncePerInterval(t *testing.T) {
	var logs logtest.Buffer
	l := ratelog.New[string](slog.New(slog.NewTextHandler(&logs, nil)), time.Minute, 2)
	now := time.Unix(1_700_000_000, 0)
	l.Now = func() time.Time { return now }
	warnings := func() []string {
		var out []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level=WARN") {
				out = append(out, line)
			}
		}
		return out
	}
	for range 5 {
		l.Warn(t.Context(), "a", "refused", "peer", "a")
	}
	l.Warn(t.Context(), "b", "refused", "peer", "b")
	if got := warnings(); len(got) != 2 {
		t.Fatalf("5 events of a, one of b: %d warnings, want 2:\n%s", len(got), logs.String())
	}
	now = now.Add(time.Minute)
	l.Warn(t.Context(), "a", "refused", "peer", "a")
	if got := warnings(); len(got) != 3 || !strings.Contains(got[2], "unlogged=4") {
		t.Fatalf("a once the interval passed: %q, want a warning counting the 4 not logged", got)
	}
	l.Warn(t.Context(), "c", "refused", "peer", "c") // forgets b, the least recently seen
	l.Warn(t.Context(), "b", "refused", "peer", "b")
	if got := warnings(); len(got) != 5 {
		t.Errorf("b after it was forgotten: %d warnings, want 5:\n%s", len(got), logs.String())
	}
}
