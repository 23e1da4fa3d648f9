// Package transcript keeps a run's hash-chained transcript (DESIGN §6, Monolith §Phase 4).
//
// Each entry's hash is SHA-256 over prev_hash, contract_hash, the state name, action_hash,
// result_hash, adapter_version and model_profile_id and, from hash version 1 on, the step id,
// the detail, the time and the entry's message seals. From hash version 2 on each field is
// preceded by its length, so that no two different field lists hash alike; versions 0 and 1
// followed each by a NUL byte, which a field holding a NUL byte (a person's feedback in a
// detail may) could move between two fields unnoticed. Verify refuses a seal whose hash is not
// a digest, which could hold a NUL byte and another seal after it. A message seal binds one
// message of the run's conversation (by position) to the entry of the step that added or last
// changed it, so the chain covers every message the model saw, tool results included. Verify
// recomputes the chain and reports the first entry that was altered, removed or reordered;
// VerifyResult also checks that a stored result shows what the chain recorded (see result.go).
package transcript

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/toolwire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// HashVersion is the hash version of the entries Append writes: the hash covers the step id,
// detail, time and message seals too (from version 1), each field preceded by its length
// (version 2). Entries of version 0 (written before) verify by DESIGN §6's fields alone, and
// those of version 1 with each field followed by a NUL byte.
const HashVersion = 2

// Chain appends entries to one run's transcript. It is safe for concurrent use.
type Chain struct {
	mu             sync.Mutex
	entries        []*typev1.TranscriptEntry
	sealed         []string // hash of each conversation message as the chain last sealed it
	seen           []Seen   // what each sealed message was, to skip hashing it again
	adapterVersion string
	modelProfileID string
	now            func() time.Time
}

// NewChain returns an empty chain whose entries carry the given adapter version and model
// profile.
func NewChain(adapterVersion, modelProfileID string) *Chain {
	return &Chain{adapterVersion: adapterVersion, modelProfileID: modelProfileID, now: time.Now}
}

// Resume returns a chain that continues after entries (e.g. a run restored from a checkpoint):
// the messages they sealed are not sealed again unless they change.
func Resume(entries []*typev1.TranscriptEntry, adapterVersion, modelProfileID string) *Chain {
	c := NewChain(adapterVersion, modelProfileID)
	for _, e := range entries {
		c.entries = append(c.entries, proto.CloneOf(e))
		for _, s := range e.GetMessages() {
			c.setSealed(int(s.GetIndex()), s.GetHash())
		}
	}
	return c
}

// Append adds the entry for entering state. action and result are hashed by their
// deterministic protobuf encoding; either may be nil. conversation is the run's conversation
// after the step: the entry seals each message that is new or changed since the previous
// entry.
func (c *Chain) Append(state typev1.RunState, stepID, contractHash string, action, result proto.Message, detail string, conversation []*typev1.Message) *typev1.TranscriptEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := ""
	if n := len(c.entries); n > 0 {
		prev = c.entries[n-1].GetHash()
	}
	e := &typev1.TranscriptEntry{
		Seq:            int64(len(c.entries) + 1),
		StepId:         stepID,
		State:          state,
		ContractHash:   contractHash,
		ActionHash:     MessageHash(action),
		ResultHash:     MessageHash(result),
		PrevHash:       prev,
		AdapterVersion: c.adapterVersion,
		ModelProfileId: c.modelProfileID,
		Detail:         detail,
		Time:           timestamppb.New(c.now()),
		HashVersion:    HashVersion,
		Messages:       c.seal(conversation),
	}
	e.Hash = EntryHash(e)
	c.entries = append(c.entries, e)
	return e
}

// seal returns the seals of the messages that are new or changed since the last entry. A
// message the chain sealed is hashed again only when it may have changed: when it is another
// message, or when its content or reasoning or number of tool calls changed in place (the XML
// transport's XML-PAST message grows one response per executed call). So an entry hashes
// what is new, not the whole conversation again (issue 15: the cost of a turn must not grow
// with the conversation).
func (c *Chain) seal(conversation []*typev1.Message) []*typev1.MessageSeal {
	var seals []*typev1.MessageSeal
	for i, m := range conversation {
		now := SeenOf(m)
		if i < len(c.seen) && c.seen[i] == now {
			continue
		}
		h := MessageHash(m)
		c.setSeen(i, now)
		if i < len(c.sealed) && c.sealed[i] == h {
			continue
		}
		seals = append(seals, &typev1.MessageSeal{Index: int32(i), Hash: h})
		c.setSealed(i, h)
	}
	return seals
}

// Seen is what a message was when it was last hashed or stored: the message and the fields a
// run changes in place (the XML transport's XML-PAST message grows one response per executed
// call). Two Seen of the same position are equal when the message cannot have changed, so it
// need not be hashed or stored again. The zero Seen is a message never seen.
type Seen struct {
	msg       *typev1.Message
	content   string // compared by value: the same string is equal at once
	reasoning string
	calls     int
}

// SeenOf is what m is now.
func SeenOf(m *typev1.Message) Seen {
	return Seen{msg: m, content: m.GetContent(), reasoning: m.GetReasoning(), calls: len(m.GetToolCalls())}
}

func (c *Chain) setSealed(i int, hash string) {
	for len(c.sealed) <= i {
		c.sealed = append(c.sealed, "")
	}
	c.sealed[i] = hash
}

func (c *Chain) setSeen(i int, s Seen) {
	for len(c.seen) <= i {
		c.seen = append(c.seen, Seen{})
	}
	c.seen[i] = s
}

// Entries returns a copy of the chain's entries.
func (c *Chain) Entries() []*typev1.TranscriptEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*typev1.TranscriptEntry, len(c.entries))
	for i, e := range c.entries {
		out[i] = proto.CloneOf(e)
	}
	return out
}

// Shared returns the entries themselves, not copies, for a caller that only reads them (a
// checkpoint): the chain never changes an entry once it is appended, so this costs no copy of
// the transcript (issue 15).
func (c *Chain) Shared() []*typev1.TranscriptEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clip(c.entries)
}

// Len returns the number of entries.
func (c *Chain) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// EntryHash computes an entry's hash from its fields (its own hash field is ignored), as its
// hash_version says (see the package's doc). The fields are written into one pooled buffer and
// hashed at once: a chain appends several entries a turn.
func EntryHash(e *typev1.TranscriptEntry) string {
	buf := encodings.Get().(*[]byte)
	defer putEncoding(buf)
	b := (*buf)[:0]
	v := e.GetHashVersion()
	for _, part := range [...]string{
		e.GetPrevHash(), e.GetContractHash(), e.GetState().String(), e.GetActionHash(),
		e.GetResultHash(), e.GetAdapterVersion(), e.GetModelProfileId(),
	} {
		b = appendField(b, v, part)
	}
	if v >= 1 {
		var scratch [32]byte
		b = appendField(b, v, strconv.AppendInt(append(scratch[:0], 'v'), int64(v), 10))
		b = appendField(b, v, e.GetStepId())
		b = appendField(b, v, e.GetDetail())
		b = appendField(b, v, appendTime(scratch[:0], e.GetTime()))
		for _, s := range e.GetMessages() {
			b = appendField(b, v, append(append(strconv.AppendInt(scratch[:0], int64(s.GetIndex()), 10), ':'), s.GetHash()...))
		}
	}
	*buf = b
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// appendField appends one field of an entry as hash version v covers it: from version 2 on,
// its length (a uvarint) and its bytes; before, its bytes and a NUL byte.
func appendField[F ~string | ~[]byte](b []byte, v uint32, field F) []byte {
	if v >= 2 {
		return append(binary.AppendUvarint(b, uint64(len(field))), field...)
	}
	return append(append(b, field...), 0)
}

// appendTime appends an entry's time as its hash covers it: seconds and nanoseconds since the
// epoch, "%d.%09d"; nothing for no time.
func appendTime(b []byte, t *timestamppb.Timestamp) []byte {
	if t == nil {
		return b
	}
	nanos := t.GetNanos()
	if nanos < 0 || nanos > 999_999_999 {
		return fmt.Appendf(b, "%d.%09d", t.GetSeconds(), nanos) // not a valid time, hashed as it is
	}
	b = append(strconv.AppendInt(b, t.GetSeconds(), 10), '.')
	for d := int32(100_000_000); d > 0; d /= 10 {
		b = append(b, byte('0'+nanos/d%10))
	}
	return b
}

// MessageHash is the hex SHA-256 of m's deterministic protobuf encoding ("" for nil). A
// request's shared tools (toolwire.Share) are written as the encodings toolwire made of them
// once, so a step does not encode every schema again; the bytes are protobuf's all the same.
func MessageHash(m proto.Message) string {
	if m == nil {
		return ""
	}
	buf := encodings.Get().(*[]byte)
	defer putEncoding(buf)
	b, err := toolwire.AppendMarshal((*buf)[:0], m, proto.MarshalOptions{Deterministic: true})
	if err != nil {
		// Marshalling a valid in-memory message cannot fail; hash the error text so the entry
		// still differs from any real payload.
		b = []byte("unmarshalable: " + err.Error())
	}
	*buf = b
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// encodings are buffers for the encodings MessageHash hashes: a step's action and result
// hold the conversation, so a buffer of their size would otherwise be allocated on every
// step.
var encodings = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledEncoding is the largest buffer kept in encodings, so that one huge message does
// not stay in memory.
const maxPooledEncoding = 1 << 20

func putEncoding(buf *[]byte) {
	if cap(*buf) <= maxPooledEncoding {
		encodings.Put(buf)
	}
}

// Verify checks a whole transcript: seqs run 1, 2, 3 … without gaps, each prev_hash is the
// previous entry's hash, each hash matches the entry's fields, and each message seal's hash is
// a digest, in an entry whose hash covers it (version 1). It returns an error naming the first
// entry that breaks the chain.
func Verify(entries []*typev1.TranscriptEntry) error {
	prev := ""
	for i, e := range entries {
		want := int64(i + 1)
		if e.GetSeq() != want {
			return fmt.Errorf("entry %d: seq is %d, want %d (an entry was removed or reordered)", i+1, e.GetSeq(), want)
		}
		if e.GetPrevHash() != prev {
			return fmt.Errorf("entry %d: prev_hash does not match the hash of entry %d (an entry was removed or reordered)", want, want-1)
		}
		if v := e.GetHashVersion(); v > HashVersion {
			return fmt.Errorf("entry %d (%s): hash_version %d is newer than this build knows (%d)", want, e.GetState(), v, HashVersion)
		}
		if got := EntryHash(e); got != e.GetHash() {
			return fmt.Errorf("entry %d (%s): hash does not match its contents (the entry was altered)", want, e.GetState())
		}
		if n := len(e.GetMessages()); n > 0 && e.GetHashVersion() == 0 {
			return fmt.Errorf("entry %d (%s): hash_version 0 covers no message seals, but the entry has %d (the entry was altered)", want, e.GetState(), n)
		}
		for j, s := range e.GetMessages() {
			// Hash version 1 covers each seal as "index:hash" and a NUL byte: only a digest (no
			// NUL) makes that one seal, so two seals merged into one cannot hash alike.
			if !isDigest(s.GetHash()) {
				return fmt.Errorf("entry %d (%s): messages[%d].hash is not a SHA-256 hex digest (the entry was altered)", want, e.GetState(), j)
			}
		}
		prev = e.GetHash()
	}
	return nil
}

// isDigest reports whether s is a hex SHA-256 digest as MessageHash writes it: 64 lowercase
// hex digits.
func isDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
