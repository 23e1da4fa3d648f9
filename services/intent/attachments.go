package intent

import (
	"fmt"
	"mime"
	"net/url"
	"strings"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// Limits of a message's attachments (ParseRequest.attachments). The stage does not read them;
// they are bounded as its other inputs are, so that no caller's request, logged or passed on,
// carries more than a message's files would.
const (
	// MaxAttachments is the most attachments a message may have: as many files as the model
	// providers take in one request (Anthropic, 100 images).
	MaxAttachments = 100
	// MaxAttachmentNameBytes is the longest name of an attachment: a file name (NAME_MAX).
	MaxAttachmentNameBytes = 255
	// MaxMIMETypeBytes is the longest mime_type of an attachment: a type and a subtype of 127
	// characters each (RFC 6838) and the '/' between them.
	MaxMIMETypeBytes = 255
	// MaxAttachmentURIBytes is the longest uri of an attachment: the length of a URI every
	// HTTP implementation should take (RFC 9110, section 4.1).
	MaxAttachmentURIBytes = 8000
	// DefaultMaxAttachmentBytes is the most inline content a message's attachments may have in
	// all when Options.MaxAttachmentBytes is 0: half of gRPC's message limit (the configuration's
	// grpc.max_message_bytes, 32 MiB by default).
	DefaultMaxAttachmentBytes = 16 << 20
)

// checkAttachments refuses attachments over the limits or with a field out of its rules, naming
// the field and the rule: more than MaxAttachments; a name or mime_type too long; a mime_type
// that is not a media type (type/subtype, with parameters); a uri too long or not absolute;
// content inline and a uri both (the uri says where the content is when it is not inline);
// inline content over maxBytes in all.
func checkAttachments(attachments []*intentv1.Attachment, maxBytes int) error {
	if n := len(attachments); n > MaxAttachments {
		return stageerr.Invalid("attachments: at most %d, got %d", MaxAttachments, n)
	}
	size := 0
	for i, a := range attachments {
		field := fmt.Sprintf("attachments[%d]", i)
		if n := len(a.GetName()); n > MaxAttachmentNameBytes {
			return stageerr.Invalid("%s.name: at most %d bytes, got %d",
				field, MaxAttachmentNameBytes, n)
		}
		if mt := a.GetMimeType(); mt != "" {
			if len(mt) > MaxMIMETypeBytes {
				return stageerr.Invalid("%s.mime_type: at most %d bytes, got %d",
					field, MaxMIMETypeBytes, len(mt))
			}
			if t, _, err := mime.ParseMediaType(mt); err != nil || !strings.Contains(t, "/") {
				return stageerr.Invalid("%s.mime_type: %q is not a media type (type/subtype)",
					field, mt)
			}
		}
		if uri := a.GetUri(); uri != "" {
			if len(uri) > MaxAttachmentURIBytes {
				return stageerr.Invalid("%s.uri: at most %d bytes, got %d",
					field, MaxAttachmentURIBytes, len(uri))
			}
			if u, err := url.Parse(uri); err != nil || !u.IsAbs() {
				return stageerr.Invalid("%s.uri: %q is not an absolute URI", field, uri)
			}
			if len(a.GetContent()) > 0 {
				return stageerr.Invalid("%s: content or uri, not both", field)
			}
		}
		size += len(a.GetContent())
	}
	if size > maxBytes {
		return stageerr.Invalid("attachments: at most %d bytes of content in all, got %d",
			maxBytes, size)
	}
	return nil
}
