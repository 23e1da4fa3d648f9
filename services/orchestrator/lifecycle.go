package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
)

// existingRun is start's answer to an idempotency key that already names a run: the caller
// attaches to that run instead of starting one (once it is stored: awaitStored), unless the
// key was claimed for another request (otherRequest).
type existingRun struct {
	id, userID, key string
	otherRequest    bool // the key's claim holds another request's fingerprint
}

// keyClaim is the claim r makes on its idempotency key: its id and its request's fingerprint.
func keyClaim(r *run) runstore.KeyClaim {
	return runstore.KeyClaim{RunID: r.id, Request: requestFingerprint(r.req)}
}

// foundRun is the existingRun that c, the claim r's idempotency key holds, names; mine is the
// claim r made or would make (keyClaim).
func foundRun(r *run, mine, c runstore.KeyClaim) existingRun {
	return existingRun{id: c.RunID, userID: r.userID, key: r.req.GetIdempotencyKey(),
		otherRequest: c.Request != "" && c.Request != mine.Request}
}

func (e existingRun) Error() string { return "idempotency key already names run " + e.id }

// start validates a request and starts its run, registered live: the caller executes it in
// runCtx (work, runHere). sink, when set, receives every event of the run from the first one
// on. An idempotency key that already names a run returns existingRun.
func (s *Service) start(ctx context.Context, req *agentv1.RunRequest, sink func(*eventv1.RunEvent)) (r *run, runCtx context.Context, err error) {
	if s.isDraining() {
		return nil, nil, errDraining()
	}
	if err := validateRunRequest(req); err != nil {
		return nil, nil, err
	}
	prof, err := s.profile(req.GetProfile())
	if err != nil {
		return nil, nil, err
	}
	runID := req.GetRunId()
	if runID == "" {
		runID = uuid.NewString()
	}
	contract, err := buildContract(prof.contract, runID, req, sink != nil, s.limits, s.ceilings)
	if err != nil {
		return nil, nil, err
	}
	if err := checkEventsKept(contract, s.publisher.MaxAge()); err != nil {
		return nil, nil, err
	}
	outputSchema, err := compileOutputSchema(req.GetOutputSchema())
	if err != nil {
		return nil, nil, stageerr.Invalid("output_schema is not a valid JSON schema: %v", err)
	}
	userID, err := s.callerID(ctx, req.GetUserId())
	if err != nil {
		return nil, nil, err
	}
	release, err := s.admit(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	r = &run{
		svc: s, id: runID, userID: userID, req: req, done: make(chan struct{}), contract: contract,
		chain: transcript.NewChain(contract.GetAdapterVersion(), modelProfile(contract)), stream: s.publisher.Run(runID, s.runOptions...),
		usage: &typev1.TokenUsage{}, sink: sink, outputSchema: outputSchema, changed: make(chan struct{}), moved: make(chan struct{}),
		counter: tokens.ForModel(firstModel(contract)), startedAt: s.now(), inputs: newInbox(),
	}
	if mode := transportMode(contract); mode != xmltransport.ModeNative {
		r.xml = xmltransport.NewSession(mode) // the nonce is fixed for the run; slots continue across turns
	}
	r.conversation = append(r.conversation, &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: prof.prompt})
	r.conversation = append(r.conversation, req.GetHistory()...)
	r.conversation = append(r.conversation, &typev1.Message{Role: typev1.Role_ROLE_USER, Content: req.GetMessage()})

	if s.store == nil {
		if err := s.reserveLocal(ctx, r); err != nil {
			return nil, nil, err
		}
	} else if err := s.reserve(ctx, r); err != nil {
		return nil, nil, err
	}
	runCtx = s.runContext(context.WithoutCancel(ctx), r, "agentmesh.run")
	r.traceparent, r.tracestate = telemetry.TraceContextOf(runCtx)
	if s.store != nil {
		head, err := s.store.Create(ctx, r.snapshot(checkpointv1.Phase_PHASE_STARTED, nil, nil))
		if err != nil && !errors.Is(err, runstore.ErrExists) {
			s.discardUnstored(ctx, r)
		}
		if err == nil && req.GetRunId() != "" { // a generated id is new; a caller's may be a retired run's
			err = s.checkRetired(ctx, runID)
		}
		if err == nil && req.GetIdempotencyKey() != "" {
			err = s.checkClaim(ctx, r)
		}
		if err != nil {
			refused := refusal(err, runID)
			if e := stageerr.As(refused); e != nil {
				// Refused, not answered with another run: the span says why, as a failed run's.
				r.span.SetAttributes(semconv.ErrorTypeKey.String(stageerr.CodeName(e.Code)))
				r.span.SetStatus(codes.Error, e.Error())
			}
			r.span.End()
			r.timer.Stop()
			r.cancel(err)
			s.unreserve(ctx, r)
			return nil, nil, refused
		}
		r.head = head
	}
	if !s.register(runCtx, r) {
		s.handBack(runCtx, r)
		return nil, nil, errMoved(r.id)
	}
	return r, runCtx, nil
}

// discardUnstored discards what a Create of r that failed may have stored all the same (a
// write NATS stored whose answer was lost; the first checkpoint, stored before the run's entry
// among the active runs failed). Its caller is told the store failed, and retries; a run kept
// stored was adopted by this replica's keeper as its own from before a restart, and ran
// besides the run the retry started. A checkpoint of another run (a caller's run id that
// another request took) is left alone; one that cannot be read or discarded now is discarded
// by the keeper (see refuse), not resumed.
func (s *Service) discardUnstored(ctx context.Context, r *run) {
	ctx = context.WithoutCancel(ctx)
	cp, err := s.store.State(ctx, r.id)
	mine := cp.GetReplica() == s.replica && cp.GetStartedAt().AsTime().Equal(r.startedAt)
	switch {
	case errors.Is(err, runstore.ErrNotFound):
		return // nothing stored
	case err == nil && !mine:
		return // another run's
	case err == nil:
		err = s.store.Discard(ctx, r.id)
	}
	if err != nil {
		s.log.WarnContext(ctx, "discarding a run whose storing failed failed; the keeper discards it later",
			"run_id", r.id, "err", err)
		s.refuse(r.id)
	}
}

// refusal is start's answer to err, the failure to store a new run runID: existingRun and
// errKeyFreed as they are (the caller answers with the run the key names, or starts again), a
// run id in use ALREADY_EXISTS, anything else STORAGE_ERROR.
func refusal(err error, runID string) error {
	switch {
	case errors.As(err, new(existingRun)) || errors.Is(err, errKeyFreed):
		return err
	case errors.Is(err, runstore.ErrExists):
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS, "run %q already exists", runID)
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR, "storing run %q: %w", runID, err)
}

// reserve claims the run's idempotency key in the store; a key that names another run is
// existingRun. The run's id is taken with its first checkpoint (Create), which also names this
// replica its owner.
func (s *Service) reserve(ctx context.Context, r *run) error {
	if key := r.req.GetIdempotencyKey(); key != "" {
		mine := keyClaim(r)
		existing, err := s.store.Claim(ctx, r.userID, key, mine)
		switch {
		case errors.Is(err, runstore.ErrExists):
			return foundRun(r, mine, existing)
		case err != nil:
			return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR, "claiming idempotency key: %w", err)
		}
	}
	s.mu.Lock()
	s.starting[r.id] = true // not adopted by our own keeper while it starts
	s.mu.Unlock()
	return nil
}

// unreserve gives back what reserve took for a run that does not start.
func (s *Service) unreserve(ctx context.Context, r *run) {
	if s.store == nil {
		s.mu.Lock()
		delete(s.idempotency, idempotencyKey{r.userID, r.req.GetIdempotencyKey()})
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	delete(s.starting, r.id)
	s.mu.Unlock()
	if key := r.req.GetIdempotencyKey(); key != "" {
		_ = s.store.Unclaim(context.WithoutCancel(ctx), r.userID, key, r.id) // even when the caller has gone
	}
}

// reserveLocal is reserve without a store: the key and the run id are checked on this replica
// only, and a caller's run id against the runs whose events the stream keeps and the finished
// runs the memory stage keeps. The events outlive the memory stage's copy (its in-memory store
// forgets runs, nats.stream_max_age_ms keeps events a week): a run that took the id of one
// whose events are kept would add its events to theirs, and its caller, its owner, could watch
// the other run's, another user's.
func (s *Service) reserveLocal(ctx context.Context, r *run) error {
	if r.req.GetRunId() != "" {
		switch err := s.runExists(ctx, r.id); {
		case err == nil:
			return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS, "run %q already exists", r.id)
		case stageerr.FromError(err).Code != typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND:
			return err
		}
		// A run of another user is there too, though the memory stage does not show it.
		_, err := whenReady(auth.OutgoingUser(ctx, r.userID), "memory", s.peers.Memory.GetRun, &memoryv1.GetRunRequest{RunId: r.id})
		switch code := stageerr.FromError(err).Code; {
		case err == nil || code == typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED:
			return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS, "run %q already exists", r.id)
		case code != typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND:
			return stageerr.Errorf(code, "cannot tell whether run %q exists: %v", r.id, stageerr.FromError(err).Msg)
		}
	}
	key := r.req.GetIdempotencyKey()
	var mine runstore.KeyClaim
	if key != "" {
		mine = keyClaim(r) // hashed before the lock: a request may be megabytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		if c, ok := s.idempotency[idempotencyKey{r.userID, key}]; ok {
			return foundRun(r, mine, c)
		}
		s.idempotency[idempotencyKey{r.userID, key}] = mine
	}
	if _, dup := s.live[r.id]; dup {
		delete(s.idempotency, idempotencyKey{r.userID, key})
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS, "run %q already exists", r.id)
	}
	return nil
}

// runContext returns the context a run executes in, below parent: cancellable with a cause,
// ended by total_timeout_ms counted from the run's start, in the run's span named name. Its
// calls to the stages act for the run's user (auth.OutgoingUser), which the memory stage
// holds them to.
func (s *Service) runContext(parent context.Context, r *run, name string) context.Context {
	// One cancellable context serves both the run's cancellation and its total timeout (an
	// idle run holds every context it made while it waits: issue 15).
	ctx, cancel := context.WithCancelCause(auth.OutgoingUser(parent, r.userID))
	total := time.Duration(r.contract.GetTotalTimeoutMs())*time.Millisecond - s.now().Sub(r.startedAt)
	r.timer = time.AfterFunc(total, func() { cancel(errTotalTimeout) })
	ctx, span := s.tracer.Start(ctx, name, trace.WithAttributes(telemetry.RunIDKey.String(r.id)))
	r.cancel, r.span = cancel, span
	return ctx
}

// launch registers the run as live on this replica and executes it in the background.
func (s *Service) launch(ctx context.Context, r *run) {
	if !s.register(ctx, r) {
		s.handBack(ctx, r)
		return
	}
	go s.work(ctx, r)
}

// work executes a registered run, and retires it once its work here is over.
func (s *Service) work(ctx context.Context, r *run) {
	defer s.retire(ctx, r)
	r.main(ctx)
}

// register makes the run live on this replica: found by its id, counted as active. Once the
// replica drains it registers nothing and reports false: Drain hands off the runs live when
// it begins (it closes draining before it lists them, and both happen under s.mu here), and a
// run started or adopted in the meantime would otherwise go on on a replica going away.
func (s *Service) register(ctx context.Context, r *run) bool {
	s.mu.Lock()
	delete(s.starting, r.id)
	if s.isDraining() {
		s.mu.Unlock()
		return false
	}
	s.live[r.id] = r
	s.mu.Unlock()
	s.metrics.active.Add(ctx, 1)
	if s.countRuns != nil {
		s.countRuns(1)
	}
	return true
}

// handBack gives up a run stored but never live here, because the replica began to drain
// while it started or was adopted: it is handed off, so another replica adopts it at once from
// its checkpoint.
func (s *Service) handBack(ctx context.Context, r *run) {
	r.timer.Stop()
	r.cancel(errHandOff)
	r.span.End()
	r.handOff(ctx)
	s.log.InfoContext(ctx, "run handed off before it began here: the replica is draining", "run_id", r.id)
}

// retire ends what register and runContext began, once the run's work here is over. A
// finished run's records in the store are retired on a goroutine of its own (retireStored),
// retireDelay later, so that its caller has its result at once; the run stays live, found by
// GetRun and waited for by Drain, until they are.
func (s *Service) retire(ctx context.Context, r *run) {
	if s.countRuns != nil {
		s.countRuns(-1)
	}
	r.timer.Stop()
	r.cancel(nil)
	r.span.End()
	if r.retireStored != nil {
		s.retiring.Go(func() {
			s.awaitRetireDelay()
			r.retireStored()
			s.forget(ctx, r)
		})
		return
	}
	s.forget(ctx, r)
}

// retireDelay is how long a finished run's records wait before they are retired. NATS's file
// store deletes a stream's block file when a purge empties the stream, and creates a new file
// for the stream's next message: a run retired at once while no other run is in flight
// empties the streams of the checkpoints, the checkpoint logs and the active runs, so that one
// run after another paid three file creations and deletions each, 7% of a lone 10-turn run's
// CPU (issue 15). A moment later the next runs have written to those streams, and a purge
// only marks the retired run's messages deleted.
const retireDelay = 100 * time.Millisecond

// awaitRetireDelay waits retireDelay, or until the replica drains: a drain retires at once
// what it can.
func (s *Service) awaitRetireDelay() {
	t := time.NewTimer(retireDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.draining:
	}
}

// forget removes a retired run from this replica.
func (s *Service) forget(ctx context.Context, r *run) {
	s.mu.Lock()
	delete(s.live, r.id)
	s.mu.Unlock()
	s.metrics.active.Add(context.WithoutCancel(ctx), -1)
	close(r.done)
}

// main executes the run on this replica: from the start, or from its checkpoint when resumed.
func (r *run) main(ctx context.Context) {
	if r.svc.store != nil {
		r.watchInputs(ctx)
	}
	switch {
	case r.resumeFrom == nil:
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_RunStarted{RunStarted: &eventv1.RunStarted{
			UserId: r.userID, ConversationId: r.req.GetConversationId(), Message: r.req.GetMessage(), Contract: r.contract,
		}}})
	case r.resumeFrom.GetPhase() == checkpointv1.Phase_PHASE_FINISHED:
		r.finishStored(ctx, r.resumeFrom.GetResult())
		return
	default:
		r.markResumed(ctx)
	}
	r.execute(ctx)
}

// watchInputs takes what other replicas hand the run (decisions, answers, cancellation) until
// ctx ends: a cancellation cancels the run at once, the rest waits in r.inputs for the run's
// waits to take it. Inputs come in the order they were recorded, and none after the
// cancellation is taken: Answer and ResolveApproval told their callers it lost to the
// cancellation (runstore.ErrCancelled). The store calls deliver one input at a time.
func (r *run) watchInputs(ctx context.Context) {
	cancelled := false
	r.svc.store.WatchInputs(ctx, r.id, func(in runstore.Input) {
		switch c := in.Cancel; {
		case c != nil:
			cancelled = true
			r.cancel(cancelCause(c.GetReason(), in.By))
		case !cancelled:
			r.inputs.put(in)
		}
	})
}

// markResumed records in the transcript and the events that this replica took the run over.
func (r *run) markResumed(ctx context.Context) {
	cp := r.resumeFrom
	phase := phaseName(cp.GetPhase())
	st := typev1.RunState_RUN_STATE_RESUMED
	detail := fmt.Sprintf("resumed on %s from the %s checkpoint of turn %d (%s; resume %d)", r.svc.replica, phase, cp.GetTurns(), r.resumeReason, r.resumes)
	r.step(ctx, st, fmt.Sprintf("RESUMED-%d", r.resumes), func(context.Context) (proto.Message, proto.Message, string) {
		return nil, nil, detail
	})
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_RunResumed{RunResumed: &eventv1.RunResumed{
		Replica: r.svc.replica, Turn: cp.GetTurns(), Phase: phase, Resumes: r.resumes, Reason: r.resumeReason,
	}}})
	r.announcePause(ctx)
}

// moveAway ends the run's work on this replica without terminating it: callers waiting here
// are told it moved, and the run, when this replica still owns it, is handed off so that
// another replica resumes it at once (a lost run is someone else's).
func (r *run) moveAway(ctx context.Context, e *ending) {
	close(r.moved)
	r.handOff(ctx)
	r.svc.log.InfoContext(ctx, "run stopped on this replica", "run_id", r.id, "why", e.reason, "turn", r.turns)
}

// handOff gives up the run, when this replica still owns it, noted handed off, so that
// another replica resumes it at once (a lost run is someone else's).
func (r *run) handOff(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if err := r.svc.store.HandOff(ctx, r.id, r.svc.replica); err != nil && !errors.Is(err, runstore.ErrConflict) {
		r.svc.log.WarnContext(ctx, "handing a run off failed; it is adopted once this replica's heartbeat is gone", "run_id", r.id, "err", err)
	}
}

// restoreRun rebuilds a run from its checkpoint, to be launched on this replica: its spans
// join the run's trace through the stored trace context, and its events continue after the
// last one stored.
func (s *Service) restoreRun(ctx context.Context, cp *checkpointv1.RunCheckpoint, head *runstore.Head, reason string) (*run, context.Context, error) {
	r := &run{
		svc: s, id: cp.GetRunId(), done: make(chan struct{}), changed: make(chan struct{}), moved: make(chan struct{}), head: head,
		resumeFrom: cp, resumeReason: reason, inputs: newInbox(),
	}
	if err := r.restore(cp); err != nil {
		return nil, nil, fmt.Errorf("restoring the checkpoint of run %s: %w: %w",
			r.id, runstore.ErrUnreadable, err)
	}
	r.resumes++
	at, err := events.LastPosition(ctx, s.js, r.id)
	if err != nil {
		return nil, nil, err
	}
	at.Seq = max(at.Seq, cp.GetEventSeq())
	r.stream = events.NewRunStreamAt(s.publisher, r.id, at, s.runOptions...)
	parent := telemetry.WithTraceContext(context.Background(), r.traceparent, r.tracestate)
	name := "agentmesh.run.resumed"
	if cp.GetPhase() == checkpointv1.Phase_PHASE_FINISHED {
		name = "agentmesh.run.finish"
		// The run is finished and its result stored: while this replica saves it again (for as
		// long as the memory stage is down), GetRun and Run's waiters here get that result, as on
		// every other replica, not "still running".
		r.result = cp.GetResult()
	}
	return r, s.runContext(parent, r, name), nil
}

// phaseName is a phase as events and the transcript show it, e.g. "awaiting_approval".
func phaseName(p checkpointv1.Phase) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "PHASE_"))
}

// checkRetired refuses (runstore.ErrExists) a run just created with the id of a retired run
// whose tombstone still keeps it taken (runstore.Finish), and discards what Create stored of
// it. It looks after Create: a retiring run's tombstone is stored before its checkpoint goes,
// so a Create that succeeds because the checkpoint is gone finds the tombstone. A run whose
// tombstone cannot be read is refused too (its caller is told the store failed), and
// discarded even when its caller has gone; one whose discarding fails is discarded by this
// replica's keeper (see refuse), not resumed.
func (s *Service) checkRetired(ctx context.Context, runID string) error {
	taken, err := s.store.Taken(ctx, runID)
	if err == nil && !taken {
		return nil
	}
	if derr := s.store.Discard(context.WithoutCancel(ctx), runID); derr != nil {
		s.log.WarnContext(ctx, "discarding a run refused at its start failed; the keeper discards it later", "run_id", runID, "err", derr)
		s.refuse(runID)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: run %s was retired", runstore.ErrExists, runID)
}

// refuse records a run refused at its start whose records could not be discarded: the keeper
// finds it among this replica's runs, as it finds those of a replica that restarted, and
// discards it instead of resuming it (discardRefused). Only this replica knows: were it to die
// first, the replica that adopts the run resumes it unless a tombstone holds its id.
func (s *Service) refuse(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused[runID] = true
}

// discardRefused discards runID's records when this replica refused the run at its start
// (refuse), and reports whether it did or tried: a run that could not be discarded now stays
// refused, for the keeper's next pass.
func (s *Service) discardRefused(ctx context.Context, runID string) bool {
	s.mu.Lock()
	refused := s.refused[runID]
	s.mu.Unlock()
	if !refused {
		return false
	}
	if err := s.store.Discard(ctx, runID); err != nil {
		s.log.WarnContext(ctx, "discarding a run refused at its start failed; trying again at the next pass", "run_id", runID, "err", err)
		return true
	}
	s.mu.Lock()
	delete(s.refused, runID)
	s.mu.Unlock()
	s.log.InfoContext(ctx, "discarded a run refused at its start", "run_id", runID)
	return true
}
