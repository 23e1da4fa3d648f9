package plan

// Limits of what a revision says of the plan so far (planning's PlanRevision), which the
// orchestrator writes and the planning stage refuses past them: a failed step's note and the
// reason quote tool errors, which are of any length.
const (
	// MaxNoteBytes is the longest note of a step's progress (StepProgress.note): what
	// happened to it, a tool's error cut in the middle to fit.
	MaxNoteBytes = 1 << 10
	// MaxOutputBytes is the largest structured result of a step (StepProgress.output), in
	// bytes of its JSON (OutputJSON).
	MaxOutputBytes = 1 << 10
	// MaxReasonBytes is the longest reason of a revision (PlanRevision.reason): each of the
	// reasons since the last revision, with the note of each failed step, as long as a goal.
	MaxReasonBytes = 64 << 10
)
