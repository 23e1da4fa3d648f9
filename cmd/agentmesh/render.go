package main

import (
	"fmt"
	"io"
	"strings"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/protobuf/encoding/protojson"
)

// progress writes a readable line per run event to w (the answer itself goes to stdout).
type progress struct {
	w         io.Writer
	streaming bool  // an llm_delta line is open
	turn      int32 // the turn and attempt whose deltas the open line shows
	attempt   int32
}

func (p *progress) event(ev *eventv1.RunEvent) {
	switch k := ev.GetKind().(type) {
	case *eventv1.RunEvent_RunStarted:
		c := k.RunStarted.GetContract()
		p.line("▶ run %s (max %d turns, targets %s)", ev.GetRunId(), c.GetMaxTurns(), targets(c.GetTargets()))
	case *eventv1.RunEvent_IntentParsed:
		p.line("  intent: %s [%s, tools %s]", k.IntentParsed.GetGoal(), k.IntentParsed.GetTaskType(), policyName(k.IntentParsed.GetToolPolicy()))
	case *eventv1.RunEvent_PlanCreated:
		if fb := k.PlanCreated.GetFallbackReason(); fb != "" {
			p.line("  plan by the rules: %s", oneLineEnds(fb, 300))
		}
		for _, s := range k.PlanCreated.GetSteps() {
			p.line("  plan %s: %s%s", s.GetId(), s.GetDescription(), toolSuffix(s))
		}
	case *eventv1.RunEvent_PlanRevised:
		r := k.PlanRevised
		p.line("  ↻ plan revised (%d): %s", r.GetRevision(), oneLineEnds(r.GetReason(), 300))
		for _, s := range r.GetSteps() {
			p.line("  plan %s [%s]: %s%s", s.GetStep().GetId(), strings.ToLower(strings.TrimPrefix(s.GetState().String(), "STEP_STATE_")),
				s.GetStep().GetDescription(), toolSuffix(s.GetStep()))
		}
	case *eventv1.RunEvent_TurnStarted:
		suffix := ""
		if k.TurnStarted.GetForcedFinal() {
			suffix = " — final turn"
		}
		if r := k.TurnStarted.GetReason(); r != "" {
			suffix += " (" + r + ")"
		}
		p.line("· turn %d%s", k.TurnStarted.GetTurn(), suffix)
	case *eventv1.RunEvent_LlmDelta:
		// A retry's deltas go on a line of their own, named for their attempt: the answer is the
		// last attempt's, not the attempts' texts run together.
		d := k.LlmDelta
		if d.GetContent() == "" { // reasoning only: the line shows the answer's text
			return
		}
		if d.GetTurn() != p.turn || d.GetAttempt() != p.attempt {
			p.endLine()
		}
		if !p.streaming {
			label := "model"
			if d.GetAttempt() > 1 {
				label = fmt.Sprintf("model (attempt %d)", d.GetAttempt())
			}
			fmt.Fprintf(p.w, "  %s: ", label)
			p.streaming, p.turn, p.attempt = true, d.GetTurn(), d.GetAttempt()
		}
		fmt.Fprint(p.w, printable(d.GetContent()))
	case *eventv1.RunEvent_LlmResponse:
		r := k.LlmResponse
		if why := unanswered(r); why != "" {
			p.line("  ✗ %s/%s attempt %d: %s", r.GetProvider(), r.GetModel(), r.GetAttempt(), why)
			return
		}
		cut := ""
		if r.GetStopReason() == "length" {
			cut = ", cut off at the output token limit"
		}
		p.line("  ✓ %s/%s answered (%d tokens)%s", r.GetProvider(), r.GetModel(), r.GetUsage().GetTotal(), cut)
	case *eventv1.RunEvent_ToolStarted:
		args, _ := protojson.Marshal(k.ToolStarted.GetCall().GetArguments())
		p.line("  → %s %s", k.ToolStarted.GetCall().GetName(), args)
	case *eventv1.RunEvent_ToolFinished:
		p.line("  ← %s: %s", k.ToolFinished.GetToolName(), oneLine(k.ToolFinished.GetObservation(), 120))
	case *eventv1.RunEvent_ToolRefused:
		r := k.ToolRefused
		p.line("  ✗ call %s (%s) refused: %s", r.GetCallId(), r.GetToolName(),
			oneLineEnds(r.GetReason(), 300))
	case *eventv1.RunEvent_RecoveryDecided:
		p.line("  ↻ recovery (%s): %s", k.RecoveryDecided.GetStage(), k.RecoveryDecided.GetStrategy())
	case *eventv1.RunEvent_ContextGuard:
		if g := k.ContextGuard.GetReport(); g.GetVerdict() != typev1.GuardVerdict_GUARD_VERDICT_OK {
			p.line("  ! context guard %s: %s, %s (projected %d, limit %d)", g.GetTrigger(),
				strings.TrimPrefix(g.GetVerdict().String(), "GUARD_VERDICT_"), g.GetReason(), g.GetProjected(), g.GetLimit())
		}
	// A pause names what to decide (agentmesh approve RUN_ID CALL_ID) or answer (agentmesh
	// answer --question ID): whoever follows the run with watch learns it here.
	case *eventv1.RunEvent_ApprovalRequested:
		calls := k.ApprovalRequested.GetPendingAction().GetToolCalls()
		if len(calls) == 1 && calls[0].GetId() == orchestrator.PlanCallID {
			p.line("  ? approval requested for the plan")
			return
		}
		names := make([]string, len(calls))
		for i, c := range calls {
			names[i] = c.GetId() + " (" + c.GetName() + ")"
		}
		label := "call"
		if len(calls) != 1 {
			label = "calls"
		}
		p.line("  ? approval requested for %s %s", label, strings.Join(names, ", "))
	case *eventv1.RunEvent_ApprovalResolved:
		p.line("  ! %s", decision(k.ApprovalResolved))
	case *eventv1.RunEvent_InputRequested:
		q := k.InputRequested.GetQuestion()
		p.line("  ? the run asks (question %s): %s", q.GetId(), q.GetQuestion())
	case *eventv1.RunEvent_InputAnswered:
		p.line("  ! answered: %s", oneLine(k.InputAnswered.GetAnswer(), 120))
	case *eventv1.RunEvent_RunResumed:
		r := k.RunResumed
		p.line("⟳ resumed on %s from its %s checkpoint of turn %d (%s)", r.GetReplica(), strings.ReplaceAll(r.GetPhase(), "_", " "), r.GetTurn(), r.GetReason())
	case *eventv1.RunEvent_RunFinished:
		res := k.RunFinished.GetResult()
		p.line("■ %s %s after %d turn(s), %d tool call(s), %d tokens — trace %s",
			outcomeName(res.GetOutcome()), res.GetExitReason(), res.GetTurns(), res.GetToolCalls(), res.GetUsage().GetTotal(), res.GetTraceId())
		if msg := res.GetError().GetMessage(); msg != "" { // why it failed, beyond its exit reason
			// A message of several lines (a schema's errors) stays under its "error:" line.
			p.line("  error: %s", msg)
		}
	}
}

// line writes one line of progress; what it shows of the run is never written as terminal
// controls (printable), and a text of several lines in it (a goal, a question, an error)
// keeps its further lines indented under it, apart from the progress's own lines.
func (p *progress) line(format string, args ...any) {
	p.endLine()
	s := printable(strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
	fmt.Fprintln(p.w, strings.ReplaceAll(s, "\n", "\n    "))
}

// endLine ends the open llm_delta line, if any.
func (p *progress) endLine() {
	if p.streaming {
		fmt.Fprintln(p.w)
		p.streaming = false
	}
}

// unanswered is why an LLM attempt gave the run no answer, or "" when it did: it failed, the
// provider's content filter stopped the answer (whatever part of it was streamed), or the answer
// was empty. The run retries such an attempt, or fails when it was the last.
func unanswered(r *eventv1.LlmResponse) string {
	m := r.GetMessage()
	switch {
	case r.GetError() != "":
		return r.GetError()
	case r.GetStopReason() == "content_filter":
		return "the answer was withheld or stopped by the provider's content filter"
	case m.GetContent() == "" && m.GetReasoning() == "" && len(m.GetToolCalls()) == 0:
		return "the answer was empty"
	}
	return ""
}

// decision says how a call (or the plan) waiting for approval was decided, by whom and why.
func decision(r *eventv1.ApprovalResolved) string {
	what := "call " + r.GetCallId()
	if r.GetCallId() == orchestrator.PlanCallID {
		what = "plan"
	}
	switch r.GetDecision() {
	case "approve":
		what += " approved"
	case "reject":
		what += " rejected"
	case "modify":
		args, _ := protojson.Marshal(r.GetArguments())
		what += " approved with arguments " + string(args)
	case "timeout":
		what += " not decided in time"
	default:
		what += " decided: " + r.GetDecision()
	}
	if by := r.GetDecidedBy(); by != "" {
		what += " by " + by
	}
	if r.GetEndsRun() {
		what += ", ending the run"
	}
	if fb := r.GetFeedback(); fb != "" {
		what += ": " + oneLineEnds(fb, 300)
	}
	return what
}

// toolSuffix is " (tool)" for a step that uses a tool.
func toolSuffix(s *typev1.Step) string {
	if s.GetToolName() == "" {
		return ""
	}
	return " (" + s.GetToolName() + ")"
}

func targets(ts []*typev1.Target) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.GetProvider() + "/" + t.GetModel()
	}
	return strings.Join(parts, ", ")
}

func policyName(p typev1.ToolPolicy) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "TOOL_POLICY_"))
}

func outcomeName(o typev1.Outcome) string { return strings.TrimPrefix(o.String(), "OUTCOME_") }

func oneLine(s string, limit int) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return string(r)
}

// oneLineEnds is s on one line, at most about limit characters: a longer s keeps its
// beginning and its end, around " … ", as a reason says what failed first and why last (a
// final report's schema error names the property and what it wants at its end). It shows
// every reason and feedback: a refused call's, the rules' plan's, a revised plan's, and the
// feedback of an approval decision.
func oneLineEnds(s string, limit int) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) <= limit {
		return string(r)
	}
	head := limit / 3
	return string(r[:head]) + " … " + string(r[len(r)-(limit-head):])
}
