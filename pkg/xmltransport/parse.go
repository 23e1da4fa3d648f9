package xmltransport

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/textcut"
)

// Call is a valid tool tag of a numbered slot.
type Call struct {
	// Slot is the slot id, e.g. "1a2b3c4d-0004".
	Slot string
	// Number is the slot number, e.g. 4.
	Number int
	// Tool is the tool attribute.
	Tool string
	// Payload is the raw text between the tags, trimmed: the tool's JSON arguments as the
	// model wrote them (parse them like native tool arguments).
	Payload string
}

// Final is the final report written in the final slot.
type Final struct {
	// Slot is the slot id, "NONCE-FINAL".
	Slot string
	// Format is the format attribute ("" when absent); normalise it to the expected format.
	Format string
	// Payload is the raw report text between the tags, trimmed.
	Payload string
	// Closed is false when the report was accepted without its closing tag.
	Closed bool
}

// Ignored is a tag that was not used, with the reason, for logs. Ignored tags do not count
// as attempts.
type Ignored struct {
	// Tag is the opening tag as written.
	Tag string
	// Reason says why it was ignored.
	Reason string
}

// Result is what one assistant answer holds.
type Result struct {
	// Calls are the valid numbered-slot tags, in the order written.
	Calls []Call
	// Final is the last valid final-report tag, or nil.
	Final *Final
	// Progress is the last valid progress tag, or nil.
	Progress *Call
	// NextSlot is the first slot number the next turn may use.
	NextSlot int
	// Incomplete is set when the only final report was cut off (stop reason length or
	// max_tokens, no closing tag): the turn must be retried.
	Incomplete bool
	// Warnings are to be logged, e.g. a final report accepted without its closing tag under
	// an unknown stop reason.
	Warnings []string
	// Ignored lists the tags that were not used.
	Ignored []Ignored
}

// Parse finds the transport tags of nonce in text. Numbered slots must be nextSlot or
// higher (lower ones were used by earlier turns) and used once; their tags need a tool
// attribute and the matching closing tag. The final slot needs tool="agent__final_report";
// when its closing tag is missing but content follows the opening tag, stopReason decides:
// stop, end_turn, end and eos accept the content; length and max_tokens mark the result
// Incomplete (retry); any other or no stop reason accepts it with a warning. The last valid
// final and progress tags win. Tags that break a rule are listed in Ignored.
func Parse(text, nonce string, nextSlot int, stopReason string) Result {
	nextSlot = max(nextSlot, 1)
	p := parser{text: text, nonce: nonce, first: nextSlot, stopReason: stopReason, used: map[int]bool{}}
	p.run()
	r := p.res
	r.NextSlot = nextSlot
	for _, c := range r.Calls {
		r.NextSlot = max(r.NextSlot, c.Number+1)
	}
	r.Incomplete = r.Final == nil && p.truncatedFinal
	return r
}

// parser scans one answer.
type parser struct {
	text, nonce, stopReason string
	first                   int
	used                    map[int]bool
	truncatedFinal          bool
	res                     Result
}

// tag is an opening tag found in the text.
type tag struct {
	raw   string // the opening tag as written
	nonce string
	slot  string // "0001", "FINAL", "PROGRESS" or anything else written
	attrs map[string]string
	end   int // index just after ">"
}

// run scans the text for opening tags.
func (p *parser) run() {
	for i := 0; ; {
		j := strings.Index(p.text[i:], "<"+tagPrefix)
		if j < 0 {
			return
		}
		start := i + j
		t, ok := p.openingTag(start)
		if !ok {
			p.ignore(truncate(p.text[start:]), "the opening tag has no closing \">\"")
			return
		}
		i = p.handle(t)
	}
}

// openingTag reads the opening tag at start.
func (p *parser) openingTag(start int) (tag, bool) {
	gt := strings.IndexByte(p.text[start:], '>')
	if gt < 0 {
		return tag{}, false
	}
	raw := p.text[start : start+gt+1]
	inner := strings.TrimSuffix(strings.TrimPrefix(raw, "<"+tagPrefix), ">")
	name, attrs, _ := strings.Cut(inner, " ")
	if k := strings.IndexAny(name, "\t\r\n"); k >= 0 {
		name, attrs = name[:k], name[k:]+" "+attrs
	}
	nonce, slot, _ := strings.Cut(name, "-")
	return tag{raw: raw, nonce: nonce, slot: slot, attrs: parseAttrs(attrs), end: start + gt + 1}, true
}

// handle applies the rules to one opening tag and returns where scanning continues.
func (p *parser) handle(t tag) int {
	if t.nonce != p.nonce {
		p.ignore(t.raw, fmt.Sprintf("nonce %q is not this session's", t.nonce))
		return t.end
	}
	closing := closeTag(t.nonce + "-" + t.slot)
	k := strings.Index(p.text[t.end:], closing)
	if k < 0 {
		if t.slot == FinalSlotName {
			p.unclosedFinal(t)
			return len(p.text)
		}
		p.ignore(t.raw, "no closing tag "+closing)
		return t.end
	}
	payload := strings.TrimSpace(p.text[t.end : t.end+k])
	next := t.end + k + len(closing)
	tool, hasTool := t.attrs["tool"]
	switch {
	case !hasTool || tool == "":
		p.ignore(t.raw, "the tag has no tool attribute")
	case t.slot == FinalSlotName:
		p.final(t, tool, payload, true)
	case t.slot == ProgressSlotName:
		if tool != ProgressTool {
			p.ignore(t.raw, fmt.Sprintf("the progress slot is for %s, not %q", ProgressTool, tool))
			break
		}
		p.res.Progress = &Call{Slot: t.nonce + "-" + t.slot, Tool: tool, Payload: payload}
	default:
		p.numbered(t, tool, payload)
	}
	return next
}

// numbered accepts a numbered slot that is unused and not below the turn's first slot.
func (p *parser) numbered(t tag, tool, payload string) {
	n, ok := slotNumber(t.slot)
	switch {
	case !ok:
		p.ignore(t.raw, fmt.Sprintf("unknown slot %q", t.slot))
	case n < p.first:
		p.ignore(t.raw, fmt.Sprintf("slot %s was used by an earlier turn (this turn starts at %s)", SlotID(p.nonce, n), SlotID(p.nonce, p.first)))
	case p.used[n]:
		p.ignore(t.raw, fmt.Sprintf("slot %s is used twice", SlotID(p.nonce, n)))
	default:
		p.used[n] = true
		p.res.Calls = append(p.res.Calls, Call{Slot: SlotID(p.nonce, n), Number: n, Tool: tool, Payload: payload})
	}
}

// final accepts a final-report tag; the last valid one wins.
func (p *parser) final(t tag, tool, payload string, closed bool) {
	switch {
	case tool != FinalReportTool:
		p.ignore(t.raw, fmt.Sprintf("the final slot is for %s, not %q", FinalReportTool, tool))
	case payload == "":
		p.ignore(t.raw, "the final report is empty")
	default:
		p.res.Final = &Final{Slot: t.nonce + "-" + t.slot, Format: t.attrs["format"], Payload: payload, Closed: closed}
	}
}

// unclosedFinal applies the stop-reason rule to a final-report tag without its closing tag:
// the content runs to the end of the text, less a partly written closing tag. The rule is for
// a valid final-report opening tag only (seed 000 §11): one without tool="agent__final_report"
// is ignored as a closed one is, neither retried as cut off nor accepted with a warning.
func (p *parser) unclosedFinal(t tag) {
	switch tool, ok := t.attrs["tool"]; {
	case !ok || tool == "":
		p.ignore(t.raw, "the tag has no tool attribute")
		return
	case tool != FinalReportTool:
		p.ignore(t.raw, fmt.Sprintf("the final slot is for %s, not %q", FinalReportTool, tool))
		return
	}
	payload := strings.TrimSpace(trimPartialClose(p.text[t.end:], closeTag(t.nonce+"-"+t.slot)))
	if payload == "" {
		p.ignore(t.raw, "the final report has no closing tag and no content")
		return
	}
	switch reason := strings.ToLower(p.stopReason); reason {
	case "stop", "end_turn", "end", "eos":
	case "length", "max_tokens":
		p.truncatedFinal = true
		p.ignore(t.raw, fmt.Sprintf("the final report has no closing tag and the answer was cut off (stop reason %s)", reason))
		return
	default:
		p.res.Warnings = append(p.res.Warnings,
			fmt.Sprintf("accepted the final report without its closing tag under the unknown stop reason %q", p.stopReason))
	}
	p.final(t, t.attrs["tool"], payload, false)
}

// trimPartialClose removes a closing tag the model started but did not finish ("</ai-agent-x")
// from the end of text.
func trimPartialClose(text, closing string) string {
	for n := len(closing) - 1; n >= 2; n-- {
		if strings.HasSuffix(text, closing[:n]) {
			return text[:len(text)-n]
		}
	}
	return text
}

// ignore records an unused tag.
func (p *parser) ignore(raw, reason string) {
	p.res.Ignored = append(p.res.Ignored, Ignored{Tag: raw, Reason: reason})
}

// slotNumber reads a numbered slot: at least 4 digits, at least 1.
func slotNumber(slot string) (int, bool) {
	if len(slot) < 4 {
		return 0, false
	}
	for _, c := range slot {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(slot)
	return n, err == nil && n > 0
}

// parseAttrs reads name="value" (or name='value') pairs; anything else is skipped.
func parseAttrs(s string) map[string]string {
	attrs := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t\r\n/")
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return attrs
		}
		name := strings.TrimSpace(s[:eq])
		rest := strings.TrimLeft(s[eq+1:], " \t")
		if rest == "" || (rest[0] != '"' && rest[0] != '\'') {
			return attrs
		}
		end := strings.IndexByte(rest[1:], rest[0])
		if end < 0 {
			return attrs
		}
		attrs[name] = rest[1 : 1+end]
		s = rest[end+2:]
	}
}

// truncate shortens a tag fragment for the ignored list, cut before the character at byte 80:
// the list goes back to the model in a protobuf string, which must be UTF-8.
func truncate(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	return s[:textcut.Boundary(s, limit)] + "…"
}
