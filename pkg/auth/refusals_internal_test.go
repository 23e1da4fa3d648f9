package auth

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/logtest"
	"google.golang.org/grpc/peer"
)

// TestRefusalLogLogsAgainAfterTheInterval: the refusals of one peer for one reason are a
// warning once per RefusalInterval, the next one saying how many were not logged at warning
// level meanwhile; another peer, or another reason, is logged at once.
func TestRefusalLogLogsAgainAfterTheInterval(t *testing.T) {
	var logs logtest.Buffer
	r := newRefusalLog(slog.New(slog.NewTextHandler(&logs, nil)))
	now := time.Unix(1_700_000_000, 0)
	r.log.Now = func() time.Time { return now }
	from := func(ip string, port int) context.Context {
		addr := &net.TCPAddr{IP: net.ParseIP(ip), Port: port}
		return peer.NewContext(t.Context(), &peer.Peer{Addr: addr})
	}
	warnings := func() []string {
		var out []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level=WARN") {
				out = append(out, line)
			}
		}
		return out
	}
	noKey := errors.New("authentication required")
	for port := range 10 {
		r.refused(from("10.0.0.1", 40000+port), "/m", noKey)
	}
	r.refused(from("10.0.0.2", 40000), "/m", noKey)
	r.refused(from("10.0.0.1", 40000), "/m", errors.New("the API key is not valid"))
	if got := warnings(); len(got) != 3 {
		t.Fatalf("warnings = %d, want the first refusal of each peer and reason:\n%s",
			len(got), logs.String())
	}
	now = now.Add(RefusalInterval)
	r.refused(from("10.0.0.1", 50000), "/m", noKey)
	got := warnings()
	if len(got) != 4 || !strings.Contains(got[3], "unlogged=9") ||
		!strings.Contains(got[3], "peer=10.0.0.1") {
		t.Errorf("a refusal after the interval: warnings\n%s\nwant a fourth naming the 9 not logged", got)
	}
}
