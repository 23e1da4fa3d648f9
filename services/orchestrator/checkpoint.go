package orchestrator

import (
	"errors"
	"slices"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/toolwire"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// snapshot is the run's state as a checkpoint of phase; t and plan are the turn in progress
// (phases EXECUTING and AWAITING_APPROVAL). The checkpoint shares the run's messages and
// transcript entries: it is encoded before the run changes them again.
func (r *run) snapshot(phase checkpointv1.Phase, t *turnState, plan []plannedCall) *checkpointv1.RunCheckpoint {
	cp := &checkpointv1.RunCheckpoint{
		RunId: r.id, Phase: phase, Request: r.req, UserId: r.userID, Contract: r.contract,
		Conversation: r.conversation, SentUpTo: int32(r.sentUpTo), Accounting: r.accounting, Usage: r.usage,
		Turns: r.turns, ToolCalls: r.toolCalls, LastTool: r.lastTool, CtxTokens: r.ctxTokens,
		ForcedFinal: r.forcedFinal, ToolsClosed: r.toolsClosed, Collapsed: r.collapsed, FormatFails: r.formatFails,
		Decision: r.decision, Goal: r.goal, Plan: r.tracker.plan(), Available: r.available, Transcript: r.chain.Shared(),
		EventSeq: r.stream.Seq(), Traceparent: r.traceparent, Tracestate: r.tracestate,
		StartedAt: timestamppb.New(r.startedAt), UpdatedAt: timestamppb.New(r.svc.now()),
		Resumes: r.resumes, Replica: r.svc.replica, ToolBudgetSpent: r.toolBudgetSpent, ObservedDone: r.observedDone,
		PlanTracker: r.tracker.checkpoint(), Constraints: r.constraints, TaskType: r.taskType, Recalled: r.recalled,
	}
	if r.xml != nil {
		cp.Xml = &checkpointv1.XmlSession{Mode: r.contract.GetToolTransport(), Nonce: r.xml.Nonce, NextSlot: int32(r.xml.NextSlot)}
	}
	for _, ig := range r.xmlIgnored {
		cp.XmlIgnored = append(cp.XmlIgnored, &checkpointv1.XmlIgnored{Tag: ig.Tag, Reason: ig.Reason})
	}
	if t != nil {
		cp.Turn = turnCheckpoint(t, plan)
	}
	return cp
}

func turnCheckpoint(t *turnState, plan []plannedCall) *checkpointv1.TurnCheckpoint {
	tc := &checkpointv1.TurnCheckpoint{
		Answer: t.answer, Attempted: int32(t.attempted), ForbiddenCall: t.forbiddenCall, Cycle: t.cycle,
		BudgetExhausted: t.budgetExhausted, Malformed: int32(t.malformed), FinalTurn: t.finalTurn,
		TransportTags: t.transportTags || usedTags(t.xml), Truncated: t.truncated,
	}
	if t.report != nil {
		tc.Report = &checkpointv1.Report{Content: t.report.content, ContentJson: t.report.json, Metadata: t.report.metadata}
	}
	if t.reportErr != nil {
		tc.ReportError = t.reportErr.Error()
	}
	for _, p := range plan {
		tc.Calls = append(tc.Calls, &checkpointv1.PlannedCall{
			Call: p.call, Xml: p.xml, Refusal: p.refusal, NeedsApproval: p.needsApproval, Approval: p.approval, Note: p.note,
		})
	}
	return tc
}

// restoreTurn is the turn in progress of a checkpoint.
func restoreTurn(tc *checkpointv1.TurnCheckpoint) (*turnState, []plannedCall) {
	t := &turnState{
		answer: tc.GetAnswer(), attempted: int(tc.GetAttempted()), forbiddenCall: tc.GetForbiddenCall(), cycle: tc.GetCycle(),
		budgetExhausted: tc.GetBudgetExhausted(), malformed: int(tc.GetMalformed()), finalTurn: tc.GetFinalTurn(),
		transportTags: tc.GetTransportTags(), truncated: tc.GetTruncated(),
	}
	if rep := tc.GetReport(); rep != nil {
		t.report = &report{content: rep.GetContent(), json: rep.GetContentJson(), metadata: rep.GetMetadata()}
	}
	if tc.GetReportError() != "" {
		t.reportErr = errors.New(tc.GetReportError())
	}
	plan := make([]plannedCall, 0, len(tc.GetCalls()))
	for _, c := range tc.GetCalls() {
		plan = append(plan, plannedCall{
			call: c.GetCall(), xml: c.GetXml(), refusal: c.GetRefusal(), needsApproval: c.GetNeedsApproval(),
			approval: c.GetApproval(), note: c.GetNote(),
		})
	}
	return t, plan
}

// restore fills a run resumed from cp with the checkpoint's state (the run's identity, span
// and event stream are set by the caller).
func (r *run) restore(cp *checkpointv1.RunCheckpoint) error {
	r.req, r.userID, r.contract = cp.GetRequest(), cp.GetUserId(), cp.GetContract()
	schema, err := compileOutputSchema(r.req.GetOutputSchema())
	if err != nil {
		return err
	}
	r.outputSchema = schema
	r.conversation = slices.Clone(cp.GetConversation())
	r.sentUpTo = int(cp.GetSentUpTo())
	r.accounting = slices.Clone(cp.GetAccounting())
	r.usage = proto.CloneOf(cp.GetUsage())
	if r.usage == nil {
		r.usage = &typev1.TokenUsage{}
	}
	r.turns, r.toolCalls, r.lastTool, r.ctxTokens = cp.GetTurns(), cp.GetToolCalls(), cp.GetLastTool(), cp.GetCtxTokens()
	r.forcedFinal, r.toolsClosed, r.collapsed, r.formatFails = cp.GetForcedFinal(), cp.GetToolsClosed(), cp.GetCollapsed(), cp.GetFormatFails()
	r.toolBudgetSpent, r.observedDone, r.recalled = cp.GetToolBudgetSpent(), cp.GetObservedDone(), cp.GetRecalled()
	r.decision, r.goal, r.available = cp.GetDecision(), cp.GetGoal(), cp.GetAvailable()
	toolwire.Share(r.available...) // the run's own, never changed: each encoded once for its requests
	r.tracker, r.constraints, r.taskType = restorePlanTracker(cp), cp.GetConstraints(), cp.GetTaskType()
	r.chain = transcript.Resume(cp.GetTranscript(), r.contract.GetAdapterVersion(), modelProfile(r.contract))
	r.counter = tokens.ForModel(firstModel(r.contract))
	r.traceparent, r.tracestate = cp.GetTraceparent(), cp.GetTracestate()
	r.startedAt = cp.GetStartedAt().AsTime()
	r.resumes = cp.GetResumes()
	if x := cp.GetXml(); x != nil {
		r.xml = &xmltransport.Session{Mode: transportMode(r.contract), Nonce: x.GetNonce(), NextSlot: int(x.GetNextSlot())}
	}
	for _, ig := range cp.GetXmlIgnored() {
		r.xmlIgnored = append(r.xmlIgnored, xmltransport.Ignored{Tag: ig.GetTag(), Reason: ig.GetReason()})
	}
	if cp.GetPhase() != checkpointv1.Phase_PHASE_STARTED {
		// After INTENT: the offered tools and the final report tool follow from the contract.
		r.offered = offeredTools(r.contract, r.available)
		if r.xml == nil {
			r.reportTool = finalReportTool(r.contract, r.req.GetOutputSchema())
		}
	}
	return nil
}
