package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// ErrFenced is Emit's error when another writer published an event of the run after the last
// one this RunStream stored, and the run is no longer this process's (its Owner says so): an
// executor that went on after another replica took its run over. The event is not stored.
var ErrFenced = errors.New("another writer publishes this run's events")

// Owner reports whether the process that publishes the events of the run runID still runs
// it; a RunStream asks it only when it finds another writer's event after its own last one.
// One Owner serves every run (a RunOption made once), so that fencing costs an idle run no
// closure of its own.
type Owner func(ctx context.Context, runID string) (bool, error)

// RunOption configures a RunStream.
type RunOption func(*RunStream)

// WithOwner fences the run's events with owns while fencing reports true (always, when it is
// nil): each event is stored only after the last one this RunStream knows of (JetStream's
// expected last sequence of the run's subjects), and an Emit that finds another writer's
// event after it stores its own after that one only while owns reports the run this
// process's, and fails with ErrFenced otherwise. Fencing costs the server a lookup of the
// run's last event for each event (some 2% of a lone turn of the mesh), hence fencing: a
// process can fence only while it has cause to think another may run its runs. Without
// WithOwner a RunStream never fences.
func WithOwner(owns Owner, fencing func() bool) RunOption {
	return func(rs *RunStream) { rs.owns, rs.fencing = owns, fencing }
}

// Position is where a run's events stand: the seq of its last stored event and the sequence in
// the stream of the last message on the run's subjects (that event's, unless a message that is
// no event of the run came after it), both 0 when it has none.
type Position struct {
	Seq       uint64
	StreamSeq uint64
}

// LastPosition returns the position of a run's last stored event, the zero Position when the
// stream holds none (also when the stream itself is missing). A resumed run continues with
// NewRunStreamAt(p, runID, LastPosition(…)). When the last message on the run's subjects is no
// event of the run (see Watch), the seq is the greatest of the events that are the last
// message of their subject: an event hidden by such a message on its own subject is missed,
// and the resumed run's next event, whose seq is then taken already, takes the next one (see
// Emit).
func LastPosition(ctx context.Context, js jetstream.JetStream, runID string) (Position, error) {
	if err := runid.Check(runID); err != nil {
		return Position{}, err
	}
	msg, err := lastMessage(ctx, js, runID)
	if err != nil || msg == nil {
		return Position{}, err
	}
	seq, err := seqOf(msg, runID)
	if err != nil {
		slog.WarnContext(ctx, "the run's last message is not one of its events; looking for its last event",
			"run_id", runID, "subject", msg.Subject, "stream_seq", msg.Sequence, "err", err)
		if seq, err = lastEventSeq(ctx, js, runID); err != nil {
			return Position{}, err
		}
	}
	return Position{Seq: seq, StreamSeq: msg.Sequence}, nil
}

// lastEventSeq returns the greatest seq of the run's events that are the last message of their
// subject, 0 when there is none.
func lastEventSeq(ctx context.Context, js jetstream.JetStream, runID string) (uint64, error) {
	s, err := js.Stream(ctx, StreamName)
	if err != nil {
		return 0, fmt.Errorf("last event of run %s: %w", runID, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(runFilter(runID)))
	if err != nil {
		return 0, fmt.Errorf("last event of run %s: %w", runID, err)
	}
	var last uint64
	for subject := range info.State.Subjects {
		msg, err := s.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed since
		}
		if err != nil {
			return 0, fmt.Errorf("last event of run %s: %w", runID, err)
		}
		if seq, err := seqOf(msg, runID); err == nil {
			last = max(last, seq)
		}
	}
	return last, nil
}

// seqOf returns the seq of msg, a stored event of the run runID.
func seqOf(msg *jetstream.RawStreamMsg, runID string) (uint64, error) {
	ev := &eventv1.RunEvent{}
	if err := proto.Unmarshal(msg.Data, ev); err != nil {
		return 0, fmt.Errorf("last event of run %s: decode %s: %w", runID, msg.Subject, err)
	}
	if ev.GetRunId() != runID {
		return 0, fmt.Errorf("last event of run %s: %s holds an event of run %q", runID, msg.Subject, ev.GetRunId())
	}
	return ev.GetSeq(), nil
}

// lastMessage returns the last stored message of a run's events, nil when there is none.
func lastMessage(ctx context.Context, js jetstream.JetStream, runID string) (*jetstream.RawStreamMsg, error) {
	s, err := js.Stream(ctx, StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last event of run %s: %w", runID, err)
	}
	// The message-get API takes a wildcard "last_by_subj": nats-server loads the last message
	// of every subject matching it (file and memory stores alike). The stream does not allow
	// direct gets, so the client uses that API.
	msg, err := s.GetLastMsgForSubject(ctx, runFilter(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last event of run %s: %w", runID, err)
	}
	return msg, nil
}

// fence makes msg, an event of the run, storable only after the run's last stored event is
// the one at stream sequence last: JetStream refuses it when another writer's event came
// after (JSErrCodeStreamWrongLastSequence). It does nothing unless the RunStream fences now
// (WithOwner), nor when the server does not take a subject filter for the check
// (nats-server before 2.11).
func (rs *RunStream) fence(msg *nats.Msg) {
	if rs.owns == nil || rs.fencing != nil && !rs.fencing() || !rs.p.fencing() {
		return
	}
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rs.last, 10))
	msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, runFilter(rs.runID))
}

// isWrongLast reports whether err is JetStream's refusal of a fenced message.
func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// settle finds out why JetStream refused msg, the event out of the run, corrects the
// RunStream's position, and reports whether msg is stored after all: the run's last message
// is msg itself (an attempt stored, its ack lost); or the stream lost the run's later events
// (its limits, or NATS lost its store), and the run goes on from what is left; or another
// writer stored events after the last one this RunStream knew of, and the run goes on after
// them while Owner says it is this process's (the other writer was an executor that lost the
// run, or this RunStream's own earlier event whose ack was lost), else ErrFenced; a message
// there that is no event of the run is gone on after the same way, without taking its seq.
// Only a fenced message is refused, so rs.owns is set. rs.mu is held.
func (rs *RunStream) settle(ctx context.Context, msg *nats.Msg, out *eventv1.RunEvent) (landed bool, err error) {
	last, err := lastMessage(ctx, rs.p.js, rs.runID)
	if err != nil {
		return false, err
	}
	switch {
	case last != nil && last.Subject == msg.Subject && bytes.Equal(last.Data, msg.Data):
		rs.last = last.Sequence
		return true, nil
	case last == nil || last.Sequence < rs.last:
		rs.last = 0
		if last != nil {
			rs.last = last.Sequence
		}
		return false, nil
	}
	ours, err := rs.owns(ctx, rs.runID)
	if err != nil {
		return false, fmt.Errorf("run %s: reading its owner: %w", rs.runID, err)
	}
	if !ours {
		return false, fmt.Errorf("%w: run %s, after its event at stream sequence %d", ErrFenced, rs.runID, rs.last)
	}
	rs.last = last.Sequence
	seq, err := seqOf(last, rs.runID)
	if err != nil {
		// No event of the run (see Watch): the run goes on after it, with its own seqs.
		slog.WarnContext(ctx, "a message that is not one of the run's events follows its last event; going on after it",
			"run_id", rs.runID, "subject", last.Subject, "stream_seq", last.Sequence, "err", err)
		return false, nil
	}
	if seq >= out.GetSeq() {
		rs.seq.Store(seq) // the next attempt takes the seq after the other writer's
	}
	return false, nil
}

// fencing reports whether the server takes a subject filter for the expected last sequence
// of a subject (nats-server 2.11 and later), read from the server the connection first
// reports.
func (p *Publisher) fencing() bool {
	if known := p.fences.Load(); known != fencesUnknown {
		return known == fencesYes
	}
	v := p.js.Conn().ConnectedServerVersion()
	if v == "" {
		return false // not connected: the attempt fails anyway, and the next one looks again
	}
	if serverFences(v) {
		p.fences.Store(fencesYes)
		return true
	}
	p.fences.Store(fencesNo)
	return false
}

// What a Publisher knows of its server's fencing (Publisher.fences).
const (
	fencesUnknown int32 = iota
	fencesNo
	fencesYes
)

// serverFences reports whether a nats-server of version v ("2.11.0", "2.15.2-beta") checks
// Nats-Expected-Last-Subject-Sequence-Subject.
func serverFences(v string) bool {
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	return err1 == nil && err2 == nil && (ma > 2 || ma == 2 && mi >= 11)
}
