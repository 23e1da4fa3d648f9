package mesh_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// heldClock is the clock of the replica that owns a paused run, which holds the run once its
// pause is over: from the instant set by holdFrom on, each reading waits until release, and
// the first closes reached. A run reads the clock first when it ends (its final report's
// time, or a checkpoint's), after it closed its pause, and before it stores its ending: held
// there, its checkpoint still shows the pause, as another replica sees it in the moment
// between the two. Before that instant the clock reads base.
type heldClock struct {
	base     func() time.Time
	from     atomic.Pointer[time.Time]
	reached  chan struct{}
	released chan struct{}
	once     sync.Once
	free     sync.Once
}

func newHeldClock(base func() time.Time) *heldClock {
	return &heldClock{base: base, reached: make(chan struct{}), released: make(chan struct{})}
}

func (c *heldClock) now() time.Time {
	if from := c.from.Load(); from != nil && !time.Now().Before(*from) {
		c.once.Do(func() { close(c.reached) })
		<-c.released
	}
	return c.base()
}

// holdFrom holds every reading from the instant at on.
func (c *heldClock) holdFrom(at time.Time) { c.from.Store(&at) }

func (c *heldClock) release() { c.free.Do(func() { close(c.released) }) }

// waitHeld waits until the replica's run is held.
func (c *heldClock) waitHeld(t *testing.T) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	select {
	case <-c.reached:
	case <-deadline.C:
		t.Fatal("the replica's run never read the clock after its pause was over")
	}
}

// behind is the clock of a replica an hour behind: it takes every pause to be still open.
func behind() time.Time { return time.Now().Add(-time.Hour) }

// clockMesh is askMesh with two replicas, calculator calls that require approval, and the
// clocks owner (the first replica's, which the tests run on) and other (the second's).
func clockMesh(t *testing.T, owner *heldClock, other func() time.Time,
	scenarios ...llmtest.Scenario) *harness {
	t.Helper()
	tools := staticTools(t, map[string]string{"export": strings.Repeat("row\n", 75)})
	cfg := config.Default()
	cfg.Observation.MaxInputBytes = 100
	cfg.RestTools = map[string]config.RestTool{
		"export": {Description: "Exports every record.", URL: tools.URL + "/export"},
	}
	cfg.Tools.RequireApproval = []string{"calculator"}
	h := startOptions(t, cfg, 2, nil, func(o *mesh.Options) {
		o.Orchestrator = func(oo *orchestrator.Options) {
			oo.Now = other
			if oo.Replica == mesh.Orchestrator+"-1" {
				oo.Now = owner.now
			}
		}
	}, scenarios...)
	t.Cleanup(owner.release) // before the mesh stops, which waits for the held run
	return h
}

// wantExpired checks that an input given on another replica after the run closed its pause
// was refused NOT_FOUND, as expired.
func wantExpired(t *testing.T, err error, what string) {
	t.Helper()
	if status.Code(err) != codes.NotFound ||
		!strings.Contains(status.Convert(err).Message(), "no more") {
		t.Fatalf("%s after the run closed its pause: %v; want NOT_FOUND, no more", what, err)
	}
}

// TestAPauseItsOwnerClosedIsExpiredOnEveryReplica: a pause ends when its owner's clock says
// it expired, and the owner closes it in the store. An answer or a decision that another
// replica, whose clock is behind, takes in the moment before the run stores its ending is
// refused NOT_FOUND as expired, as on the owner, not FAILED_PRECONDITION as already answered
// or decided: nobody answered.
func TestAPauseItsOwnerClosedIsExpiredOnEveryReplica(t *testing.T) {
	const pause = 2 * time.Second // the owner reads its clock before the pause's timer starts
	t.Run("question", func(t *testing.T) {
		const message = "Export the whole archive."
		owner := newHeldClock(time.Now)
		h := clockMesh(t, owner, behind, exportScenario(message, "never asked"))
		overrides := &agentv1.RunOverrides{AnswerTimeoutMs: i64(pause.Milliseconds())}
		req := &agentv1.RunRequest{Message: message, Overrides: overrides}
		res, err := h.replicas[0].Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		asking(t, res)
		owner.holdFrom(res.GetPendingQuestion().GetExpiresAt().AsTime())
		owner.waitHeld(t)
		_, err = h.replicas[1].Answer(t.Context(),
			&agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "Skip it."})
		wantExpired(t, err, "an answer")
		owner.release()
		final, kinds := finishOn(t, h.replicas[1], res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_TIMEOUT ||
			final.GetExitReason() != orchestrator.ExitAnswerTimeout ||
			count(kinds, "input_answered") != 0 {
			t.Errorf("outcome %s %s, events %v; want ANSWER_TIMEOUT without an answer",
				final.GetOutcome(), final.GetExitReason(), kinds)
		}
	})
	t.Run("approval", func(t *testing.T) {
		const message = "Add it up, with approval."
		owner := newHeldClock(time.Now)
		h := clockMesh(t, owner, behind, llmtest.Scenario{
			Match: message, Turns: []llmtest.Turn{calcTurn("c1", "1+1"), text("never asked")},
		})
		overrides := &agentv1.RunOverrides{ApprovalTimeoutMs: i64(pause.Milliseconds())}
		req := &agentv1.RunRequest{Message: message, Overrides: overrides}
		res, err := h.replicas[0].Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		paused(t, res, "c1")
		owner.holdFrom(res.GetPendingAction().GetExpiresAt().AsTime())
		owner.waitHeld(t)
		_, err = h.replicas[1].ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{
			RunId: res.GetRunId(), CallId: "c1",
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
		})
		wantExpired(t, err, "a decision")
		owner.release()
		final, _ := finishOn(t, h.replicas[1], res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_REJECTED ||
			final.GetExitReason() != orchestrator.ExitApprovalTimeout || final.GetToolCalls() != 0 {
			t.Errorf("outcome %s %s, %d tool calls; want APPROVAL_TIMEOUT, none run",
				final.GetOutcome(), final.GetExitReason(), final.GetToolCalls())
		}
	})
}
