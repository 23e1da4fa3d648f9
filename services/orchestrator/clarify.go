package orchestrator

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
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

// clarificationSeparator joins the run's message and the answer to its intent question.
const clarificationSeparator = "\n\n"

// intentMessage is the text the intent stage parses: the run's message, and the user's answer
// to the run's question about it.
func (r *run) intentMessage() string {
	if r.clarification == "" {
		return r.req.GetMessage()
	}
	return r.req.GetMessage() + clarificationSeparator + r.clarification
}

// clarificationTooLong is the error of an answer to question questionID of a run whose message
// is message that the intent stage could not take: the answer to the intent question is parsed
// with the message (intentMessage), and the two together may be MaxMessageBytes long, the
// limit of a message. Refused at once, the answer does not end the run later; nil when it fits
// or answers another question.
func clarificationTooLong(questionID, message, answer string) error {
	room := MaxMessageBytes - len(message) - len(clarificationSeparator)
	if questionID != IntentQuestionID || len(answer) <= room {
		return nil
	}
	return stageerr.Invalid("answer: at most %d bytes, got %d: the answer to question %q is parsed with the run's message of %d bytes, together at most %d bytes",
		max(room, 0), len(answer), IntentQuestionID, len(message), MaxMessageBytes)
}

// questionID is the id of a question asked now: "intent" before the first turn, else
// "turn-<n>".
func (r *run) questionID() string {
	if r.turns == 0 {
		return IntentQuestionID
	}
	return fmt.Sprintf("turn-%d", r.turns)
}
