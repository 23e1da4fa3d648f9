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
// clocks owner (the first replica's, which the tests run on) and other (the second's); change,
// when set, changes the configuration last.
func clockMesh(t *testing.T, owner *heldClock, other func() time.Time, change func(*config.Config),
	scenarios ...llmtest.Scenario) *harness {
	t.Helper()
	tools := staticTools(t, map[string]string{"export": strings.Repeat("row\n", 75)})
	cfg := config.Default()
	cfg.Observation.MaxInputBytes = 100
	cfg.RestTools = map[string]config.RestTool{
		"export": {Description: "Exports every record.", URL: tools.URL + "/export"},
	}
	cfg.Tools.RequireApproval = []string{"calculator"}
	if change != nil {
		change(cfg)
	}
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
		h := clockMesh(t, owner, behind, nil, exportScenario(message, "never asked"))
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
		h := clockMesh(t, owner, behind, nil, llmtest.Scenario{
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

// frozenClock is a clock that stands still at the instant set by freeze, and reads the
// time until then.
type frozenClock struct{ at atomic.Pointer[time.Time] }

func (c *frozenClock) now() time.Time {
	if at := c.at.Load(); at != nil {
		return *at
	}
	return time.Now()
}

// freeze stops the clock now, and returns the instant it stands at.
func (c *frozenClock) freeze() time.Time {
	at := time.Now()
	c.at.Store(&at)
	return at
}

// TestAPauseEndedByTheRunsDeadlineIsClosed: a pause that expires at the run's deadline
// (pauseExpiry) has two timers that fire at once, the pause's and the run's, and either may
// end the wait. When the run's came first, the pause was left open in the store, and an
// answer or a decision given before the run stored its ending was told resumed: true, though
// the run ended TIMEOUT without it. The run's timer now closes the pause as the pause's does.
// Here the run's timer comes first, surely: the owner's clock stands still from the run's
// start, so the pause's timer, started later, counts the whole of total_timeout_ms too; and
// the owner's run is held before it stores its ending while another replica, whose clock is
// behind, is asked.
func TestAPauseEndedByTheRunsDeadlineIsClosed(t *testing.T) {
	const total = 3 * time.Second
	slow := func(turn llmtest.Turn) llmtest.Turn {
		turn.DelayMS = 500 // the pause's timer starts half a second after the run's, at least
		return turn
	}
	overrides := &agentv1.RunOverrides{
		TotalTimeoutMs: i64(total.Milliseconds()), AnswerTimeoutMs: i64(time.Hour.Milliseconds()),
		ApprovalTimeoutMs: i64(time.Hour.Milliseconds()),
	}
	t.Run("question", func(t *testing.T) {
		const message = "Export the whole archive."
		clock := &frozenClock{}
		owner := newHeldClock(clock.now)
		turns := []llmtest.Turn{slow(call("export", `{}`)), text("never asked")}
		h := clockMesh(t, owner, behind, nil, llmtest.Scenario{Match: message, Turns: turns})
		owner.holdFrom(clock.freeze().Add(total))
		req := &agentv1.RunRequest{Message: message, Overrides: overrides}
		res, err := h.replicas[0].Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		asking(t, res)
		owner.waitHeld(t)
		_, err = h.replicas[1].Answer(t.Context(),
			&agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "Skip it."})
		wantExpired(t, err, "an answer")
		owner.release()
		final, kinds := finishOn(t, h.replicas[1], res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_TIMEOUT ||
			final.GetExitReason() != orchestrator.ExitTimeout ||
			count(kinds, "input_answered") != 0 {
			t.Errorf("outcome %s %s, events %v; want TIMEOUT without an answer",
				final.GetOutcome(), final.GetExitReason(), kinds)
		}
	})
	t.Run("approval", func(t *testing.T) {
		const message = "Add it up, with approval."
		clock := &frozenClock{}
		owner := newHeldClock(clock.now)
		turns := []llmtest.Turn{slow(calcTurn("c1", "1+1")), text("never asked")}
		h := clockMesh(t, owner, behind, nil, llmtest.Scenario{Match: message, Turns: turns})
		owner.holdFrom(clock.freeze().Add(total))
		req := &agentv1.RunRequest{Message: message, Overrides: overrides}
		res, err := h.replicas[0].Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		paused(t, res, "c1")
		owner.waitHeld(t)
		_, err = h.replicas[1].ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{
			RunId: res.GetRunId(), CallId: "c1",
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
		})
		wantExpired(t, err, "a decision")
		owner.release()
		final, kinds := finishOn(t, h.replicas[1], res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_TIMEOUT ||
			final.GetExitReason() != orchestrator.ExitTimeout || final.GetToolCalls() != 0 {
			t.Errorf("outcome %s %s, %d tool calls, events %v; want TIMEOUT, none run",
				final.GetOutcome(), final.GetExitReason(), final.GetToolCalls(), kinds)
		}
	})
}

// TestAPlanPauseClosedUndecidedStaysClosed: a pause for the plan's approval that expires is
// closed in the store, as any pause. The run then forgot the plan's decision, so that a revised
// plan waits for one of its own, and took the closing record for one: it purged it, and a
// decision that another replica, whose clock is behind, took in the moment before the run
// stored its ending was told resumed: true, though the run ended APPROVAL_TIMEOUT without
// it. Only a person's decision is forgotten now; the refused decision is NOT_FOUND.
func TestAPlanPauseClosedUndecidedStaysClosed(t *testing.T) {
	const message, pause = "What is 6 times 7?", 2 * time.Second
	owner := newHeldClock(time.Now)
	h := clockMesh(t, owner, behind, func(cfg *config.Config) { cfg.Tools.ApprovePlans = true },
		llmtest.Scenario{Match: message, Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	overrides := &agentv1.RunOverrides{ApprovalTimeoutMs: i64(pause.Milliseconds())}
	req := &agentv1.RunRequest{Message: message, Overrides: overrides}
	res, err := h.replicas[0].Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, orchestrator.PlanCallID)
	owner.holdFrom(res.GetPendingAction().GetExpiresAt().AsTime())
	owner.waitHeld(t)
	_, err = h.replicas[1].ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{
		RunId: res.GetRunId(), CallId: orchestrator.PlanCallID,
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
	})
	wantExpired(t, err, "a decision on the plan")
	owner.release()
	final, _ := finishOn(t, h.replicas[1], res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_REJECTED ||
		final.GetExitReason() != orchestrator.ExitApprovalTimeout || final.GetTurns() != 0 {
		t.Errorf("outcome %s %s after %d turns; want APPROVAL_TIMEOUT before the first",
			final.GetOutcome(), final.GetExitReason(), final.GetTurns())
	}
}

// TestAnInputAfterACancellationIsRefused: CancelRun records the cancellation for the run's
// owner, which cancels the run: it stops waiting in its pause and ends INTERRUPTED. An answer
// or a decision given once the cancellation was recorded, in the moment before the run stored
// its ending (or, for a run no replica owns, until one adopts it), was recorded and told
// resumed: true, though the run ended without it. It is refused FAILED_PRECONDITION now, the
// run being cancelled. The owner's run is held, through its clock, once it was cancelled.
func TestAnInputAfterACancellationIsRefused(t *testing.T) {
	cancelled := func(t *testing.T, h *harness, owner *heldClock, runID string, give func() error) {
		t.Helper()
		// Held wherever the owner reads its clock next: as its wait begins, or as it ends.
		owner.holdFrom(time.Now())
		done := make(chan error, 1)
		go func() {
			_, err := h.replicas[1].CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: runID})
			done <- err
		}()
		owner.waitHeld(t)
		err := give()
		if status.Code(err) != codes.FailedPrecondition ||
			!strings.Contains(status.Convert(err).Message(), "cancelled") {
			t.Errorf("an input after the run was cancelled: %v; want FAILED_PRECONDITION, cancelled",
				err)
		}
		owner.release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		final, kinds := finishOn(t, h.replicas[1], runID)
		if final.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED ||
			count(kinds, "input_answered")+count(kinds, "approval_resolved") != 0 {
			t.Errorf("outcome %s %s, events %v; want INTERRUPTED without the input",
				final.GetOutcome(), final.GetExitReason(), kinds)
		}
	}
	t.Run("question", func(t *testing.T) {
		const message = "Export the whole archive."
		owner := newHeldClock(time.Now)
		h := clockMesh(t, owner, behind, nil, exportScenario(message, "never asked"))
		res, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: message})
		if err != nil {
			t.Fatal(err)
		}
		asking(t, res)
		cancelled(t, h, owner, res.GetRunId(), func() error {
			_, err := h.replicas[1].Answer(t.Context(),
				&agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "Skip it."})
			return err
		})
	})
	t.Run("approval", func(t *testing.T) {
		const message = "Add it up, with approval."
		owner := newHeldClock(time.Now)
		turns := []llmtest.Turn{calcTurn("c1", "1+1"), text("never asked")}
		h := clockMesh(t, owner, behind, nil, llmtest.Scenario{Match: message, Turns: turns})
		res, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: message})
		if err != nil {
			t.Fatal(err)
		}
		paused(t, res, "c1")
		cancelled(t, h, owner, res.GetRunId(), func() error {
			_, err := h.replicas[1].ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{
				RunId: res.GetRunId(), CallId: "c1",
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
			})
			return err
		})
	})
}
