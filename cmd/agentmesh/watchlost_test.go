package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/nats-io/nats.go/jetstream"
)

// TestWatchOfARunWhoseStartIsGone: `agentmesh watch` of a run whose first events the event
// stream no longer keeps (its limits dropped them) names the CLI's own flag to follow the run
// from its first event kept, `--from N`, and exits 4, as for an argument that cannot be
// served; `--from N` then follows the run. It showed the server's text as it is, naming the
// API's from_seq, which no flag of the CLI is called, and exited 1, the code of a failed run.
func TestWatchOfARunWhoseStartIsGone(t *testing.T) {
	isolate(t)
	m := startMesh(t, config.Default())
	addr := m.Addr("orchestrator")
	_, progress := runCLI(t, 0, "run", "--addr", addr, "What is 6 times 7?")
	runID := regexp.MustCompile(`▶ run (\S+) `).FindStringSubmatch(progress)
	if runID == nil {
		t.Fatalf("no run id in the progress:\n%s", progress)
	}
	js, err := jetstream.New(m.NATS())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// What the stream's limits do to a run's oldest events once they are old enough.
	started, err := stream.GetLastMsgForSubject(t.Context(), events.Subject(runID[1], "run_started"))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(t.Context(), started.Sequence); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"watch", runID[1]}, {"watch", "--json", runID[1]}} {
		_, errOut := runCLI(t, 4, append(args, "--addr", addr)...)
		want := "agentmesh watch " + runID[1] + " --from 1"
		if !strings.Contains(errOut, want) || strings.Contains(errOut, "from_seq") {
			t.Errorf("agentmesh %s: stderr does not name %q (nor only from_seq):\n%s",
				strings.Join(args, " "), want, errOut)
		}
	}
	if _, errOut := runCLI(t, 0, "watch", runID[1], "--from", "1", "--addr", addr); !strings.Contains(errOut, "■ COMPLETED") {
		t.Errorf("watch --from 1 does not follow the run to its end:\n%s", errOut)
	}
}
