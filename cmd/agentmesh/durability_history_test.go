package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/protobuf/proto"
)

// historyBytes is the size of TestLargeHistory's history: twice NATS's default payload limit
// (1 MB), and under the API's history limit (2 MiB).
const historyBytes = 2_000_000

// TestLargeHistory proves that a result too large for one NATS message neither hangs nor loses
// the run (issue 10, item 6): a run whose request carries a 2 MB history finishes; StreamRun's
// last event is run_finished with the whole result, and GetRun returns it whole too; the stream
// keeps exactly one run_finished, with the outcome, which may leave the result out
// (result_omitted) and refer to GetRun.
func TestLargeHistory(t *testing.T) {
	llm := llmtest.New(t, llmtest.Scenario{Name: "large history", Match: "large history*", Turns: []llmtest.Turn{
		{Content: "I have read all of it."},
	}})
	m := durableMesh(t, llm, meshproc.NewToolServer(t))
	a, b := m.Replica(t, "a"), m.Replica(t, "b")

	var history []*typev1.Message
	for i := range 3 {
		history = append(history, &typev1.Message{Role: typev1.Role_ROLE_USER, Content: padded(fmt.Sprintf("large history, part %d:", i+1), historyBytes/3)})
	}
	req := &agentv1.RunRequest{
		RunId:     "large-history",
		Message:   "Summarise the history in one line.",
		History:   history,
		Overrides: &agentv1.RunOverrides{ContextWindow: proto.Int64(4 * historyBytes)},
	}
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	stream, err := a.Agent().StreamRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	last := lastEvent(t, stream)
	finished := last.GetRunFinished()
	if finished == nil {
		t.Fatalf("StreamRun's last event is %v, want run_finished", last)
	}
	if finished.GetResultOmitted() {
		t.Error("StreamRun sent run_finished with result_omitted; it must send the whole result")
	}
	checkWhole(t, "StreamRun's run_finished", finished.GetResult())

	got, err := b.Agent().GetRun(ctx, &agentv1.GetRunRequest{RunId: req.GetRunId()})
	if err != nil {
		t.Fatalf("GetRun on b: %v", err)
	}
	checkWhole(t, "GetRun on b", got)

	checkEventLog(t, m, req.GetRunId())
	if stored := m.WaitEvent(t, req.GetRunId(), "run_finished", runTimeout).GetRunFinished(); stored.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
		t.Errorf("the stored run_finished carries outcome %s, want COMPLETED_CHAT_ONLY", stored.GetOutcome())
	}
}

// checkWhole asserts that res is the large-history run, completed, with the whole history in
// its conversation.
func checkWhole(t *testing.T, what string, res *typev1.RunResult) {
	t.Helper()
	size := 0
	for _, msg := range res.GetConversation() {
		size += len(msg.GetContent())
	}
	if res.GetRunId() != "large-history" || res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || size < historyBytes {
		t.Errorf("%s: run %s %s %v with a %d-byte conversation, want large-history COMPLETED_CHAT_ONLY with at least %d bytes",
			what, res.GetRunId(), res.GetOutcome(), res.GetError(), size, historyBytes)
	}
}

// padded returns head followed by words, size bytes long in all.
func padded(head string, size int) string {
	const words = " all work and no play makes a long history."
	text := head + strings.Repeat(words, (size-len(head))/len(words)+1)
	return text[:size]
}
