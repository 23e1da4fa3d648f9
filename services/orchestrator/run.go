package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// run is the state of one run. Its fields are owned by the goroutine executing the run;
// the mutex guards only what other goroutines touch (the event sink and the result).
type run struct {
	svc    *Service
	id     string
	userID string
	req    *agentv1.RunRequest
	// assertion is the last assertion of userID the run signed (asserted).
	assertion atomic.Pointer[userAssertion]

	cancel context.CancelCauseFunc
	done   chan struct{}
	span   trace.Span
	// retireStored, set when the run finished, retires its records in the store
	// (retireRecords); retire calls it on a goroutine of its own, after the run's callers
	// have their result.
	retireStored func()

	// Durability (nil store: none). The checkpoint revision and the phase to resume from are
	// the run goroutine's.
	traceparent  string                      // W3C trace context of the run's first root span
	tracestate   string                      // its tracestate
	startedAt    time.Time                   // total_timeout_ms counts from here, on every replica
	resumes      int32                       // times the run was resumed
	head         *runstore.Head              // where the run's last checkpoint stands
	resumeFrom   *checkpointv1.RunCheckpoint // the checkpoint a resumed run continues from
	resumeReason string                      // why it was resumed
	timer        *time.Timer                 // cancels the run at its total_timeout_ms
	inputs       *inbox                      // decisions and answers handed over, taken by the run's waits

	contract *typev1.ExecutionContract
	chain    *transcript.Chain
	stream   *events.RunStream

	goal         string
	constraints  []string               // from INTENT, for planning
	taskType     string                 // from INTENT ("question", "action", ...), for planning
	available    []*typev1.Tool         // every tool the action service offers
	offered      []*typev1.Tool         // tools this run may use
	reportTool   *typev1.Tool           // final_report, offered for json output (native mode only)
	xml          *xmltransport.Session  // the XML tool transport; nil in native mode
	xmlIgnored   []xmltransport.Ignored // tags of the last answer that were ignored, told to the model next turn
	outputSchema *outputSchema
	tracker      *planTracker // the plan and its progress; nil without one
	conversation []*typev1.Message
	sentUpTo     int // conversation messages already sent to the model
	accounting   []*typev1.AccountingEntry
	usage        *typev1.TokenUsage
	turns        int32
	toolCalls    int32 // executed tool calls
	lastTool     string
	ctxTokens    int64
	recalled     []*memoryv1.MemoryHit // the memories the first turn recalled, shown at every turn
	forcedFinal  bool
	toolsClosed  bool // a tool result overflowed the window: no new tools start (seed 000 §2)
	counter      tokens.Counter
	collapsed    bool  // a final report failed: the next turn is the last (seed 000 §1)
	formatFails  int32 // turns whose output had malformed tool calls
	decision     *typev1.AgentDecision
	// toolBudgetSpent: a call was dropped over max_tool_calls_total, so the next turn is the
	// final one (seed 002 §7).
	toolBudgetSpent bool
	// observedDone: an observation said the run should answer now (should_continue false),
	// so the next turn is a final one.
	observedDone bool
	// unclear: the intent stage could not tell what the user wants, and recovery decided to
	// ask (clarifyIntent); clarification is the user's answer.
	unclear       *askUser
	clarification string

	mu       sync.Mutex
	sink     func(*eventv1.RunEvent)
	result   *typev1.RunResult // the final result, or a snapshot while paused
	stored   *typev1.RunResult // the final result once its FINISHED checkpoint is stored, before finish hands it out
	changed  chan struct{}     // closed (and replaced) whenever result changes
	approval *approvalState    // non-nil while paused for approval
	asking   *questionState    // non-nil while paused for the user's answer
	moved    chan struct{}     // closed when the run stops here to continue on another replica

	// inline: the run executes on a unary Run's handler, so its first pause yields (yield);
	// resume is then the run's work from that pause on, for drive to continue.
	inline bool
	resume func(context.Context) *ending
}

// publish sets the result callers wait for: a paused snapshot, nil once resumed, or the final
// result.
func (r *run) publish(res *typev1.RunResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.result = res
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitResult returns the final result, or a snapshot if the run pauses for a person first;
// UNAVAILABLE when the run moves to another replica before either.
func (r *run) waitResult(ctx context.Context) (*typev1.RunResult, error) {
	return r.waitFor(ctx, func(*typev1.RunResult) bool { return true })
}

// waitFinished returns the final result, once the run has it (not a snapshot of a pause it
// left); UNAVAILABLE when the run moves to another replica before.
func (r *run) waitFinished(ctx context.Context) (*typev1.RunResult, error) {
	return r.waitFor(ctx, func(res *typev1.RunResult) bool {
		return res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL && res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_INPUT
	})
}

// waitFor returns the run's result (final, or the snapshot of a pause) once ok accepts it.
func (r *run) waitFor(ctx context.Context, ok func(*typev1.RunResult) bool) (*typev1.RunResult, error) {
	for {
		r.mu.Lock()
		res, changed := r.result, r.changed
		r.mu.Unlock()
		if res != nil && ok(res) {
			return res, nil
		}
		select {
		case <-changed:
		case <-r.moved:
			return nil, errMoved(r.id)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// currentResult is the run's final result, its paused snapshot, or nil while it executes.
func (r *run) currentResult() *typev1.RunResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.result == nil {
		return r.stored // ended, as any replica reads it in the store, while finish saves it
	}
	return r.result
}

// pausedResult is the snapshot a caller gets while the run waits for approval: the one any
// replica builds from the run's paused checkpoint, with copies of what the run changes later.
func (r *run) pausedResult(pending *typev1.PendingAction) *typev1.RunResult {
	cp := r.snapshot(checkpointv1.Phase_PHASE_AWAITING_APPROVAL, nil, nil)
	cp.Pending, cp.Usage = pending, proto.CloneOf(r.usage)
	cp.Conversation, cp.Accounting, cp.Transcript = slices.Clone(cp.Conversation), slices.Clone(cp.Accounting), r.chain.Entries()
	return pausedFromCheckpoint(cp)
}

// setSink installs (or with nil removes) the local listener that receives every event after
// it is published.
func (r *run) setSink(sink func(*eventv1.RunEvent)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sink = sink
}

// emit publishes an event of the run (seq and time are stamped by the run stream) and hands
// it to the local listener. A publish that fails after the stream's retries is logged: the run
// itself goes on, and its result (saved to memory) still holds everything. A durable run
// publishes only while its replica's lease holds (awaitLease), and nothing once another
// replica may have it.
func (r *run) emit(ctx context.Context, ev *eventv1.RunEvent) {
	if !r.awaitLease(ctx) {
		r.svc.log.WarnContext(ctx, "run event not published: the run is no longer this replica's", "run_id", r.id, "kind", events.Kind(ev))
		return
	}
	stamped, err := r.stream.Emit(r.publishContext(ctx), ev)
	if errors.Is(err, events.ErrFenced) {
		r.svc.log.WarnContext(ctx, "run event not published: another replica runs the run; it stops here", "run_id", r.id, "kind", events.Kind(ev), "err", err)
		r.cancel(errLeaseLost)
		return
	}
	if err != nil {
		r.svc.log.ErrorContext(ctx, "publishing run event failed", "run_id", r.id, "kind", events.Kind(ev), "err", err)
		return
	}
	r.mu.Lock()
	sink := r.sink
	r.mu.Unlock()
	if sink != nil {
		out := proto.CloneOf(stamped) // sent later, while the run may change what the event shares
		if fin := out.GetRunFinished(); fin.GetResultOmitted() {
			// The stream keeps the outcome only (the result is larger than a NATS message), but
			// the run has the whole result: its own caller gets it, without asking GetRun, which
			// would find the run still live on this replica until it has published its result.
			fin.Result, fin.ResultOmitted = ev.GetRunFinished().GetResult(), false
		}
		sink(out)
	}
}

// step runs one state of the machine in its own span and appends its transcript entry, which
// seals the conversation messages the state added or changed.
func (r *run) step(ctx context.Context, st typev1.RunState, stepID string, fn func(ctx context.Context) (action, result proto.Message, detail string)) {
	ctx, span := r.svc.tracer.Start(ctx, "agentmesh."+strings.ToLower(stateName(st)),
		trace.WithAttributes(telemetry.RunIDKey.String(r.id), telemetry.StepIDKey.String(stepID)))
	defer span.End()
	action, result, detail := fn(ctx)
	if detail != "" {
		span.SetAttributes(attribute.String("agentmesh.detail", detail))
	}
	r.chain.Append(st, stepID, r.contract.GetContractHash(), action, result, detail, r.conversation)
}

// stepApart is step for a state entered outside the run's goroutine (a decision): its entry
// records result and detail and seals no conversation messages.
func (r *run) stepApart(ctx context.Context, st typev1.RunState, stepID string, result proto.Message, detail string) {
	_, span := r.svc.tracer.Start(ctx, "agentmesh."+strings.ToLower(stateName(st)),
		trace.WithAttributes(telemetry.RunIDKey.String(r.id), telemetry.StepIDKey.String(stepID),
			attribute.String("agentmesh.detail", detail)))
	defer span.End()
	r.chain.Append(st, stepID, r.contract.GetContractHash(), nil, result, detail, nil)
}

func stateName(st typev1.RunState) string { return strings.TrimPrefix(st.String(), "RUN_STATE_") }

func (r *run) stepID(st typev1.RunState) string {
	if r.turns == 0 {
		return stateName(st)
	}
	return "turn-" + strconv.Itoa(int(r.turns)) + "/" + stateName(st)
}

// failedReport is the final report the system writes in format, at, for a run that ended
// without the model's answer: message, and why in its metadata's reason (seed 000 §5).
func failedReport(format typev1.OutputFormat, message, reason string, at time.Time) *typev1.FinalReport {
	meta, _ := structpb.NewStruct(map[string]any{"reason": reason})
	return &typev1.FinalReport{Format: format, Status: typev1.ReportStatus_REPORT_STATUS_FAILURE,
		Content: message, Metadata: meta, Ts: timestamppb.New(at)}
}

// terminate ends the run exactly once: TERMINATE transcript entry, final report, result saved
// to memory, run_finished published last, root span closed.
func (r *run) terminate(ctx context.Context, e ending) *typev1.RunResult {
	now := r.svc.now()
	report := &typev1.FinalReport{Format: r.contract.GetOutputFormat(), Ts: timestamppb.New(now)}
	if report.Format == typev1.OutputFormat_OUTPUT_FORMAT_UNSPECIFIED {
		report.Format = typev1.OutputFormat_OUTPUT_FORMAT_TEXT
	}
	res := &typev1.RunResult{
		RunId:      r.id,
		Outcome:    e.outcome,
		ExitReason: e.exit,
		Success:    e.success(),
		Contract:   r.contract,
		TraceId:    r.span.SpanContext().TraceID().String(),
		Usage:      r.usage,
		Turns:      r.turns,
		ToolCalls:  r.toolCalls,
		Decision:   r.decision,
		Plan:       r.tracker.progress(),
	}
	// The report's status follows its source (seed 000 §5): success when the model gave the
	// answer (in a failed run too: MAX_TOOL_CALLS_REACHED after a final answer), failure when
	// the system wrote it.
	if e.answer != nil {
		report.Status = typev1.ReportStatus_REPORT_STATUS_SUCCESS
		report.Content = e.answer.GetContent()
		if e.report != nil {
			report.Content, report.ContentJson, report.Metadata = e.report.content, e.report.json, e.report.metadata
		}
		if e.truncated {
			report.Status, report.Metadata = typev1.ReportStatus_REPORT_STATUS_PARTIAL, truncatedMetadata(report.Metadata)
		}
		if res.Decision == nil {
			res.Decision = &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY, ResponseText: report.Content}
		}
	} else {
		report = failedReport(report.GetFormat(), e.message, cmp.Or(e.reason, strings.ToLower(e.exit)), now)
	}
	if !e.success() {
		res.Error = &typev1.RunError{Code: e.exit, Message: reasonText(e), Retryable: e.retryable}
	}
	res.FinalReport = report
	res.Conversation = r.conversation
	res.Accounting = r.accounting
	// The entry covers everything the result shows: the report, the ending and accounting,
	// and (sealed) the conversation.
	r.step(ctx, typev1.RunState_RUN_STATE_TERMINATE, stateName(typev1.RunState_RUN_STATE_TERMINATE), func(context.Context) (proto.Message, proto.Message, string) {
		return transcript.Ending(res), report, e.outcome.String() + " " + e.exit
	})
	res.Transcript = r.chain.Entries()

	r.endingAttributes(res)
	if r.svc.store != nil {
		cp := r.snapshot(checkpointv1.Phase_PHASE_FINISHED, nil, nil)
		cp.Result = res
		if stop := r.save(ctx, cp); stop != nil {
			r.moveAway(ctx, stop) // another replica owns the run now and finishes it
			return res
		}
		r.mu.Lock()
		r.stored = res
		r.mu.Unlock()
	}
	r.svc.metrics.runFinished(ctx, e.outcome.String(), e.exit, r.turns)
	r.finish(ctx, res, false)
	r.svc.log.InfoContext(ctx, "run finished", "run_id", r.id, "outcome", e.outcome.String(), "exit_reason", e.exit, "turns", r.turns)
	return res
}

// finish hands a final result (already in the checkpoint store, when there is one) to the
// memory stage, its watchers and its waiters, in that order (so run_finished is stored when a
// caller of Run on this replica gets the result), then retires the run. A result
// the memory stage cannot take now stays in the checkpoint store, where GetRun finds it and
// any replica saves it later. published says run_finished is in the stream already. A run
// whose user is unknown (its checkpoint did not decode: endUnreadable) has nobody for the
// memory stage to keep its result for, which refuses it: its tombstone keeps the result.
func (r *run) finish(ctx context.Context, res *typev1.RunResult, published bool) {
	var err error
	if r.userID != "" {
		req := &memoryv1.SaveRunRequest{Result: res, UserId: r.userID}
		_, err = r.svc.peers.Memory.SaveRun(ctx, req)
	}
	if err != nil {
		r.svc.log.ErrorContext(ctx, "saving run result failed; it stays in the checkpoint store", "run_id", r.id, "err", err)
	}
	r.span.End() // the run's span is complete before its callers hear the result (ending it twice is a no-op)
	if !published {
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_RunFinished{RunFinished: &eventv1.RunFinished{Result: res, Outcome: res.GetOutcome()}}})
	}
	r.publish(res)
	if r.svc.store == nil {
		return
	}
	ctx = r.publishContext(ctx) // the run's context ends as it returns; its records outlive it
	r.retireStored = func() { r.retireRecords(ctx, err == nil, res) }
}

// retireRecords retires a finished run's records in the store (runstore.Finish: a tombstone
// for its checkpoint, whose log, inputs and entry among the active runs go). saved says the
// memory stage has the result: a run whose result it has not keeps its records, and is
// handed off, for a replica (this one, or another) to adopt and save it; so is a run whose
// retirement failed, to be retired again. The result is stored and delivered by then, so the
// run's callers and watchers need not wait for these requests to NATS. The tombstone of a run
// whose user is unknown, whose result res the memory stage was not asked to keep (finish),
// keeps res (a small one: endUnreadable's), where GetRun finds it as in a checkpoint.
func (r *run) retireRecords(ctx context.Context, saved bool, res *typev1.RunResult) {
	if saved {
		tomb := &checkpointv1.RunCheckpoint{RunId: r.id, Phase: checkpointv1.Phase_PHASE_FINISHED,
			UserId: r.userID, ResultSaved: true, Replica: r.svc.replica}
		if r.userID == "" {
			tomb.Result = res
		}
		err := r.svc.store.Finish(ctx, tomb, r.head)
		if err == nil {
			return
		}
		r.svc.log.WarnContext(ctx, "retiring a finished run failed; it is handed off to be retired again", "run_id", r.id, "err", err)
	}
	r.handOff(ctx)
}

// finishStored completes a run found finished in its checkpoint: its result is saved, and
// run_finished published, unless that happened before the previous owner stopped.
//
// The lookup of run_finished does not end with the run's context: that of a run past its
// total_timeout_ms ends as soon as the run is taken over, and a lookup in it failed, so that
// every replica that took the run to save its result (for as long as the memory stage was
// down) published run_finished again. It is asked again until the stream answers (any other
// failure counted as "not published" too); when the replica gives up its runs first, the run
// is left as it is stored, for the replica that adopts it next.
func (r *run) finishStored(ctx context.Context, res *typev1.RunResult) {
	r.endingAttributes(res)
	published, err := runFinishedStored(r.publishContext(ctx), r.svc.js, r.id)
	if err != nil {
		r.svc.log.WarnContext(ctx, "looking up whether run_finished is published failed; the run is left to be finished later", "run_id", r.id, "err", err)
		return
	}
	r.finish(context.WithoutCancel(ctx), res, published)
}

// runFinishedStored reports whether the events stream holds run_finished of run runID, asking
// again until the stream answers (lastStored).
func runFinishedStored(ctx context.Context, js jetstream.JetStream, runID string) (bool, error) {
	msg, err := lastStored(ctx, js, runID, "run_finished")
	return msg != nil, err
}

// lastStored returns the last event of kind the events stream holds of run runID, nil when it
// holds none (nor a stream), asking again, a little later each time, until the stream answers;
// it fails only when ctx ends first. Each attempt is bounded by eventLookupTimeout.
func lastStored(ctx context.Context, js jetstream.JetStream, runID, kind string,
) (*jetstream.RawStreamMsg, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		actx, cancel := context.WithTimeout(ctx, eventLookupTimeout)
		st, err := js.Stream(actx, events.StreamName)
		var msg *jetstream.RawStreamMsg
		if err == nil {
			msg, err = st.GetLastMsgForSubject(actx, events.Subject(runID, kind))
		}
		cancel()
		switch {
		case err == nil:
			return msg, nil
		case errors.Is(err, jetstream.ErrMsgNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("looking up %s of run %s: %w (last: %w)",
				kind, runID, context.Cause(ctx), err)
		case <-time.After(wait):
		}
	}
}

// endingAttributes sets on the run's span how the run ended, as its result res says (README
// "Tracing"): the span that terminated it, and the agentmesh.run.finish span of a replica
// that finishes a run stored as ended (its result not yet with the memory stage). A failed run
// ends it with status Error and error.type, its exit reason, as the OpenTelemetry conventions
// record a failed operation.
func (r *run) endingAttributes(res *typev1.RunResult) {
	r.span.SetAttributes(
		attribute.String("agentmesh.outcome", res.GetOutcome().String()),
		attribute.String("agentmesh.exit_reason", res.GetExitReason()),
		attribute.Int("agentmesh.turns", int(res.GetTurns())),
		attribute.String("agentmesh.contract_hash", res.GetContract().GetContractHash()),
	)
	if !res.GetSuccess() {
		r.span.SetAttributes(semconv.ErrorTypeKey.String(res.GetExitReason()))
		r.span.SetStatus(codes.Error, res.GetExitReason())
	}
}

// pausedFromCheckpoint is the snapshot of a run paused for approval or for an answer, as its
// checkpoint holds it.
func pausedFromCheckpoint(cp *checkpointv1.RunCheckpoint) *typev1.RunResult {
	res := &typev1.RunResult{
		RunId: cp.GetRunId(), Outcome: typev1.Outcome_OUTCOME_AWAITING_APPROVAL, ExitReason: ExitApprovalRequired,
		Conversation: cp.GetConversation(), Accounting: cp.GetAccounting(), Contract: cp.GetContract(),
		Transcript: cp.GetTranscript(), TraceId: traceIDOf(cp.GetTraceparent()), PendingAction: cp.GetPending(),
		Decision: cp.GetDecision(), Usage: cp.GetUsage(), Turns: cp.GetTurns(), ToolCalls: cp.GetToolCalls(),
		Plan: restorePlanTracker(cp).progress(),
	}
	if cp.GetPhase() == checkpointv1.Phase_PHASE_AWAITING_INPUT {
		res.Outcome, res.ExitReason, res.PendingQuestion = typev1.Outcome_OUTCOME_AWAITING_INPUT, ExitInputRequired, cp.GetQuestion()
	}
	return res
}

// traceIDOf is the trace id of a W3C traceparent ("00-<trace id>-<span id>-<flags>").
func traceIDOf(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

// truncatedMetadata is a report's metadata with truncated: true and stop_reason: length set,
// the model's own metadata kept.
func truncatedMetadata(md *structpb.Struct) *structpb.Struct {
	out := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	maps.Copy(out.Fields, md.GetFields())
	out.Fields["truncated"] = structpb.NewBoolValue(true)
	out.Fields["stop_reason"] = structpb.NewStringValue(stopLength)
	return out
}

func reasonText(e ending) string {
	if e.reason != "" {
		return e.reason
	}
	return e.message
}

// addUsage adds one LLM attempt's usage to the run's totals.
func (r *run) addUsage(u *typev1.TokenUsage) { addTokens(r.usage, u) }

// addTokens adds u to total; the total is estimated once any usage added to it is.
func addTokens(total, u *typev1.TokenUsage) {
	if u == nil {
		return
	}
	total.Input += u.GetInput()
	total.Output += u.GetOutput()
	total.Cached += u.GetCached()
	total.Total += u.GetTotal()
	total.Estimated = total.GetEstimated() || u.GetEstimated()
}

// account appends e to the run's accounting, stamped with the time now unless the stage that
// made the request stamped it.
func (r *run) account(e *typev1.AccountingEntry) {
	if e.GetTimestampMs() == 0 {
		e.TimestampMs = r.svc.now().UnixMilli()
	}
	r.accounting = append(r.accounting, e)
}

func msSince(start time.Time) int64 { return time.Since(start).Milliseconds() }
