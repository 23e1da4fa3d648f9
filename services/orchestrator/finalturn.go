package orchestrator

// Why a turn is a final turn. A final turn offers only final_report (in the XML modes only the
// XML final slot); a call to any other tool is refused, never run; and the turn ends the run,
// with the model's answer or, without one, with the ending its reason names. The reason is
// the turn_started event's.
const (
	// finalContext: the context guard forced it (seed 000 §2); without an answer the run
	// ends MAX_CONTEXT_REACHED.
	finalContext = "context"
	// finalReportRefused: a final report was refused, and the remaining turns collapse into
	// this one (seed 000 §1); without an answer the run ends FINAL_REPORT_INVALID.
	finalReportRefused = "final_report_refused"
	// finalToolBudget: a call was dropped over max_tool_calls_total, and one final answer may
	// follow (seed 002 §7); the run ends MAX_TOOL_CALLS_REACHED either way (toolBudgetEnding).
	finalToolBudget = "max_tool_calls"
	// finalMaxTurns: the last turn under max_turns (seed 000 §1: "final turn: tools
	// disabled"); without an answer the run ends MAX_TURNS_REACHED with the synthetic report.
	finalMaxTurns = "max_turns"
	// finalObserved: an observation said the run should answer now (should_continue false,
	// from an observation stage of one's own); without an answer the turns go on, final, up
	// to max_turns.
	finalObserved = "observation"
)

// finalReason says why the current turn is a final turn, or "" when it offers every tool.
func (r *run) finalReason() string {
	switch {
	case r.forcedFinal:
		return finalContext
	case r.collapsed:
		return finalReportRefused
	case r.toolBudgetSpent:
		return finalToolBudget
	case r.observedDone:
		return finalObserved
	case r.turns >= r.contract.GetMaxTurns():
		return finalMaxTurns
	}
	return ""
}

// finalInstructions are the ephemeral system messages that tell the model why its turn is the
// final one, by reason: sent last, never stored. The turn after a refused final report has
// none: the refusal's tool message says what to fix.
var finalInstructions = map[string]string{
	finalContext: "System notice: the context window is nearly full. No more tools can run. " +
		"Answer the user now with the information you already have.",
	finalToolBudget: "System notice: the run's tool call budget is used up. No more tools can run. " +
		"Answer the user now with the information you already have.",
	finalMaxTurns: "System notice: the run has reached its turn limit. This is the last turn: no more tools can run. " +
		"Answer the user now with the information you already have.",
	finalObserved: "System notice: a tool's result says the task is done. No more tools can run. " +
		"Answer the user now with the information you already have.",
}
