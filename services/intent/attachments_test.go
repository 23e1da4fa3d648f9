package intent_test

import (
	"fmt"
	"strings"
	"testing"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/intent"
	"google.golang.org/grpc/codes"
)

// TestAttachments: a message's attachments are checked as the stage's other inputs are, each
// refusal INVALID_INPUT naming the field and the rule: at most intent.MaxAttachments, a name
// and a MIME type of at most 255 bytes, the MIME type a media type, a URI of at most 8,000
// bytes that is absolute, content inline or a URI but not both, and the inline content of all
// at most Options.MaxAttachmentBytes. Attachments within the rules are taken.
func TestAttachments(t *testing.T) {
	c := client(t, intent.Options{MaxAttachmentBytes: 10})
	const message = "Summarize the attached report"
	many := make([]*intentv1.Attachment, intent.MaxAttachments+1)
	for i := range many {
		many[i] = &intentv1.Attachment{Name: fmt.Sprintf("f%d.txt", i), Uri: "https://a.example/f"}
	}
	ok := []*intentv1.Attachment{
		{Name: "report.txt", MimeType: "text/plain; charset=utf-8", Content: []byte("12345")},
		{Name: strings.Repeat("n", 255), MimeType: "application/pdf",
			Uri: "https://example.com/" + strings.Repeat("p", 8000-20)},
		{Content: []byte("67890")},
	}
	_, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: message, Attachments: ok})
	if err != nil {
		t.Fatalf("attachments within the rules were refused: %v", err)
	}
	table := []struct {
		name        string
		attachments []*intentv1.Attachment
		want        string
	}{
		{"too many", many,
			fmt.Sprintf("attachments: at most %d, got %d", intent.MaxAttachments, len(many))},
		{"long name",
			[]*intentv1.Attachment{{Name: strings.Repeat("n", 256), Uri: "https://example.com/f"}},
			"attachments[0].name: at most 255 bytes, got 256"},
		{"long MIME type", []*intentv1.Attachment{{MimeType: "text/" + strings.Repeat("x", 251),
			Uri: "https://example.com/f"}},
			"attachments[0].mime_type: at most 255 bytes, got 256"},
		{"not a MIME type", []*intentv1.Attachment{{MimeType: "text plain", Content: []byte("x")}},
			`attachments[0].mime_type: "text plain" is not a media type (type/subtype)`},
		{"long URI",
			[]*intentv1.Attachment{{Uri: "https://example.com/" + strings.Repeat("p", 8000-19)}},
			"attachments[0].uri: at most 8000 bytes, got 8001"},
		{"relative URI", []*intentv1.Attachment{{Uri: "reports/q3.pdf"}},
			`attachments[0].uri: "reports/q3.pdf" is not an absolute URI`},
		{"content and URI",
			[]*intentv1.Attachment{{Content: []byte("x"), Uri: "https://example.com/f"}},
			"attachments[0]: content or uri, not both"},
		{"content over the limit",
			[]*intentv1.Attachment{{Content: []byte("123456")}, {Content: []byte("78901")}},
			"attachments: at most 10 bytes of content in all, got 11"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Parse(t.Context(),
				&intentv1.ParseRequest{Message: message, Attachments: tc.attachments})
			grpctest.WantStageError(t, err, codes.InvalidArgument,
				typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.want)
		})
	}
}
