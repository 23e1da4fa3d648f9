package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Limits of the requests of the public API (README, "Limits"); a request over one is
// INVALID_ARGUMENT naming the field and the limit.
const (
	// MaxMessageBytes is the largest user message: what the intent and planning stages take
	// (their default limits), so that a message the API accepts is not refused by a stage. An
	// answer and a decision's feedback, which the model reads as it reads a message, have the
	// same limit.
	MaxMessageBytes = 64 << 10
	// MaxUserIDBytes is the longest user_id: room for any principal name or a hash of one,
	// the bound every stage keeps (auth.MaxIDBytes).
	MaxUserIDBytes = auth.MaxIDBytes
	// MaxConversationIDBytes is the longest conversation_id, which every checkpoint, the
	// stored result and the memories learned from the run carry: room for any UUID or hash.
	MaxConversationIDBytes = 256
	// MaxIdempotencyKeyBytes is the longest idempotency_key: room for any UUID or hash, as
	// Stripe's 255-character keys.
	MaxIdempotencyKeyBytes = 256
	// MaxFeedbackBytes is the longest feedback of a ResolveApproval and reason of a CancelRun:
	// a person's text, which the model (or the run's error) shows, as long as a message may
	// be. Each is stored as one NATS message for the replica that applies it, where a much
	// longer one failed as a retryable STORAGE_ERROR.
	MaxFeedbackBytes = MaxMessageBytes
	// MaxModifiedArgumentsBytes bounds the encoded modified_arguments of a ResolveApproval:
	// arguments a person wrote for one tool call, stored with the decision in one NATS message
	// (1 MiB by default) beside a feedback of up to MaxFeedbackBytes.
	MaxModifiedArgumentsBytes = 256 << 10
	// MaxCallIDBytes is the longest call_id of a ResolveApproval: the action stage's limit of a
	// call id, so that no call it would run is refused. The id is part of the store key of the
	// decision and of a NOT_FOUND error's text.
	MaxCallIDBytes = 512
	// MaxQuestionIDBytes is the longest question_id of an Answer, as long as a call id: the
	// orchestrator's own question ids ("intent", "turn-3") are far shorter. The id is part of
	// the store key of the answer and of a NOT_FOUND error's text.
	MaxQuestionIDBytes = MaxCallIDBytes
	// MaxHistoryMessages is the most messages a history holds: OpenAI's chat API takes at
	// most 2048 messages a request, and a run adds its own turns.
	MaxHistoryMessages = 1000
	// MaxHistoryBytes bounds the encoded size of a whole history: about 500k tokens, over
	// every context window but the largest, and small enough that the RunResult, which
	// carries the conversation, stays within gRPC's default 4 MiB for the API's clients.
	MaxHistoryBytes = 2 << 20
)

// Run invokes an agent and returns its result at a terminal outcome, or a snapshot with
// OUTCOME_AWAITING_APPROVAL when it pauses for approval (OUTCOME_AWAITING_INPUT when it asks
// its user a question). The run belongs to the orchestrator, not to the call: if the caller
// goes away, or its API key or client certificate is revoked (the call ends UNAUTHENTICATED),
// the run goes on and can be watched or read back.
// A repeated idempotency key, on any replica, returns the run it first started.
func (s *Service) Run(ctx context.Context, req *agentv1.RunRequest) (*typev1.RunResult, error) {
	r, runCtx, existing, err := s.startOrFind(ctx, req, nil)
	switch {
	case err != nil:
		return nil, err
	case existing != "":
		return s.attach(ctx, existing)
	}
	if auth.Held(ctx) {
		// A revoked API key or client certificate ends the call (auth.Authenticator.Hold)
		// while the run goes on: the run has a goroutine of its own, as a StreamRun's has, for
		// the call to end before it.
		go s.work(runCtx, r)
		return r.waitResult(ctx)
	}
	s.runHere(runCtx, r)
	return r.waitResult(ctx)
}

// startOrFind starts req's run as start does, or returns the id of the stored run its
// idempotency key names (existing), starting again when the key named a run that never
// stored anything and is freed (awaitStored). A key that names a stored run started by
// another request is INVALID_ARGUMENT, as Stripe's idempotency_error: answering it with the
// first run's result would tell its caller that its own request ran.
func (s *Service) startOrFind(ctx context.Context, req *agentv1.RunRequest, sink func(*eventv1.RunEvent)) (r *run, runCtx context.Context, existing string, err error) {
	for range maxClaims {
		r, runCtx, err = s.start(ctx, req, sink)
		var found existingRun
		if !errors.As(err, &found) {
			if errors.Is(err, errKeyFreed) {
				continue
			}
			return r, runCtx, "", err
		}
		switch err := s.awaitStored(ctx, found); {
		case errors.Is(err, errKeyFreed):
			continue
		case err != nil:
			return nil, nil, "", err
		case found.otherRequest:
			return nil, nil, "", stageerr.Invalid("idempotency_key %q started run %s with a different request: "+
				"a retry must repeat its request, and another request needs a key of its own", req.GetIdempotencyKey(), found.id)
		}
		return nil, nil, found.id, nil
	}
	return nil, nil, "", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE,
		"idempotency key %q named %d runs in turn that never stored anything; try again", req.GetIdempotencyKey(), maxClaims)
}

// StreamRun runs an agent and streams its events; the last one is run_finished, or
// approval_requested or input_requested for a run that pauses (follow it on with WatchRun). A repeated
// idempotency key replays the first run's events instead of running again. A client that reads
// more slowly than the run emits has at most streamBuffer bytes of events held for it: past
// them, the stream ends RESOURCE_EXHAUSTED naming the seq to watch the run on from.
func (s *Service) StreamRun(req *agentv1.RunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	q := newEventQueue(s.streamBuffer)
	r, runCtx, existing, err := s.startOrFind(stream.Context(), req, q.push)
	switch {
	case err != nil:
		return err
	case existing != "":
		return s.watchRun(&agentv1.WatchRunRequest{RunId: existing}, stream, true)
	}
	go s.work(runCtx, r)
	defer r.setSink(nil)
	var sent uint64
	for {
		ev, ok, overflowed := q.pop(stream.Context(), r.moved)
		switch {
		case overflowed:
			return streamBehind(r.id, s.streamBuffer, sent)
		case !ok:
			if err := stream.Context().Err(); err != nil {
				return err
			}
			return errMoved(r.id)
		}
		if err := stream.Send(s.wholeResult(stream.Context(), ev)); err != nil {
			return err
		}
		sent = ev.GetSeq()
		if ev.GetRunFinished() != nil || ev.GetApprovalRequested() != nil || ev.GetInputRequested() != nil {
			return nil
		}
	}
}

// streamBehind is the error that ends a StreamRun whose client read its events too slowly:
// the orchestrator held limit bytes of them, and sent the client those up to seq sent.
func streamBehind(runID string, limit int, sent uint64) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_RESOURCE_EXHAUSTED,
		"run %q emitted events faster than the client read them, past the %d bytes the stream "+
			"holds (grpc.stream_buffer_bytes): the run goes on; follow it with WatchRun from_seq %d",
		runID, limit, sent)
}

// attach waits for a run started earlier (by this or another replica) to pause or finish.
func (s *Service) attach(ctx context.Context, runID string) (*typev1.RunResult, error) {
	if r := s.liveRun(runID); r != nil {
		return r.waitResult(ctx)
	}
	if s.store == nil {
		return s.GetRun(ctx, &agentv1.GetRunRequest{RunId: runID})
	}
	cp, err := s.store.Await(ctx, runID, func(cp *checkpointv1.RunCheckpoint) bool {
		switch cp.GetPhase() {
		case checkpointv1.Phase_PHASE_AWAITING_APPROVAL, checkpointv1.Phase_PHASE_AWAITING_INPUT, checkpointv1.Phase_PHASE_FINISHED:
			return true
		}
		return false
	})
	if err != nil {
		return nil, storeErr(ctx, runID, err)
	}
	return s.resultOf(ctx, cp)
}

func firstModel(c *typev1.ExecutionContract) string {
	if len(c.GetTargets()) == 0 {
		return ""
	}
	return c.GetTargets()[0].GetModel()
}

// modelProfile is the model profile the transcript entries record: the contract's
// model_profile_id, its first target ("none" without targets; PRECHECK then fails the run).
func modelProfile(c *typev1.ExecutionContract) string {
	return cmp.Or(c.GetModelProfileId(), targetProfile(c.GetTargets()), "none")
}

// targetProfile names the model profile of a contract's targets, "provider/model" of the
// first one, or "" without targets.
func targetProfile(targets []*typev1.Target) string {
	if len(targets) == 0 {
		return ""
	}
	return targets[0].GetProvider() + "/" + targets[0].GetModel()
}

func validateRunRequest(req *agentv1.RunRequest) error {
	if err := validateInput(req.GetUserId(), req.GetConversationId(), req.GetMessage(), "history", req.GetHistory(), req.GetSurface()); err != nil {
		return err
	}
	if n := len(req.GetIdempotencyKey()); n > MaxIdempotencyKeyBytes {
		return stageerr.Invalid("idempotency_key: at most %d bytes, got %d", MaxIdempotencyKeyBytes, n)
	}
	if err := auth.CheckControl("idempotency_key", req.GetIdempotencyKey()); err != nil {
		return err
	}
	if id := req.GetRunId(); id != "" {
		if err := checkRunID(id); err != nil {
			return err
		}
	}
	if req.GetOutputSchema() != nil && req.GetOutputFormat() != typev1.OutputFormat_OUTPUT_FORMAT_JSON {
		return stageerr.Invalid("output_schema needs output_format OUTPUT_FORMAT_JSON (only a JSON answer is checked against a schema), got %s", req.GetOutputFormat())
	}
	if req.GetPendingConfirmation() != nil {
		// A run that ignored it would start anew with the user's "yes" as its message, and
		// the action the user confirmed would not run.
		return stageerr.Invalid("pending_confirmation: a run does not take it; answer a paused run's calls with ResolveApproval " +
			"(pending_action.run_id and each call's id), and a decision's pending action with Decide's pending_confirmation")
	}
	return nil
}

// checkRunID is the INVALID_ARGUMENT error of a request whose run_id cannot name a run (empty,
// too long, or with characters a run id never has), nil for one that can.
func checkRunID(id string) error {
	if err := runid.Check(id); err != nil {
		return stageerr.Invalid("run_id: %v", err)
	}
	return nil
}

// validateInput checks what Run and Decide take alike against the limits: the user, the
// conversation, the message, the earlier messages (named historyField), each with a role, and
// the surface.
func validateInput(userID, conversationID, message, historyField string, history []*typev1.Message, surface typev1.Surface) error {
	if err := checkUserID(userID); err != nil {
		return err
	}
	if n := len(conversationID); n > MaxConversationIDBytes {
		return stageerr.Invalid("conversation_id: at most %d bytes, got %d", MaxConversationIDBytes, n)
	}
	// An id, as the user's: shown in logs, errors and the run's events, where a terminal obeys
	// a control character.
	if err := auth.CheckControl("conversation_id", conversationID); err != nil {
		return err
	}
	if n := len(message); n > MaxMessageBytes {
		return stageerr.Invalid("message: at most %d bytes, got %d", MaxMessageBytes, n)
	}
	if n := len(history); n > MaxHistoryMessages {
		return stageerr.Invalid("%s: at most %d messages, got %d", historyField, MaxHistoryMessages, n)
	}
	size := 0
	for _, m := range history {
		size += proto.Size(m)
	}
	if size > MaxHistoryBytes {
		return stageerr.Invalid("%s: at most %d bytes in all, got %d", historyField, MaxHistoryBytes, size)
	}
	if err := checkHistoryShape(historyField, history); err != nil {
		return err
	}
	if err := checkHistoryCalls(historyField, history); err != nil {
		return err
	}
	if _, known := typev1.Surface_name[int32(surface)]; !known {
		return stageerr.Invalid("surface %d is not one of its values", surface)
	}
	return nil
}

// GetRun returns a run's result: the final one, or a snapshot while it waits for a person.
// A run still executing is FAILED_PRECONDITION (follow it with WatchRun). Any replica
// answers for any run.
func (s *Service) GetRun(ctx context.Context, req *agentv1.GetRunRequest) (*typev1.RunResult, error) {
	if err := checkRunID(req.GetRunId()); err != nil {
		return nil, err
	}
	loc, err := s.locate(ctx, req.GetRunId())
	if err := s.authorize(ctx, auth.ActionRead, req.GetRunId(), loc, err); err != nil {
		return nil, err
	}
	switch {
	case loc.live != nil:
		if res := loc.live.currentResult(); res != nil {
			return res, nil
		}
		return nil, stillRunning(req.GetRunId())
	case loc.cp != nil:
		return s.resultOf(ctx, loc.cp)
	}
	return loc.saved.GetResult(), nil
}

// savedResult is a finished run's result as the memory stage keeps it.
func (s *Service) savedResult(ctx context.Context, runID string) (*typev1.RunResult, error) {
	resp, err := whenReady(actingForCaller(ctx), "memory", s.peers.Memory.GetRun, &memoryv1.GetRunRequest{RunId: runID})
	if err != nil {
		return nil, stageerr.FromError(err)
	}
	return resp.GetResult(), nil
}

// resultOf is the result a checkpoint stands for: the final result (from the checkpoint until
// the memory stage has it), a paused snapshot, or FAILED_PRECONDITION while the run executes.
func (s *Service) resultOf(ctx context.Context, cp *checkpointv1.RunCheckpoint) (*typev1.RunResult, error) {
	switch cp.GetPhase() {
	case checkpointv1.Phase_PHASE_FINISHED:
		if cp.GetResult() != nil {
			return cp.GetResult(), nil
		}
		return s.savedResult(ctx, cp.GetRunId())
	case checkpointv1.Phase_PHASE_AWAITING_APPROVAL, checkpointv1.Phase_PHASE_AWAITING_INPUT:
		return pausedFromCheckpoint(cp), nil
	}
	return nil, stillRunning(cp.GetRunId())
}

func stillRunning(runID string) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
		"run %q is still running; follow it with WatchRun", runID)
}

// storeErr reports a store failure about a run, in a call whose context is ctx, with the
// right code: ctx's own error when the call's context ended (the caller cancelled, or its
// deadline passed), STORAGE_ERROR (UNAVAILABLE) when the store failed. A store request that
// NATS left unanswered for its own time limit also ends with context.DeadlineExceeded, which
// reached the caller as DEADLINE_EXCEEDED, long before its deadline, while NATS was down.
func storeErr(ctx context.Context, runID string, err error) error {
	if errors.Is(err, runstore.ErrNotFound) {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q does not exist", runID)
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR, "run %q: %w", runID, err)
}

// CancelRun ends a live run with OUTCOME_INTERRUPTED and waits until it has terminated; on
// any replica, whichever replica runs it (or none, for a run waiting to be resumed).
func (s *Service) CancelRun(ctx context.Context, req *agentv1.CancelRunRequest) (*agentv1.CancelRunResponse, error) {
	if err := checkRunID(req.GetRunId()); err != nil {
		return nil, err
	}
	if n := len(req.GetReason()); n > MaxFeedbackBytes {
		return nil, stageerr.Invalid("reason: at most %d bytes, got %d", MaxFeedbackBytes, n)
	}
	if err := s.authorizeRun(ctx, auth.ActionCancel, req.GetRunId()); err != nil {
		return nil, err
	}
	cancel := s.cancelStored
	if s.store == nil {
		cancel = s.cancelLocal
	}
	res, asked, err := cancel(ctx, req)
	if err != nil {
		return nil, err
	}
	return &agentv1.CancelRunResponse{RunId: req.GetRunId(), Cancelled: asked && res.GetOutcome() == typev1.Outcome_OUTCOME_INTERRUPTED, Outcome: res.GetOutcome()}, nil
}

// cancelLocal cancels a run live on this replica and returns its result; asked is false for a
// run that had already ended.
func (s *Service) cancelLocal(ctx context.Context, req *agentv1.CancelRunRequest) (res *typev1.RunResult, asked bool, err error) {
	r := s.liveRun(req.GetRunId())
	if r == nil {
		res, err := s.GetRun(ctx, &agentv1.GetRunRequest{RunId: req.GetRunId()})
		return res, false, err
	}
	r.cancel(cancelCause(req.GetReason(), principalID(ctx)))
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	return r.currentResult(), true, nil
}

// cancelStored asks a run's owner, through the store, to cancel it, and waits for its result;
// asked is false for a run that had already ended.
func (s *Service) cancelStored(ctx context.Context, req *agentv1.CancelRunRequest) (res *typev1.RunResult, asked bool, err error) {
	cp, _, err := s.store.Load(ctx, req.GetRunId())
	if errors.Is(err, runstore.ErrNotFound) {
		res, err := s.savedResult(ctx, req.GetRunId())
		return res, false, err
	}
	if err != nil {
		return nil, false, storeErr(ctx, req.GetRunId(), err)
	}
	asked = cp.GetPhase() != checkpointv1.Phase_PHASE_FINISHED
	if asked {
		switch err := s.store.RequestCancel(ctx, req, principalID(ctx)); {
		case errors.Is(err, runstore.ErrNotFound): // the run ended, and retired, since it was read
			res, err := s.savedResult(ctx, req.GetRunId())
			return res, false, err
		case err != nil:
			return nil, false, storeErr(ctx, req.GetRunId(), err)
		}
		if cp, err = s.store.Await(ctx, req.GetRunId(), func(cp *checkpointv1.RunCheckpoint) bool {
			return cp.GetPhase() == checkpointv1.Phase_PHASE_FINISHED
		}); err != nil {
			return nil, false, storeErr(ctx, req.GetRunId(), err)
		}
	}
	res, err = s.resultOf(ctx, cp)
	return res, asked, err
}

// cancelCause is the cancellation cause of a CancelRun with reason, called by the principal
// by (empty when unknown).
func cancelCause(reason, by string) error {
	cause := errCancelled
	if by != "" {
		cause = fmt.Errorf("%w %s", errCancelled, by)
	}
	if reason == "" {
		return cause
	}
	return fmt.Errorf("%w: %s", cause, reason)
}

// ListTools lists the tools the mesh can execute.
func (s *Service) ListTools(ctx context.Context, _ *agentv1.ListToolsRequest) (*agentv1.ListToolsResponse, error) {
	resp, err := whenReady(ctx, "action", s.peers.Action.ListTools, &actionv1.ListToolsRequest{})
	if err != nil {
		return nil, stageerr.FromError(err)
	}
	return &agentv1.ListToolsResponse{Tools: resp.GetTools()}, nil
}

// ResolveApproval records a person's decision on a paused tool call: approve, reject (the
// model sees a tool failure) or modify (arguments the tool's input schema refuses are
// INVALID_ARGUMENT, and the call waits on; the action stage validates them again); or on a plan
// waiting for approval (call_id "plan", approvePlan): approve or reject. The run resumes
// when every paused call of its turn is decided. Any replica takes the decision for
// any run: it is stored, and the run's owner (or whichever replica resumes the run) applies it.
// A decision past the pause's expires_at is NOT_FOUND: the run takes none after it.
func (s *Service) ResolveApproval(ctx context.Context, req *agentv1.ResolveApprovalRequest) (*agentv1.ResolveApprovalResponse, error) {
	if err := validateResolveApproval(req); err != nil {
		return nil, err
	}
	if err := s.authorizeRun(ctx, auth.ActionApprove, req.GetRunId()); err != nil {
		return nil, err
	}
	if s.store != nil {
		return s.resolveStored(ctx, req)
	}
	r := s.liveRun(req.GetRunId())
	if r == nil {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q is not live on this orchestrator", req.GetRunId())
	}
	return r.resolve(ctx, req)
}

// resolveStored records a decision in the store, for the run's owner to apply.
//
// It reads the run's recorded decisions before its checkpoint: a run that ends (a rejection
// that ends it, say) writes its FINISHED checkpoint before it purges its decisions, so a
// checkpoint still waiting for approval means the decisions read before it were all there.
// The other order let a decision after the ending one be taken, when the run finished and
// retired between the two reads (TestRejectionThatEndsTheRun, once in CI).
func (s *Service) resolveStored(ctx context.Context, req *agentv1.ResolveApprovalRequest) (*agentv1.ResolveApprovalResponse, error) {
	runID, callID := req.GetRunId(), req.GetCallId()
	stored, err := s.store.Decisions(ctx, runID)
	if err != nil {
		return nil, storeErr(ctx, runID, err)
	}
	cp, _, err := s.store.Load(ctx, runID)
	switch {
	case errors.Is(err, runstore.ErrNotFound):
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q has no tool call waiting for approval", runID)
	case err != nil:
		return nil, storeErr(ctx, runID, err)
	}
	if d := stored[callID]; d != nil && proto.Equal(d, req) {
		switch taken, err := s.decidedBy(ctx, req); {
		case err != nil:
			return nil, err
		case taken:
			return decisionTaken(cp, stored, req), nil
		}
	}
	if cp.GetPhase() != checkpointv1.Phase_PHASE_AWAITING_APPROVAL {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q has no tool call waiting for approval", runID)
	}
	st := pauseDecisions(cp, stored)
	if !slices.ContainsFunc(cp.GetPending().GetToolCalls(), func(c *typev1.ToolCall) bool { return c.GetId() == callID }) {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND,
			"run %q has no tool call %q waiting for approval; waiting: %s", runID, callID, strings.Join(st.undecided(), ", "))
	}
	if err := s.approvalExpired(runID, callID, cp.GetPending()); err != nil {
		return nil, err
	}
	if d, decided := st.decisions[callID]; decided {
		if d.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_UNSPECIFIED {
			// Timed out: the run closed the pause at its expires_at, by its owner's clock,
			// which may be ahead of this replica's.
			return nil, pauseExpired(runID, callID, cp.GetPending())
		}
		return nil, alreadyDecided(runID, callID)
	}
	if err := planDecisionError(cp.GetPending(), req); err != nil {
		return nil, err
	}
	if err := modifiedArgumentsError(cp.GetPending(), cp.GetAvailable(), req); err != nil {
		return nil, err
	}
	if stop := st.stopper(cp.GetContract()); stop != nil {
		return nil, endingAlready(runID, stop.GetCallId())
	}
	if err := s.cancelling(ctx, runID, "no call is decided"); err != nil {
		return nil, err
	}
	switch err := s.store.Decide(ctx, req, principalID(ctx)); {
	case errors.Is(err, runstore.ErrCancelled): // a CancelRun came since cancelling read
		return nil, cancelled(runID, "no call is decided")
	case errors.Is(err, runstore.ErrExists):
		// The run closed the pause at its deadline, meanwhile (see above); or another decision
		// came first, or this one, sent again while the first was being stored.
		in, err := s.store.Decided(ctx, runID, callID)
		if errors.Is(err, runstore.ErrCancelled) {
			return nil, cancelled(runID, "no call is decided")
		}
		if err == nil &&
			in.Decision.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_UNSPECIFIED {
			return nil, pauseExpired(runID, callID, cp.GetPending())
		}
		if err == nil && retryOf(ctx, in.Decision, req, in.By) {
			stored[callID] = req
			return decisionTaken(cp, stored, req), nil
		}
		if err := s.approvalExpired(runID, callID, cp.GetPending()); err != nil {
			return nil, err
		}
		return nil, alreadyDecided(runID, callID)
	case errors.Is(err, runstore.ErrNotFound): // the run ended, and retired, since it was read
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q has no tool call waiting for approval", runID)
	case err != nil:
		return nil, storeErr(ctx, runID, err)
	}
	stored[callID] = req
	return decisionTaken(cp, stored, req), nil
}

// pauseDecisions is the approval state of the pause checkpoint cp waits in, with the decisions
// the run's owner took and those recorded for it (stored).
func pauseDecisions(
	cp *checkpointv1.RunCheckpoint, stored map[string]*agentv1.ResolveApprovalRequest,
) *approvalState {
	st := restoreApproval(cp) // the decisions the owner took, and those handed to it
	for id, d := range stored {
		if _, ok := st.decisions[id]; !ok {
			st.decisions[id] = d
		}
	}
	return st
}

// decisionTaken answers decision req, recorded, on the run whose checkpoint is cp and whose
// recorded decisions are stored: the calls the pause still waits for, none when it waits no
// more (a run that went on, or ends, with the decision).
func decisionTaken(
	cp *checkpointv1.RunCheckpoint, stored map[string]*agentv1.ResolveApprovalRequest,
	req *agentv1.ResolveApprovalRequest,
) *agentv1.ResolveApprovalResponse {
	var remaining []string
	waiting := cp.GetPhase() == checkpointv1.Phase_PHASE_AWAITING_APPROVAL
	if waiting && !endsRun(cp.GetContract(), req) {
		remaining = pauseDecisions(cp, stored).undecided()
	}
	return &agentv1.ResolveApprovalResponse{RunId: req.GetRunId(), CallId: req.GetCallId(),
		PendingCallIds: remaining, Resumed: len(remaining) == 0}
}

// decidedBy reports whether decision req is the one recorded on its call, by the caller: a
// retry of a call whose answer was lost (its caller saw UNAVAILABLE), which gets what the
// first got instead of "already decided". It is the error the first got when the decision was
// recorded after the run's cancellation, which the run never takes (runstore.ErrCancelled).
func (s *Service) decidedBy(
	ctx context.Context, req *agentv1.ResolveApprovalRequest,
) (bool, error) {
	in, err := s.store.Decided(ctx, req.GetRunId(), req.GetCallId())
	switch {
	case err != nil && !errors.Is(err, runstore.ErrCancelled),
		!retryOf(ctx, in.Decision, req, in.By):
		return false, nil
	case err != nil:
		return false, cancelled(req.GetRunId(), "no call is decided")
	}
	return true, nil
}

// retryOf reports whether req is recorded (the input the store holds, given by by) sent again
// by the caller of ctx who gave it: a decision or an answer whose call's answer was lost, which
// gets what the first call got.
func retryOf(ctx context.Context, recorded, req proto.Message, by string) bool {
	return proto.Equal(recorded, req) && by == principalID(ctx)
}

func alreadyDecided(runID, callID string) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "tool call %q of run %q is already decided", callID, runID)
}

// WatchRun streams a run's events from JetStream, after from_seq, until run_finished; any
// replica serves any run.
func (s *Service) WatchRun(req *agentv1.WatchRunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	return s.watchRun(req, stream, false)
}

// errPausedHere ends a watch at the pause the run waits in now (watchRun's toPause).
var errPausedHere = errors.New("the run waits at this pause")

// watchRun is WatchRun; with toPause it also ends at an event that leaves the run at a pause
// (atPause) and is the run's last event so far, the pause it waits in now, as StreamRun ends at
// a pause: a StreamRun repeated with the idempotency key of a run that paused replays its
// events up to the pause and ends there, where it streamed on until the pause was decided (a
// client reading to the end, as the first call let it, waited up to approval_timeout_ms).
//
// A replica that begins to drain ends its watches UNAVAILABLE (errWatchMoved), for their
// clients to watch on through another replica.
func (s *Service) watchRun(req *agentv1.WatchRunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent], toPause bool) error {
	ctx, stop := s.untilDrain(stream.Context())
	defer stop()
	sent := req.GetFromSeq()
	err := s.watchEvents(ctx, req, stream, toPause, &sent)
	if errors.Is(err, context.Canceled) && stream.Context().Err() == nil &&
		errors.Is(context.Cause(ctx), errWatchDrained) {
		return errWatchMoved(req.GetRunId(), sent)
	}
	return err
}

// watchEvents is watchRun in ctx, which ends when the replica drains; it advances *sent to
// the seq of each event sent.
func (s *Service) watchEvents(ctx context.Context, req *agentv1.WatchRunRequest,
	stream grpc.ServerStreamingServer[eventv1.RunEvent], toPause bool, sent *uint64,
) error {
	if err := checkRunID(req.GetRunId()); err != nil {
		return err
	}
	// Authorised first: a run the caller may not read is NOT_FOUND as one that does not
	// exist, whether or not its events are kept.
	if err := s.authorizeRun(ctx, auth.ActionRead, req.GetRunId()); err != nil {
		return err
	}
	if err := s.runExists(ctx, req.GetRunId()); err != nil {
		return err
	}
	err := events.Watch(ctx, s.js, req.GetRunId(), *sent, func(ctx context.Context, ev *eventv1.RunEvent) error {
		// The whole result of a run_finished is read for as long as the caller waits, also
		// when the replica begins to drain meanwhile: the event is the watch's last.
		whole := detached{Context: context.WithoutCancel(ctx), until: stream.Context()}
		if err := stream.Send(s.wholeResult(whole, ev)); err != nil {
			return err
		}
		*sent = ev.GetSeq()
		if toPause && atPause(ev) {
			if last, err := events.LastPosition(ctx, s.js, req.GetRunId()); err == nil && last.Seq == ev.GetSeq() {
				return errPausedHere
			}
		}
		return nil
	})
	if errors.Is(err, errPausedHere) {
		return nil
	}
	return err
}

// atPause reports whether ev leaves its run waiting for a person while no event follows it:
// the pause's approval_requested or input_requested, or the run_resumed of a replica that took
// the paused run over (a drain handed it off, or its owner died), which asks nothing again.
func atPause(ev *eventv1.RunEvent) bool {
	if ev.GetApprovalRequested() != nil || ev.GetInputRequested() != nil {
		return true
	}
	switch ev.GetRunResumed().GetPhase() {
	case phaseName(checkpointv1.Phase_PHASE_AWAITING_APPROVAL), phaseName(checkpointv1.Phase_PHASE_AWAITING_INPUT):
		return true
	}
	return false
}

// wholeResult is ev with the whole result in a run_finished whose result did not fit in one
// NATS message (from the run while it is live on this replica, else read back from the
// checkpoint store or the memory stage).
func (s *Service) wholeResult(ctx context.Context, ev *eventv1.RunEvent) *eventv1.RunEvent {
	fin := ev.GetRunFinished()
	if fin == nil || !fin.GetResultOmitted() {
		return ev
	}
	res, err := s.omittedResult(ctx, ev.GetRunId())
	if err != nil {
		s.log.WarnContext(ctx, "reading an omitted result failed; sending the summary", "run_id", ev.GetRunId(), "err", err)
		return ev
	}
	out := proto.CloneOf(ev)
	out.GetRunFinished().Result, out.GetRunFinished().ResultOmitted = res, false
	return out
}

// omittedResult is the whole result of a finished run whose run_finished event left it out.
// A run live on this replica hands its result to its callers only once its run_finished is
// stored, so GetRun, which finds it still executing until then, is not asked: its result is
// waited for (a watcher that read run_finished at once got FAILED_PRECONDITION there, and the
// event without its result). The caller may read the run already.
func (s *Service) omittedResult(ctx context.Context, runID string) (*typev1.RunResult, error) {
	if r := s.liveRun(runID); r != nil {
		return r.waitFinished(ctx)
	}
	return s.GetRun(ctx, &agentv1.GetRunRequest{RunId: runID})
}

// eventLookupTimeout bounds runExists's look for a run's events: one NATS leaves unanswered
// (it is down) fails after it, UNAVAILABLE, instead of waiting for the caller's deadline.
const eventLookupTimeout = 5 * time.Second

// runExists reports NOT_FOUND for a run to watch that is neither unfinished in the store nor
// has events in the stream. A finished run must have events: its tombstone outlives them when
// durability.idempotency_ttl_ms is longer than nats.stream_max_age_ms (or nats.stream_max_bytes
// dropped them), and a watch of it waited for good for a run_finished no longer kept.
func (s *Service) runExists(ctx context.Context, runID string) error {
	if s.liveRun(runID) != nil {
		return nil
	}
	if s.store != nil {
		if cp, err := s.store.State(ctx, runID); err == nil && cp.GetPhase() != checkpointv1.Phase_PHASE_FINISHED {
			return nil
		}
	}
	lctx, cancel := context.WithTimeout(ctx, eventLookupTimeout)
	defer cancel()
	at, err := events.LastPosition(lctx, s.js, runID)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR, "looking up run %q: %w", runID, err)
	}
	if at.Seq == 0 {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q has no events", runID)
	}
	return nil
}
