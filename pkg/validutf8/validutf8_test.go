package validutf8

import (
	"testing"
	"unicode/utf8"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	bad   = "a\xffb"
	fixed = "a\uFFFDb"
)

// TestRepairReachesEveryString: strings of fields, of oneofs, of lists, of nested messages and
// lists of them, and of maps' keys and values, all repaired in place, and the result encodes.
func TestRepairReachesEveryString(t *testing.T) {
	res := &typev1.RunResult{
		RunId:    "run-1",
		Contract: &typev1.ExecutionContract{AllowedTools: []string{"fine", bad}},
		Conversation: []*typev1.Message{
			{Content: "fine"},
			{Content: bad, ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: bad}}},
		},
		FinalReport: &typev1.FinalReport{Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"k" + bad: structpb.NewStringValue("fine"),
			"list":    structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue(bad)}}),
		}}},
	}
	if _, err := proto.Marshal(res); err == nil {
		t.Fatal("a result holding text that is not UTF-8 encodes: the test has nothing to repair")
	}
	if n := Repair(res); n != 5 {
		t.Errorf("Repair changed %d strings, want 5", n)
	}
	if _, err := proto.Marshal(res); err != nil {
		t.Fatalf("the repaired result does not encode: %v", err)
	}
	fields := res.GetFinalReport().GetMetadata().GetFields()
	for what, got := range map[string]string{
		"a list's string":         res.GetContract().GetAllowedTools()[1],
		"a message's field":       res.GetConversation()[1].GetContent(),
		"a nested list's message": res.GetConversation()[1].GetToolCalls()[0].GetName(),
		"a map's value":           fields["list"].GetListValue().GetValues()[0].GetStringValue(),
	} {
		if got != fixed {
			t.Errorf("%s is %q, want %q", what, got, fixed)
		}
	}
	if _, ok := fields["k"+fixed]; !ok || len(fields) != 2 {
		t.Errorf("the map's keys are %v, want the bad key repaired", keys(fields))
	}
	if res.GetConversation()[0].GetContent() != "fine" || res.GetRunId() != "run-1" {
		t.Error("Repair changed valid text")
	}
	if Repair(res) != 0 || Repair(nil) != 0 {
		t.Error("Repair of valid text (or of nothing) reports changes")
	}
}

func keys(m map[string]*structpb.Value) []string {
	var ks []string
	for k := range m {
		if !utf8.ValidString(k) {
			k = "(not UTF-8) " + k
		}
		ks = append(ks, k)
	}
	return ks
}
