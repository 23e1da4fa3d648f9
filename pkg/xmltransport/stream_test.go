package xmltransport_test

import (
	"reflect"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/xmltransport"
)

func TestStream(t *testing.T) {
	tag := call("0001", "get_weather", `{"city": "Paris"}`)
	for _, tc := range []struct {
		name      string
		fragments []string
		want      []xmltransport.Piece // from all writes, then Flush
	}{
		{
			name:      "plain text passes at once",
			fragments: []string{"Hello ", "world"},
			want:      []xmltransport.Piece{{Text: "Hello "}, {Text: "world"}},
		},
		{
			name:      "a tag split anywhere comes out whole",
			fragments: []string{"Checking <ai-", "agent-1a2b", "3c4d-0001 tool=\"get_weather\">{\"city\"", ": \"Paris\"}</ai-agent-1a2b3c4d-00", "01> done"},
			want:      []xmltransport.Piece{{Text: "Checking "}, {Text: tag, Tag: true}, {Text: " done"}},
		},
		{
			name:      "a look-alike is released once it cannot be a tag",
			fragments: []string{"a <ai-agent-dead", "beef-0001> b"},
			want:      []xmltransport.Piece{{Text: "a <ai-agent-dead"}, {Text: "beef-0001> b"}},
		},
		{
			name:      "two tags in one fragment",
			fragments: []string{tag + tag},
			want:      []xmltransport.Piece{{Text: tag, Tag: true}, {Text: tag, Tag: true}},
		},
		{
			name:      "the closing tag of another slot does not end the tag",
			fragments: []string{"<ai-agent-1a2b3c4d-FINAL tool=\"agent__final_report\">x</ai-agent-1a2b3c4d-0001>y", "</ai-agent-1a2b3c4d-FINAL>"},
			want:      []xmltransport.Piece{{Text: "<ai-agent-1a2b3c4d-FINAL tool=\"agent__final_report\">x</ai-agent-1a2b3c4d-0001>y</ai-agent-1a2b3c4d-FINAL>", Tag: true}},
		},
		{
			name:      "an unclosed tag is flushed as unclosed",
			fragments: []string{"text ", openFinal, "The answer"},
			want:      []xmltransport.Piece{{Text: "text "}, {Text: openFinal + "The answer", Tag: true, Unclosed: true}},
		},
		{
			name:      "a trailing partial opening is flushed as text",
			fragments: []string{"see <ai-ag"},
			want:      []xmltransport.Piece{{Text: "see "}, {Text: "<ai-ag"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := xmltransport.NewStream(nonce)
			var got []xmltransport.Piece
			for _, f := range tc.fragments {
				got = append(got, s.Write(f)...)
			}
			got = append(got, s.Flush()...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("pieces = %+v\nwant %+v", got, tc.want)
			}
			if again := s.Flush(); again != nil {
				t.Errorf("second flush = %+v", again)
			}
		})
	}
}
