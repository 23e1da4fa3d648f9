package events

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/textcut"
)

// minCut is the shortest text fit cuts: shorter texts cost less than the marker replacing them.
const minCut = 128

// cutSlack is what fit removes from a text beyond the excess, for the length prefixes that
// shrink with it.
const cutSlack = 16

// OmitResult returns a copy of the run_finished event ev whose result is cut down to its
// summary: run id, outcome, exit reason, success, error, final report, trace id, turns, tool
// calls and usage, with result_omitted set; the whole result is read with GetRun. Any other
// event is returned as it is.
func OmitResult(ev *eventv1.RunEvent) *eventv1.RunEvent {
	rf := ev.GetRunFinished()
	if rf == nil {
		return ev
	}
	r := rf.GetResult()
	out := proto.CloneOf(ev)
	out.Kind = &eventv1.RunEvent_RunFinished{RunFinished: &eventv1.RunFinished{
		Result: &typev1.RunResult{
			RunId:       r.GetRunId(),
			Outcome:     r.GetOutcome(),
			ExitReason:  r.GetExitReason(),
			Success:     r.GetSuccess(),
			Error:       proto.CloneOf(r.GetError()),
			FinalReport: proto.CloneOf(r.GetFinalReport()),
			TraceId:     r.GetTraceId(),
			Turns:       r.GetTurns(),
			ToolCalls:   r.GetToolCalls(),
			Usage:       proto.CloneOf(r.GetUsage()),
		},
		Outcome:       rf.GetOutcome(),
		ResultOmitted: true,
	}}
	return out
}

// fit returns ev when it encodes to at most limit bytes, otherwise a copy cut down to fit: a
// run_finished event carries its result's summary (OmitResult), and then, as in any other
// event, its longest texts are cut, each ending with a marker that says how much is missing.
// Should the texts not be enough, the largest fields of the event's kind are cleared. It fails
// only when even the bare event is larger than limit.
func fit(ev *eventv1.RunEvent, limit int) (*eventv1.RunEvent, error) {
	if proto.Size(ev) <= limit {
		return ev, nil
	}
	out := OmitResult(ev)
	if out == ev {
		out = proto.CloneOf(ev)
	}
	kind := kindMessage(out)
	size := func() int { return proto.Size(out) }
	cutTexts(kind, size, limit)
	clearLargest(kind, size, limit)
	if n := size(); n > limit {
		return nil, fmt.Errorf("%s event of run %s is %d bytes even cut down; at most %d fit in a NATS message",
			Kind(ev), ev.GetRunId(), n, limit)
	}
	return out, nil
}

// cutTexts cuts the longest strings within m, one after the other, until size reports at
// most limit bytes or no string is longer than minCut.
func cutTexts(m protoreflect.Message, size func() int, limit int) {
	for n := size(); n > limit; n = size() {
		t, ok := longestText(m)
		if !ok || len(t.value) <= minCut {
			return
		}
		t.set(cut(t.value, n-limit+cutSlack))
	}
}

// cut returns s shortened by at least excess bytes, its end replaced with a marker that says
// how many bytes are missing; s is cut at a rune boundary.
func cut(s string, excess int) string {
	marker := func(n int) string {
		return fmt.Sprintf("…[truncated %d bytes; read the whole run with GetRun]", n)
	}
	keep := textcut.Boundary(s, len(s)-excess-len(marker(len(s))))
	return s[:keep] + marker(len(s)-keep)
}

// text is a string somewhere in a message, with a way to replace it.
type text struct {
	value string
	set   func(string)
}

// longestText returns the longest string held by m or any message within it: string fields,
// elements of repeated strings, and string values of maps.
func longestText(m protoreflect.Message) (best text, found bool) {
	consider := func(t text) {
		if !found || len(t.value) > len(best.value) {
			best, found = t, true
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			list := v.List()
			for i := range list.Len() {
				if fd.Kind() == protoreflect.StringKind {
					consider(text{list.Get(i).String(), func(s string) { list.Set(i, protoreflect.ValueOfString(s)) }})
				} else if fd.Message() != nil {
					if t, ok := longestText(list.Get(i).Message()); ok {
						consider(t)
					}
				}
			}
		case fd.IsMap():
			mp := v.Map()
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.StringKind {
					consider(text{mv.String(), func(s string) { mp.Set(k, protoreflect.ValueOfString(s)) }})
				} else if fd.MapValue().Message() != nil {
					if t, ok := longestText(mv.Message()); ok {
						consider(t)
					}
				}
				return true
			})
		case fd.Kind() == protoreflect.StringKind:
			consider(text{v.String(), func(s string) { m.Set(fd, protoreflect.ValueOfString(s)) }})
		case fd.Message() != nil:
			if t, ok := longestText(v.Message()); ok {
				consider(t)
			}
		}
		return true
	})
	return best, found
}

// clearLargest clears the fields of m, largest first, until size reports at most limit bytes
// or m is empty.
func clearLargest(m protoreflect.Message, size func() int, limit int) {
	for size() > limit {
		var (
			largest protoreflect.FieldDescriptor
			most    int
		)
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			alone := m.New()
			alone.Set(fd, v)
			if n := proto.Size(alone.Interface()); largest == nil || n > most {
				largest, most = fd, n
			}
			return true
		})
		if largest == nil {
			return
		}
		m.Clear(largest)
	}
}

// kindMessage returns the message of ev's kind, e.g. the ToolFinished of a tool_finished event.
func kindMessage(ev *eventv1.RunEvent) protoreflect.Message {
	r := ev.ProtoReflect()
	return r.Get(r.WhichOneof(kindOneof)).Message()
}
