package orchestrator

import (
	"fmt"
	"math"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestShareHistory: the assembled messages equal to the conversation's in their place (the
// leading ones, matched from the front, and the newest, from the back) become the
// conversation's own; those the stage added or changed stay its own.
func TestShareHistory(t *testing.T) {
	msg := func(role typev1.Role, content string) *typev1.Message {
		return &typev1.Message{Role: role, Content: content}
	}
	system := msg(typev1.Role_ROLE_SYSTEM, "You are an agent.")
	conversation := []*typev1.Message{system}
	for i := range 6 {
		role := typev1.Role_ROLE_USER
		if i%2 == 1 {
			role = typev1.Role_ROLE_ASSISTANT
		}
		conversation = append(conversation, msg(role, fmt.Sprintf("message %d", i)))
	}
	conversation[4].ToolCalls = []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}
	decoded := func(ms ...*typev1.Message) []*typev1.Message { // as the context stage's answer arrives: copies
		out := make([]*typev1.Message, len(ms))
		for i, m := range ms {
			out[i] = proto.CloneOf(m)
		}
		return out
	}
	step := msg(typev1.Role_ROLE_SYSTEM, "Current step: multiply.")
	memory := msg(typev1.Role_ROLE_SYSTEM, "Recalled: 6 times 7 is 42.")
	changed := msg(typev1.Role_ROLE_SYSTEM, "You are an agent. Task type: math.")
	noCalls := proto.CloneOf(conversation[4])
	noCalls.ToolCalls = nil
	table := []struct {
		name      string
		assembled []*typev1.Message
		shared    []int // for each assembled message, the conversation's it must be, or -1
	}{
		{"the whole conversation", decoded(conversation...), []int{0, 1, 2, 3, 4, 5, 6}},
		{"step and memories between", decoded(append([]*typev1.Message{system, step, memory}, conversation[1:]...)...), []int{0, -1, -1, 1, 2, 3, 4, 5, 6}},
		{"older messages dropped", decoded(system, memory, conversation[5], conversation[6]), []int{0, -1, 5, 6}},
		{"a changed system prompt", decoded(append([]*typev1.Message{changed}, conversation[1:]...)...), []int{-1, 1, 2, 3, 4, 5, 6}},
		{"a message that differs in its tool calls", decoded(system, conversation[3], noCalls, conversation[5], conversation[6]), []int{0, -1, -1, 5, 6}},
		{"nothing in common", decoded(step, memory), []int{-1, -1}},
		{"an empty assembly", nil, nil},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]*typev1.Message(nil), tc.assembled...)
			shareHistory(tc.assembled, conversation)
			for i, want := range tc.shared {
				switch got := tc.assembled[i]; {
				case want >= 0 && got != conversation[want]:
					t.Errorf("message %d (%q) is not the conversation's message %d", i, got.GetContent(), want)
				case want < 0 && got != before[i]:
					t.Errorf("message %d (%q) was replaced, but the conversation has no equal one in its place", i, got.GetContent())
				}
			}
		})
	}
}

// TestSameMessageComparesEveryField: sameMessage agrees with proto.Equal when any one field
// of a message or of its tool call differs, or its unknown fields do; a field added to either
// message fails here until sameMessage compares it.
func TestSameMessageComparesEveryField(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{"expression": "6*7"})
	if err != nil {
		t.Fatal(err)
	}
	base := &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "c", Reasoning: "r", ToolCallId: "t", Name: "n",
		ReasoningState: []byte{1}, ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator", Arguments: args, RawArguments: `{"expression":"6*7"}`}}}
	check := func(what string, changed *typev1.Message) {
		t.Helper()
		if got, want := sameMessage(base, changed), proto.Equal(base, changed); got != want || got {
			t.Errorf("%s: sameMessage %v, proto.Equal %v; want both false", what, got, want)
		}
	}
	for _, m := range []protoreflect.Message{base.ProtoReflect(), base.GetToolCalls()[0].ProtoReflect()} {
		// in is m's counterpart in a copy of base.
		in := func(changed *typev1.Message) protoreflect.Message {
			if m.Descriptor() == changed.ProtoReflect().Descriptor() {
				return changed.ProtoReflect()
			}
			return changed.GetToolCalls()[0].ProtoReflect()
		}
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			f := fields.Get(i)
			if !m.Has(f) {
				t.Fatalf("the test's message leaves %s unset: set it, and compare it in sameMessage", f.FullName())
			}
			changed := proto.CloneOf(base)
			target := in(changed)
			switch {
			case f.IsList():
				target.Mutable(f).List().Append(target.Mutable(f).List().NewElement())
			case f.Kind() == protoreflect.MessageKind:
				target.Clear(f)
			case f.Kind() == protoreflect.EnumKind:
				target.Set(f, protoreflect.ValueOfEnum(target.Get(f).Enum()+1))
			case f.Kind() == protoreflect.StringKind:
				target.Set(f, protoreflect.ValueOfString(target.Get(f).String()+"x"))
			case f.Kind() == protoreflect.BytesKind:
				target.Set(f, protoreflect.ValueOfBytes(append(target.Get(f).Bytes(), 2)))
			default:
				t.Fatalf("%s is a %s: teach this test to change it, and sameMessage to compare it", f.FullName(), f.Kind())
			}
			check(string(f.FullName()), changed)
		}
		changed := proto.CloneOf(base)
		in(changed).SetUnknown(protoreflect.RawFields{0x48, 0x01}) // field 9, varint 1
		check(string(m.Descriptor().FullName())+"'s unknown fields", changed)
	}
	if !sameMessage(base, proto.CloneOf(base)) || !sameMessage(nil, nil) || sameMessage(base, nil) {
		t.Error("sameMessage: a copy, or nil and nil, is not the same, or a message and nil are")
	}
}

// BenchmarkSameMessage compares a 50-turn run's conversation with its decoded copy, as
// shareHistory does every turn, with sameMessage and with proto.Equal (`benchstat -col
// /compare`).
func BenchmarkSameMessage(b *testing.B) {
	args, err := structpb.NewStruct(map[string]any{"expression": "6*7"})
	if err != nil {
		b.Fatal(err)
	}
	conversation := []*typev1.Message{{Role: typev1.Role_ROLE_SYSTEM, Content: "You are an agent that uses tools to answer."}}
	for i := range 70 {
		conversation = append(conversation,
			&typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: fmt.Sprintf("call_%d", i), Name: "calculator", Arguments: args, RawArguments: `{"expression":"6*7"}`}}},
			&typev1.Message{Role: typev1.Role_ROLE_TOOL, ToolCallId: fmt.Sprintf("call_%d", i), Name: "calculator", Content: "42"})
	}
	decoded := make([]*typev1.Message, len(conversation))
	for i, m := range conversation {
		decoded[i] = proto.CloneOf(m)
	}
	for _, c := range []struct {
		name string
		same func(a, b *typev1.Message) bool
	}{{"sameMessage", sameMessage}, {"proto.Equal", func(a, b *typev1.Message) bool { return proto.Equal(a, b) }}} {
		b.Run("compare="+c.name, func(b *testing.B) {
			for b.Loop() {
				for i, m := range decoded {
					if !c.same(m, conversation[i]) {
						b.Fatal("a copy differs")
					}
				}
			}
		})
	}
}

// TestSameStructAgreesWithProtoEqual: tool calls' arguments compare as proto.Equal has them.
func TestSameStructAgreesWithProtoEqual(t *testing.T) {
	value := func(v any) *structpb.Value {
		pv, err := structpb.NewValue(v)
		if err != nil {
			t.Fatal(err)
		}
		return pv
	}
	nan := structpb.NewNumberValue(math.NaN())
	values := []*structpb.Value{
		nil, {}, structpb.NewNullValue(), value(0.0), value(1.5), nan, value(""), value("6*7"), value(true), value(false),
		value([]any{}), value([]any{1.0, "a"}), value([]any{1.0, "b"}), value([]any{[]any{nil}}),
		value(map[string]any{}), value(map[string]any{"a": 1.0}), value(map[string]any{"a": 2.0}), value(map[string]any{"b": 1.0}),
		value(map[string]any{"a": map[string]any{"b": []any{true}}}), value(map[string]any{"a": map[string]any{"b": []any{false}}}),
	}
	for i, a := range values {
		for j, b := range values {
			sa, sb := &structpb.Struct{Fields: map[string]*structpb.Value{"x": a}}, &structpb.Struct{Fields: map[string]*structpb.Value{"x": proto.CloneOf(b)}}
			if got, want := sameStruct(sa, sb), proto.Equal(sa, sb); got != want {
				t.Errorf("values %d and %d (%v, %v): sameStruct %v, proto.Equal %v", i, j, a, b, got, want)
			}
		}
	}
}
