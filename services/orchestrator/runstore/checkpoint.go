package runstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/agentmesh/agentmesh/pkg/kvbody"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// Version is the RunCheckpoint format this build writes; it reads every version up to it.
// Version 1 held the whole run in the checkpoint; version 2 keeps what the run adds in the
// run's checkpoint log (see LogRef).
const Version = 2

// Create stores the first checkpoint of a run and marks the run active; ErrExists when the
// run id is taken. It returns the head the run's owner saves its next checkpoint with.
func (s *Store) Create(ctx context.Context, cp *checkpointv1.RunCheckpoint) (*Head, error) {
	w, err := s.prepare(ctx, cp, &Head{emptyLog: true})
	if err != nil {
		return nil, err
	}
	var rev uint64
	err = s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		if err := createOnce(ctx, b.checkpoints, cp.GetRunId(), w.data, &rev); err != nil {
			return err
		}
		_, err := b.active.Put(ctx, cp.GetRunId(), []byte(cp.GetReplica()))
		return err
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			s.drop(ctx, w)
		}
		return nil, mapErr(err)
	}
	return w.head(rev), nil
}

// createOnce creates key with data in kv, and sets *rev to its revision, unless an earlier
// attempt of the same write did and the key is still at *rev: retry runs a write again after
// creating the buckets again, and a write of two keys (the checkpoint, then the run's entry
// among the active runs) whose second key's bucket was missing must not then fail on its own
// first key, nor take it for another run's.
func createOnce(ctx context.Context, kv jetstream.KeyValue, key string, data []byte, rev *uint64) error {
	if *rev != 0 {
		if e, err := kv.Get(ctx, key); err == nil && e.Revision() == *rev {
			return nil
		}
	}
	r, err := kv.Create(ctx, key, data)
	if err != nil {
		return err
	}
	*rev = r
	return nil
}

// Save replaces a run's checkpoint written at h and advances h; ErrConflict when h is no
// longer the latest (another replica advanced the run). It writes what changed since h: the
// new messages, transcript and accounting entries, the request, contract and tools when they
// changed, and the checkpoint's own small state. A checkpoint that the store lost (NATS
// restarted with an empty store) is written again whole from cp. A checkpoint holding text
// that is not UTF-8 is refused with ErrUnencodable. When Save fails, h is as it was, but for
// knowing that the run's log may now hold a segment, and, when the write went unanswered (a
// request NATS may have stored, its answer lost with the connection), the write itself: the
// next Save through h first reads whether it was stored (settle), and goes on after it.
func (s *Store) Save(ctx context.Context, cp *checkpointv1.RunCheckpoint, h *Head) error {
	if err := s.settle(ctx, cp.GetRunId(), h); err != nil {
		return err
	}
	w, err := s.prepare(ctx, cp, h)
	if err != nil {
		return err
	}
	var (
		next uint64
		lost bool
	)
	err = s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		next, err = b.checkpoints.Update(ctx, cp.GetRunId(), w.data, h.rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if _, getErr := b.checkpoints.Get(ctx, cp.GetRunId()); isNotFound(getErr) {
				// Gone: retired by a replica that finished the run (its tombstone says so), a
				// conflict; or lost with NATS's store.
				switch _, tombErr := b.finished.Get(ctx, cp.GetRunId()); {
				case isNotFound(tombErr):
					lost = true
					return nil
				case tombErr != nil:
					return tombErr
				}
			}
		}
		return err
	})
	if lost {
		// The store lost the key, and the log with it: the owner's state is the only copy left.
		if w, err = s.prepare(ctx, cp, &Head{}); err != nil {
			return err
		}
		next = 0
		err = s.retry(ctx, func(ctx context.Context) error {
			b := s.buckets()
			err := createOnce(ctx, b.checkpoints, cp.GetRunId(), w.data, &next)
			if err == nil && cp.GetPhase() != checkpointv1.Phase_PHASE_FINISHED {
				_, err = b.active.Put(ctx, cp.GetRunId(), []byte(cp.GetReplica()))
			}
			return err
		})
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			s.drop(ctx, w)
		} else {
			h.remember(w)
		}
		return mapErr(err)
	}
	s.advance(ctx, h, w.head(next))
	return nil
}

// advance moves h to next, a checkpoint of the run stored after it, and deletes the body of
// h's checkpoint when next has another.
func (s *Store) advance(ctx context.Context, h, next *Head) {
	if h.body != "" && h.body != next.body {
		_ = s.buckets().bodies.Delete(ctx, h.body) // a body left behind only costs space
	}
	*h = *next
}

// settle finds out whether the write through h whose answer was lost (Head.unsure) was
// stored: the run's checkpoint then holds it, and h advances to it. Without that, the next
// Save through h found the checkpoint past h and took its own write for another replica's:
// ErrConflict, which stops the run on its own replica as one another replica took over.
func (s *Store) settle(ctx context.Context, runID string, h *Head) error {
	u := h.unsure
	if u == nil {
		return nil
	}
	var e jetstream.KeyValueEntry
	err := s.retry(ctx, func(ctx context.Context) (err error) {
		e, err = s.buckets().checkpoints.Get(ctx, runID)
		return err
	})
	switch {
	case isNotFound(err):
		h.unsure = nil // not stored, or lost with NATS's store: Save finds out which
		return nil
	case err != nil:
		return mapErr(err)
	}
	h.unsure = nil
	if e.Revision() != h.rev && bytes.Equal(e.Value(), u.data) {
		next := *u.head
		next.rev = e.Revision()
		s.advance(ctx, h, &next)
	}
	return nil
}

// write is a checkpoint ready to be stored: its log written, its entry encoded.
type write struct {
	from     *Head
	change   change
	segments []uint64
	tail     *checkpointv1.LogSegment
	data     []byte   // the entry
	body     string   // the object holding the checkpoint, when it is too large for one entry
	flushed  uint64   // the segment this write appended; 0 when none
	objects  []string // objects this write stored
	cp       *checkpointv1.RunCheckpoint
}

// head is the head a run stands at once w is stored at revision rev.
func (w *write) head(rev uint64) *Head {
	next := w.from.advanced(w.change, rev, w.segments, w.tail, w.cp)
	next.body = w.body
	return next
}

// prepare writes what cp changed since h to the run's log, when it is worth a segment, and
// encodes the checkpoint that names it.
func (s *Store) prepare(ctx context.Context, cp *checkpointv1.RunCheckpoint, h *Head) (*write, error) {
	w := &write{from: h, change: h.changeOf(cp), cp: cp}
	w.segments, w.tail = h.segments, h.withTail(w.change)
	if w.change.fresh {
		w.segments = nil
	}
	if w.tail != nil && proto.Size(w.tail) > tailSize {
		seq, object, err := s.appendSegment(ctx, w.tail)
		if err != nil {
			return nil, err
		}
		h.emptyLog = false // even when the write is refused: its segment may be left behind
		w.segments, w.tail, w.flushed = concat(w.segments, []uint64{seq}), nil, seq
		if object != "" {
			w.objects = append(w.objects, object)
		}
	}
	ref := &checkpointv1.LogRef{
		Segments: w.segments, Tail: w.tail, Messages: int32(len(cp.GetConversation())),
		TranscriptEntries: int32(len(cp.GetTranscript())), AccountingEntries: int32(len(cp.GetAccounting())),
	}
	if tr := cp.GetTranscript(); len(tr) > 0 {
		ref.TranscriptHead = tr[len(tr)-1].GetHash()
	}
	data, err := s.encode(ctx, cp, ref)
	if err != nil {
		s.drop(ctx, w)
		return nil, err
	}
	w.data, w.body = data, cp.GetBodyObject()
	if w.body != "" {
		w.objects = append(w.objects, w.body)
	}
	return w, nil
}

// drop removes what a write that was refused stored.
func (s *Store) drop(ctx context.Context, w *write) {
	b := s.buckets()
	if w.flushed != 0 {
		_ = b.log.DeleteMsg(ctx, w.flushed) // a segment left behind only costs space until the run retires
	}
	for _, name := range w.objects {
		_ = b.bodies.Delete(ctx, name)
	}
}

// Load returns a run's checkpoint, whole, and the head it stands at; ErrNotFound when the
// store has none. A retired run's checkpoint is its tombstone (Finish), while it is kept.
func (s *Store) Load(ctx context.Context, runID string) (*checkpointv1.RunCheckpoint, *Head, error) {
	return s.load(ctx, runID, nil)
}

// State returns a run's checkpoint without what its log holds (request, contract, available,
// conversation, transcript and accounting are empty), for a caller that needs only where the
// run stands: its phase, its pending approvals or question; ErrNotFound when the store has
// none.
func (s *Store) State(ctx context.Context, runID string) (*checkpointv1.RunCheckpoint, error) {
	cp, _, err := s.load(ctx, runID, func(*checkpointv1.RunCheckpoint) bool { return false })
	return cp, err
}

// load is Load; when want is set, only a checkpoint it accepts (given without its log) is
// read whole, and for another it returns the checkpoint without its log and a nil head.
func (s *Store) load(ctx context.Context, runID string, want func(*checkpointv1.RunCheckpoint) bool) (*checkpointv1.RunCheckpoint, *Head, error) {
	var (
		cp *checkpointv1.RunCheckpoint
		h  *Head
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		for range maxReads {
			e, err := b.checkpoints.Get(ctx, runID)
			if isNotFound(err) {
				cp, h, err = s.tombstone(ctx, b, runID, want)
				return err
			}
			if err != nil {
				return err
			}
			cp, h, err = s.read(ctx, b, runID, e, want)
			if err == nil || !s.moved(ctx, b, e) {
				return err
			}
		}
		return fmt.Errorf("runstore: checkpoint of run %s changed at each of %d reads", runID, maxReads)
	})
	if err != nil {
		return nil, nil, mapErr(err)
	}
	return cp, h, nil
}

// maxReads bounds the reads of a checkpoint that its owner replaces while it is read.
const maxReads = 5

// read reads the checkpoint entry e of a run, and its log unless want refuses it.
func (s *Store) read(ctx context.Context, b buckets, runID string, e jetstream.KeyValueEntry, want func(*checkpointv1.RunCheckpoint) bool) (*checkpointv1.RunCheckpoint, *Head, error) {
	cp, err := s.decode(ctx, b, runID, e)
	if err != nil {
		return nil, nil, err
	}
	if want != nil && !want(cp) {
		return cp, nil, nil
	}
	h := &Head{} // version 1: the checkpoint holds the whole run, the log nothing
	if cp.GetLog() != nil {
		if h, err = s.readLog(ctx, b, cp, e); err != nil {
			return nil, nil, err
		}
	}
	h.rev, h.body = e.Revision(), cp.GetBodyObject()
	return cp, h, nil
}

// objectFirstWait is how long the first read of a checkpoint's object waits (see object): well
// above what reading a body of a few megabytes takes, which each further read waits twice as
// long for.
const objectFirstWait = 250 * time.Millisecond

// errMovedWhileRead is the failure of a read of an object that its checkpoint's owner deleted
// as it replaced the checkpoint.
var errMovedWhileRead = errors.New("runstore: the checkpoint was replaced while its object was read")

// object reads an object that checkpoint entry e names (its body, its log's bodies) whole. Its
// owner deletes it when it replaces the checkpoint or retires the run (a finished run's result
// just after its callers got it), and nats.go's read of an object deleted under it waits for
// chunks that never come until its context's deadline, which is the only time it looks at its
// context: a reader on another replica would wait out opTimeout, then fail. So the read waits
// objectFirstWait, then twice as long each time, for as long as e is still the run's
// checkpoint, and fails errMovedWhileRead as soon as it is not (load then reads the new one).
func (s *Store) object(ctx context.Context, b buckets, e jetstream.KeyValueEntry, name string) ([]byte, error) {
	for wait := objectFirstWait; ; wait *= 2 {
		deadline := time.Now().Add(wait)
		try, cancel := context.WithDeadline(ctx, deadline)
		data, err := b.bodies.GetBytes(try, name)
		cancel()
		// Past its deadline, the read fails nats.ErrTimeout, or the pipe's own timeout when it
		// sees its deadline before its context does.
		if err == nil || time.Now().Before(deadline) || ctx.Err() != nil {
			return data, err
		}
		if s.moved(ctx, b, e) {
			return nil, errMovedWhileRead
		}
	}
}

// moved reports whether a run's checkpoint is no longer e: what e named (its body, its log)
// may be gone with it, as a finished run's log goes when the run is retired.
func (s *Store) moved(ctx context.Context, b buckets, e jetstream.KeyValueEntry) bool {
	now, err := b.checkpoints.Get(ctx, e.Key())
	return isNotFound(err) || (err == nil && now.Revision() != e.Revision())
}

// gone is err, the failure of a read of what a checkpoint names (an object, a log segment),
// marked ErrUnreadable when what it names is gone while the checkpoint is still the run's
// (load reads a checkpoint that was replaced meanwhile again).
func gone(err error) error {
	if isNotFound(err) || errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return err
}

// decode reads a checkpoint entry e of a run, and the body it names.
func (s *Store) decode(ctx context.Context, b buckets, runID string, e jetstream.KeyValueEntry) (*checkpointv1.RunCheckpoint, error) {
	cp := &checkpointv1.RunCheckpoint{}
	if err := proto.Unmarshal(e.Value(), cp); err != nil {
		return nil, fmt.Errorf("runstore: checkpoint of run %s is corrupt: %w: %w",
			runID, ErrUnreadable, err)
	}
	if name := cp.GetBodyObject(); name != "" {
		body, err := s.object(ctx, b, e, name)
		if err != nil {
			return nil, fmt.Errorf("runstore: body %s of run %s: %w", name, runID, gone(err))
		}
		cp = &checkpointv1.RunCheckpoint{}
		if err := proto.Unmarshal(body, cp); err != nil {
			return nil, fmt.Errorf("runstore: checkpoint body of run %s is corrupt: %w: %w",
				runID, ErrUnreadable, err)
		}
		cp.BodyObject = name
	}
	if cp.GetVersion() > Version {
		return nil, fmt.Errorf("runstore: checkpoint of run %s has version %d; this build reads up to %d", runID, cp.GetVersion(), Version)
	}
	return cp, nil
}

// Retire removes a finished run from the index of active runs and drops its checkpoint log and
// its inputs; the run's checkpoint must no longer need its log (a finished run's last
// checkpoint keeps none). The index entry goes last, so a Retire that fails midway is
// repeated by whichever replica finds the run still indexed. The entry is purged, not
// deleted: a deleted key leaves a marker in the bucket's stream for good, and Active, which
// every replica's keeper calls every third of the heartbeat TTL, would read one more marker for
// every run that ever finished.
//
// h is the head the run's owner last saved at, or nil when it is not known (a keeper retiring
// a run it found finished): a run whose head says its log holds nothing (a run that went
// from Create to its end without a segment, as most short runs do) skips the log's two
// requests to JetStream (issue 15).
func (s *Store) Retire(ctx context.Context, runID string, h *Head) error {
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		if h == nil || !h.emptyLog {
			if err := purgeLog(ctx, b, runID); err != nil {
				return err
			}
		}
		if err := s.purgeInputs(ctx, b, runID); err != nil {
			return err
		}
		return b.activeLog.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(ActiveBucket, runID)))
	}))
}

// encode marshals cp without what its log holds, with ref naming the log instead; a
// checkpoint too large for one entry goes to the object store under a fresh name and the entry
// holds a reference to it. The previous body is left to be replaced: names are unique per
// write, so a stale writer can never corrupt the current body. cp is as it was afterwards,
// but for BodyObject, set to the body's name.
func (s *Store) encode(ctx context.Context, cp *checkpointv1.RunCheckpoint, ref *checkpointv1.LogRef) ([]byte, error) {
	req, contract, available := cp.Request, cp.Contract, cp.Available
	conv, tr, acc := cp.Conversation, cp.Transcript, cp.Accounting
	cp.Request, cp.Contract, cp.Available, cp.Conversation, cp.Transcript, cp.Accounting = nil, nil, nil, nil, nil, nil
	cp.Version, cp.BodyObject, cp.Log = Version, "", ref
	data, err := proto.Marshal(cp)
	cp.Request, cp.Contract, cp.Available, cp.Conversation, cp.Transcript, cp.Accounting = req, contract, available, conv, tr, acc
	cp.Log = nil
	if err != nil {
		return nil, fmt.Errorf("runstore: run %s: %w: %w", cp.GetRunId(), ErrUnencodable, err)
	}
	if kvbody.Fits(s.nc, len(data)) {
		return data, nil
	}
	var name string
	err = s.retry(ctx, func(ctx context.Context) (err error) {
		name, err = kvbody.Put(ctx, s.nc, s.buckets().bodies, cp.GetRunId(), data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("runstore: store checkpoint body of run %s: %w", cp.GetRunId(), err)
	}
	cp.BodyObject = name
	stub := &checkpointv1.RunCheckpoint{Version: Version, RunId: cp.GetRunId(), Phase: cp.GetPhase(), UserId: cp.GetUserId(), BodyObject: name}
	return proto.Marshal(stub)
}
