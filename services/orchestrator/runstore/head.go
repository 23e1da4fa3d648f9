package runstore

import (
	"slices"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/transcript"
)

// Head is where a run's stored checkpoint stands, as the replica that owns the run last wrote
// or read it: the checkpoint's revision and what the run's checkpoint log holds, so that Save
// writes only what the run changed since (issue 15: a checkpoint costs what its turn changed,
// not the whole run). Create and Load return a Head; Save advances it when it succeeds and
// leaves it as it was when it fails. A Head belongs to one run and is used by one goroutine
// at a time.
type Head struct {
	rev      uint64
	segments []uint64                 // the log segments the checkpoint names
	tail     *checkpointv1.LogSegment // what the checkpoint holds itself; nil when nothing
	body     string                   // the object holding the checkpoint; empty when none
	// emptyLog says the run's checkpoint log holds nothing: the head descends from Create's
	// and no write through it or a head before it appended a segment (not even one that was
	// refused), so Retire has no log to purge. False when unknown (a head Load read).
	emptyLog bool
	// unsure is the last write through this head that went unanswered, which NATS may have
	// stored (Store.settle); nil when none.
	unsure *unsureWrite

	// What the segments and the tail hold, to tell what a run changed since.
	messages       []transcript.Seen // the conversation, one per message
	entries        int               // transcript entries
	lastEntry      string            // the hash of the last one
	accounting     int               // accounting entries
	lastAccounting *typev1.AccountingEntry
	request        *agentv1.RunRequest
	contract       *typev1.ExecutionContract
	available      []*typev1.Tool
}

// Revision returns the revision of the checkpoint h stands at.
func (h *Head) Revision() uint64 { return h.rev }

// unsureWrite is a checkpoint write through a head that went unanswered: its entry, and the
// head the run stands at if it was stored (at a revision the store tells).
type unsureWrite struct {
	data []byte
	head *Head
}

// remember records w, a write through h that went unanswered, in h: the next Save through h
// reads whether it was stored. The head it leads to is made now, while the run's state is
// still the one w wrote, from a copy of the head w was made from (h, or an empty one for a
// checkpoint the store lost) whose messages it cannot overwrite.
func (h *Head) remember(w *write) {
	from := *w.from
	from.messages, from.unsure = slices.Clip(from.messages), nil
	w.from = &from
	h.unsure = &unsureWrite{data: w.data, head: w.head(0)}
}

// change is what cp changed since a head: the segment that records it and what the head
// becomes once it is stored.
type change struct {
	seg   *checkpointv1.LogSegment // nil when nothing changed
	fresh bool                     // the log starts over: cp is not a continuation of the head
	from  int                      // the first message that changed
	seen  []transcript.Seen        // the messages from from on
}

// changeOf is what cp changed since h. A checkpoint that does not continue h's (a finished
// run's last checkpoint keeps nothing of the run) starts the log over.
func (h *Head) changeOf(cp *checkpointv1.RunCheckpoint) change {
	if !h.continuedBy(cp) {
		c := (&Head{}).changeOf(cp)
		c.fresh = true
		return c
	}
	conv := cp.GetConversation()
	from := min(len(conv), len(h.messages))
	for i := range from {
		if transcript.SeenOf(conv[i]) != h.messages[i] {
			from = i
			break
		}
	}
	seg := &checkpointv1.LogSegment{RunId: cp.GetRunId(), MessagesFrom: int32(from)}
	changed := from < len(h.messages) || len(conv) > len(h.messages)
	if changed {
		seg.Messages = conv[from:]
	}
	seg.Transcript = cp.GetTranscript()[h.entries:]
	seg.Accounting = cp.GetAccounting()[h.accounting:]
	c, static := change{from: from}, false
	if cp.GetRequest() != h.request {
		seg.Request, static = cp.GetRequest(), true
	}
	if cp.GetContract() != h.contract {
		seg.Contract, static = cp.GetContract(), true
	}
	if !slices.Equal(cp.GetAvailable(), h.available) {
		seg.Available, static = &checkpointv1.ToolList{Tools: cp.GetAvailable()}, true
	}
	if changed || len(seg.Transcript) > 0 || len(seg.Accounting) > 0 || static {
		c.seg = seg
		for _, m := range seg.Messages {
			c.seen = append(c.seen, transcript.SeenOf(m))
		}
	}
	return c
}

// continuedBy reports whether cp continues h: its transcript and accounting extend h's, and
// it keeps the request and contract h has (a segment can replace them, not remove them).
func (h *Head) continuedBy(cp *checkpointv1.RunCheckpoint) bool {
	if (h.request != nil && cp.GetRequest() == nil) || (h.contract != nil && cp.GetContract() == nil) {
		return false
	}
	tr, acc := cp.GetTranscript(), cp.GetAccounting()
	if len(tr) < h.entries || len(acc) < h.accounting {
		return false
	}
	if h.entries > 0 && tr[h.entries-1].GetHash() != h.lastEntry {
		return false
	}
	return h.accounting == 0 || acc[h.accounting-1] == h.lastAccounting
}

// withTail is the tail once c is applied after h's.
func (h *Head) withTail(c change) *checkpointv1.LogSegment {
	prev := h.tail
	if c.fresh {
		prev = nil
	}
	switch {
	case c.seg == nil:
		return prev
	case prev == nil:
		return c.seg
	}
	t := &checkpointv1.LogSegment{
		RunId: c.seg.GetRunId(), MessagesFrom: prev.GetMessagesFrom(), Messages: prev.GetMessages(),
		Transcript: concat(prev.GetTranscript(), c.seg.GetTranscript()),
		Accounting: concat(prev.GetAccounting(), c.seg.GetAccounting()),
		Request:    firstSet(c.seg.GetRequest(), prev.GetRequest()),
		Contract:   firstSet(c.seg.GetContract(), prev.GetContract()),
		Available:  firstSet(c.seg.GetAvailable(), prev.GetAvailable()),
	}
	// The tail's messages run to the end of h's conversation: those from c.from on are
	// replaced.
	if c.from < len(h.messages) || len(c.seg.GetMessages()) > 0 {
		if keep := int32(c.from) - prev.GetMessagesFrom(); keep >= 0 {
			t.Messages = concat(prev.GetMessages()[:keep], c.seg.GetMessages())
		} else {
			t.MessagesFrom, t.Messages = c.seg.GetMessagesFrom(), c.seg.GetMessages()
		}
	}
	return t
}

// concat is a new slice of a's elements then b's.
func concat[T any](a, b []T) []T {
	return append(slices.Clip(a), b...)
}

// firstSet is a when it is set, else b.
func firstSet[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// advanced is h after c was stored at revision rev with the given segments and tail.
func (h *Head) advanced(c change, rev uint64, segments []uint64, tail *checkpointv1.LogSegment, cp *checkpointv1.RunCheckpoint) *Head {
	next := &Head{rev: rev, segments: segments, tail: tail, emptyLog: h.emptyLog}
	if c.fresh {
		next.fill(cp)
		return next
	}
	next.messages = append(h.messages[:c.from], c.seen...)
	next.request, next.contract, next.available = cp.GetRequest(), cp.GetContract(), cp.GetAvailable()
	next.countLogs(cp)
	return next
}

// fill sets what h holds to what cp holds.
func (h *Head) fill(cp *checkpointv1.RunCheckpoint) {
	h.messages = h.messages[:0]
	for _, m := range cp.GetConversation() {
		h.messages = append(h.messages, transcript.SeenOf(m))
	}
	h.request, h.contract, h.available = cp.GetRequest(), cp.GetContract(), cp.GetAvailable()
	h.countLogs(cp)
}

// countLogs sets h's transcript and accounting to cp's.
func (h *Head) countLogs(cp *checkpointv1.RunCheckpoint) {
	tr, acc := cp.GetTranscript(), cp.GetAccounting()
	h.entries, h.lastEntry = len(tr), ""
	if len(tr) > 0 {
		h.lastEntry = tr[len(tr)-1].GetHash()
	}
	h.accounting, h.lastAccounting = len(acc), nil
	if len(acc) > 0 {
		h.lastAccounting = acc[len(acc)-1]
	}
}
