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
