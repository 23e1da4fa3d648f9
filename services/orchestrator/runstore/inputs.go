package runstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// Input is something another replica handed to a run's owner: a person's decision on a paused
// call, the user's answer to the run's question, or a cancellation.
type Input struct {
	// Decision is an approval decision, or nil.
	Decision *agentv1.ResolveApprovalRequest
	// Answer is an answer, naming its question, or nil.
	Answer *agentv1.AnswerRequest
	// Cancel is a cancellation, or nil.
	Cancel *agentv1.CancelRunRequest
	// By is who handed it over: the authenticated principal's id (tenant/user); empty with
	// authentication off, or for an input an earlier release recorded.
	By string
}

// Decide records a decision on a paused call of a run; ErrExists when the call is decided
// already (the first decision wins, on whichever replica it arrived); ErrNotFound when the run
// has retired, ErrCancelled when its cancellation came first (see record). by is who decided
// (Input.By).
func (s *Store) Decide(ctx context.Context, d *agentv1.ResolveApprovalRequest, by string) error {
	data, err := encodeInput(d, by)
	if err != nil {
		return fmt.Errorf("runstore: encode decision: %w", err)
	}
	return s.record(ctx, d.GetRunId(), decisionKey(d.GetRunId(), d.GetCallId()), data, false)
}

// Answer records the answer to a question of a run (a.question_id names it); ErrExists when
// the question is answered already (the first answer wins, on whichever replica it arrived);
// ErrNotFound when the run has retired, ErrCancelled when its cancellation came first (see
// record). by is who answered (Input.By).
func (s *Store) Answer(ctx context.Context, a *agentv1.AnswerRequest, by string) error {
	data, err := encodeInput(a, by)
	if err != nil {
		return fmt.Errorf("runstore: encode answer: %w", err)
	}
	return s.record(ctx, a.GetRunId(), answerKey(a.GetRunId(), a.GetQuestionId()), data, false)
}

// RequestCancel asks a run's owner to cancel it; ErrNotFound when the run has retired (see
// record). by is who cancels it (Input.By). The first cancellation stays: its revision is
// the one the run's inputs are ordered against (ErrCancelled), and a later one would move it
// past inputs the run took before it.
func (s *Store) RequestCancel(ctx context.Context, c *agentv1.CancelRunRequest, by string) error {
	data, err := encodeInput(c, by)
	if err != nil {
		return fmt.Errorf("runstore: encode cancellation: %w", err)
	}
	err = s.record(ctx, c.GetRunId(), cancelKey(c.GetRunId()), data, true)
	if errors.Is(err, ErrExists) {
		return nil // cancelled already
	}
	return err
}

// Cancelling reports whether a cancellation of a run is recorded (RequestCancel): its owner
// cancels it, or the replica that adopts it does.
func (s *Store) Cancelling(ctx context.Context, runID string) (bool, error) {
	return s.has(ctx, func(b buckets) jetstream.KeyValue { return b.inputs }, cancelKey(runID))
}

// record creates an input of a run under key (a cancellation: cancel), then reads whether the
// run's cancellation came before it (ErrCancelled; the input stays, unused, until the run
// retires), then whether the run's checkpoint is still there, in that order: a run's
// retirement purges its checkpoint before its cancellation. Callers write an input once they
// read the run waiting for it, but the run may end and retire in between: its retirement
// purges its checkpoint, then its inputs, so an input written after that stayed for good in
// the bucket, which has no TTL, replayed to every replica's input watch, and its caller was
// told it was taken. An input that finds the checkpoint gone is purged again, and ErrNotFound
// returned: its run has ended. (A run that took the input, ended and retired between the write
// and the read, a retireDelay at least, would be reported so too.) When the read of the
// checkpoint fails, the input is kept and nil returned: it is stored, and its run's retirement
// purges it.
func (s *Store) record(ctx context.Context, runID, key string, data []byte, cancel bool) error {
	var rev uint64
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		rev, err = s.buckets().inputs.Create(ctx, key, data)
		return err
	})
	if err != nil {
		return mapErr(err)
	}
	if !cancel {
		if err := s.cancelledBefore(ctx, runID, rev); err != nil {
			return err
		}
	}
	err = s.retry(ctx, func(ctx context.Context) error {
		_, err := s.buckets().checkpoints.Get(ctx, runID)
		return err
	})
	if !isNotFound(err) {
		return nil
	}
	// Through the bucket, so that the replicas' input watches drop it, then from its stream,
	// which drops the purge marker too.
	_ = s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		if err := b.inputs.Purge(ctx, key); err != nil {
			return err
		}
		return b.inputLog.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(InputBucket, key)))
	})
	return fmt.Errorf("%w: run %s has ended", ErrNotFound, runID)
}

// WatchInputs hands deliver each input of a run, those recorded so far first, each once, until
// ctx ends. The runs of a replica share one watch of the inputs bucket (inputHub), which calls
// deliver, one input at a time: deliver must return at once, and must not call the Store.
func (s *Store) WatchInputs(ctx context.Context, runID string, deliver func(Input)) {
	s.hub.subscribe(ctx, runID, deliver)
}

// encodeInput is an input's stored value: its encoding, then its origin's
// (checkpointv1.InputOrigin), which decodes as a field the input reserves.
func encodeInput(in proto.Message, by string) ([]byte, error) {
	data, err := proto.Marshal(in)
	if err != nil || by == "" {
		return data, err
	}
	return proto.MarshalOptions{}.MarshalAppend(data, &checkpointv1.InputOrigin{Principal: by})
}

// inputDecoding decodes a stored input without its origin's field, which the input does not
// know, and the origin without the input's fields.
var inputDecoding = proto.UnmarshalOptions{DiscardUnknown: true}

func decodeInput(key string, value []byte) (Input, error) {
	origin := &checkpointv1.InputOrigin{}
	if err := inputDecoding.Unmarshal(value, origin); err != nil {
		return Input{}, err
	}
	in := Input{By: origin.GetPrincipal()}
	var m proto.Message
	switch {
	case strings.HasSuffix(key, ".cancel"):
		in.Cancel = &agentv1.CancelRunRequest{}
		m = in.Cancel
	case strings.Contains(key, ".answer."):
		in.Answer = &agentv1.AnswerRequest{}
		m = in.Answer
	default:
		in.Decision = &agentv1.ResolveApprovalRequest{}
		m = in.Decision
	}
	return in, inputDecoding.Unmarshal(value, m)
}

// ForgetDecision removes the recorded decision on a call of a run once the run has taken it,
// so that a later pause for a call of the same id (the plan's "plan", after a revision) waits
// for a decision of its own: the first one answered it, as already decided, where no person
// had seen the revised plan. A decision that is not there is no error.
func (s *Store) ForgetDecision(ctx context.Context, runID, callID string) error {
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		err := s.buckets().inputs.Purge(ctx, decisionKey(runID, callID))
		if isNotFound(err) {
			return nil
		}
		return err
	}))
}

// decisionKey is the key of a call's decision; call ids are free text, so they are hex-encoded.
func decisionKey(runID, callID string) string {
	return runID + ".approval." + hex.EncodeToString([]byte(callID))
}

// answerKey is the key of the answer to a question; question ids are free text, so they are
// hex-encoded.
func answerKey(runID, questionID string) string {
	return runID + ".answer." + hex.EncodeToString([]byte(questionID))
}

// Answered returns the answer recorded to question questionID of a run, and who gave it
// (Input.Answer set; an empty answer is the question's closing record, which the run's owner
// wrote when the question expired by its clock); ErrNotFound when none is recorded;
// ErrCancelled, with it, when it came after the run's cancellation.
func (s *Store) Answered(ctx context.Context, runID, questionID string) (Input, error) {
	return s.input(ctx, runID, answerKey(runID, questionID))
}

// Decided returns the decision recorded on call callID of a run, and who decided
// (Input.Decision set; APPROVAL_DECISION_UNSPECIFIED is the pause's closing record, which the
// run's owner wrote when the pause expired by its clock); ErrNotFound when none is recorded;
// ErrCancelled, with it, when it came after the run's cancellation.
func (s *Store) Decided(ctx context.Context, runID, callID string) (Input, error) {
	return s.input(ctx, runID, decisionKey(runID, callID))
}

// input reads the input of runID recorded under key; ErrCancelled, with the input, when it
// was recorded after the run's cancellation, which the run took first (record).
func (s *Store) input(ctx context.Context, runID, key string) (Input, error) {
	var (
		in  Input
		rev uint64
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		e, err := s.buckets().inputs.Get(ctx, key)
		if err != nil {
			return err
		}
		rev = e.Revision()
		in, err = decodeInput(key, e.Value())
		return err
	})
	if err != nil {
		return in, mapErr(err)
	}
	return in, s.cancelledBefore(ctx, runID, rev)
}

// Decisions returns a run's recorded decisions by call id.
func (s *Store) Decisions(ctx context.Context, runID string) (map[string]*agentv1.ResolveApprovalRequest, error) {
	var decisions map[string]*agentv1.ResolveApprovalRequest
	err := s.retry(ctx, func(ctx context.Context) error {
		decisions = map[string]*agentv1.ResolveApprovalRequest{}
		inputs := s.buckets().inputs
		prefix := runID + ".approval."
		lister, err := inputs.ListKeysFiltered(ctx, prefix+"*")
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var keys []string
		for k := range lister.Keys() {
			keys = append(keys, k)
		}
		if err := ctx.Err(); err != nil {
			// The listing ends when ctx does, as if it were complete; and the bucket's watch
			// waits for good for a key purged before it is delivered.
			return fmt.Errorf("list the decisions of run %s: %w", runID, err)
		}
		for _, k := range keys {
			e, err := inputs.Get(ctx, k)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue // purged since it was listed
			}
			if err != nil {
				return err
			}
			in, err := decodeInput(k, e.Value())
			if err != nil || in.Decision == nil {
				continue // not a decision of this build: ignored, as WatchInputs does
			}
			decisions[in.Decision.GetCallId()] = in.Decision
		}
		return nil
	})
	return decisions, mapErr(err)
}

// purgeInputs removes every input of a run. The keys this replica's watch recorded are purged
// through the bucket, so that every replica's watch sees them go; then the run's subjects are
// purged from the bucket's stream in one request, which drops those purge markers too, and
// any input recorded too late for the watch. Listing the run's keys instead made a JetStream
// consumer per run: about a tenth of the CPU a short run cost (issue 15). A replica whose watch
// had not yet seen the markers when they were dropped keeps what it recorded of the run until
// its watch starts again.
func (s *Store) purgeInputs(ctx context.Context, b buckets, runID string) error {
	for _, key := range s.hub.keys(runID) {
		if err := b.inputs.Purge(ctx, key); err != nil && !isNotFound(err) {
			return err
		}
	}
	return b.inputLog.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(InputBucket, runID+".>")))
}

// SweepInputs purges the inputs of runs that have no checkpoint: those of a run whose writer
// stopped between writing the input and finding the run retired (record), or whose retirement
// failed to purge them after its checkpoint had gone. The bucket has no TTL: nothing else
// would ever remove them. It lists the runs with inputs, then the active runs, in a request
// each; a run with inputs that is not active is purged only once its checkpoint is read gone
// (a run an earlier release runs is not in this release's index, and a run being created is
// indexed just after its checkpoint is stored). It returns the runs whose inputs it purged.
func (s *Store) SweepInputs(ctx context.Context) ([]string, error) {
	withInputs := map[string]bool{}
	err := s.retry(ctx, func(ctx context.Context) error {
		keys, err := subjects(ctx, s.buckets().inputLog, InputBucket)
		for _, k := range keys {
			if run, _, ok := strings.Cut(k, "."); ok {
				withInputs[run] = true
			}
		}
		return err
	})
	if err != nil || len(withInputs) == 0 {
		return nil, mapErr(err)
	}
	active, err := s.Active(ctx) // after the inputs: a run indexed since they were listed is kept
	if err != nil {
		return nil, err
	}
	for _, runID := range active {
		delete(withInputs, runID)
	}
	var purged []string
	for _, runID := range slices.Sorted(maps.Keys(withInputs)) {
		gone := false
		err := s.retry(ctx, func(ctx context.Context) error {
			b := s.buckets()
			_, err := b.checkpoints.Get(ctx, runID)
			if gone = isNotFound(err); !gone {
				return err
			}
			return s.purgeInputs(ctx, b, runID)
		})
		if err != nil {
			return purged, mapErr(err)
		}
		if gone {
			purged = append(purged, runID)
		}
	}
	return purged, nil
}
