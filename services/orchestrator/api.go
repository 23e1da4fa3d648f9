package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// MaxMessageBytes is the largest user message a run accepts.
const MaxMessageBytes = 1 << 20

// Run invokes an agent and returns its result at a terminal outcome, or a snapshot with
// OUTCOME_AWAITING_APPROVAL when it pauses for approval. The run belongs to the orchestrator,
// not to the call: if the caller goes away, the run goes on and can be watched or read back.
func (s *Service) Run(ctx context.Context, req *agentv1.RunRequest) (*typev1.RunResult, error) {
	if id, live := s.idempotentRun(req.GetIdempotencyKey()); id != "" && !live {
		return s.GetRun(ctx, &agentv1.GetRunRequest{RunId: id})
	}
	r, err := s.start(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	return r.waitResult(ctx)
}

// StreamRun runs an agent and streams its events; the last one is run_finished, or
// approval_requested for a run that pauses (follow it on with WatchRun).
func (s *Service) StreamRun(req *agentv1.RunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	if id, _ := s.idempotentRun(req.GetIdempotencyKey()); id != "" {
		// A repeated request replays the first run's events instead of running again.
		return s.WatchRun(&agentv1.WatchRunRequest{RunId: id}, stream)
	}
	q := newEventQueue()
	r, err := s.start(stream.Context(), req, q.push)
	if err != nil {
		return err
	}
	defer r.setSink(nil)
	for {
		ev, ok := q.pop(stream.Context())
		if !ok {
			return stream.Context().Err()
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
		if ev.GetRunFinished() != nil || ev.GetApprovalRequested() != nil {
			return nil
		}
	}
}

// start validates a request and launches its run in the background. sink, when set, receives
// every event of the run from the first one on.
func (s *Service) start(ctx context.Context, req *agentv1.RunRequest, sink func(*eventv1.RunEvent)) (*run, error) {
	if err := validateRunRequest(req); err != nil {
		return nil, err
	}
	runID := req.GetRunId()
	if runID == "" {
		runID = uuid.NewString()
	}
	contract, err := buildContract(s.contract, runID, req)
	if err != nil {
		return nil, err
	}
	outputSchema, err := compileOutputSchema(req.GetOutputSchema())
	if err != nil {
		return nil, stageerr.Invalid("output_schema is not a valid JSON schema: %v", err)
	}
	userID := req.GetUserId()
	if userID == "" {
		userID = "anonymous"
	}

	s.mu.Lock()
	if key := req.GetIdempotencyKey(); key != "" {
		if id, ok := s.idempotency[key]; ok {
			existing := s.live[id]
			s.mu.Unlock()
			if existing != nil {
				return existing, nil
			}
			return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
				"idempotency key %q already ran as run %q; read it with GetRun", key, id)
		}
		s.idempotency[key] = runID
	}
	if _, dup := s.live[runID]; dup {
		s.mu.Unlock()
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "run %q is already running", runID)
	}
	base := context.WithoutCancel(ctx)
	runCtx, cancel := context.WithCancelCause(base)
	runCtx, stopTimer := withTimer(runCtx, time.Duration(contract.GetTotalTimeoutMs())*time.Millisecond, errTotalTimeout)
	runCtx, span := s.tracer.Start(runCtx, "agentmesh.run", trace.WithAttributes(attribute.String("agentmesh.run_id", runID)))
	r := &run{
		svc: s, id: runID, userID: userID, req: req, cancel: cancel, done: make(chan struct{}), span: span,
		contract: contract, chain: transcript.NewChain(contract.GetAdapterVersion(), modelProfile(contract)),
		stream: s.publisher.Run(runID), usage: &typev1.TokenUsage{}, sink: sink, outputSchema: outputSchema,
		changed: make(chan struct{}), counter: tokens.ForModel(firstModel(contract)),
	}
	if mode := transportMode(contract); mode != xmltransport.ModeNative {
		r.xml = xmltransport.NewSession(mode) // the nonce is fixed for the run; slots continue across turns
	}
	r.conversation = append(r.conversation, &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: s.prompt})
	r.conversation = append(r.conversation, req.GetHistory()...)
	r.conversation = append(r.conversation, &typev1.Message{Role: typev1.Role_ROLE_USER, Content: req.GetMessage()})
	s.live[runID] = r
	s.mu.Unlock()

	go func() {
		defer func() {
			stopTimer()
			cancel(nil)
			span.End()
			s.mu.Lock()
			delete(s.live, runID)
			s.mu.Unlock()
			close(r.done)
		}()
		r.emit(runCtx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_RunStarted{RunStarted: &eventv1.RunStarted{
			UserId: userID, ConversationId: req.GetConversationId(), Message: req.GetMessage(), Contract: contract,
		}}})
		r.execute(runCtx)
	}()
	return r, nil
}

// idempotentRun returns the run an idempotency key already started, and whether it is live.
func (s *Service) idempotentRun(key string) (runID string, live bool) {
	if key == "" {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	runID = s.idempotency[key]
	_, live = s.live[runID]
	return runID, live
}

func (r *run) finalResult() *typev1.RunResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.result
}

func firstModel(c *typev1.ExecutionContract) string {
	if len(c.GetTargets()) == 0 {
		return ""
	}
	return c.GetTargets()[0].GetModel()
}

// modelProfile names the contract's first target ("none" without targets; PRECHECK then
// fails the run).
func modelProfile(c *typev1.ExecutionContract) string {
	if len(c.GetTargets()) == 0 {
		return "none"
	}
	return c.GetTargets()[0].GetProvider() + "/" + c.GetTargets()[0].GetModel()
}

func validateRunRequest(req *agentv1.RunRequest) error {
	if len(req.GetMessage()) > MaxMessageBytes {
		return stageerr.Invalid("message is %d bytes; the limit is %d", len(req.GetMessage()), MaxMessageBytes)
	}
	if id := req.GetRunId(); id != "" {
		if err := events.ValidRunID(id); err != nil {
			return stageerr.Invalid("run_id: %v", err)
		}
	}
	for i, m := range req.GetHistory() {
		if m.GetRole() == typev1.Role_ROLE_UNSPECIFIED {
			return stageerr.Invalid("history[%d].role is unspecified", i)
		}
	}
	return nil
}

// GetRun returns the stored result of a finished run.
func (s *Service) GetRun(ctx context.Context, req *agentv1.GetRunRequest) (*typev1.RunResult, error) {
	if req.GetRunId() == "" {
		return nil, stageerr.Invalid("run_id must not be empty")
	}
	s.mu.Lock()
	r := s.live[req.GetRunId()]
	s.mu.Unlock()
	if r != nil {
		r.mu.Lock()
		paused := r.result
		r.mu.Unlock()
		if paused != nil {
			return paused, nil
		}
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
			"run %q is still running; follow it with WatchRun", req.GetRunId())
	}
	resp, err := s.peers.Memory.GetRun(ctx, &memoryv1.GetRunRequest{RunId: req.GetRunId()})
	if err != nil {
		return nil, stageerr.FromError(err)
	}
	return resp.GetResult(), nil
}

// CancelRun ends a live run with OUTCOME_INTERRUPTED and waits until it has terminated.
func (s *Service) CancelRun(ctx context.Context, req *agentv1.CancelRunRequest) (*agentv1.CancelRunResponse, error) {
	if req.GetRunId() == "" {
		return nil, stageerr.Invalid("run_id must not be empty")
	}
	s.mu.Lock()
	r := s.live[req.GetRunId()]
	s.mu.Unlock()
	if r == nil {
		res, err := s.GetRun(ctx, &agentv1.GetRunRequest{RunId: req.GetRunId()})
		if err != nil {
			return nil, err
		}
		return &agentv1.CancelRunResponse{RunId: req.GetRunId(), Cancelled: false, Outcome: res.GetOutcome()}, nil
	}
	reason := errCancelled
	if req.GetReason() != "" {
		reason = fmt.Errorf("%w: %s", errCancelled, req.GetReason())
	}
	r.cancel(reason)
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res := r.finalResult()
	return &agentv1.CancelRunResponse{RunId: req.GetRunId(), Cancelled: res.GetOutcome() == typev1.Outcome_OUTCOME_INTERRUPTED, Outcome: res.GetOutcome()}, nil
}

// ListTools lists the tools the mesh can execute.
func (s *Service) ListTools(ctx context.Context, _ *agentv1.ListToolsRequest) (*agentv1.ListToolsResponse, error) {
	resp, err := s.peers.Action.ListTools(ctx, &actionv1.ListToolsRequest{})
	if err != nil {
		return nil, stageerr.FromError(err)
	}
	return &agentv1.ListToolsResponse{Tools: resp.GetTools()}, nil
}

// ResolveApproval records a person's decision on a paused tool call: approve, reject (the
// model sees a tool failure) or modify (the new arguments are validated again). The run
// resumes when every paused call of its turn is decided.
func (s *Service) ResolveApproval(ctx context.Context, req *agentv1.ResolveApprovalRequest) (*agentv1.ResolveApprovalResponse, error) {
	switch {
	case req.GetRunId() == "":
		return nil, stageerr.Invalid("run_id must not be empty")
	case req.GetCallId() == "":
		return nil, stageerr.Invalid("call_id must not be empty")
	case req.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_UNSPECIFIED:
		return nil, stageerr.Invalid("decision must be approve, reject or modify")
	case req.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY && req.GetModifiedArguments() == nil:
		return nil, stageerr.Invalid("decision modify needs modified_arguments")
	}
	s.mu.Lock()
	r := s.live[req.GetRunId()]
	s.mu.Unlock()
	if r == nil {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q is not live on this orchestrator", req.GetRunId())
	}
	return r.resolve(ctx, req)
}

// WatchRun streams a run's events from JetStream, after from_seq, until run_finished.
func (s *Service) WatchRun(req *agentv1.WatchRunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	ctx := stream.Context()
	if err := events.ValidRunID(req.GetRunId()); err != nil {
		return stageerr.Invalid("run_id: %v", err)
	}
	if err := s.runExists(ctx, req.GetRunId()); err != nil {
		return err
	}
	return events.Watch(ctx, s.js, req.GetRunId(), req.GetFromSeq(), func(_ context.Context, ev *eventv1.RunEvent) error {
		return stream.Send(ev)
	})
}

// runExists reports NOT_FOUND for a run that never published an event.
func (s *Service) runExists(ctx context.Context, runID string) error {
	s.mu.Lock()
	_, live := s.live[runID]
	s.mu.Unlock()
	if live {
		return nil
	}
	st, err := s.js.Stream(ctx, events.StreamName)
	if err != nil {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR, "event stream unavailable: %w", err)
	}
	if _, err := st.GetLastMsgForSubject(ctx, events.Subject(runID, "run_started")); err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q has no events", runID)
		}
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR, "looking up run %q: %w", runID, err)
	}
	return nil
}
