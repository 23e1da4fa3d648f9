package orchestrator

import (
	"context"
	"errors"
	"strings"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"google.golang.org/protobuf/proto"
)

// Answer records the user's answer to the question a paused run asks (OUTCOME_AWAITING_INPUT,
// result.pending_question): the run goes on with the answer as the user's message. Any replica
// takes the answer for any run: it is stored, and the run's owner (or whichever replica
// resumes the run) applies it. The first answer wins; an answer to a question the run does not
// ask (any more), or one past the question's expires_at, is NOT_FOUND.
func (s *Service) Answer(ctx context.Context, req *agentv1.AnswerRequest) (*agentv1.AnswerResponse, error) {
	if err := checkRunID(req.GetRunId()); err != nil {
		return nil, err
	}
	switch {
	case strings.TrimSpace(req.GetAnswer()) == "":
		return nil, stageerr.Invalid("answer must not be empty")
	case len(req.GetAnswer()) > MaxMessageBytes:
		return nil, stageerr.Invalid("answer: at most %d bytes, got %d", MaxMessageBytes, len(req.GetAnswer()))
	case len(req.GetQuestionId()) > MaxQuestionIDBytes:
		return nil, stageerr.Invalid("question_id: at most %d bytes, got %d",
			MaxQuestionIDBytes, len(req.GetQuestionId()))
	}
	if err := s.authorizeRun(ctx, auth.ActionAnswer, req.GetRunId()); err != nil {
		return nil, err
	}
	if s.store != nil {
		return s.answerStored(ctx, req)
	}
	r := s.liveRun(req.GetRunId())
	if r == nil {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q is not live on this orchestrator", req.GetRunId())
	}
	return r.answerLocal(req, principalID(ctx))
}

// answerStored records an answer in the store, for the run's owner to apply. An answer the
// store holds already, the same by the same caller, is taken again: a retry of a call whose
// answer was lost (its caller saw UNAVAILABLE) gets what the first got, resumed, where it was
// refused as another answer, or as one to a question the run went on from with it.
func (s *Service) answerStored(ctx context.Context, req *agentv1.AnswerRequest) (*agentv1.AnswerResponse, error) {
	resp, err := s.recordAnswer(ctx, req)
	if e := stageerr.As(err); e == nil ||
		(e.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND &&
			e.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION) {
		return resp, err
	}
	switch questionID, lost := s.answeredBefore(ctx, req); {
	case lost != nil:
		return nil, lost
	case questionID != "":
		resp := &agentv1.AnswerResponse{RunId: req.GetRunId(), QuestionId: questionID, Resumed: true}
		return resp, nil
	}
	return nil, err
}

// answeredBefore returns the id of the question that answer req, by the caller, is recorded to
// already; "" when none is. Without a question_id, req answers the question the run asks. lost
// is the error of such an answer recorded after the run's cancellation, which the run never
// takes (runstore.ErrCancelled): a retry of an Answer that lost to a CancelRun.
func (s *Service) answeredBefore(
	ctx context.Context, req *agentv1.AnswerRequest,
) (questionID string, lost error) {
	answer := proto.CloneOf(req)
	if answer.GetQuestionId() == "" {
		cp, err := s.store.State(ctx, req.GetRunId())
		if err != nil || cp.GetPhase() != checkpointv1.Phase_PHASE_AWAITING_INPUT {
			return "", nil
		}
		answer.QuestionId = cp.GetQuestion().GetId()
	}
	in, err := s.store.Answered(ctx, req.GetRunId(), answer.GetQuestionId())
	switch {
	case err != nil && !errors.Is(err, runstore.ErrCancelled),
		!retryOf(ctx, in.Answer, answer, in.By):
		return "", nil
	case err != nil:
		return "", cancelled(req.GetRunId(), "no answer is taken")
	}
	return answer.GetQuestionId(), nil
}

// recordAnswer is answerStored for an answer not recorded yet.
func (s *Service) recordAnswer(ctx context.Context, req *agentv1.AnswerRequest) (*agentv1.AnswerResponse, error) {
	runID := req.GetRunId()
	cp, err := s.store.State(ctx, runID)
	switch {
	case errors.Is(err, runstore.ErrNotFound):
		return nil, notAsking(runID, req.GetQuestionId())
	case err != nil:
		return nil, storeErr(ctx, runID, err)
	}
	q := cp.GetQuestion()
	if cp.GetPhase() != checkpointv1.Phase_PHASE_AWAITING_INPUT || (req.GetQuestionId() != "" && req.GetQuestionId() != q.GetId()) {
		return nil, notAsking(runID, req.GetQuestionId())
	}
	if err := s.expired(runID, q); err != nil {
		return nil, err
	}
	if q.GetId() == IntentQuestionID {
		// State leaves the request out; the answer is parsed with its message.
		full, _, err := s.store.Load(ctx, runID)
		switch {
		case errors.Is(err, runstore.ErrNotFound):
			return nil, notAsking(runID, q.GetId())
		case err != nil:
			return nil, storeErr(ctx, runID, err)
		}
		if err := clarificationTooLong(q.GetId(), full.GetRequest().GetMessage(), req.GetAnswer()); err != nil {
			return nil, err
		}
	}
	if err := s.cancelling(ctx, runID, "no answer is taken"); err != nil {
		return nil, err
	}
	answer := proto.CloneOf(req)
	answer.QuestionId = q.GetId()
	switch err := s.store.Answer(ctx, answer, principalID(ctx)); {
	case errors.Is(err, runstore.ErrCancelled): // a CancelRun came since cancelling read
		return nil, cancelled(runID, "no answer is taken")
	case errors.Is(err, runstore.ErrExists):
		// The run closed the question at its deadline, meanwhile, by its owner's clock, which
		// may be ahead of this replica's; or another answer came first.
		in, err := s.store.Answered(ctx, runID, q.GetId())
		if errors.Is(err, runstore.ErrCancelled) {
			return nil, cancelled(runID, "no answer is taken")
		}
		if err == nil && in.Answer.GetAnswer() == "" {
			return nil, questionExpired(runID, q)
		}
		if err := s.expired(runID, q); err != nil {
			return nil, err
		}
		return nil, alreadyAnswered(runID, q.GetId())
	case errors.Is(err, runstore.ErrNotFound):
		return nil, notAsking(runID, q.GetId()) // the run ended, and retired, since it was read
	case err != nil:
		return nil, storeErr(ctx, runID, err)
	}
	return &agentv1.AnswerResponse{RunId: runID, QuestionId: q.GetId(), Resumed: true}, nil
}

// cancelling is the error of an input (what says what is not taken) to a run whose
// cancellation is recorded (cancelled); nil while the run is not being cancelled. An input
// recorded after this check may still lose to a cancellation recorded since: the store
// reports it (runstore.ErrCancelled).
func (s *Service) cancelling(ctx context.Context, runID, what string) error {
	is, err := s.store.Cancelling(ctx, runID)
	if err != nil {
		return storeErr(ctx, runID, err)
	}
	if is {
		return cancelled(runID, what)
	}
	return nil
}

// cancelled is the FAILED_PRECONDITION error of an input (what says what is not taken) to a
// run whose cancellation came first: the run ends INTERRUPTED without it, once its owner (or
// the replica that adopts it) has applied the cancellation, so it is not acknowledged as
// resuming the run.
func cancelled(runID, what string) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
		"run %q is ending: it was cancelled, so %s", runID, what)
}
