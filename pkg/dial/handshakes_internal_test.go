package dial

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/logtest"
	"google.golang.org/grpc/credentials/insecure"
)

// TestHandshakeLogLogsEachCauseOncePerInterval: the failed handshakes of a connection are a
// warning once per HandshakeLogInterval for one target and cause, the next one saying how many
// were not logged at warning level meanwhile; another cause, or another target, is logged at
// once. A network error's addresses, which differ from one try to the next, are not its cause.
func TestHandshakeLogLogsEachCauseOncePerInterval(t *testing.T) {
	var logs logtest.Buffer
	h := logHandshakes(insecure.NewCredentials(), slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Unix(1_700_000_000, 0)
	h.failed.Now = func() time.Time { return now }
	reset := func(port int) error {
		return &net.OpError{Op: "read", Net: "tcp",
			Source: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port},
			Addr:   &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7003},
			Err:    &net.OpError{Op: "read", Err: syscall.ECONNRESET}}
	}
	identity := errors.New("the server's certificate is planning's")
	warnings := func() []string {
		var out []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level=WARN") {
				out = append(out, line)
			}
		}
		return out
	}

	for i := range 5 {
		h.logFailure(t.Context(), "memory:7007", nil, identity)
		h.logFailure(t.Context(), "memory:7007", nil, reset(50000+i))
	}
	h.logFailure(t.Context(), "planning:7002", nil, identity)
	if got := warnings(); len(got) != 3 {
		t.Fatalf("5 tries of two causes and one of another target: %d warnings, want 3:\n%s", len(got), logs.String())
	}
	now = now.Add(HandshakeLogInterval)
	h.logFailure(t.Context(), "memory:7007", nil, identity)
	got := warnings()
	if len(got) != 4 || !strings.Contains(got[3], "unlogged=4") {
		t.Errorf("the cause once the interval passed: %q, want a warning counting the 4 tries not logged", got[len(got)-1])
	}
	if strings.Contains(logs.String(), ":50001") {
		t.Errorf("the cause of a network error names its addresses:\n%s", logs.String())
	}
}

// TestHandshakeLogIsSharedByALoggersCredentials: the credentials of every connection that logs
// to one logger, and their clones, share its limit: a failure one logged as a warning is a debug
// line for the others within HandshakeLogInterval, and the next warning, on any of them, counts
// them all. Credentials logging to another logger have a limit of their own.
func TestHandshakeLogIsSharedByALoggersCredentials(t *testing.T) {
	var logs, otherLogs logtest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a, b := logHandshakes(insecure.NewCredentials(), log), logHandshakes(insecure.NewCredentials(), log)
	clone := a.Clone().(*loggedHandshakes)
	other := logHandshakes(insecure.NewCredentials(), slog.New(slog.NewTextHandler(&otherLogs, nil)))
	if b.failed != a.failed || clone.failed != a.failed || other.failed == a.failed {
		t.Fatal("the credentials of one logger do not share its log, or those of another logger do")
	}
	now := time.Unix(1_700_000_000, 0)
	a.failed.Now = func() time.Time { return now }
	failed := errors.New("the server's certificate is planning's")
	for _, h := range []*loggedHandshakes{a, b, clone, other} {
		h.logFailure(t.Context(), "memory:7007", nil, failed)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("3 credentials of one logger failing with one target and cause: %d warnings, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(otherLogs.String(), "level=WARN"); n != 1 {
		t.Errorf("the credentials of another logger: %d warnings, want 1:\n%s", n, otherLogs.String())
	}
	now = now.Add(HandshakeLogInterval)
	b.logFailure(t.Context(), "memory:7007", nil, failed)
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 || !strings.Contains(logs.String(), "unlogged=2") {
		t.Errorf("once the interval passed: %d warnings, want a second one counting the 2 tries not logged:\n%s", n, logs.String())
	}
}
