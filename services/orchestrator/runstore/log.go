package runstore

import (
	"context"
	"errors"
	"fmt"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/kvbody"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// LogStream is the stream of the runs' checkpoint log segments: a run's segments are on the
// subject SegmentSubject(run) (or, for a segment kept in the object store, BodySubject(run)).
const LogStream = "AGENTMESH_CHECKPOINT_LOG"

// logSubjects are the log stream's subjects.
const logSubjects = "agentmesh.checkpoint.>"

// SegmentSubject is the subject of a run's log segments.
func SegmentSubject(runID string) string { return "agentmesh.checkpoint.segment." + runID }

// BodySubject is the subject of a run's log segments kept in the object store.
func BodySubject(runID string) string { return "agentmesh.checkpoint.body." + runID }

// tailSize is how large a checkpoint's tail grows before it goes to a segment of its own: a
// checkpoint costs at most about this much more than its turn's changes, and a run writes a
// segment for about every tailSize bytes it adds.
const tailSize = 8 << 10

// appendSegment stores seg in the run's log and returns its stream sequence. A segment too
// large for one message goes to the object store, and the log holds its name (object).
func (s *Store) appendSegment(ctx context.Context, seg *checkpointv1.LogSegment) (seq uint64, object string, err error) {
	runID := seg.GetRunId()
	data, err := proto.Marshal(seg)
	if err != nil {
		return 0, "", fmt.Errorf("runstore: log of run %s: %w: %w", runID, ErrUnencodable, err)
	}
	subject := SegmentSubject(runID)
	if !kvbody.Fits(s.nc, len(data)) {
		var name string
		err = s.retry(ctx, func(ctx context.Context) (err error) {
			name, err = kvbody.Put(ctx, s.nc, s.buckets().bodies, runID, data)
			return err
		})
		if err != nil {
			return 0, "", fmt.Errorf("runstore: store checkpoint log body of run %s: %w", runID, err)
		}
		if data, err = proto.Marshal(&checkpointv1.LogSegment{RunId: runID, BodyObject: name}); err != nil {
			return 0, "", err
		}
		subject, object = BodySubject(runID), name
	}
	err = s.retry(ctx, func(ctx context.Context) error {
		ack, err := s.js.Publish(ctx, subject, data, jetstream.WithExpectStream(LogStream))
		if err != nil {
			return err
		}
		seq = ack.Sequence
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("runstore: append to the checkpoint log of run %s: %w", runID, err)
	}
	return seq, object, nil
}

// segment reads the log segment at seq of a run, which its checkpoint entry e names.
func (s *Store) segment(ctx context.Context, b buckets, runID string, seq uint64, e jetstream.KeyValueEntry) (*checkpointv1.LogSegment, error) {
	msg, err := b.log.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("runstore: checkpoint log segment %d of run %s: %w",
			seq, runID, gone(err))
	}
	if msg.Subject != SegmentSubject(runID) && msg.Subject != BodySubject(runID) {
		return nil, fmt.Errorf("runstore: checkpoint log segment %d of run %s is on %s: %w",
			seq, runID, msg.Subject, ErrUnreadable)
	}
	seg := &checkpointv1.LogSegment{}
	if err := proto.Unmarshal(msg.Data, seg); err != nil {
		return nil, fmt.Errorf("runstore: checkpoint log segment %d of run %s is corrupt: %w: %w",
			seq, runID, ErrUnreadable, err)
	}
	if name := seg.GetBodyObject(); name != "" {
		body, err := s.object(ctx, b, e, name)
		if err != nil {
			return nil, fmt.Errorf("runstore: checkpoint log body %s of run %s: %w",
				name, runID, gone(err))
		}
		seg = &checkpointv1.LogSegment{}
		if err := proto.Unmarshal(body, seg); err != nil {
			return nil, fmt.Errorf("runstore: checkpoint log body %s of run %s is corrupt: %w: %w",
				name, runID, ErrUnreadable, err)
		}
	}
	if seg.GetRunId() != runID {
		return nil, fmt.Errorf(
			"runstore: checkpoint log segment %d of run %s belongs to run %q: %w",
			seq, runID, seg.GetRunId(), ErrUnreadable)
	}
	return seg, nil
}

// readLog fills cp, a checkpoint of version 2, from the log it names, and returns the head
// it stands at. It checks that the log holds what the checkpoint counted and that the
// transcript is one chain ending at the checkpoint's head.
func (s *Store) readLog(ctx context.Context, b buckets, cp *checkpointv1.RunCheckpoint, e jetstream.KeyValueEntry) (*Head, error) {
	ref := cp.GetLog()
	h := &Head{segments: ref.GetSegments(), tail: ref.GetTail()}
	for _, seq := range ref.GetSegments() {
		seg, err := s.segment(ctx, b, cp.GetRunId(), seq, e)
		if err != nil {
			return nil, err
		}
		if err := apply(cp, seg); err != nil {
			return nil, fmt.Errorf("runstore: checkpoint log segment %d of run %s: %w: %w",
				seq, cp.GetRunId(), ErrUnreadable, err)
		}
	}
	if err := apply(cp, ref.GetTail()); err != nil {
		return nil, fmt.Errorf("runstore: checkpoint tail of run %s: %w: %w",
			cp.GetRunId(), ErrUnreadable, err)
	}
	if err := checkLog(cp, ref); err != nil {
		return nil, fmt.Errorf("runstore: checkpoint log of run %s: %w: %w",
			cp.GetRunId(), ErrUnreadable, err)
	}
	cp.Log = nil
	h.fill(cp)
	return h, nil
}

// apply applies seg to cp.
func apply(cp *checkpointv1.RunCheckpoint, seg *checkpointv1.LogSegment) error {
	if seg == nil {
		return nil
	}
	from := int(seg.GetMessagesFrom())
	if from > len(cp.GetConversation()) {
		return fmt.Errorf("messages from %d of a conversation of %d", from, len(cp.GetConversation()))
	}
	cp.Conversation = append(cp.Conversation[:from], seg.GetMessages()...)
	cp.Transcript = append(cp.Transcript, seg.GetTranscript()...)
	cp.Accounting = append(cp.Accounting, seg.GetAccounting()...)
	if seg.GetRequest() != nil {
		cp.Request = seg.GetRequest()
	}
	if seg.GetContract() != nil {
		cp.Contract = seg.GetContract()
	}
	if seg.GetAvailable() != nil {
		cp.Available = seg.GetAvailable().GetTools()
	}
	return nil
}

// checkLog reports a log that does not hold what ref counted.
func checkLog(cp *checkpointv1.RunCheckpoint, ref *checkpointv1.LogRef) error {
	if n := len(cp.GetConversation()); n != int(ref.GetMessages()) {
		return fmt.Errorf("%d messages, the checkpoint counted %d", n, ref.GetMessages())
	}
	if n := len(cp.GetAccounting()); n != int(ref.GetAccountingEntries()) {
		return fmt.Errorf("%d accounting entries, the checkpoint counted %d", n, ref.GetAccountingEntries())
	}
	tr := cp.GetTranscript()
	if len(tr) != int(ref.GetTranscriptEntries()) {
		return fmt.Errorf("%d transcript entries, the checkpoint counted %d", len(tr), ref.GetTranscriptEntries())
	}
	if err := chained(tr); err != nil {
		return err
	}
	if len(tr) > 0 && tr[len(tr)-1].GetHash() != ref.GetTranscriptHead() {
		return errors.New("the transcript does not end at the checkpoint's head")
	}
	return nil
}

// chained reports a transcript whose entries are not one chain in order.
func chained(tr []*typev1.TranscriptEntry) error {
	for i, e := range tr {
		if e.GetSeq() != int64(i+1) {
			return fmt.Errorf("transcript entry %d has seq %d", i+1, e.GetSeq())
		}
		if i > 0 && e.GetPrevHash() != tr[i-1].GetHash() {
			return fmt.Errorf("transcript entry %d does not follow entry %d", i+1, i)
		}
	}
	return nil
}

// purgeLog removes a run's checkpoint log: the segments and the bodies of those kept in the
// object store.
func purgeLog(ctx context.Context, b buckets, runID string) error {
	for seq := uint64(1); ; {
		msg, err := b.log.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(BodySubject(runID)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return err
		}
		seg := &checkpointv1.LogSegment{}
		if proto.Unmarshal(msg.Data, seg) == nil && seg.GetBodyObject() != "" {
			if err := b.bodies.Delete(ctx, seg.GetBodyObject()); err != nil && !isNotFound(err) {
				return err
			}
		}
		seq = msg.Sequence + 1
	}
	// One request for both subjects, segment and body: agentmesh.checkpoint.*.<run id>.
	return b.log.Purge(ctx, jetstream.WithPurgeSubject(runSubjects(runID)))
}

// runSubjects is a subject filter matching a run's log subjects, SegmentSubject and
// BodySubject.
func runSubjects(runID string) string { return "agentmesh.checkpoint.*." + runID }
