package events

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

func runStarted(msg string) *eventv1.RunEvent {
	return &eventv1.RunEvent{Kind: &eventv1.RunEvent_RunStarted{RunStarted: &eventv1.RunStarted{UserId: "u1", Message: msg}}}
}

func turnStarted(turn int32) *eventv1.RunEvent {
	return &eventv1.RunEvent{Kind: &eventv1.RunEvent_TurnStarted{TurnStarted: &eventv1.TurnStarted{Turn: turn}}}
}

func llmDelta(content string) *eventv1.RunEvent {
	return &eventv1.RunEvent{Kind: &eventv1.RunEvent_LlmDelta{LlmDelta: &eventv1.LlmDelta{Turn: 1, Content: content}}}
}

func toolFinished(name string) *eventv1.RunEvent {
	return &eventv1.RunEvent{Kind: &eventv1.RunEvent_ToolFinished{ToolFinished: &eventv1.ToolFinished{
		Turn: 1, CallId: "call-1", ToolName: name, Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, Observation: "ok",
	}}}
}

func runFinished() *eventv1.RunEvent {
	return &eventv1.RunEvent{Kind: &eventv1.RunEvent_RunFinished{RunFinished: &eventv1.RunFinished{
		Outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS,
	}}}
}

func TestRoundTripKeepsSubjectsPayloadsAndHeaders(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-rt")
	inputs := []*eventv1.RunEvent{runStarted("hello"), turnStarted(1), llmDelta("Hel"), llmDelta("lo"), toolFinished("search"), runFinished()}
	var emitted []*eventv1.RunEvent
	for _, in := range inputs {
		ev, err := rs.Emit(t.Context(), in)
		if err != nil {
			t.Fatalf("Emit(%s): %v", Kind(in), err)
		}
		emitted = append(emitted, ev)
	}
	if got := env.streamMsgs(t); got != uint64(len(inputs)) {
		t.Fatalf("stream holds %d messages, want %d", got, len(inputs))
	}
	for i, want := range emitted {
		seq := uint64(i + 1)
		if want.GetSeq() != seq || want.GetRunId() != "run-rt" || want.GetTime() == nil {
			t.Fatalf("event %d stamped as run %q seq %d time %v", i, want.GetRunId(), want.GetSeq(), want.GetTime())
		}
		msg := env.storedMsg(t, seq)
		if wantSubj := "agentmesh.run.run-rt." + Kind(inputs[i]); msg.Subject != wantSubj {
			t.Errorf("message %d subject = %q, want %q", seq, msg.Subject, wantSubj)
		}
		if got, wantID := msg.Header.Get(jetstream.MsgIDHeader), fmt.Sprintf("run-rt-%d", seq); got != wantID {
			t.Errorf("message %d Nats-Msg-Id = %q, want %q", seq, got, wantID)
		}
		got := &eventv1.RunEvent{}
		if err := proto.Unmarshal(msg.Data, got); err != nil {
			t.Fatalf("decode message %d: %v", seq, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("message %d payload = %v, want %v", seq, got, want)
		}
	}

	var watched []*eventv1.RunEvent
	err := Watch(t.Context(), env.js, "run-rt", 0, func(_ context.Context, ev *eventv1.RunEvent) error {
		watched = append(watched, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	assertEvents(t, watched, emitted)
}

func TestPublishDeduplicatesByRunAndSeq(t *testing.T) {
	env := newTestEnv(t)
	first := runStarted("first")
	first.RunId, first.Seq = "run-dup", 1
	second := runStarted("second")
	second.RunId, second.Seq = "run-dup", 1
	for _, ev := range []*eventv1.RunEvent{first, second} {
		if err := env.pub.Publish(t.Context(), ev); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	if got := env.streamMsgs(t); got != 1 {
		t.Fatalf("stream holds %d messages after publishing (run-dup, 1) twice, want 1", got)
	}
	got := &eventv1.RunEvent{}
	if err := proto.Unmarshal(env.storedMsg(t, 1).Data, got); err != nil {
		t.Fatal(err)
	}
	if got.GetRunStarted().GetMessage() != "first" {
		t.Errorf("stored message = %q, want the first publish", got.GetRunStarted().GetMessage())
	}
}

func TestPublishRejectsInvalidEvents(t *testing.T) {
	env := newTestEnv(t)
	tests := []struct {
		name    string
		ev      *eventv1.RunEvent
		wantErr string
	}{
		{"nil", nil, "must not be nil"},
		{"no kind", &eventv1.RunEvent{RunId: "r", Seq: 1}, "has no kind"},
		{"empty run id", &eventv1.RunEvent{Seq: 1, Kind: runFinished().Kind}, "run id must not be empty"},
		{"dotted run id", &eventv1.RunEvent{RunId: "a.b", Seq: 1, Kind: runFinished().Kind}, `contains '.'`},
		{"zero seq", &eventv1.RunEvent{RunId: "r", Kind: runFinished().Kind}, "seq must not be zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env.pub.Publish(t.Context(), tt.ev)
			assertInvalid(t, err, tt.wantErr)
		})
	}
	if got := env.streamMsgs(t); got != 0 {
		t.Errorf("stream holds %d messages after invalid publishes, want 0", got)
	}
}

// assertInvalid fails unless err is an INVALID_INPUT error whose message contains want.
func assertInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want one containing %q", want)
	}
	se := stageerr.As(err)
	if se == nil || se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT {
		t.Errorf("error %v is not INVALID_INPUT", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// assertEvents fails unless got and want hold equal events in the same order.
func assertEvents(t *testing.T, got, want []*eventv1.RunEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("event %d = %v, want %v", i, got[i], want[i])
		}
	}
}
