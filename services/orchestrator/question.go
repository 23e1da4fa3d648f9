package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// askUser is the recovery stage's decision to ask the user how to proceed (seed 003: unknown
// failure → ask user for guidance), made in a turn.
type askUser struct {
	question string // recovery's user_message
	reason   string // the failure
}

// questionState is a pause for the user's answer.
type questionState struct {
	pending  *typev1.PendingQuestion
	answered bool // an answer was handed to the run (a second one is refused)
}

// awaitAnswer pauses the run until its user answers the turn's question (AgentService.Answer,
// on any replica), the answer timeout passes (the run ends FAILED_TIMEOUT / ANSWER_TIMEOUT, or
// TIMEOUT when the run's deadline came first: pauseExpiry) or the run is cancelled (an answer
// queued before is taken all the same: its caller was told the run has it). The
// question is added to the conversation as the assistant's message and the answer as the
// user's, so the model of the next turn sees both. Like an approval pause, it is checkpointed
// before it is announced: the run can be stopped here (a deploy) and resumed by any replica,
// which waits until the same deadline; an answer recorded meanwhile reaches it through the
// run-inputs bucket. A run restored from such a checkpoint continues its pause.
func (r *run) awaitAnswer(ctx context.Context, t *turnState) *ending {
	r.mu.Lock()
	st := r.asking
	r.mu.Unlock()
	if st == nil {
		st = r.ask(ctx, t.ask)
		if e := r.persist(ctx, checkpointv1.Phase_PHASE_AWAITING_INPUT, t, nil); e != nil {
			return e
		}
		r.publish(r.questionResult(st.pending))
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_InputRequested{InputRequested: &eventv1.InputRequested{Question: st.pending}}})
		if e := r.yield(func(ctx context.Context) *ending { return r.awaitAnswer(ctx, t) }); e != nil {
			return e
		}
	} else {
		r.publish(r.questionResult(st.pending))
	}
	timer := time.NewTimer(st.pending.GetExpiresAt().AsTime().Sub(r.svc.now()))
	defer timer.Stop()
	var (
		end    *ending
		answer *agentv1.AnswerRequest
		by     string // who answered
	)
wait:
	for {
		select {
		case <-r.inputs.ready:
			for {
				in, ok := r.inputs.next()
				if !ok {
					break
				}
				if a := in.Answer; a != nil && a.GetQuestionId() == st.pending.GetId() {
					if a.GetAnswer() == "" { // the question was closed unanswered (closeQuestion)
						end = r.answerTimeout(st)
					} else {
						answer, by = a, in.By
					}
					break wait
				}
			}
		case <-r.svc.draining:
			return stopHere(errHandOff.Error()) // the pause is checkpointed: another replica waits on
		case <-ctx.Done():
			if e := stopCause(ctx); e != nil {
				return e
			}
			if !errors.Is(context.Cause(ctx), errTotalTimeout) {
				// Cancelled: COMMIT ends the run. An answer queued before the cancellation
				// (the select takes either) is the run's, as Answer told its caller: it is
				// recorded, though no turn follows to use it. Answer finds no question from
				// the same moment (stopAsking), so none comes after the queue was read.
				answer, by = r.stopAsking(st.pending.GetId())
				break wait
			}
			// The run's deadline, which the question's expires_at never passes (pauseExpiry),
			// came before the question's timer: the question has expired too.
			answer, by, end = r.expireQuestion(ctx, st)
			break wait
		case <-timer.C:
			answer, by, end = r.expireQuestion(ctx, st)
			break wait
		}
	}
	r.mu.Lock()
	r.asking = nil
	r.mu.Unlock()
	r.publish(nil)
	if answer != nil {
		r.takeAnswer(ctx, st.pending, answer.GetAnswer(), by)
	}
	return end
}

// answerTimeout ends a run whose question st was not answered in time: ANSWER_TIMEOUT, or
// TIMEOUT when the question expired at the run's deadline (pauseExpiry).
func (r *run) answerTimeout(st *questionState) *ending {
	if r.endsAtDeadline(st.pending.GetExpiresAt()) {
		return r.totalTimeout()
	}
	end := fail(typev1.Outcome_OUTCOME_FAILED_TIMEOUT, ExitAnswerTimeout, messageAnswerTimeout,
		fmt.Sprintf("no answer within answer_timeout_ms (%d ms) to %q", r.contract.GetAnswerTimeoutMs(), st.pending.GetQuestion()))
	end.retryable = true
	return end
}

// expireQuestion ends the wait for an answer to the question st, whose expires_at has passed:
// closed (closeQuestion), it ends the run (answerTimeout). An answer taken before is recorded,
// since Answer told its caller the run has it (resumed); when the question expired at the
// run's deadline, the run ends TIMEOUT all the same, with the answer in its conversation.
func (r *run) expireQuestion(ctx context.Context, st *questionState) (
	*agentv1.AnswerRequest, string, *ending) {
	answer, by := r.closeQuestion(ctx, st)
	if answer == nil || r.endsAtDeadline(st.pending.GetExpiresAt()) {
		return answer, by, r.answerTimeout(st)
	}
	return answer, by, nil
}

// pauseCloseTimeout bounds the closing of an expired pause in the store (closeQuestion,
// closeDecisions), which is not done under the run's context: the run's deadline may have
// ended that.
const pauseCloseTimeout = 10 * time.Second

// closingContext is the context an expired pause is closed in: ctx's values, not its
// cancellation, within pauseCloseTimeout and the replica's drain (publishContext).
func (r *run) closingContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.publishContext(ctx), pauseCloseTimeout)
}

// closeQuestion closes the question st once its deadline has passed, unless an answer was
// taken before: Answer told its caller the run goes on with it, though the run may not have
// it yet (the store's watch has not handed it over; or it was recorded while no replica owned
// the paused run, which a replica adopted after the deadline): it is read from the store. It
// returns that answer, and who gave it, or nil when the question is closed unanswered. With
// the store, the first of the answer and the run's closing record (an empty answer, which
// Answer never records) wins, whichever replica wrote it; a run that resumes from the pause
// finds the closing record and ends too. The store is written in a context of its own
// (closingContext), since the run's may have ended at the deadline.
func (r *run) closeQuestion(ctx context.Context, st *questionState) (*agentv1.AnswerRequest, string) {
	id := st.pending.GetId()
	if r.svc.store == nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !st.answered {
			r.asking = nil // Answer finds no question from now on
			return nil, ""
		}
		return r.queuedAnswer(id) // answerLocal queued it with r.mu held
	}
	ctx, cancel := r.closingContext(ctx)
	defer cancel()
	err := r.svc.store.Answer(ctx, &agentv1.AnswerRequest{RunId: r.id, QuestionId: id}, "")
	if !errors.Is(err, runstore.ErrExists) {
		if err != nil && !errors.Is(err, runstore.ErrCancelled) {
			r.svc.log.WarnContext(ctx, "closing an expired question in the store failed", "run_id", r.id, "question_id", id, "err", err)
		}
		return nil, ""
	}
	// An answer was recorded first, which the watch may not have handed over yet.
	in, err := r.svc.store.Answered(ctx, r.id, id)
	if errors.Is(err, runstore.ErrCancelled) {
		return nil, "" // after the run's cancellation: not the run's
	}
	if err != nil {
		r.svc.log.WarnContext(ctx, "reading the answer to an expired question failed",
			"run_id", r.id, "question_id", id, "err", err)
		return r.queuedAnswer(id)
	}
	if in.Answer.GetAnswer() == "" {
		return nil, "" // closed by the replica that owned the run before
	}
	return in.Answer, in.By
}

// stopAsking ends the run's question id: under r.mu, Answer finds no question from now on
// and the answer queued before is taken (queuedAnswer), so that none is queued, and told
// resumed, after the queue was read.
func (r *run) stopAsking(id string) (*agentv1.AnswerRequest, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asking = nil
	return r.queuedAnswer(id)
}

// queuedAnswer takes the answer to question id, and who gave it, from the run's inputs; nil
// when none is there.
func (r *run) queuedAnswer(id string) (*agentv1.AnswerRequest, string) {
	for {
		in, ok := r.inputs.next()
		if !ok {
			return nil, ""
		}
		if a := in.Answer; a != nil && a.GetQuestionId() == id && a.GetAnswer() != "" {
			return a, in.By
		}
	}
}

// ask starts a pause for the user's answer to q: the question in the conversation, the
// AWAIT_INPUT transcript entry and the ASK_CLARIFICATION decision. The recovery stage is
// swappable: a decision that came without its question (user_message) asks
// MessageHowToProceed, never an empty question.
func (r *run) ask(ctx context.Context, q *askUser) *questionState {
	now := r.svc.now()
	question := cmp.Or(q.question, MessageHowToProceed)
	st := &questionState{pending: &typev1.PendingQuestion{
		RunId: r.id, Id: r.questionID(), Question: question, Reason: q.reason,
		RequestedAt: timestamppb.New(now), ExpiresAt: r.pauseExpiry(now, time.Duration(r.contract.GetAnswerTimeoutMs())*time.Millisecond),
	}}
	r.conversation = append(r.conversation, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: question})
	st0 := typev1.RunState_RUN_STATE_AWAIT_INPUT
	r.step(ctx, st0, r.stepID(st0), func(context.Context) (proto.Message, proto.Message, string) {
		return st.pending, nil, "asking the user how to proceed after " + q.reason
	})
	r.decision = &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION, ClarificationQuestion: question}
	r.mu.Lock()
	r.asking = st
	r.mu.Unlock()
	return st
}

// takeAnswer adds the user's answer to the conversation, records it and announces it, with
// who answered (a principal's id; empty when unknown).
func (r *run) takeAnswer(ctx context.Context, q *typev1.PendingQuestion, answer, by string) {
	r.conversation = append(r.conversation, &typev1.Message{Role: typev1.Role_ROLE_USER, Content: answer})
	r.decision = nil // answered: the run decides anew
	ev := &eventv1.InputAnswered{QuestionId: q.GetId(), Answer: answer, AnsweredBy: by}
	st := typev1.RunState_RUN_STATE_AWAIT_INPUT
	r.step(ctx, st, r.stepID(st)+"/answer", func(context.Context) (proto.Message, proto.Message, string) {
		return nil, ev, "answered " + q.GetId() + bySuffix(by)
	})
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_InputAnswered{InputAnswered: ev}})
}

// questionResult is the snapshot a caller gets while the run waits for an answer, the one any
// replica builds from the paused checkpoint.
func (r *run) questionResult(q *typev1.PendingQuestion) *typev1.RunResult {
	cp := r.snapshot(checkpointv1.Phase_PHASE_AWAITING_INPUT, nil, nil)
	cp.Question, cp.Usage = q, proto.CloneOf(r.usage)
	cp.Conversation, cp.Accounting = slices.Clone(cp.Conversation), slices.Clone(cp.Accounting)
	return pausedFromCheckpoint(cp)
}

// answerLocal hands an answer to a run live on this replica that waits for one (no store).
func (r *run) answerLocal(req *agentv1.AnswerRequest, by string) (*agentv1.AnswerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.asking
	if st == nil || (req.GetQuestionId() != "" && req.GetQuestionId() != st.pending.GetId()) {
		return nil, notAsking(r.id, req.GetQuestionId())
	}
	if st.answered {
		return nil, alreadyAnswered(r.id, st.pending.GetId())
	}
	if err := r.svc.expired(r.id, st.pending); err != nil {
		return nil, err
	}
	if err := clarificationTooLong(st.pending.GetId(), r.req.GetMessage(), req.GetAnswer()); err != nil {
		return nil, err
	}
	answer := proto.CloneOf(req)
	answer.QuestionId = st.pending.GetId()
	r.inputs.put(runstore.Input{Answer: answer, By: by})
	st.answered = true
	return &agentv1.AnswerResponse{RunId: r.id, QuestionId: st.pending.GetId(), Resumed: true}, nil
}

// notAsking is the error of an answer to a run that asks no question, or not that one.
func notAsking(runID, questionID string) error {
	if questionID != "" {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q does not ask question %q", runID, questionID)
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q asks no question", runID)
}

// expired is the error of an answer to q past its expires_at: the run asks no more, and ends
// ANSWER_TIMEOUT without it (at once, or when a replica adopts it), so the answer is not
// taken, nor acknowledged as resuming the run. nil while q is open.
func (s *Service) expired(runID string, q *typev1.PendingQuestion) error {
	if exp := q.GetExpiresAt(); exp == nil || s.now().Before(exp.AsTime()) {
		return nil
	}
	return questionExpired(runID, q)
}

// questionExpired is the error of an answer to q once it expired: by this replica's clock
// (expired), or closed by the run at its expires_at.
func questionExpired(runID string, q *typev1.PendingQuestion) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q asks question %q no more: it expired at %s, unanswered",
		runID, q.GetId(), q.GetExpiresAt().AsTime().Format(time.RFC3339Nano))
}

// alreadyAnswered is the error of a second answer to a question.
func alreadyAnswered(runID, questionID string) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "question %q of run %q is already answered", questionID, runID)
}

// restoreQuestion is the pause a checkpoint was taken in.
func restoreQuestion(cp *checkpointv1.RunCheckpoint) *questionState {
	return &questionState{pending: cp.GetQuestion()}
}
