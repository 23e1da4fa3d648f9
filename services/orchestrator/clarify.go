package orchestrator

import (
	"context"
	"fmt"
)

// IntentQuestionID is the id of the question a run asks before it plans, when the intent
// stage could not tell what its user wants (AgentService.Answer with question_id "intent").
const IntentQuestionID = "intent"

// clarifyIntent pauses the run before its contract is sealed, when the intent stage could not
// tell what the user wants (INTENT_UNCLEAR) and recovery decided to ask the user (seed 003:
// ask the user for guidance; r.unclear holds the question). It is the pause of a turn's
// question (awaitAnswer: checkpointed, announced, answered on any replica, ended by
// answer_timeout_ms), asked once: the answer joins the conversation and the text the intent
// is parsed from again, and an intent still unclear then ends the run asking its question.
//
// A clarification the intent stage answers (needs_clarification) is not a pause: it is the
// run's answer, the ASK_CLARIFICATION decision of seed 004, and the conversation goes on in
// the user's next run.
func (r *run) clarifyIntent(ctx context.Context) *ending {
	t := &turnState{ask: r.unclear}
	r.unclear = nil
	if end := r.awaitAnswer(ctx, t); end != nil {
		return end.instead(func(ctx context.Context) *ending {
			r.unclear = t.ask // the question clarifyIntent asks, and finds asked
			return r.clarifyIntent(ctx)
		})
	}
	if ctx.Err() != nil {
		return r.interruption(ctx)
	}
	r.clarification = r.conversation[len(r.conversation)-1].GetContent() // takeAnswer's
	return r.parseIntent(ctx, "INTENT/answered")
}

// intentMessage is the text the intent stage parses: the run's message, and the user's answer
// to the run's question about it.
func (r *run) intentMessage() string {
	if r.clarification == "" {
		return r.req.GetMessage()
	}
	return r.req.GetMessage() + "\n\n" + r.clarification
}

// questionID is the id of a question asked now: "intent" before the first turn, else
// "turn-<n>".
func (r *run) questionID() string {
	if r.turns == 0 {
		return IntentQuestionID
	}
	return fmt.Sprintf("turn-%d", r.turns)
}
