package orchestrator

import (
	"bytes"
	"math"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// shareHistory points each message of assembled, the context stage's assembly of the
// conversation, that equals the conversation's message in its place at the conversation's
// own. The stage returns most of the conversation unchanged, but each turn decodes it anew:
// the run would hold every message twice while the model answers, and the assembly is kept
// for the turn's attempts (issue 15). The stage keeps the leading messages (the system
// prompt) and the newest, in their order, and may add some between them (the plan's step,
// recalled memories) or drop older ones: the messages are matched from the front, then from
// the back, each side while they are equal. Only equal messages are shared, and the run never
// changes a message of its conversation while the turn's attempts use the assembly.
func shareHistory(assembled, conversation []*typev1.Message) {
	front := 0
	for ; front < len(assembled) && front < len(conversation); front++ {
		if !sameMessage(assembled[front], conversation[front]) {
			break
		}
		assembled[front] = conversation[front]
	}
	for a, c := len(assembled)-1, len(conversation)-1; a >= front && c >= front; a, c = a-1, c-1 {
		if !sameMessage(assembled[a], conversation[c]) {
			return
		}
		assembled[a] = conversation[c]
	}
}

// sameMessage reports whether a and b are equal as proto.Equal has them, comparing their
// fields directly. shareHistory compares the whole conversation every turn, and proto.Equal,
// which walks every field (and each tool call's arguments) by reflection, took 16 times as
// long (BenchmarkSameMessage: some 250 µs for the 141 messages of a 50-turn run's last turn,
// a fifth of a millisecond a turn on average). TestSameMessageComparesEveryField fails when a
// field is added that it does not compare. Where it is unsure (a nil set in a oneof), it
// answers false, and the message is merely not shared.
func sameMessage(a, b *typev1.Message) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.GetRole() != b.GetRole() || a.GetContent() != b.GetContent() || a.GetReasoning() != b.GetReasoning() ||
		a.GetToolCallId() != b.GetToolCallId() || a.GetName() != b.GetName() ||
		!bytes.Equal(a.GetReasoningState(), b.GetReasoningState()) || len(a.GetToolCalls()) != len(b.GetToolCalls()) ||
		!bytes.Equal(a.ProtoReflect().GetUnknown(), b.ProtoReflect().GetUnknown()) {
		return false
	}
	for i, call := range a.GetToolCalls() {
		if !sameToolCall(call, b.GetToolCalls()[i]) {
			return false
		}
	}
	return true
}

// sameToolCall is proto.Equal of two tool calls, by their fields.
func sameToolCall(a, b *typev1.ToolCall) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.GetId() == b.GetId() && a.GetName() == b.GetName() && a.GetRawArguments() == b.GetRawArguments() &&
		bytes.Equal(a.ProtoReflect().GetUnknown(), b.ProtoReflect().GetUnknown()) && sameStruct(a.GetArguments(), b.GetArguments())
}

// sameStruct is proto.Equal of two tool calls' arguments, by their types' fields.
func sameStruct(a, b *structpb.Struct) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.GetFields()) != len(b.GetFields()) || !bytes.Equal(a.ProtoReflect().GetUnknown(), b.ProtoReflect().GetUnknown()) {
		return false
	}
	for k, va := range a.GetFields() {
		vb, ok := b.GetFields()[k]
		if !ok || !sameValue(va, vb) {
			return false
		}
	}
	return true
}

// sameValue is proto.Equal of two JSON values of a Struct, where a nil value is an empty one.
func sameValue(a, b *structpb.Value) bool {
	if a == nil || b == nil {
		empty := func(v *structpb.Value) bool {
			return v == nil || v.GetKind() == nil && len(v.ProtoReflect().GetUnknown()) == 0
		}
		return empty(a) && empty(b)
	}
	if !bytes.Equal(a.ProtoReflect().GetUnknown(), b.ProtoReflect().GetUnknown()) {
		return false
	}
	switch ka := a.GetKind().(type) {
	case nil:
		return b.GetKind() == nil
	case *structpb.Value_NullValue:
		kb, ok := b.GetKind().(*structpb.Value_NullValue)
		return ok && ka.NullValue == kb.NullValue
	case *structpb.Value_NumberValue:
		kb, ok := b.GetKind().(*structpb.Value_NumberValue)
		return ok && (ka.NumberValue == kb.NumberValue || math.IsNaN(ka.NumberValue) && math.IsNaN(kb.NumberValue))
	case *structpb.Value_StringValue:
		kb, ok := b.GetKind().(*structpb.Value_StringValue)
		return ok && ka.StringValue == kb.StringValue
	case *structpb.Value_BoolValue:
		kb, ok := b.GetKind().(*structpb.Value_BoolValue)
		return ok && ka.BoolValue == kb.BoolValue
	case *structpb.Value_StructValue:
		kb, ok := b.GetKind().(*structpb.Value_StructValue)
		return ok && sameStruct(ka.StructValue, kb.StructValue)
	case *structpb.Value_ListValue:
		kb, ok := b.GetKind().(*structpb.Value_ListValue)
		if !ok || len(ka.ListValue.GetValues()) != len(kb.ListValue.GetValues()) ||
			(ka.ListValue == nil) != (kb.ListValue == nil) ||
			!bytes.Equal(ka.ListValue.ProtoReflect().GetUnknown(), kb.ListValue.ProtoReflect().GetUnknown()) {
			return false
		}
		for i, v := range ka.ListValue.GetValues() {
			if !sameValue(v, kb.ListValue.GetValues()[i]) {
				return false
			}
		}
		return true
	}
	return false
}
