package xmltransport

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/toolname"
)

// Reserved tool names of the special slots.
const (
	// FinalReportTool is the tool attribute of the final-report slot.
	FinalReportTool = toolname.XMLFinalReport
	// ProgressTool is the tool attribute of the progress slot.
	ProgressTool = toolname.XMLProgressReport
)

// Special slot names, after "NONCE-".
const (
	// FinalSlotName names the final-report slot.
	FinalSlotName = "FINAL"
	// ProgressSlotName names the progress slot.
	ProgressSlotName = "PROGRESS"
)

// tagPrefix starts every transport tag name.
const tagPrefix = "ai-agent-"

// Session is the transport state of one run: a fixed nonce and the first unused slot
// number. It is a plain value so the run can persist it.
type Session struct {
	// Mode is the run's tool transport.
	Mode Mode
	// Nonce is 8 lowercase hex digits, fixed for the whole run.
	Nonce string
	// NextSlot is the first slot number not used by an earlier turn; it starts at 1.
	NextSlot int
}

// NewSession starts a session with a fresh nonce and slot 1.
func NewSession(mode Mode) *Session {
	return &Session{Mode: mode, Nonce: NewNonce(), NextSlot: 1}
}

// NewNonce returns 8 random lowercase hex digits.
func NewNonce() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SlotID is the id of numbered slot n, e.g. "1a2b3c4d-0007".
func SlotID(nonce string, n int) string { return fmt.Sprintf("%s-%04d", nonce, n) }

// Slot is the id of numbered slot n of the session.
func (s *Session) Slot(n int) string { return SlotID(s.Nonce, n) }

// FinalSlot is the id of the final-report slot, "NONCE-FINAL".
func (s *Session) FinalSlot() string { return s.Nonce + "-" + FinalSlotName }

// ProgressSlot is the id of the progress slot, "NONCE-PROGRESS".
func (s *Session) ProgressSlot() string { return s.Nonce + "-" + ProgressSlotName }

// Parse reads the tags of one assistant answer (see the package function Parse) and moves
// NextSlot past the slots the answer used.
func (s *Session) Parse(text, stopReason string) Result {
	r := Parse(text, s.Nonce, s.NextSlot, stopReason)
	s.NextSlot = r.NextSlot
	return r
}

// openTag is the opening tag of a slot with its attributes.
func openTag(slot, tool, format string) string {
	if format != "" {
		return fmt.Sprintf("<%s%s tool=%q format=%q>", tagPrefix, slot, tool, format)
	}
	return fmt.Sprintf("<%s%s tool=%q>", tagPrefix, slot, tool)
}

// closeTag is the closing tag of a slot.
func closeTag(slot string) string { return "</" + tagPrefix + slot + ">" }
